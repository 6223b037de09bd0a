"""Tool directory and lazy schema loading (placeholder pending the full implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin.config import ToolsConfig
from ctxplugin.tokens import TokenCounter, count_tool_schemas

LOAD_TOOLS_NAME = "load_tools"


class ToolRegistry:
    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._names: list[str] = []

    def names(self) -> list[str]:
        return list(self._names)


@dataclass
class ToolPlan:
    bound: list[Any]
    active: bool = False
    loaded: list[str] = field(default_factory=list)
    schema_tokens_full: int = 0
    schema_tokens_sent: int = 0
    directory_text: str = ""


@dataclass
class Resolution:
    kind: Literal["run", "schema", "unknown"]
    message: str = ""


def plan_tools(tools: Sequence[Any], body: Sequence[BaseMessage], *, config: ToolsConfig, counter: TokenCounter, registry: ToolRegistry) -> ToolPlan:
    schemas = [convert_to_openai_tool(t) for t in tools]
    tokens = count_tool_schemas(schemas, counter)
    return ToolPlan(bound=list(tools), schema_tokens_full=tokens, schema_tokens_sent=tokens)


def resolve_call(name: str, args: dict[str, Any], registry: ToolRegistry) -> Resolution:
    return Resolution(kind="run")


def make_load_tools_tool(registry: ToolRegistry) -> BaseTool:
    def load_tools(names: list[str]) -> str:
        """Load the full schemas of tools from the tool directory."""
        return "loaded"

    return StructuredTool.from_function(load_tools, name=LOAD_TOOLS_NAME)
