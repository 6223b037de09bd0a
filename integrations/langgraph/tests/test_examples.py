"""Every example under ``examples/`` runs offline and exits 0 (each in its own process, all at
once)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
HOST_EXAMPLES = {"create_agent", "create_react_agent", "state_graph", "lcel_pipe", "message_history", "callbacks"}


def test_there_is_one_short_example_per_host() -> None:
    names = {p.stem for p in EXAMPLES}
    assert names >= HOST_EXAMPLES
    for path in EXAMPLES:
        if path.stem in HOST_EXAMPLES:
            assert len(path.read_text().splitlines()) < 80, f"{path.name} should stay under 80 lines"


def run(path: Path, cwd: Path) -> str | None:
    """``None`` when the example ran cleanly, else what went wrong."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LANGSMITH_TRACING"] = "false"
    done = subprocess.run([sys.executable, str(path)], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300, check=False)
    if done.returncode == 0 and done.stdout.strip():
        return None
    return f"{path.name} exited {done.returncode}:\n{done.stderr[-2000:]}"


@pytest.mark.slow
def test_every_example_runs(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [f for f in pool.map(lambda p: run(p, tmp_path), EXAMPLES) if f]
    assert not failures, "\n\n".join(failures)


def test_quickstart_real_without_a_key_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"), "--real"], cwd=tmp_path, env=env,
                          text=True, capture_output=True, timeout=300, check=False)
    assert done.returncode == 2, done.stdout
    assert "OPENAI_API_KEY" in done.stderr and "ANTHROPIC_API_KEY" in done.stderr
    assert done.stdout == "", "nothing ran with the scripted model instead"
