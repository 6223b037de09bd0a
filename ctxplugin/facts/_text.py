"""Text helpers shared by embedding, extraction and outdated-marking: one tokenizer for all.

The tokenizer is identifier-aware: ``HAT123``, ``#W1234``, ``sofia_kim_7287``, ``src/app.py``
and URLs come out as single tokens, so exact identifiers match exactly wherever they appear.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache

from ctxplugin._lru import LRU, THREAD_TEXTS, Memo, TextKey, shared, text_key
from ctxplugin.errors import InvalidInputError

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "lets", "let's", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "please", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "ok", "okay", "yes", "yeah", "hi", "hello", "thanks", "thank"]
)

# An identifier: letters/digits joined by inner punctuation, or a word mixing letters and digits.
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+", re.IGNORECASE)
# parts bounded at 256 characters, as in ctxplugin.history.identifiers: unbounded, a long run of
# such characters is scanned to its end from every start inside it
_EMAIL = re.compile(r"\b[\w.+-]{1,256}@[\w-]+(?:\.[\w-]+)+\b")
_PATH = re.compile(r"(?<![\w/])(?:\.{0,2}/)?[\w.-]{1,256}(?:/[\w.-]{1,256})+")
_TOKEN = re.compile(r"#?[\w]+(?:[-.:_#][\w]+)*", re.UNICODE)
_HAS_DIGIT = re.compile(r"\d")
_HAS_ALPHA = re.compile(r"[^\W\d_]")
_SPLIT = re.compile(r"[-.:_#/@]+")


QUERY_CHARS = 16_000
"""Characters of a question that retrieval reads. A longer message (a log or a file the user
pasted) is read as its first and last halves of that, where the question stands: an embedding
reads about 2,000 characters at most, and the words of megabytes only slow the lexical side."""


def query_text(text: str) -> str:
    """``text`` as retrieval reads a question (see :data:`QUERY_CHARS`).

    Raises:
        InvalidInputError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"a facts search takes a text query, got {type(text).__name__}")
    if len(text) <= QUERY_CHARS:
        return text
    return f"{text[: QUERY_CHARS // 2]}\n{text[-(QUERY_CHARS // 2):]}"


def strings(value: str | Sequence[str], what: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings; one string is one entry (not one per character).

    Raises:
        InvalidInputError: an entry is not a string.
    """
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise InvalidInputError(f"a fact's {what} are strings, got {type(item).__name__} {item!r:.40}")
    return items


def one_of(value: str | Sequence[str], what: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """``value`` as a tuple of names from ``allowed``; one string is one name (not one per letter).

    Raises:
        InvalidInputError: a name not in ``allowed``, which would match nothing.
    """
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if item not in allowed:
            raise InvalidInputError(f"{what}= takes names from {list(allowed)}, got {item!r:.40}")
    return items


def result_count(k: object) -> int:
    """``k``, checked to be a whole number of results.

    Raises:
        InvalidInputError: it is not an int.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise InvalidInputError(f"a facts search takes k= a whole number of results, got {k!r:.40}")
    return k


def normalize(text: str) -> str:
    """NFKC, lower case, collapsed whitespace."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def is_identifier(token: str) -> bool:
    """Whether a token looks like an exact identifier (ids, codes, paths, urls, emails)."""
    if "/" in token or "@" in token:
        return True
    if _HAS_DIGIT.search(token) and _HAS_ALPHA.search(token):
        return True
    return "_" in token or "#" in token or (("-" in token or "." in token or ":" in token) and len(token) > 3)


_MEMO_SIZE = THREAD_TEXTS
_MEMO_MAX_CHARS = 8192
"""Longer texts are read again each time (a memo of their words would hold too much)."""
_IDENTIFIERS: LRU[TextKey, tuple[str, ...]] = LRU(_MEMO_SIZE)
_WORDS: LRU[TextKey, tuple[str, ...]] = LRU(_MEMO_SIZE)
_MEMO_LOCK = threading.Lock()


def _memoised(memo: LRU[TextKey, tuple[str, ...]], text: str, find: Callable[[str], list[str]]) -> list[str]:
    """``find(text)``, once per text (bounded): a question, a fact or a message is read again
    on every call."""
    if len(text) > _MEMO_MAX_CHARS:
        return find(text)
    key = text_key(text)
    with _MEMO_LOCK:
        hit = memo.hit(key)
    if hit is None:
        hit = shared(find(text))
        with _MEMO_LOCK:
            memo.put(key, hit)
    return list(hit)


_TOKENS: Memo[TextKey, tuple[str, ...]] = Memo(256)
_TOKENS_KEPT_CHARS = 512


def _lowered(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _tokens(text: str, lowered: str | None = None) -> Sequence[str]:
    """The :data:`_TOKEN` matches of ``text`` NFKC-normalised and lower-cased (``lowered``, when
    the caller has it): :func:`words` and :func:`identifiers` both read them, so those of the last
    long texts read are kept (a question is read by both, one after the other; a short text is
    scanned again for less than keeping it costs). No match holds whitespace: they are those of
    the text with its whitespace collapsed (:func:`normalize`)."""
    if not _TOKENS_KEPT_CHARS <= len(text) <= _MEMO_MAX_CHARS:
        return _TOKEN.findall(_lowered(text) if lowered is None else lowered)
    return _TOKENS.get_or_make(text_key(text), lambda: shared(_TOKEN.findall(_lowered(text) if lowered is None else lowered)))


def identifiers(text: str) -> list[str]:
    """Exact identifiers in ``text`` (lower-cased, leading ``#`` dropped, order kept, no repeats)."""
    return _memoised(_IDENTIFIERS, text, _identifiers)


def _identifiers(text: str) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    lowered = _lowered(text)

    def keep(token: str) -> None:
        token = token.strip(".,;:!?'\"()[]{}").lstrip("#")
        if token and token not in seen and is_identifier(token):
            seen.add(token)
            found.append(token)

    for whole in _marked(lowered):
        keep(whole)
    for token in _tokens(text, lowered):
        if token.isalpha():  # letters only: no digit, "_" or "#"
            continue
        if "_" in token or "#" in token or _HAS_DIGIT.search(token):
            keep(token)
    return found


_MARKED = ((_URL, "://"), (_EMAIL, "@"), (_PATH, "/"))
"""The patterns of whole identifiers, each with what every match of it holds."""


def _marked(lowered: str) -> Iterator[str]:
    """What the patterns of :data:`_MARKED` find in ``lowered``, pattern by pattern, in order.

    No match holds a space, and each pattern reads a space as it reads the end of a text, so
    each is looked for only in the words (runs between spaces) that hold its mark: most texts
    have no URL or e-mail address, and a text with a path has few words with a slash."""
    words: list[str] | None = None
    for pattern, mark in _MARKED:
        if mark not in lowered:
            continue
        if words is None:
            words = lowered.split()
        for word in words:
            if mark in word:
                for match in pattern.finditer(word):
                    yield match.group(0)


_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ied", "ies", "ed", "es", "ly", "s")
_SUFFIXES_BY_LAST = {last: tuple(s for s in _SUFFIXES if s.endswith(last)) for last in {s[-1] for s in _SUFFIXES}}
"""The suffixes ending in each letter, in the order they are tried: a word is tried against those
its last letter may end."""


@lru_cache(maxsize=16384)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match allocation/allocated/allocating."""
    for suffix in _SUFFIXES_BY_LAST.get(word[-1:], ()):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    """Lower-cased word tokens with identifiers kept whole (``#w1234`` becomes ``w1234``)."""
    return _memoised(_WORDS, text, _words)


def _words(text: str) -> list[str]:
    out: list[str] = []
    for found in _tokens(text):
        token = found.lstrip("#")
        if token.isalpha():  # most words: letters only, neither an identifier nor split
            out.append(token)
        elif not token:
            continue
        elif is_identifier(token):
            out.append(token)
        else:
            out.extend(p for p in _SPLIT.split(token) if p)
    return out


def content_words(text: str) -> list[str]:
    """Words of ``text`` without stopwords or one-letter tokens."""
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1]


_WORD_SETS: LRU[TextKey, frozenset[str]] = LRU(16_384)
_WORD_SETS_LOCK = threading.Lock()


def word_set(text: str) -> frozenset[str]:
    """The set of :func:`content_words` of ``text``, memoised (bounded): history is scanned on
    every call and each message's words are found once."""
    key = text_key(text)
    with _WORD_SETS_LOCK:
        hit = _WORD_SETS.hit(key)
    if hit is not None:
        return hit
    found = frozenset(content_words(text))
    with _WORD_SETS_LOCK:
        _WORD_SETS.put(key, found)
    return found


def parts_of(identifier: str) -> list[str]:
    """Pieces of an identifier (``src/app/main.py`` -> src, app, main, py)."""
    return [p for p in _SPLIT.split(identifier) if p and p != identifier]


_DENIAL = re.compile(
    r"\b(?:is|are|was|were)\s+not\s+(?!only\b)(?P<val>[^,;]+?)[.!]?$|\b(?:isn't|aren't|wasn't|weren't)\s+(?P<val2>[^,;]+?)[.!]?$",
    re.IGNORECASE,
)


def denied(text: str) -> frozenset[str] | None:
    """The content words of the value a plain denial denies ("the meeting is not on Friday":
    ``{"friday"}``), or None when ``text`` is not one: it affirms nothing else ("the budget is not
    $500, it's $400" is a correction, not a denial)."""
    match = _DENIAL.search(text.strip())
    if match is None:
        return None
    found = frozenset(content_words(match.group("val") or match.group("val2")))
    return found or None


def slug(text: str, max_words: int = 4) -> str:
    """A short key from a phrase: content words joined by ``_`` (at most ``max_words``, the last ones)."""
    kept = [w for w in content_words(text) if not w.isdigit()]
    return "_".join(kept[-max_words:])


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=\S)|\n+")
_DAY_POINT = re.compile(r"(?<![\w.])[0-3]?\d\.")
_MONTH_AFTER = re.compile(r"(?:Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember)\b")
"""A German date ("am 3. Mai"): the day's point is no end of a sentence."""
_NEVER_LAST = frozenset(["e.g.", "i.e.", "cf.", "vs.", "viz.", "approx.", "incl.", "esp.", "dr.", "mr.", "mrs.", "ms.", "prof."])
"""Abbreviations that always lead on to more of their sentence ("e.g. ORD-123", "Dr. Smith")."""
_BEFORE_NUMBER = frozenset(["no.", "nr.", "ref.", "tel.", "ca."])
"""Abbreviations that lead on to a number ("order no. 4411-B")."""
_MAY_BE_LAST = frozenset(["etc.", "al."])
"""Abbreviations that end a sentence only when a capital follows ("socks etc. and a coat")."""
_ITEM_NUMBER = re.compile(r"\d{1,3}\.")


def _ends_sentence(text: str, start: int, match: re.Match[str]) -> bool:
    """Whether the point, "!" or "?" before the space ``match`` ends a sentence: a capital, a digit
    or an opening quote begins the next one, and so does a lower-case word (people type "My email
    is alice@example.com. show orders") unless an abbreviation or an ellipsis leads on to it."""
    following = text[match.end()]
    space = text.rfind(" ", start, match.start())
    word = text[space + 1 if space >= 0 else start : match.start()].lstrip("(\"'[").lower()
    if word in _NEVER_LAST or (word in _BEFORE_NUMBER and (following.isdigit() or following == "#")):
        return False
    if following.isupper() or following.isdigit() or following in "\"'(":
        return not (_MONTH_AFTER.match(text, match.end()) and _DAY_POINT.search(text, max(match.start() - 3, start), match.start()))
    # "5. pv.Grid(...)": a list's number leads on to its item
    return following.islower() and word not in _MAY_BE_LAST and not word.endswith("..") and _ITEM_NUMBER.fullmatch(word) is None


def sentences(text: str) -> Iterator[str]:
    """The sentences and lines of prose (never split inside URLs, paths, decimals or version
    numbers, nor after "e.g." or "Dr."), one at a time: a reader that stops after the first few
    does not split the rest of a long output."""
    start = 0
    for match in _SENTENCE_BREAK.finditer(text):
        if "\n" not in match.group() and not _ends_sentence(text, start, match):
            continue  # "Mein Flug ist am 3. Mai.", "Ask Dr. Smith"
        piece = text[start : match.start()].strip()
        start = match.end()
        if piece:
            yield piece
    piece = text[start:].strip()
    if piece:
        yield piece
