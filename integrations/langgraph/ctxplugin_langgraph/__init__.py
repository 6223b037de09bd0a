"""ctxplugin adapters for LangChain ``create_agent``, LangGraph ``create_react_agent`` and
custom ``StateGraph``s.

- :class:`ContextMiddleware`: ``create_agent(..., middleware=[ContextMiddleware(engine)])``.
- :class:`ContextHooks`: ``pre_model_hook``, a model callable, a capturing ``ToolNode`` and
  nodes for custom graphs.
"""

from ctxplugin_langgraph._capture import current_scope
from ctxplugin_langgraph._scope import ScopeRule, ScopeSpec
from ctxplugin_langgraph.hooks import ContextHooks, state_messages
from ctxplugin_langgraph.middleware import ContextMiddleware

__all__ = ["ContextHooks", "ContextMiddleware", "ScopeRule", "ScopeSpec", "current_scope", "state_messages"]
