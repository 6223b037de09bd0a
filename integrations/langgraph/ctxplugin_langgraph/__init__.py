"""ctxplugin adapters for LangChain ``create_agent``, LangGraph ``create_react_agent`` and
custom ``StateGraph``s."""

from ctxplugin_langgraph._capture import current_scope
from ctxplugin_langgraph.hooks import ContextHooks
from ctxplugin_langgraph.middleware import ContextMiddleware

__all__ = ["ContextHooks", "ContextMiddleware", "current_scope"]
