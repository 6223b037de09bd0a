"""ctxplugin: a smaller, better context for every model call of a LangChain or LangGraph agent.

The public surface is what ``__all__`` lists; everything else is internal.
"""

from ctxplugin._connect import connect
from ctxplugin.config import (
    BudgetConfig,
    CacheConfig,
    CASConfig,
    ContextConfig,
    FactsConfig,
    HistoryConfig,
    StoresConfig,
    ToolsConfig,
)
from ctxplugin.engine import ContextEngine, PreparedContext
from ctxplugin.errors import (
    AccessDeniedError,
    ConfigError,
    CtxpluginError,
    InvalidInputError,
    MissingDependencyError,
    RefNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from ctxplugin.langchain import ContextCallbackHandler
from ctxplugin.report import CaptureReport, ContextReport, RunSummary
from ctxplugin.scope import Scope

__version__ = "0.1.0"

__all__ = [
    "AccessDeniedError",
    "BudgetConfig",
    "CASConfig",
    "CacheConfig",
    "CaptureReport",
    "ConfigError",
    "ContextCallbackHandler",
    "ContextConfig",
    "ContextEngine",
    "ContextReport",
    "CtxpluginError",
    "FactsConfig",
    "HistoryConfig",
    "InvalidInputError",
    "MissingDependencyError",
    "PreparedContext",
    "RefNotFoundError",
    "RunSummary",
    "Scope",
    "StoreError",
    "StoreUnavailableError",
    "StoresConfig",
    "ToolsConfig",
    "__version__",
    "connect",
]
