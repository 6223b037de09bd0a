"""benchmarks/statebench_runner.py's table of missed must-mention phrases."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "statebench_runner.py"


def runner() -> Any:
    spec = importlib.util.spec_from_file_location("statebench_runner_bench", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_phrase_is_counted_as_asked_as_often_as_a_system_was_asked_it() -> None:
    bench = runner()
    # ctxplugin failed on one of the two queries asking for the phrase: it was scored on one only
    mine = bench.Score(queries=2, errors=1, phrases={"refund": [1, 0, 0]})
    other = bench.Score(queries=2, phrases={"refund": [2, 2, 1]})
    table = {"ctxplugin": {"track": mine}, "memgine": {"track": other}}
    [row] = [line for line in bench.render_misses(table).splitlines() if "refund" in line]
    assert row == "| track | refund | 2 | 0 (0) | 2 (1) |"
