from __future__ import annotations

import ctxplugin

CONTRACT = {
    "ContextEngine", "ContextConfig", "Scope", "PreparedContext", "ContextReport",
    "ContextCallbackHandler", "CtxpluginError", "InvalidInputError", "StoreError",
    "RefNotFoundError",
}


def test_all_lists_exactly_the_public_names() -> None:
    public = {n for n in dir(ctxplugin) if not n.startswith("_")} - {
        "config", "engine", "errors", "langchain", "report", "scope", "tokens", "budget",
        "cas", "facts", "history", "tools", "testing", "cli", "cache", "replay", "guard", "fidelity", "stages",
    }
    assert set(ctxplugin.__all__) - {"__version__"} == public


def test_contract_names_are_exported() -> None:
    assert set(ctxplugin.__all__) >= CONTRACT


def test_errors_mix_in_builtins() -> None:
    assert issubclass(ctxplugin.InvalidInputError, ValueError)
    assert issubclass(ctxplugin.RefNotFoundError, KeyError)
    assert issubclass(ctxplugin.StoreError, ctxplugin.CtxpluginError)
