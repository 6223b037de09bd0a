"""Replay recorded agent conversations through ctxplugin and its alternatives, call by call.

The ``ctxplugin replay`` command is built on these functions; they are usable from Python too::

    from ctxplugin.replay import ReplaySettings, replay

    result = replay(["traces/"], ReplaySettings())
    print(result.totals()["ctxplugin"].input_tokens)
"""

from ctxplugin.replay.loaders import (
    FORMATS,
    Conversation,
    ExpectedAction,
    Format,
    LoadedFile,
    RecordedUsage,
    detect,
    discover,
    load_file,
)
from ctxplugin.replay.metrics import action_identifiers, identifiers_in_text, pair_expected_actions
from ctxplugin.replay.peers import STRATEGIES, ClearToolUsesSettings, StrategyName, View
from ctxplugin.replay.results import ConversationResult, FileResult, ReplayResult, StrategyFigures
from ctxplugin.replay.runner import (
    ReplaySettings,
    load_tools_file,
    memory_engine_factory,
    replay,
    replay_conversation,
    replay_file,
)

__all__ = [
    "FORMATS",
    "STRATEGIES",
    "ClearToolUsesSettings",
    "Conversation",
    "ConversationResult",
    "ExpectedAction",
    "FileResult",
    "Format",
    "LoadedFile",
    "RecordedUsage",
    "ReplayResult",
    "ReplaySettings",
    "StrategyFigures",
    "StrategyName",
    "View",
    "action_identifiers",
    "detect",
    "discover",
    "identifiers_in_text",
    "load_file",
    "load_tools_file",
    "memory_engine_factory",
    "pair_expected_actions",
    "replay",
    "replay_conversation",
    "replay_file",
]
