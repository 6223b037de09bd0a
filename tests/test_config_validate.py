"""``model_validate`` and ``model_validate_json``, pydantic's other constructors, refuse a bad
configuration as the constructor does: a :class:`ConfigError` (a ``ValueError``) with the same
message, pydantic's ``ValidationError`` chained as its cause."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from ctxplugin import ContextConfig
from ctxplugin.config import BudgetConfig, CASConfig
from ctxplugin.errors import ConfigError

BAD: list[dict[str, Any]] = [
    {"budget": {"total": -5}},
    {"mode": "sometimes"},
    {"budget": {"totl": 4000}},
    {"cas": {"passthrough_tokens": "many"}, "tools": {"directory": "sometimes"}},
    {"chroma_headers": {"x-chroma-token": 5}},
    {"colour": "blue"},
]


@pytest.mark.parametrize("bad", BAD, ids=lambda bad: ",".join(bad))
def test_model_validate_raises_the_config_error_the_constructor_raises(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as built:
        ContextConfig(**bad)
    with pytest.raises(ConfigError) as validated:
        ContextConfig.model_validate(bad)
    assert str(validated.value) == str(built.value)
    assert isinstance(validated.value, ValueError) and isinstance(
        validated.value.__cause__, ValidationError
    )
    with pytest.raises(ConfigError) as parsed:
        ContextConfig.model_validate_json(json.dumps(bad))
    assert str(parsed.value) == str(built.value)


def test_a_section_validated_alone_names_its_full_path() -> None:
    with pytest.raises(ConfigError) as built:
        BudgetConfig(total=-5)
    with pytest.raises(ConfigError) as validated:
        BudgetConfig.model_validate({"total": -5})
    assert str(validated.value) == str(built.value) and "budget.total=-5" in str(built.value)
    with pytest.raises(ConfigError, match=r"cas\.passthrough_tokens"):
        CASConfig.model_validate_json('{"passthrough_tokens": "many"}')


def test_good_settings_validate_as_before() -> None:
    config = ContextConfig.model_validate({"mode": "compact", "budget": {"total": 5000}})
    assert config == ContextConfig(mode="compact", budget={"total": 5000})
    assert ContextConfig.model_validate_json(config.model_dump_json()) == config
    assert BudgetConfig.model_validate(config.budget.model_dump()) == config.budget


def test_a_model_holding_a_config_still_reports_pydantic_errors() -> None:
    """Inside another pydantic model, a bad config is that model's ``ValidationError``, as
    pydantic reports any field: the constructors alone translate."""

    class Holder(BaseModel):
        config: ContextConfig

    with pytest.raises(ValidationError, match=r"config\n.*budget\.total=-5: must be positive"):
        Holder.model_validate({"config": {"budget": {"total": -5}}})
