"""One set of field names for the stored facts that set the same fields.

Pydantic keeps, per model instance, the set of the names of the fields given when it was made
(:attr:`~pydantic.BaseModel.model_fields_set`). A fact names eighteen, its source five: the two
sets weighed more than all the references to the fields' values, and an in-memory store of
thousands of facts held thousands of equal sets.
"""

from __future__ import annotations

from pydantic import BaseModel

_FIELDS_SETS: dict[frozenset[str], set[str]] = {}
_FIELDS_SETS_KEPT = 256


def share_fields_set(model: BaseModel) -> None:
    """Give ``model`` (frozen: a stored fact or its source) the one set that every model stored
    with the same field names holds. The set is never changed: a frozen model takes no
    assignment, and :meth:`~pydantic.BaseModel.model_copy` copies the set before adding to it."""
    fields = model.__pydantic_fields_set__
    one = _FIELDS_SETS.get(frozenset(fields))
    if one is None:
        if len(_FIELDS_SETS) >= _FIELDS_SETS_KEPT:  # a few kinds of facts in practice
            return
        one = _FIELDS_SETS.setdefault(frozenset(fields), fields)
    if one is not fields:
        object.__setattr__(model, "__pydantic_fields_set__", one)


__all__ = ["share_fields_set"]
