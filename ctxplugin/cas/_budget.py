"""A token-bounded list of summary lines."""

from __future__ import annotations

from ctxplugin.tokens import TokenCounter

MAX_LINE_CHARS = 320
"""Lines longer than this are cut (with an ellipsis) before they are placed in a summary."""


def clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class Lines:
    """Summary lines under a token budget; every line costs its tokens plus one for the newline."""

    def __init__(self, counter: TokenCounter, budget: int) -> None:
        self.counter = counter
        self.budget = budget
        self.used = 0
        self.lines: list[str] = []

    @property
    def left(self) -> int:
        return self.budget - self.used

    def cost(self, line: str) -> int:
        return self.counter.count(line) + 1

    def add(self, line: str, *, force: bool = False) -> bool:
        """Append ``line`` if it fits (always with ``force``); True when appended."""
        cost = self.cost(line)
        if not force and self.used + cost > self.budget:
            return False
        self.lines.append(line)
        self.used += cost
        return True

    def add_list(self, prefix: str, items: list[str], *, more_hint: str = "", sep: str = ", ") -> int:
        """Append ``prefix`` + as many ``items`` as fit on one line, plus a count of the rest.

        Returns how many items were placed.
        """
        if not items:
            return 0
        placed: list[str] = []
        cost = self.cost(prefix)
        for item in items:
            step = self.counter.count(item + sep)
            if self.used + cost + step + 6 > self.budget:  # leave room for the "+N more" tail
                break
            placed.append(item)
            cost += step
        if not placed:
            return 0
        rest = len(items) - len(placed)
        tail = f"{sep.rstrip()} … +{rest} more{more_hint}" if rest else ""
        self.add(prefix + sep.join(placed) + tail, force=True)
        return len(placed)

    def text(self) -> str:
        return "\n".join(self.lines)
