"""The default embedding: static word-piece vectors that ship inside a package, no download.

:class:`StaticEmbedding` reads the 256-dimension ``l2_supercat`` token table of the
``wordllama`` package (16 MB, in its wheel) and its tokenizer file, and embeds a text as the
mean of its tokens' vectors, L2-normalised: about 0.1 ms per text on one core, and it knows
that "languages" is near "Portuguese" and "paged" near "on call". Tokens are weighted by their
vector's norm already (the table gives function words short vectors), so no stop list is needed.

Only the two files are read (with ``safetensors`` and ``tokenizers``); the ``wordllama`` module
itself is never imported, so its loader (which falls back to a download when a file is missing,
and configures the root logger on import) never runs. A missing file is an error that names the
install command, never a download.
"""

from __future__ import annotations

import importlib.util
import threading
from functools import lru_cache
from pathlib import Path

from langchain_core.embeddings import Embeddings

from ctxplugin._lru import LRU, TextKey, text_key
from ctxplugin.errors import ConfigError

_VERSION = "1"
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_INSTALL = "pip install wordllama (a dependency of ctxplugin: reinstall ctxplugin)"
_MAX_TOKENS = 512
_HEAD_CHARS = 6 * _MAX_TOKENS
"""Characters of a text tokenized when its first :data:`_FIRST_CHARS` hold too few tokens: its
first tokens are all a vector is made of."""
_FIRST_CHARS = 9 * _MAX_TOKENS // 2
"""Characters of a text tokenized first: code, logs and prose hold :data:`_MAX_TOKENS` tokens
in fewer (a pasted task in about 1,600)."""
_SPACE = "\u2581"
"""The tokenizer's space."""


def package_dir() -> Path:
    """Where the ``wordllama`` package is installed (found without importing it).

    Raises:
        ImportError: the package is not installed; the message names the install command.
    """
    spec = importlib.util.find_spec("wordllama")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ImportError(f"the static embedding needs the wordllama package: {_INSTALL}")
    return Path(locations[0])


class _Table:
    """The token table and tokenizer, loaded once per process and shared by every instance."""

    def __init__(self, root: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        weights = root.joinpath(*_WEIGHTS)
        tokenizer = root.joinpath(*_TOKENIZER)
        for path in (weights, tokenizer):
            if not path.is_file():
                raise ConfigError(f"the static embedding's file {path} is missing: {_INSTALL}")
        # kept as stored (half precision, 16 MB): only the rows a text uses are widened, to the
        # same single-precision values a widened table would hold
        self.vectors = load_file(str(weights))["embedding.weight"]
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.dims = int(self.vectors.shape[1])
        # no token but runs of spaces holds a space after its first character: the tokens before
        # a space that follows another character are those of the text up to it alone
        self.split_at_spaces = not any(_SPACE in token[1:] and token.strip(_SPACE) for token in self.tokenizer.get_vocab())
        # the tokenizer starts its worker threads and numpy makes its first calls on the first
        # texts embedded: here, with the load, rather than on a first model call
        self.embed(["a first text", "and a second"])

    def embed(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        out: list[list[float]] = []
        heads = [_head(text, _FIRST_CHARS) for text in texts] if self.split_at_spaces else texts
        for text, head, encoding in zip(texts, heads, self.tokenizer.encode_batch(heads, add_special_tokens=False), strict=True):
            ids = encoding.ids
            if head is not text and len(ids) < _MAX_TOKENS:  # a start too short after all
                ids = self._longer(text, head)
            ids = ids[:_MAX_TOKENS]
            if not ids:
                out.append([0.0] * self.dims)
                continue
            vector = self.vectors[np.asarray(ids, dtype=np.int64)].astype(np.float32).mean(axis=0)
            norm = float(np.linalg.norm(vector))
            out.append((vector / norm).tolist() if norm > 0.0 else [0.0] * self.dims)
        return out

    def _longer(self, text: str, head: str) -> list[int]:
        """The tokens of ``text`` whose start ``head`` holds too few: of a longer start when it
        holds enough, else of the whole text."""
        longer = _head(text)
        if len(longer) > len(head) and longer is not text:
            ids: list[int] = self.tokenizer.encode(longer, add_special_tokens=False).ids
            if len(ids) >= _MAX_TOKENS:
                return ids
        whole: list[int] = self.tokenizer.encode(text, add_special_tokens=False).ids
        return whole


def _head(text: str, chars: int = _HEAD_CHARS) -> str:
    """The start of ``text`` up to the first space after ``chars`` characters that follows
    another character (``text`` itself when there is none): the text's first
    :data:`_MAX_TOKENS` tokens when the start has that many, without tokenizing the rest."""
    if len(text) <= chars:
        return text
    cut = text.find(" ", chars)
    while cut != -1 and text[cut - 1] in (" ", _SPACE):
        cut = text.find(" ", cut + 1)
    return text if cut == -1 else text[:cut]


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _load() -> _Table:
    return _Table(package_dir())


def _table() -> _Table:
    """The process's table. A call that arrives while another thread loads it waits for that
    load (an abandoned store call, say) instead of loading it a second time."""
    with _lock:
        return _load()


class StaticEmbedding(Embeddings):
    """Static token vectors averaged per text; offline, weights shipped in a package.

    The table is loaded on first use (about 0.3 s with numpy's import), or by :meth:`warm`, and
    shared by every instance in the process.

    Example:
        >>> emb = StaticEmbedding()
        >>> len(emb.embed_query("Which languages does Maria know?"))
        256
    """

    dims = 256

    @property
    def identity(self) -> str:
        """Names the vector space: vectors of different identities must not share a collection."""
        return f"wordllama{self.dims}v{_VERSION}"

    def warm(self) -> None:
        """Load the table now rather than on the first text: :class:`~ctxplugin.ContextEngine`
        calls it when it is built, so an application pays the load at start-up, not on its
        first model call.

        Raises:
            ConfigError: a file of the table is missing (the message names the install command).
            ImportError: the ``wordllama`` package is not installed.
        """
        _table()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for stored texts."""
        return _table().embed(list(texts)) if texts else []

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query (same space as documents). Memoised (bounded): the question of a
        turn is asked again on every call until the user speaks again."""
        key = text_key(text)
        with _queries_lock:
            hit = _queries.hit(key)
        if hit is None:
            hit = _table().embed([text])[0]
            with _queries_lock:
                _queries.put(key, hit)
        return list(hit)


_queries: LRU[TextKey, list[float]] = LRU(1024)
_queries_lock = threading.Lock()


__all__ = ["StaticEmbedding", "package_dir"]
