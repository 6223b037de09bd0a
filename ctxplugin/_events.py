"""Custom callback events: ``emit`` dispatches one when running inside a LangChain run."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("ctxplugin")


def emit(name: str, data: Any) -> None:
    """Dispatch a custom callback event when running inside a LangChain run; else do nothing.

    An event only reports: a handler that raises (one with ``raise_error=True``) is logged at
    WARNING and never fails the step that reported."""
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get()
    if not config or not config.get("callbacks"):
        return
    from langchain_core.callbacks.manager import dispatch_custom_event

    try:
        dispatch_custom_event(name, data)
    except Exception as exc:
        if not (isinstance(exc, RuntimeError) and "parent run id" in str(exc)):  # no run: nobody to tell
            logger.warning("a callback handler failed on %s: %r", name, exc)


__all__ = ["emit"]
