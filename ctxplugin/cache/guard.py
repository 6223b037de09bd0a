"""When two questions may share one answer: the normalised query, and guards on top of similarity.

A cosine threshold alone cannot tell "how long does shipping to Portland take for order W1234"
from the same question about Seattle or order W1235: one word in twenty differs, so a lexical
embedding scores the pair close, and a semantic one often does too. A guard is a plain function
``(cached_query, new_query) -> reason | None`` that vetoes such a pair after the threshold:

- :func:`same_wording` (the default) lets through only questions that say the same thing in the
  same order once politeness, greetings, articles and request framing ("can you tell me", "I'd
  like to know") are set aside. Every identifier, number, name, place, date, negation and
  direction word ("from", "to", "before") must be there, in order.
- :func:`same_specifics` checks only the specifics (identifiers, numbers, capitalised names,
  calendar words, negations) and trusts the embedding for the rest; pick it with a semantic
  embedding that knows paraphrases.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

from ctxplugin.facts import identifiers, words

QueryGuard = Callable[[str, str], "str | None"]
"""``(cached_query, new_query) -> None`` when the cached answer may serve the new query, else a
short reason (shown in the cache-lookup event)."""

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\bcan't\b", "cannot"),
        (r"\bwon't\b", "will not"),
        (r"\bshan't\b", "shall not"),
        (r"n't\b", " not"),
        (r"\b(what|where|when|who|how|why|which|that|there|here|it|he|she)'s\b", r"\1 is"),
        (r"\bi'm\b", "i am"),
        (r"'re\b", " are"),
        (r"'ll\b", " will"),
        (r"'ve\b", " have"),
        (r"'d\b", " would"),
    )
)
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni", strict=True))
_SUPERSCRIPT = re.compile(f"[{''.join(_SUPERSCRIPTS)}]+")
"""An exponent: NFKC writes "2³" as "23" and "x²" as "x2", other questions; it is read as "2^3"."""
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
# Symbols that change what is asked: an operator ("2+2" is not "2-2", "√16" not "16"), a
# comparison, a sign ("-5"), a percent or currency sign, the "#" of "C#". A hyphen between two
# letters ("e-mail") is spelling, not a symbol. Such symbols are never stripped from a query's
# edges and count as words of its wording.
_MATH = "\u00ac" + "".join(
    c
    for start, end in ((0x2190, 0x2300), (0x27C0, 0x2800), (0x2900, 0x2B00))
    for c in map(chr, range(start, end))
    if unicodedata.category(c) == "Sm"
)
"""Mathematical symbols besides those above (root, element of, arrows, logic, sets): "√16" is not "16"."""
_SYMBOL_CHARS = "+\\-\u2212*\u00d7\u00f7/^%=<>\u2264\u2265\u2260\u00b1~$\u20ac\u00a3\u00a5\u20b9\u20bd\u20a9" + _MATH

def _ranges(chars: list[str]) -> str:
    """``chars`` (in code point order) as a regex class body of ranges."""
    out: list[str] = []
    start = prev = -2
    for c in map(ord, [*chars, "\U0010ffff"]):
        if c != prev + 1:
            if start >= 0:
                out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
            start = c
        prev = c
    return "".join(out)


# Pictographs and other symbols that are the point of a question: "Is this 👍?" is not "Is this
# 👎?", "Rate ★★★★★" not "Rate ★", "5°" not "5". A run of them is read as one symbol.
_PICTOGRAPH = _ranges([
    c
    for start, end in ((0xA0, 0x100), (0x2100, 0x2C00), (0x2E80, 0x3400), (0x1F000, 0x1FB00))
    for c in map(chr, range(start, end))
    if unicodedata.category(c) in ("So", "Sk")
])
_SYMBOL = re.compile(
    rf"((?<![^\W\d_])-|-(?![^\W\d_])|[{_SYMBOL_CHARS.replace('-', '')}]|(?<=[^\W\d_])#(?!\w)"
    rf"|(?:(?<=\b\d)|(?<=\b\d\d)|(?<=\b\d{{3}}))!|[{_PICTOGRAPH}]+)"
)
"""A symbol that changes what is asked; a "!" right after a number is a factorial ("5!" is not "5",
"W1234!" is an identifier said loud)."""


def _strip_edges(value: str) -> str:
    """``value`` without the whitespace and punctuation around it ("?", "!", "...", quotes,
    brackets). A symbol is kept ("5%", "C#", "👍", "★"), and so is a "!" right after a digit: "What
    is 5!" asks for a factorial."""
    start, end = 0, len(value)
    while start < end and _edge(value[start], first=True):
        start += 1
    while end > start and _edge(value[end - 1], first=False) and not _SYMBOL.match(value, end - 1):
        end -= 1
    return value[start:end]


def _edge(char: str, *, first: bool) -> bool:
    """Whether ``char`` at a query's edge is only punctuation or space."""
    if char in _SYMBOL_CHARS or (char == "#" and not first):
        return False
    return char.isspace() or unicodedata.category(char)[0] in "PZC"
_REPEATED_PUNCT = re.compile(r"([!?.,;:])\1+")
# How a question is written, not what it asks, though its characters are symbols: markdown
# emphasis ("**python**"), a list bullet before the first word, a dash set between words
# ("python - what is a list"). Set aside before symbols are read. A star inside emphasis stands
# between two characters ("**2*3**"), so the search for a closing star stops at one after a space
# and a long question full of stars is read in one pass.
_WRITTEN = re.compile(
    r"(?<![\w*])(\*{1,3})(?=[^\s*])((?:[^*]|(?<=[^\s*])\*+(?=[^\s*]))+?)(?<=[^\s*])\1(?![\w*])"
    r"|^[-*+] (?=[^\W\d_])"
    r"|(?:(?<=[^\W\d_])|(?<=[?!.:;,)\]])) -{1,3}(?= [^\W\d_])"
)

# Request framing that never changes what is asked. Removed as phrases, before single words,
# so that "you" and "I" stay significant elsewhere ("can I cancel" is not "can you cancel").
_FRAMING = tuple(
    re.compile(pattern)
    for pattern in (
        r"^(hi|hello|hey|good (morning|afternoon|evening))( there)?\b",
        r"\b(thanks|thank you)( (so|very) much)?( in advance)?\b",
        r"\b(can|could|would|will) you (please )?(tell|show|let) me( know)?\b",
        r"\b(please )?(tell|show) me\b",
        r"\b(i|we) (would like|want|wanted|need|am trying|was hoping) to (know|ask|find out|check|understand)\b",
        r"\bdo you (happen to )?know\b",
        r"\b(i am|i was) (just )?(wondering|curious)( about)?\b",
        r"\bi (just )?wonder\b",
        r"\b(i have a )?quick question\b",
        r"^(what|which) (is|are)\b",
    )
)
_NEUTRAL = frozenset({"a", "an", "the", "please", "pls", "plz", "kindly", "just", "actually", "really", "ok", "okay", "um", "uh"})

_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
    "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40",
    "fifty": "50", "hundred": "100", "thousand": "1000", "million": "1000000", "dozen": "12",
    "half": "0.5", "first": "1st", "second": "2nd", "third": "3rd", "fourth": "4th", "fifth": "5th",
}
_CALENDAR = frozenset({
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday", "today", "tomorrow", "yesterday", "tonight", "morning", "afternoon",
    "evening", "night", "weekend", "week", "month", "year", "last", "next", "previous",
    "earlier", "later",
})
_NEGATIONS = frozenset({"not", "no", "never", "nor", "cannot", "without", "none", "nothing", "neither", "nobody"})
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_WORD = re.compile(r"(?<![\w'-])[^\W\d_][\w'-]*")


_TOKEN = re.compile(r"\S+")


def _case_kept(token: str) -> bool:
    """Whether a token is a name in code written in mixed case (``getUser``, ``aBc12X``,
    ``src/App.py``, ``dir_A``): it may mean another thing in another case (``getuser``,
    ``AbC12x``), so it keeps its case. A word people write in mixed case (``iPhone``, ``iOS``,
    ``McDonald's``, ``O'Neil``, ``JavaScript``, ``APIs``) is the same word typed in lower case or
    in capitals, and is folded like a word in one case or capitalised (``Portland``, ``NASA``)."""
    core = token.strip(".,;:!?'\"()[]{}")
    upper = [c.isupper() for c in core if c.isalpha()]
    if all(upper) or not any(upper) or not any(upper[1:]):
        return False  # one case, or capitalised
    if any(not (c.isalpha() or c in "'-") for c in core):
        return not (all(upper[:-1]) and core[-1] == "s")  # a digit, "_", "/", "." ...; not "MP3s"
    first = upper.index(True)  # lowerCamelCase: a lower-case word, then a capitalised one
    return first >= 2 and not all(upper[first:])


def _fold(text: str) -> str:
    """``text`` in lower case, except its mixed-case tokens (see :func:`_case_kept`) and a capital
    "A" that names something (see :func:`_letter_name`)."""
    return _TOKEN.sub(lambda m: m.group(0) if _case_kept(m.group(0)) or _letter_name(m) else m.group(0).lower(), text)


_LETTER_A = re.compile(r"A[.,;:!?'\")\]]*")
_NAMED_A = re.compile(r"(?<![\w'-])A(?![\w'-])")


def _letter_name(token: re.Match[str]) -> bool:
    """Whether a lone capital "A" is a name ("vitamin A", "grade A", "plan A"), not the article:
    it follows a word written in lower case, not the start of a sentence ("A cat sat") nor a
    question in capitals ("WHAT IS A LIST")."""
    if not _LETTER_A.fullmatch(token.group(0)):
        return False
    # the word before, read from a short stretch before the letter: a long question full of
    # capital A's is read in one pass
    before = token.string[max(0, token.start() - 64) : token.start()]
    words = before.split()
    if not before[-1:].isspace() or not words:
        return False
    return any(c.islower() for c in words[-1]) and words[-1][-1].isalpha()


def _cased(text: str) -> tuple[str, ...]:
    """The mixed-case tokens of a query, without the punctuation around them, in order."""
    return tuple(t.strip(".,;:!?'\"()[]{}") for t in _TOKEN.findall(normalize_query(text)) if _case_kept(t))


def normalize_query(text: str) -> str:
    """The form under which queries are compared: an exponent written with a caret (``2^3``), NFKC,
    lower case (a name in code written in mixed case, such as ``getUser``, keeps its case, and so
    does a capital "A" that names something, as in "vitamin A"), contractions
    expanded, thousands separators dropped, repeated punctuation and punctuation around it removed
    (a symbol at its end, such as "👍", "%" or the "!" of "5!", stays),
    whitespace collapsed."""
    raised = _SUPERSCRIPT.sub(lambda m: "^" + "".join(_SUPERSCRIPTS[c] for c in m.group(0)), text)
    value = _fold(unicodedata.normalize("NFKC", raised).translate(_APOSTROPHES))
    for pattern, replacement in _CONTRACTIONS:
        value = pattern.sub(replacement, value)
    value = _THOUSANDS.sub("", value)
    value = _REPEATED_PUNCT.sub(r"\1", value)
    value = " ".join(value.split())
    return _strip_edges(value)


def query_hash(normalized: str) -> str:
    """Stable hash of a normalised query (the exact-match key)."""
    return hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()


def wording(text: str) -> list[str]:
    """The significant words of a query, in order: what :func:`same_wording` compares."""
    return list(_wording(text))


@lru_cache(maxsize=8192)
def _wording(text: str) -> tuple[str, ...]:
    value = _plain(normalize_query(text))
    for _ in range(2):  # framing often comes in layers: "hi! i'd like to know: what is ..."
        for pattern in _FRAMING:
            value = _strip_edges(pattern.sub(" ", value))
    tokens: list[str] = []
    for index, part in enumerate(_SYMBOL.split(value)):
        if index % 2:  # a symbol the split kept
            tokens.append(part)
        else:  # a capital "A" left in a normalised query is a name, not the article
            for piece_index, piece in enumerate(_NAMED_A.split(part)):
                if piece_index:
                    tokens.append("a")
                tokens.extend(_NUMBER_WORDS.get(w, w) for w in words(piece) if w not in _NEUTRAL)
    return tuple(tokens)


def _symbols(text: str) -> frozenset[str]:
    """The symbols of a normalised query that change what it asks (see ``_SYMBOL``)."""
    return frozenset(_SYMBOL.findall(_plain(text)))


def _plain(text: str) -> str:
    """``text`` without the markdown and dashes that only shape it (see ``_WRITTEN``)."""
    return _WRITTEN.sub(lambda m: m.group(2) or "", text)


def search_text(query: str) -> str:
    """What is embedded for similarity search: the significant wording, so that greetings and
    request framing do not lower the similarity of the same question (the normalised query when
    nothing significant is left)."""
    return " ".join(wording(query)) or normalize_query(query)


def same_wording(cached: str, new: str) -> str | None:
    """The default guard: the significant words of both queries are the same, in the same order.

    Example:
        >>> same_wording("Can you tell me the refund policy?", "what's the refund policy")
        >>> same_wording("How long does shipping to Portland take?", "How long does shipping to Seattle take?")
        'wording differs: portland / seattle'
    """
    a, b = _wording(cached), _wording(new)
    if a == b:
        return _case_differs(cached, new)
    only_a = [w for w in a if w not in b]
    only_b = [w for w in b if w not in a]
    if not only_a and not only_b:
        return "word order differs"
    return f"wording differs: {' '.join(only_a) or '-'} / {' '.join(only_b) or '-'}"


def _case_differs(cached: str, new: str) -> str | None:
    """Why two queries whose words agree in lower case still differ: a name written in mixed case
    in one is written otherwise in the other (``getUser`` / ``getuser``)."""
    a, b = _cased(cached), _cased(new)
    if a == b:
        return None
    return f"case differs: {' '.join(t for t in a if t not in b) or '-'} / {' '.join(t for t in b if t not in a) or '-'}"


def specifics(text: str) -> dict[str, frozenset[str]]:
    """Identifiers, numbers (digits or words), calendar words, negations and symbols (operators,
    signs, percent and currency signs) of a query."""
    value = normalize_query(text)
    tokens = words(value)
    numbers = set(_NUMBER.findall(value)) | {_NUMBER_WORDS[t] for t in tokens if t in _NUMBER_WORDS}
    return {
        "identifiers": frozenset(identifiers(value)),
        "numbers": frozenset(numbers),
        "calendar": frozenset(t for t in tokens if t in _CALENDAR),
        "negations": frozenset(t for t in tokens if t in _NEGATIONS),
        "symbols": _symbols(value),
    }


def _names(text: str) -> set[str]:
    """Capitalised words that are not the first word of a sentence (names, places, products), in
    lower case ("İstanbul" as "istanbul")."""
    found: set[str] = set()
    text = unicodedata.normalize("NFKC", text)
    for match in _WORD.finditer(text):
        if not match.group(0)[0].isupper():  # a capital in any script: Łódź, Österreich, Москва
            continue
        before = match.start() - 1
        while before >= 0 and text[before].isspace():
            before -= 1
        if before < 0 or text[before] in ".!?:;\"'(":
            continue
        found.add(match.group(0).lower().replace("i\u0307", "i"))
    return found


def same_specifics(cached: str, new: str) -> str | None:
    """A guard for semantic embeddings: identifiers, numbers, names, calendar words and negations
    must match exactly; the wording around them may differ.

    A name (a capitalised word inside a sentence) in either query must appear, in any case, in
    the other, so "ship to portland" and "ship to Portland" agree while "Portland" and
    "Seattle" do not.

    Example:
        >>> same_specifics("Status of order #W1234?", "where is my order W1234")
        >>> same_specifics("Status of order #W1234?", "Status of order #W1235?")
        'identifiers differ: w1234 / w1235'
    """
    a, b = specifics(cached), specifics(new)
    for kind in ("identifiers", "numbers", "calendar", "negations", "symbols"):
        if a[kind] != b[kind]:
            return f"{kind} differ: {' '.join(sorted(a[kind] - b[kind])) or '-'} / {' '.join(sorted(b[kind] - a[kind])) or '-'}"
    words_a, words_b = set(words(normalize_query(cached))), set(words(normalize_query(new)))
    # a name is in the other query if its words are ("o'neil" is read as "o", "neil")
    missing = sorted({n for n in _names(cached) if not words_b.issuperset(words(n))} | {n for n in _names(new) if not words_a.issuperset(words(n))})
    if missing:
        return f"names differ: {' '.join(missing)}"
    return _case_differs(cached, new)


__all__ = [
    "QueryGuard",
    "normalize_query",
    "query_hash",
    "same_specifics",
    "same_wording",
    "search_text",
    "specifics",
    "wording",
]
