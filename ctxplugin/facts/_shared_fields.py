"""One set of field names for the stored facts that set the same fields.

Pydantic keeps, per model instance, the set of the names of the fields given when it was made
(:attr:`~pydantic.BaseModel.model_fields_set`). A fact names eighteen, its source five: the two
sets weighed more than all the references to the fields' values, and an in-memory store of
thousands of facts held thousands of equal sets.

The set is pydantic's own (``__pydantic_fields_set__``), so it is shared only when it can reach
no other model: the model is frozen (an assignment would add to the set in place), the set
shared refuses changes (through ``fact.model_fields_set``), and this pydantic gives a copy of a
model (:meth:`~pydantic.BaseModel.model_copy`, ``copy``) a set of its own, which is
tried once, on a model of its own, before the first set is shared. Otherwise nothing is.
"""

from __future__ import annotations

import contextlib
import copy
import pickle
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, ValidationError

_FIELDS_SETS: dict[frozenset[str], _FieldNames] = {}
_FIELDS_SETS_KEPT = 256
_SAFE: bool | None = None
"""Whether this pydantic lets a set of field names be shared (tried on first use)."""


class _FieldNames(set[str]):
    """The field names shared by stored models: read-only, so a change made through one model
    cannot reach the others; a copy (what pydantic gives a copied model) is a plain set. Models
    pickled together are loaded sharing one again, read-only as well."""

    __slots__ = ()

    def _read_only(self, *args: object) -> NoReturn:
        raise TypeError(
            "the field names of a stored fact are shared with other stored facts and cannot be changed: "
            "change those of a copy (fact.model_copy())"
        )

    add = discard = remove = pop = clear = update = _read_only
    difference_update = intersection_update = symmetric_difference_update = _read_only
    __ior__ = __iand__ = __isub__ = __ixor__ = _read_only

    def __repr__(self) -> str:
        return repr(set(self))

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)


def share_fields_set(model: BaseModel) -> None:
    """Give ``model`` (a stored fact or its source) the one set that every model stored with the
    same field names holds, when it is frozen and this pydantic allows it."""
    if not model.model_config.get("frozen") or not (_SAFE if _SAFE is not None else _tried()):
        return
    fields = model.__pydantic_fields_set__
    one = _FIELDS_SETS.get(frozenset(fields))
    if one is None:
        if len(_FIELDS_SETS) >= _FIELDS_SETS_KEPT:  # a few kinds of facts in practice
            return
        one = _FIELDS_SETS.setdefault(frozenset(fields), _FieldNames(fields))
    if one is not fields:
        object.__setattr__(model, "__pydantic_fields_set__", one)


class _Probe(BaseModel):
    model_config = ConfigDict(frozen=True)

    a: int = 0
    b: int = 0


def _tried() -> bool:
    global _SAFE
    _SAFE = _sharing_holds()
    return _SAFE


def _sharing_holds() -> bool:
    """Whether a model given a shared :class:`_FieldNames` keeps it as its fields set, and its
    copies, an assignment and pickling leave the shared set as it was."""
    try:
        model = _Probe(a=1)
        one = _FieldNames(model.__pydantic_fields_set__)
        object.__setattr__(model, "__pydantic_fields_set__", one)
        if model.model_fields_set is not one:
            return False
        made = [model.model_copy(update={"b": 2}), model.model_copy(update={"b": 2}, deep=True), copy.copy(model), copy.deepcopy(model)]
        for other in made:
            other.model_fields_set.add("b")
        with contextlib.suppress(ValidationError):
            model.b = 2  # type: ignore[misc]  # frozen: refused before the set is touched
        loaded = pickle.loads(pickle.dumps(model)).model_fields_set  # shared as it was: read-only too
        return (
            one == loaded == {"a"}
            and type(one) is type(loaded) is _FieldNames
            and all(m.model_fields_set == {"a", "b"} and type(m.model_fields_set) is set for m in made)
        )
    except Exception:  # a pydantic whose models are made otherwise: nothing is shared
        return False


__all__ = ["share_fields_set"]
