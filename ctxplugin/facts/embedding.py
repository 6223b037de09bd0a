"""Embeddings for the facts ledger: the weight-free hashing embedding, the choice of default, and
adapters for anything else.

The default is :class:`~ctxplugin.facts.static.StaticEmbedding` (word vectors shipped inside a
package; paraphrases and synonyms). :class:`HashingEmbedding` needs no model and no download: it hashes word unigrams and bigrams,
exact identifiers and character n-grams into a fixed number of dimensions (the "hashing trick")
and L2-normalises the result. It matches shared words, word forms and identifiers well, and does
not know synonyms or paraphrases. Any LangChain ``Embeddings`` or Chroma embedding function can
replace it (:func:`as_embeddings` adapts them).
"""

from __future__ import annotations

import math
import numbers
import re
import threading
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypeVar, cast

from langchain_core.embeddings import Embeddings

from ctxplugin._lru import LRU, TextKey, text_key
from ctxplugin._untrusted import valid_unicode
from ctxplugin.errors import ConfigError, StoreError
from ctxplugin.facts._failures import bounded_call, failing_as_store
from ctxplugin.facts._text import STOPWORDS, is_identifier, parts_of, stem, words

T = TypeVar("T")

_VERSION = "1"
_MEMO_TEXTS = 8192

# Weights per feature family: identifiers dominate so that "HAT123" finds HAT123 exactly;
# word stems carry topic; bigrams reward phrase overlap; char grams catch word-form variants.
_W_IDENT = 2.0
_W_IDENT_PART = 0.4
_W_WORD = 1.0
_W_BIGRAM = 0.6
_W_CHAR = 0.2


@lru_cache(maxsize=65536)
def _slot(feature: str, dims: int) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
    # the top bit picks a sign, so colliding features tend to cancel instead of piling up
    return h % dims, 1.0 if (h >> 31) & 1 else -1.0


def _char_grams(word: str, n: int = 4) -> list[str]:
    padded = f"<{word}>"
    if len(padded) <= n:
        return [padded]
    return [padded[i : i + n] for i in range(len(padded) - n + 1)]


def _root(token: str) -> str | None:
    """The stem a plain word contributes to bigrams (``None`` for identifiers and stopwords)."""
    if is_identifier(token) or token in STOPWORDS or len(token) < 2:
        return None
    return stem(token)


@lru_cache(maxsize=65536)
def _token_slots(token: str, dims: int) -> tuple[tuple[int, float], ...]:
    """Signed weights one token adds (words recur across texts, so this is computed once)."""
    if is_identifier(token):
        named = [("i:" + token, _W_IDENT)] + [
            ("w:" + stem(part), _W_IDENT_PART) for part in parts_of(token) if part not in STOPWORDS and len(part) > 1
        ]
    elif token in STOPWORDS or len(token) < 2:
        return ()
    else:
        named = [("w:" + stem(token), _W_WORD)] + [("c:" + gram, _W_CHAR) for gram in _char_grams(token)]
    out = []
    for name, weight in named:
        index, sign = _slot(name, dims)
        out.append((index, sign * weight))
    return tuple(out)


class HashingEmbedding(Embeddings):
    """Dense embedding by feature hashing; deterministic, offline, no weights.

    Args:
        dims: vector size (a few hundred is plenty; larger means fewer hash collisions).

    Example:
        >>> emb = HashingEmbedding(dims=256)
        >>> len(emb.embed_query("order #W1234 was cancelled"))
        256
    """

    def __init__(self, dims: int = 384) -> None:
        if not 32 <= dims <= 8192:
            raise ConfigError(f"HashingEmbedding dims must be within 32..8192, got {dims}")
        self.dims = dims
        self._vectors: LRU[TextKey, list[float]] = LRU(_MEMO_TEXTS)
        self._memo_lock = threading.Lock()

    @property
    def identity(self) -> str:
        """Names the vector space: vectors of different identities must not share a collection."""
        return f"hash{self.dims}v{_VERSION}"

    def features(self, text: str) -> dict[str, float]:
        """The weighted features of ``text`` (what gets hashed)."""
        feats: dict[str, float] = {}

        def add(name: str, weight: float) -> None:
            feats[name] = feats.get(name, 0.0) + weight

        previous: str | None = None
        for token in words(text):
            if is_identifier(token):
                add("i:" + token, _W_IDENT)
                for part in parts_of(token):
                    if part not in STOPWORDS and len(part) > 1:
                        add("w:" + stem(part), _W_IDENT_PART)
                previous = None
                continue
            if token in STOPWORDS or len(token) < 2:
                previous = None
                continue
            root = stem(token)
            add("w:" + root, _W_WORD)
            for gram in _char_grams(token):
                add("c:" + gram, _W_CHAR)
            if previous is not None:
                add(f"b:{previous}_{root}", _W_BIGRAM)
            previous = root
        return feats

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        dims = self.dims
        previous: str | None = None
        for token in words(text):
            for index, value in _token_slots(token, dims):
                vector[index] += value
            root = _root(token)
            if root is not None and previous is not None:
                index, sign = _slot(f"b:{previous}_{root}", dims)
                vector[index] += sign * _W_BIGRAM
            previous = root
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            return vector
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for stored texts."""
        return [self._memo(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query (same space as documents)."""
        return self._memo(text)

    def _memo(self, text: str) -> list[float]:
        # the same question and texts come back call after call; each is embedded once
        key = text_key(text)
        with self._memo_lock:
            hit = self._vectors.hit(key)
        if hit is None:
            hit = self._embed(text)
            with self._memo_lock:
                self._vectors.put(key, hit)
        return list(hit)


class _CallableEmbeddings(Embeddings):
    """A Chroma embedding function, or any ``list[str] -> vectors`` callable, as ``Embeddings``."""

    def __init__(self, function: Callable[[list[str]], Any]) -> None:
        self.function = function

    @property
    def identity(self) -> str:
        name_of = getattr(self.function, "name", None)
        name = name_of() if callable(name_of) else type(self.function).__name__
        return _safe(f"{name}{_model_suffix(self.function)}")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        # the answer as it is: document_vectors checks it, outside the function's own call
        return cast("list[list[float]]", self.function(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        query = getattr(self.function, "embed_query", None)
        vectors = query([text]) if callable(query) else self.function([text])
        return cast("list[float]", _one_vector(vectors, self))


def _one_vector(vectors: object, embedding: object) -> object:
    """The one vector of ``vectors``, a function's answer for one text.

    Raises:
        StoreError: ``vectors`` is not one vector.
    """
    _check_count(vectors, 1, embedding)
    return cast("Sequence[object]", vectors)[0]


def default_embedding(kind: str = "static", dims: int = 384) -> Embeddings:
    """The built-in embedding named by ``FactsConfig.embedding``: ``"static"`` (or ``"auto"``)
    is :class:`~ctxplugin.facts.static.StaticEmbedding`, ``"hashing"`` is
    :class:`HashingEmbedding` of ``dims`` dimensions, ``"minilm"`` is
    :class:`~ctxplugin.facts.sentence.SentenceEmbedding` (the ``semantic`` extra). None of
    them downloads anything.

    Raises:
        MissingDependencyError: ``"minilm"`` without the ``semantic`` extra installed.
        ConfigError: an unknown name.
    """
    if kind == "hashing":
        return HashingEmbedding(dims)
    if kind in ("static", "auto"):
        from ctxplugin.facts.static import StaticEmbedding

        return StaticEmbedding()
    if kind == "minilm":
        from ctxplugin.facts.sentence import SentenceEmbedding

        return SentenceEmbedding()
    raise ConfigError(f"unknown embedding {kind!r}: use 'auto', 'static', 'hashing' or 'minilm'")


def as_embeddings(
    embedding: Embeddings | Callable[[list[str]], Any] | None, dims: int = 384, default: str = "static"
) -> Embeddings:
    """Normalise an embedding choice: ``None`` (the built-in ``default``, see
    :func:`default_embedding`), a LangChain ``Embeddings``, a Chroma embedding function, or a
    plain ``list[str] -> vectors`` callable.

    Raises:
        ConfigError: ``embedding`` is none of these.
    """
    if embedding is None:
        return default_embedding(default, dims)
    if isinstance(embedding, Embeddings):
        return embedding
    if callable(embedding):
        return _CallableEmbeddings(embedding)
    raise ConfigError(
        f"embedding must be a LangChain Embeddings, a Chroma embedding function or a callable, "
        f"got {type(embedding).__name__}"
    )


def embedding_identity(embedding: Embeddings) -> str:
    """A short stable name for the vector space of ``embedding`` (used in collection names)."""
    identity = getattr(embedding, "identity", None)
    if isinstance(identity, str):
        return _safe(identity)
    return _safe(f"{type(embedding).__name__}{_model_suffix(embedding)}")


def _model_suffix(obj: object) -> str:
    for attr in ("model", "model_name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return "-" + value
    return ""


def _safe(name: str) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9]+", "", name.lower())
    return cleaned[:40] or "custom"


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is zero)."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


def query_vector(embedding: Embeddings, text: str) -> list[float]:
    """``embedding.embed_query(text)`` with lone surrogates (undecodable bytes a host decoded with
    ``surrogateescape``) replaced by U+FFFD first: no tokenizer or embedding API can encode them,
    and a question holding one must not fail the call.

    Raises:
        StoreError: the embedding failed (see :func:`ctxplugin.facts._failures.failing_as_store`),
            or answered with something other than one vector of finite numbers.
    """
    if _own(embedding):
        return _called(embedding, lambda: embedding.embed_query(valid_unicode(text)))
    return _vector(_called(embedding, lambda: embedding.embed_query(valid_unicode(text))), embedding)


def document_vectors(embedding: Embeddings, texts: Sequence[str]) -> list[list[float]]:
    """``embedding.embed_documents(texts)``, each text made encodable as :func:`query_vector` does.

    Raises:
        StoreError: the embedding failed, or answered with something other than one vector of
            finite numbers per text, all of one length.
    """
    vectors = _called(embedding, lambda: embedding.embed_documents([valid_unicode(text) for text in texts]))
    if _own(embedding):
        return vectors
    _check_count(vectors, len(texts), embedding)
    checked = [_vector(v, embedding) for v in vectors]
    widths = sorted({len(v) for v in checked})
    if len(widths) > 1:
        raise StoreError(f"the embedding {_name(embedding)} answered vectors of {widths} numbers for one call's texts")
    return checked


def _own(embedding: Embeddings) -> bool:
    """Whether ``embedding`` is one of ctxplugin's own (a function wrapped by
    :func:`as_embeddings` is not)."""
    return type(embedding).__module__.startswith("ctxplugin.") and not isinstance(embedding, _CallableEmbeddings)


def _name(embedding: object) -> str:
    if isinstance(embedding, _CallableEmbeddings):
        return str(getattr(embedding.function, "__name__", type(embedding.function).__name__))
    return type(embedding).__name__


def _check_count(vectors: object, count: int, embedding: object) -> None:
    """Raises :class:`StoreError` unless ``vectors`` is a sequence of ``count`` items."""
    if not _is_sequence(vectors):
        raise StoreError(f"the embedding {_name(embedding)} answered {type(vectors).__name__}, not a list of vectors")
    if len(vectors) != count:  # type: ignore[arg-type]
        raise StoreError(f"the embedding {_name(embedding)} answered {len(vectors)} vectors for {count} texts")  # type: ignore[arg-type]


def _vector(vector: object, embedding: object) -> list[float]:
    """``vector`` as a list of floats.

    Raises:
        StoreError: ``vector`` is not a non-empty sequence of finite numbers.
    """
    if not _is_sequence(vector) or not len(vector):  # type: ignore[arg-type]
        raise StoreError(f"the embedding {_name(embedding)} answered {type(vector).__name__} {str(vector)[:40]!r} for a vector")
    items = cast("Sequence[float]", vector.tolist() if hasattr(vector, "tolist") else vector)  # numpy's rows as Python numbers
    # most answers hold plain floats: checked and converted in C loops, a vector at a time
    try:
        out = list(map(float, items)) if set(map(type, items)) <= _PLAIN_NUMBERS else [_number(x, embedding) for x in items]
    except OverflowError as exc:  # an integer past a float's range
        raise StoreError(f"the embedding {_name(embedding)} answered a number no float holds in a vector") from exc
    if not all(map(math.isfinite, out)):
        bad = next(x for x in out if not math.isfinite(x))
        raise StoreError(f"the embedding {_name(embedding)} answered {bad!r} in a vector: not a finite number")
    return out


_PLAIN_NUMBERS = {float, int, bool}


def _number(x: object, embedding: object) -> float:
    if not isinstance(x, numbers.Real):  # numpy's numbers are
        raise StoreError(f"the embedding {_name(embedding)} answered {str(x)[:20]!r} in a vector: not a finite number")
    return float(x)


def _is_sequence(value: object) -> bool:
    """A list, tuple or numpy array of one dimension or more (not text, bytes, a dict or a
    number)."""
    return isinstance(value, (list, tuple)) or (type(value).__module__ == "numpy" and getattr(value, "ndim", 0) >= 1)


def _called(embedding: Embeddings, fn: Callable[[], T]) -> T:
    """``fn()``, a call of ``embedding``: one of ctxplugin's own runs here; another (a hosted
    model, a function) runs within the step's store time (see
    :func:`ctxplugin.facts._failures.bounded_call`)."""
    what = f"the embedding {_name(embedding)}"
    if _own(embedding):
        with failing_as_store(what):
            return fn()
    return bounded_call(fn, what, embedding)


__all__ = ["HashingEmbedding", "as_embeddings", "cosine", "default_embedding", "document_vectors", "embedding_identity", "query_vector"]
