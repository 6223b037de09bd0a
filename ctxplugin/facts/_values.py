"""Typed values in a statement — days, times, dates, amounts of money, percentages, counts of a
unit ("5 people", "3 rooms") — for the ledger's implicit supersession (the same entity with
conflicting values). Counts of different units never conflict ("5 people", "3 rooms").

Each value is normalised so that two spellings of one value compare equal (``2pm`` and
``14:00``, ``$50k`` and ``$50,000``, ``May 20`` and ``2024-05-20``), and two statements
*conflict* on a type when each holds a value of that type the other does not.

A value after a limit word is a *bound*, not a value: "after 8 am", "before 9pm", "up to $600",
"under $1,000", "between 8am and 9pm". A bound conflicts with another bound of its type, and
with a value only when the value breaks it: "the 9:15 flight works" meets "a flight after
8 am" and leaves it standing, "the 7am flight is fine" replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Literal, NamedTuple

ValueType = Literal["day", "time", "date", "money", "percent", "count"]

_DAYS = {
    "monday": "monday", "mon": "monday", "tuesday": "tuesday", "tue": "tuesday", "tues": "tuesday",
    "wednesday": "wednesday", "wed": "wednesday", "thursday": "thursday", "thu": "thursday",
    "thur": "thursday", "thurs": "thursday", "friday": "friday", "fri": "friday",
    "saturday": "saturday", "sat": "saturday", "sunday": "sunday", "sun": "sunday",
    "today": "today", "tonight": "today", "tomorrow": "tomorrow",
}
# Abbreviations only when capitalised ("Sat", not "sat" the verb), full names in any case.
_DAY = re.compile(
    r"\b(?:(?i:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tonight|tomorrow)|"
    r"Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)\b\.?"
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")),
        start=1,
    )
    for name in names
}
MONTH_NAMES = "january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec"
"""The names of the months, whole and shortened, as alternatives of a pattern."""
_MONTH = rf"(?P<month>(?i:{MONTH_NAMES}))\.?"
_DAY_OF_MONTH = r"(?P<dom>[0-3]?\d)(?:st|nd|rd|th)?"
_DATES = (
    re.compile(r"\b(?P<year>\d{4})-(?P<mon>[01]\d)-(?P<dom>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY_OF_MONTH}\b"),
    re.compile(rf"\b{_DAY_OF_MONTH}\s+(?:of\s+)?{_MONTH}\b"),
)
_TIMES = (
    re.compile(r"\b(?P<hour>1[0-2]|0?[1-9])(?::(?P<minute>[0-5]\d))?\s*(?P<half>[ap])\.?\s?m\b\.?", re.IGNORECASE),
    re.compile(r"\b(?P<hour>[01]?\d|2[0-3]):(?P<minute>[0-5]\d)\b(?!\s*[ap]\.?\s?m\b)", re.IGNORECASE),
    re.compile(r"\b(?P<word>noon|midday|midnight)\b", re.IGNORECASE),
)
_SCALE = {"k": 1_000, "thousand": 1_000, "m": 1_000_000, "mm": 1_000_000, "million": 1_000_000, "bn": 1_000_000_000, "billion": 1_000_000_000}
_AMOUNT = r"(?P<amount>\d[\d,]*(?:\.\d+)?)\s*(?P<scale>k|mm|m|bn|thousand|million|billion)?\b"
_MONEY = (
    re.compile(rf"(?P<currency>[$€£¥])\s?{_AMOUNT}", re.IGNORECASE),
    re.compile(rf"\b{_AMOUNT}\s*(?P<code>usd|eur|gbp|jpy|dollars?|euros?|pounds?)\b", re.IGNORECASE),
)
_CODES = {"usd": "$", "dollar": "$", "dollars": "$", "eur": "€", "euro": "€", "euros": "€", "gbp": "£", "pound": "£", "pounds": "£", "jpy": "¥"}
_PERCENT = re.compile(r"\b(?P<amount>\d+(?:\.\d+)?)\s*(?:%|percent\b|per cent\b)", re.IGNORECASE)


_NUMBER_WORDS = {w: str(n) for n, w in enumerate(["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"], start=1)}
_UNITS = {
    "person": "people", "persons": "people", "people": "people", "headcount": "people", "children": "child", "kids": "child",
    **{plural: plural[:-1] for plural in ["guests", "attendees", "participants", "members", "passengers", "travelers", "travellers", "adults", "employees", "engineers", "developers", "users", "seats", "rooms", "tickets", "bags", "tables", "speakers", "volunteers", "students", "customers", "hires", "tents", "cars"]},
}
COUNT = re.compile(
    rf"(?<![\d.,])\b(?P<n>\d[\d,]*|{'|'.join(_NUMBER_WORDS)})\s+(?:(?P<added>more|extra|additional|other)\s+|(?:total|adult)\s+)?"
    rf"(?P<unit>{'|'.join(sorted({*_UNITS, *(u[:-1] for u in _UNITS if u.endswith('s'))}, key=len, reverse=True))})\b",
    re.IGNORECASE,
)
"""A count of a unit: "5 people", "seven guests", "1 adult passenger"; "2 more rooms" (``added``)
is a count added to another, not one of its own; the digits after a point ("2.5 people") are no
count."""


EVENTS = {
    verb: noun for noun, verbs in (
        ("departure", "departs departed leaves left"), ("arrival", "arrives arrived lands landed"),
        ("start", "starts started begins began"), ("end", "ends ended finishes finished"),
        ("closing", "closes closed"), ("opening", "opens opened"), ("expiry", "expires expired"),
    ) for verb in verbs.split()
}
"""Verbs that set when something happens ("Reservation QW12ER departs on May 22"), by the event
they name: the extraction rules key such a statement by its subject and the event
(``reservation_qw12er_departure``), so its arrival is another fact."""
WHEN_TYPES: frozenset[ValueType] = frozenset({"day", "time", "date"})


def _number(text: str) -> str:
    value = float(text.replace(",", ""))
    return str(int(value)) if value.is_integer() else repr(value)


Found = tuple[int, str]
"""Where a value starts in the text, and the value normalised."""


def _days(text: str) -> Iterator[Found]:
    for match in _DAY.finditer(text):
        yield match.start(), _DAYS[match.group(0).rstrip(".").lower()]


def _dates(text: str) -> Iterator[Found]:
    for pattern in _DATES:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month = int(groups["mon"]) if groups.get("mon") else _MONTHS[groups["month"].lower()]
            day = int(groups["dom"])
            if 1 <= month <= 12 and 1 <= day <= 31:
                yield match.start(), f"{month:02d}-{day:02d}"


def _times(text: str) -> Iterator[Found]:
    for pattern in _TIMES:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            if groups.get("word"):
                yield match.start(), "00:00" if groups["word"].lower() == "midnight" else "12:00"
                continue
            hour, minute = int(groups["hour"]), int(groups.get("minute") or 0)
            half = (groups.get("half") or "").lower()
            if half:
                hour = hour % 12 + (12 if half == "p" else 0)
            yield match.start(), f"{hour:02d}:{minute:02d}"


def _money(text: str) -> Iterator[Found]:
    for pattern in _MONEY:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            currency = groups.get("currency") or _CODES[groups["code"].lower()]
            amount = float(groups["amount"].replace(",", "")) * _SCALE.get((groups.get("scale") or "").lower(), 1)
            yield match.start(), f"{currency}{_number(str(amount))}"


def _percents(text: str) -> Iterator[Found]:
    for match in _PERCENT.finditer(text):
        yield match.start(), f"{_number(match.group('amount'))}%"


def _counts(text: str) -> Iterator[Found]:
    for match in COUNT.finditer(text):
        if match.group("added"):  # "2 more people" adds to the count: 5 and "2 more" are no conflict
            continue
        number, unit = match.group("n").lower(), match.group("unit").lower()
        yield match.start(), f"{_UNITS.get(unit) or _UNITS.get(unit + 's') or unit}:{_NUMBER_WORDS.get(number) or _number(number)}"


def count_unit(value: str) -> str:
    """The unit of a normalised count (``people:5``: ``people``)."""
    return value.partition(":")[0]


_FINDERS: dict[ValueType, Callable[[str], Iterator[Found]]] = {
    "day": _days,
    "time": _times,
    "date": _dates,
    "money": _money,
    "percent": _percents,
    "count": _counts,
}


_WHEN = frozenset({"day", "time", "date"})
_UPPER_WHEN = r"before|by|until|till|no later than|not later than|earlier than|not after"
_LOWER_WHEN = r"after|no earlier than|not earlier than|later than|not before"
_UPPER_AMOUNT = (
    r"up to|under|below|less than|no more than|not more than|at most|max(?:imum)?(?: of)?|within|cap(?:ped)? at|"
    r"not (?:over|above)"
)
_LOWER_AMOUNT = r"over|above|more than|at least|no less than|not less than|min(?:imum)?(?: of)?|not (?:under|below)"
_FILLER = r"(?:\s+(?:a|an|the|my|our))?(?:\s+[a-z]+\s+of)?\s*$"
"""Words a limit may have before its value: "within a fee of $200", "within the $1,000"."""
_LIMITS = {
    (when, upper): re.compile(rf"(?i)\b(?:{words}){_FILLER}")
    for when, upper, words in (
        (True, True, _UPPER_WHEN), (True, False, _LOWER_WHEN), (False, True, _UPPER_AMOUNT), (False, False, _LOWER_AMOUNT)
    )
}
_NEGATED = re.compile(r"(?i)\b(?:don[’']?t|do not|doesn[’']?t|does not|won[’']?t|will not|can[’']?t|cannot|never)\b[^,;.!?]*$")
"""A negation in the clause before a limit turns it round."""
_BETWEEN = re.compile(r"(?i)\bbetween\s*$")
_AND = re.compile(r"(?i)^\S+(?:\s?[ap]\.?\s?m\.?)?\s*(?:and|to|-)\s*$")
"""What stands between the two values of "between 8 am and 9 pm": the first value, then "and"."""


class Bound(NamedTuple):
    """A limit on a value: ``upper`` (at most ``value``) or at least ``value``."""

    value: str
    upper: bool


class Values(NamedTuple):
    """A statement's typed values, split into plain values and bounds, by type."""

    points: dict[ValueType, frozenset[str]]
    bounds: dict[ValueType, frozenset[Bound]]


def read_values(text: str) -> Values:
    """The plain values and the bounds ``text`` states, by type (see the module docstring)."""
    points: dict[ValueType, frozenset[str]] = {}
    bounds: dict[ValueType, frozenset[Bound]] = {}
    for kind, finder in _FINDERS.items():
        found = sorted(set(finder(text)))
        plain: set[str] = set()
        limits: set[Bound] = set()
        after_between: Found | None = None
        for index, (start, value) in enumerate(found):
            before = text[max(0, start - 60) : start]
            if after_between is not None and found[index - 1] == after_between and _AND.match(text[after_between[0] : start]):
                limits.add(Bound(value, upper=True))  # "between 8am and 9pm": the second is the upper one
                continue
            if _BETWEEN.search(before):
                limits.add(Bound(value, upper=False))
                after_between = (start, value)
                continue
            when = kind in _WHEN
            # the longer phrase wins: "no later than" over "later than", "not before" over "before"
            found_limits = [(m.start(), up) for up in (True, False) if (m := _LIMITS[(when, up)].search(before))]
            if not found_limits:
                plain.add(value)
                continue
            at, upper = min(found_limits)
            # "I don't want to fly before 11am" asks for 11am or later
            limits.add(Bound(value, upper=upper != bool(_NEGATED.search(before[:at]))))
        if plain:
            points[kind] = frozenset(plain)
        if limits:
            bounds[kind] = frozenset(limits)
    return Values(points, bounds)


def typed_values(text: str) -> dict[ValueType, frozenset[str]]:
    """The typed values ``text`` states, normalised, by type (types it does not state are absent).

    >>> typed_values("Meeting is Tuesday at 2pm")
    {'day': frozenset({'tuesday'}), 'time': frozenset({'14:00'})}
    """
    found: dict[ValueType, frozenset[str]] = {}
    for kind, finder in _FINDERS.items():
        values = frozenset(value for _, value in finder(text))
        if values:
            found[kind] = values
    return found


def conflicting(old: str, new: str) -> list[ValueType]:
    """Types on which the two statements disagree: each states a value of the type that the other
    does not (``Tuesday`` against ``Thursday``; ``Tuesday`` against ``Tuesday and Friday`` is an
    addition, not a conflict). Against a bound ``old`` states, ``new`` conflicts with another
    bound or a value that breaks it, never with a value that meets it."""
    before, after = read_values(old), read_values(new)
    out: list[ValueType] = []
    for kind in _FINDERS:
        was, now = before.points.get(kind, frozenset()), after.points.get(kind, frozenset())
        now_bound = after.bounds.get(kind, frozenset())
        was_bound = before.bounds.get(kind)
        if kind == "count":  # only a count of a unit both state: "5 people" and "3 rooms" say different things
            units = {count_unit(v) for v in was | {b.value for b in was_bound or ()}}
            units &= {count_unit(v) for v in now | {b.value for b in now_bound}}
            was, now = (frozenset(v for v in values if count_unit(v) in units) for values in (was, now))
            now_bound = frozenset(b for b in now_bound if count_unit(b.value) in units)
            was_bound = frozenset(b for b in was_bound if count_unit(b.value) in units) if was_bound else was_bound
        if was_bound is None:
            now = now | {b.value for b in now_bound}  # "closes Friday", then "open until Sunday"
            now_bound = frozenset()
        if (
            (was and now and was - now and now - was)
            or (was_bound and now_bound and was_bound - now_bound and now_bound - was_bound)
            or (was_bound and _breaks(kind, now, was_bound))
        ):
            out.append(kind)
    return out


def keeps_bound(old: str, new: str) -> bool:
    """Whether ``old`` states a bound that ``new`` leaves standing: ``new`` states no bound of
    that type and no value that breaks it ("I'd prefer a flight after 8 am", then "the 9:15
    flight works" or "I'd like flight HAT266")."""
    before, after = read_values(old), read_values(new)
    if not before.bounds:
        return False
    return not any(
        kind in after.bounds or _breaks(kind, after.points.get(kind, frozenset()), bounds)
        for kind, bounds in before.bounds.items()
    )


_WEEK = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _order(kind: ValueType, value: str) -> tuple[str, float] | None:
    """A value as something to compare with others of its type and unit (None: it cannot be:
    "today" against "Friday")."""
    if kind in ("time", "date"):
        return "", float(value.replace(":", "").replace("-", ""))
    if kind == "day":
        return ("", float(_WEEK.index(value))) if value in _WEEK else None
    if kind == "percent":
        return "", float(value.rstrip("%"))
    if kind == "count":
        unit, _, number = value.partition(":")
        return unit, float(number)
    return value[0], float(value[1:])  # money: the currency, then the amount


def _breaks(kind: ValueType, points: frozenset[str], bounds: frozenset[Bound]) -> bool:
    """Whether a value of ``points`` is out of a bound of ``bounds`` (inclusive; values in
    another unit or that cannot be compared break nothing)."""
    for point in points:
        value = _order(kind, point)
        for bound in bounds:
            limit = _order(kind, bound.value)
            if value is None or limit is None or value[0] != limit[0]:
                continue
            if (value[1] > limit[1]) if bound.upper else (value[1] < limit[1]):
                return True
    return False


__all__ = ["COUNT", "EVENTS", "MONTH_NAMES", "WHEN_TYPES", "Bound", "ValueType", "Values", "conflicting", "count_unit", "keeps_bound", "read_values", "typed_values"]
