"""The cost of a replay's calls on Anthropic's prompt cache, which serves only marked prefixes.

The replay's main cost model credits each call with its longest prefix equal to the previous
call's, as OpenAI and Gemini serve it. Claude caches only up to the blocks a request marks with
``cache_control`` (at most four), and a request reads an entry only at one of its own marks or
up to ``LOOKBACK_BLOCKS`` - 1 blocks before one. Here every strategy's requests are marked as
LangChain's ``AnthropicPromptCachingMiddleware`` marks them: the last tool, the end of the system
prompt (the host's, the view's first message) and the request's end; ctxplugin's also carry its own mark at the view's most stable
end (``ctxplugin._cache_points.stable_ends``), as ``ContextMiddleware`` sends them to a Claude
model (unless ``prompt_cache_marks`` is off).

Per call: entries are written at each mark whose prefix holds at least ``MINIMUM_TOKENS``; the
call reads the longest entry found; the tokens between it and the last mark are written (billed
at ``WRITE_PRICE``), the rest of the input is billed in full. Blocks are counted as Anthropic's
request has them (one per tool, per text and per tool call of a message); tokens, as the replay
counts them. Cache lifetimes are not modelled (an agent's calls come well within 5 minutes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from ctxplugin._cache_points import stable_ends
from ctxplugin.replay.metrics import Meter

MINIMUM_TOKENS = 1024
"""The shortest prefix Claude Sonnet caches (Opus 4.5 and Haiku 4.5: 4,096)."""
LOOKBACK_BLOCKS = 20
READ_PRICE = 0.1
WRITE_PRICE = 1.25


def _blocks(message: BaseMessage) -> int:
    """How many blocks Anthropic's request holds for ``message``."""
    content = message.content
    count = len(content) if isinstance(content, list) else int(bool(content))
    if isinstance(message, AIMessage):
        count += len(message.tool_calls)
    return max(count, 1)


@dataclass
class MarkedCache:
    """Anthropic's cache over one strategy's calls in one conversation."""

    own_marks: bool = False
    entries: set[str] = field(default_factory=set)

    def call(self, tools_sig: str, tool_tokens: int, tool_count: int, view: Sequence[BaseMessage], meter: Meter) -> tuple[int, int]:
        """``(read, written)`` tokens of one call, whose request sends ``tool_count`` tool
        schemas (``tool_tokens`` together, signed ``tools_sig``) and ``view``."""
        # one position per end a mark may sit at: the tools', then each message's
        digest = hashlib.sha1(tools_sig.encode())
        prefixes, tokens, blocks = [digest.hexdigest()], [tool_tokens], [tool_count]
        for message in view:
            digest.update(meter.signature(message).encode())
            prefixes.append(digest.hexdigest())
            tokens.append(tokens[-1] + meter.tokens(message))
            blocks.append(blocks[-1] + _blocks(message))
        marks = {0} if tool_count else set()
        if view and isinstance(view[0], SystemMessage):
            # the middleware marks the system prompt it is given, the view's first message: a
            # tool directory after it is a message of its own (position k is the end of view[k - 1])
            marks.add(1)
        if view:
            marks.add(len(view))
        if self.own_marks:
            ends = [i for i in stable_ends(view) if i + 1 not in marks]
            if ends and len(marks) < 4:
                marks.add(ends[0] + 1)
        hit = max((self._entry_before(m, prefixes, blocks) for m in marks), default=-1)
        read = tokens[hit] if hit >= 0 else 0
        last = max(marks, default=0)
        written = max(tokens[last] - read, 0) if tokens[last] >= MINIMUM_TOKENS else 0
        self.entries.update(prefixes[m] for m in marks if tokens[m] >= MINIMUM_TOKENS)
        return read, written

    def _entry_before(self, mark: int, prefixes: list[str], blocks: list[int]) -> int:
        """The latest position at or before ``mark``, within the lookback, holding an entry (-1: none)."""
        for position in range(mark, -1, -1):
            if blocks[mark] - blocks[position] >= LOOKBACK_BLOCKS:
                break
            if prefixes[position] in self.entries:
                return position
        return -1
