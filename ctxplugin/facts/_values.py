"""Typed values in a statement — days, times, dates, amounts of money, percentages — for the
ledger's implicit supersession (seed 002, rule 2: the same entity with conflicting values).

Each value is normalised so that two spellings of one value compare equal (``2pm`` and
``14:00``, ``$50k`` and ``$50,000``, ``May 20`` and ``2024-05-20``), and two statements
*conflict* on a type when each holds a value of that type the other does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Literal

ValueType = Literal["day", "time", "date", "money", "percent"]

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
_MONTH = r"(?P<month>(?i:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec))\.?"
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


def _number(text: str) -> str:
    value = float(text.replace(",", ""))
    return str(int(value)) if value.is_integer() else repr(value)


def _days(text: str) -> Iterator[str]:
    for match in _DAY.finditer(text):
        yield _DAYS[match.group(0).rstrip(".").lower()]


def _dates(text: str) -> Iterator[str]:
    for pattern in _DATES:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month = int(groups["mon"]) if groups.get("mon") else _MONTHS[groups["month"].lower()]
            day = int(groups["dom"])
            if 1 <= month <= 12 and 1 <= day <= 31:
                yield f"{month:02d}-{day:02d}"


def _times(text: str) -> Iterator[str]:
    for pattern in _TIMES:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            if groups.get("word"):
                yield "00:00" if groups["word"].lower() == "midnight" else "12:00"
                continue
            hour, minute = int(groups["hour"]), int(groups.get("minute") or 0)
            half = (groups.get("half") or "").lower()
            if half:
                hour = hour % 12 + (12 if half == "p" else 0)
            yield f"{hour:02d}:{minute:02d}"


def _money(text: str) -> Iterator[str]:
    for pattern in _MONEY:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            currency = groups.get("currency") or _CODES[groups["code"].lower()]
            amount = float(groups["amount"].replace(",", "")) * _SCALE.get((groups.get("scale") or "").lower(), 1)
            yield f"{currency}{_number(str(amount))}"


def _percents(text: str) -> Iterator[str]:
    for match in _PERCENT.finditer(text):
        yield f"{_number(match.group('amount'))}%"


_FINDERS: dict[ValueType, Callable[[str], Iterator[str]]] = {
    "day": _days,
    "time": _times,
    "date": _dates,
    "money": _money,
    "percent": _percents,
}


def typed_values(text: str) -> dict[ValueType, frozenset[str]]:
    """The typed values ``text`` states, normalised, by type (types it does not state are absent).

    >>> typed_values("Meeting is Tuesday at 2pm")
    {'day': frozenset({'tuesday'}), 'time': frozenset({'14:00'})}
    """
    found: dict[ValueType, frozenset[str]] = {}
    for kind, finder in _FINDERS.items():
        values = frozenset(finder(text))
        if values:
            found[kind] = values
    return found


def conflicting(old: str, new: str) -> list[ValueType]:
    """Types on which the two statements disagree: each states a value of the type that the other
    does not (``Tuesday`` against ``Thursday``; ``Tuesday`` against ``Tuesday and Friday`` is an
    addition, not a conflict)."""
    before, after = typed_values(old), typed_values(new)
    return [
        kind for kind in _FINDERS
        if kind in before and kind in after and before[kind] - after[kind] and after[kind] - before[kind]
    ]


__all__ = ["ValueType", "conflicting", "typed_values"]
