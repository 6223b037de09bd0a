"""What kind of choice a word names, for a choice asked for instead of another ("can we do
business instead?", see :func:`~ctxplugin.facts._revisions.chosen_instead`).

A word alone says which choice it replaces only when it is of the kind that choice holds:
"business" is a cabin class, so it replaces "I'd like economy class" but not "I'd like seat 14C";
and a word of no kind known here ("chicago", "oakwood") replaces no choice whose kind is known
(a class, a seat, a room, a meal, a hotel, an airline), which could not hold it. The kinds are
few and closed: the choices a booking conversation makes over and over, each named by its key
(``pref_class``).

A hotel or an airline is chosen by its name ("I'd like the Hilton", "Make it Delta instead"): the
names of the large chains are known here, so "Marriott" replaces the Hilton and "Delta" does not
(nor "Paris", of no kind known here). A name not known is of its kind when the kind's word is said
with it ("the Oakwood hotel", "the Grand Plaza hotel").
"""

from __future__ import annotations

import re

from ctxplugin.facts._text import content_words, stem

_KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    kind: (frozenset(stem(w) for w in names), frozenset(stem(w) for w in values))
    for kind, names, values in [
        ("class", ["class", "cabin"], ["economy", "business", "premium", "coach"]),
        ("seat", ["seat"], ["window", "aisle", "middle"]),
        ("room", ["room", "bed"], ["king", "queen", "twin", "double", "suite"]),
        ("meal", ["meal"], ["vegan", "vegetarian", "kosher", "halal"]),
        ("hotel", ["hotel", "inn", "resort", "motel"], [
            "hilton", "marriott", "hyatt", "sheraton", "westin", "radisson", "wyndham", "fairmont", "ritz", "intercontinental",
            "hampton", "courtyard", "doubletree", "novotel", "ibis", "mercure", "sofitel", "kempinski", "waldorf",
        ]),
        ("airline", ["airline", "airlines", "airways", "carrier"], [
            "delta", "united", "southwest", "jetblue", "lufthansa", "emirates", "ryanair", "easyjet", "qantas", "klm",
            "aeromexico", "qatar", "etihad", "iberia", "finnair",
        ]),
    ]
}  # fmt: skip
"""Each kind: the words that name it (in a key or a statement) and the values it holds."""
_BRANDED = frozenset(["hotel", "airline"])
"""The kinds whose values are names ("Courtyard", "Delta"), some of them common words too."""
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def _kind_of_value(word: str) -> str | None:
    """The kind of choice ``word`` is a value of ("business": ``class``), or None."""
    stemmed = stem(word.lower())
    return next((kind for kind, (_, values) in _KINDS.items() if stemmed in values), None)


def kind_named(words: list[str]) -> tuple[str | None, list[str]]:
    """The kind ``words`` name besides a value ("fairmont hotel", "holiday inn": ``hotel``), or
    None, and the words without the kind's names (["fairmont"])."""
    stemmed = [stem(w.lower()) for w in words]
    kinds = {kind for kind, (names, _) in _KINDS.items() for s in stemmed if s in names}
    rest = [
        w
        for w, s in zip(words, stemmed, strict=True)
        if not any(s in names for names, _ in _KINDS.values())
    ]
    return (next(iter(kinds)) if len(kinds) == 1 else None), rest


def kind_of_name(word: str, said: str | None) -> str | None:
    """The kind of ``word`` said with the kind named ``said`` (:func:`kind_named`): a name's kind
    yields to the kind said ("the Delta hotel": ``hotel``), a common word's does not ("the
    economy seat": ``class``)."""
    held = _kind_of_value(word)
    return said if said is not None and (held is None or held in _BRANDED) else held


def kind_of_choice(key: str, text: str) -> str | None:
    """The kind of the choice stated as ``text`` under ``key`` (``pref_seat``, "I'd like seat
    14C": ``seat``; ``pref_economy``: ``class``), or None when no known kind is named or held."""
    said = {stem(w) for w in content_words(key.replace("_", " "))}
    named = [kind for kind, (names, values) in _KINDS.items() if said & (names | values)]
    if not named:
        # a chain named in the statement only when written as a name: "the courtyard view" is no hotel
        written = {stem(w) for w in content_words(text)}
        names = {stem(w.lower()) for w in _WORD.findall(text) if w[0].isupper()}
        named = [
            kind
            for kind, (kinds, values) in _KINDS.items()
            if (said | written) & kinds or (names if kind in _BRANDED else written) & values
        ]
    return named[0] if len(named) == 1 else None


__all__ = ["kind_named", "kind_of_choice", "kind_of_name"]
