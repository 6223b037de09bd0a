"""benchmarks/latency.py names the recordings of its chained session as it chains them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

LATENCY = Path(__file__).resolve().parents[1] / "benchmarks" / "latency.py"


def latency() -> Any:
    spec = importlib.util.spec_from_file_location("latency_bench", LATENCY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_chain_s_names_are_the_recordings_chained_in_order_also_past_the_last_file() -> None:
    bench = latency()
    files = sorted(bench.SWE.glob("*.traj.json"))
    if not files:
        pytest.skip(f"no swe recordings under {bench.SWE}")
    runs = len(files) + 2  # the chain wraps around to the first recordings
    owners: list[str] = []
    bench.chained_session(runs, owners=owners)
    chained = [name for i, name in enumerate(owners) if i == 0 or owners[i - 1] != name]
    assert bench.chain_names(runs) == chained
