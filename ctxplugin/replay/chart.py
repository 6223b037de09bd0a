"""A PNG of input tokens per call for each strategy (needs matplotlib: ``ctxplugin[chart]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxplugin.errors import InvalidInputError, MissingDependencyError
from ctxplugin.replay.results import ConversationResult, FileResult, ReplayResult

COLORS = {
    "full": "#7f7f7f",
    "trim_messages": "#1f77b4",
    "context_editing": "#ff7f0e",
    "ctxplugin": "#2ca02c",
}
STYLES = {"full": "-", "trim_messages": "--", "context_editing": ":", "ctxplugin": "-"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependencyError(
            "--chart draws with matplotlib, which is not installed: pip install matplotlib (the chart extra: "
            "pip install '<path to the ctxplugin clone>[chart]')"
        ) from exc
    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt

    return plt


def pick(result: ReplayResult, limit: int) -> list[tuple[FileResult, ConversationResult]]:
    """The conversations to draw: every one if they fit, else the ``limit`` with most calls
    (ties broken by file order, so the choice is stable)."""
    items = result.conversations()
    if len(items) <= limit:
        return items
    ranked = sorted(range(len(items)), key=lambda i: (-items[i][1].calls, i))[:limit]
    return [items[i] for i in sorted(ranked)]


def _label(name: str, chosen: list[tuple[FileResult, ConversationResult]]) -> str:
    """The legend label; a peer whose line is the full history's everywhere says so, since it
    is drawn underneath."""
    if name == "full":
        return name
    same = all(
        [c[0] for c in conv.per_call.get(name, [])] == [c[0] for c in conv.per_call.get("full", [])]
        for _, conv in chosen
    )
    return f"{name} (same as full)" if same else name


# what each format would stamp with the time or the library version: left out, so the same
# results draw the same file
_METADATA: dict[str, dict[str, None]] = {
    "png": {"Software": None},
    "svg": {"Creator": None, "Date": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
}


def write_chart(result: ReplayResult, path: str | Path, *, limit: int = 6, title: str | None = None) -> Path:
    """Draw input tokens per call, one subplot per conversation, and save it as PNG.

    Args:
        result: a replay result.
        path: the ``.png`` file to write (parent directories are created).
        limit: most subplots to draw (the longest conversations).
        title: figure title; a default names the budget.

    Raises:
        MissingDependencyError: matplotlib is not installed.
        InvalidInputError: nothing was replayed, or ``limit`` is below 1.
    """
    if limit < 1:
        raise InvalidInputError(f"chart limit must be at least 1, got {limit}")
    chosen = pick(result, limit)
    if not chosen:
        raise InvalidInputError("nothing was replayed, so there is nothing to chart")
    plt = _pyplot()
    columns = 1 if len(chosen) == 1 else 2
    rows = (len(chosen) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.4 * columns, 3.6 * rows), squeeze=False)
    budget = int(result.settings.get("budget_total", 0))
    labels = {name: _label(name, chosen) for name in result.strategies}
    for ax, (file, conv) in zip(axes.flat, chosen, strict=False):
        for name in result.strategies:
            calls = conv.per_call.get(name)
            if not calls:
                continue
            xs = list(range(1, len(calls) + 1))
            ax.plot(
                xs,
                [c[0] for c in calls],
                label=labels[name],
                color=COLORS.get(name),
                linestyle=STYLES.get(name, "-"),
                linewidth=2.2 if name == "ctxplugin" else 1.6,
                # the baseline on top, so a peer that never changes anything hides under it
                zorder={"full": 3, "ctxplugin": 4}.get(name, 2),
            )
        if budget:
            ax.axhline(budget, color="#d62728", linewidth=0.8, linestyle="-.", label=f"budget ({budget:,})")
        label = conv.id if conv.id == Path(file.path).stem.removesuffix(".traj") else f"{Path(file.path).name} · {conv.id}"
        ax.set_title(f"{label} ({conv.calls} calls)", fontsize=9)
        ax.set_xlabel("call", fontsize=8)
        ax.set_ylabel("input tokens", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1000:.0f}k" if v >= 1000 else f"{v:.0f}"))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(chosen):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle(title or "Input tokens per call (messages + tool schemas)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    kind = out.suffix.lower().lstrip(".")
    kind = kind if kind in _METADATA else "png"
    fig.savefig(out, format=kind, dpi=110, metadata=_METADATA[kind])
    plt.close(fig)
    return out
