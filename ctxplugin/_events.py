"""Custom callback events: ``emit`` dispatches one when running inside a LangChain run."""

from __future__ import annotations

from typing import Any


def emit(name: str, data: Any) -> None:
    """Dispatch a custom callback event when running inside a LangChain run; else do nothing."""
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get()
    if not config or not config.get("callbacks"):
        return
    from langchain_core.callbacks.manager import dispatch_custom_event

    try:
        dispatch_custom_event(name, data)
    except RuntimeError:  # no parent run: nothing to report to
        return


__all__ = ["emit"]
