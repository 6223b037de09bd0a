"""Which chat models can be bound a stub.

A stub leaves a tool's arguments open (``{"type": "object", "properties": {}}`` with
``additionalProperties``). Google's Gemini function declarations cannot say that: the request
builders of ``langchain-google-genai`` and ``langchain-google-vertexai`` turn an object without
properties into a function that takes no parameters, and Gemini then calls every stub with
none. Such a model is bound every tool with its own schema (as a strict binding is: see
:func:`~ctxplugin.tools.plan_tools`'s ``strict``).
"""

from __future__ import annotations

from typing import Any

from ctxplugin._model_kind import model_classes

# (top-level package, class) of the chat models whose tools are Gemini function declarations;
# subclasses count (their MRO names one of these)
_GEMINI = frozenset((("langchain_google_genai", "ChatGoogleGenerativeAI"), ("langchain_google_vertexai", "ChatVertexAI")))


def takes_stubs(model: Any) -> bool:
    """Whether ``model`` can be bound tools whose arguments are left open: False for Gemini
    through ``ChatGoogleGenerativeAI`` or ``ChatVertexAI`` (a model with arguments bound to it,
    ``model.bind(...)``, is looked through); True for every other model, and for a wrapper that
    hides which model it is."""
    return not any((module.split(".", 1)[0], name) in _GEMINI for module, name in model_classes(model))


__all__ = ["takes_stubs"]
