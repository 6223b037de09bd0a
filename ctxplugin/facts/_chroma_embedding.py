"""The fact store's embedding as Chroma sees it: an embedding function registered with Chroma
(so Chroma never loads its default model), and Chroma's errors translated, a collection made
with another embedding included.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any

from langchain_core.embeddings import Embeddings

from ctxplugin._chroma import translated
from ctxplugin.errors import ConfigError, StoreError
from ctxplugin.facts.embedding import (
    HashingEmbedding,
    _CallableEmbeddings,
    document_vectors,
    embedding_identity,
)


def _translated(
    action: str, forget: Callable[[], None] | None = None
) -> AbstractContextManager[None]:
    """Chroma errors as store errors (:func:`ctxplugin._chroma.translated`, which calls
    ``forget`` for a collection Chroma no longer knows), and a collection made with another
    embedding as a ``ConfigError`` that says what to do."""
    return translated(action, _embedding_mismatch, forget)


def _embedding_mismatch(exc: Exception) -> ConfigError | None:
    if isinstance(exc, ValueError) and "embedding function" in str(exc).lower():
        return ConfigError(
            f"the facts collection was created with another embedding; use the same embedding "
            f"or another collection name (config.facts.collection): {exc}"
        )
    return None


@lru_cache(maxsize=1)
def _adapter_class() -> type[Any]:
    from chromadb.api.types import Documents, EmbeddingFunction
    from chromadb.utils.embedding_functions import register_embedding_function

    class CtxpluginEmbeddingFunction(EmbeddingFunction[Documents]):
        """Chroma's view of a ctxplugin embedding (so Chroma never loads its default model)."""

        def __init__(self, embedding: Embeddings | None = None, identity: str = "") -> None:
            self.embedding = embedding
            self.identity = identity or (embedding_identity(embedding) if embedding is not None else "")

        def __call__(self, input: Documents) -> Any:
            if self.embedding is None:
                raise StoreError(
                    f"the embedding {self.identity!r} of this collection cannot be rebuilt from its "
                    "stored configuration; open it through ChromaFactStore with the same embedding"
                )
            return [list(v) for v in document_vectors(self.embedding, list(input))]

        @staticmethod
        def name() -> str:
            return "ctxplugin"

        def get_config(self) -> dict[str, Any]:
            return {"identity": self.identity}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> CtxpluginEmbeddingFunction:
            identity = str(config.get("identity", ""))
            if identity.startswith("hash") and identity.endswith("v1"):
                dims = int(identity[4:-2])
                return CtxpluginEmbeddingFunction(HashingEmbedding(dims), identity)
            if identity == "wordllama256v1":
                from ctxplugin.facts.static import StaticEmbedding

                return CtxpluginEmbeddingFunction(StaticEmbedding(), identity)
            return CtxpluginEmbeddingFunction(None, identity)

        def default_space(self) -> Any:
            return "cosine"

    register_embedding_function(CtxpluginEmbeddingFunction)  # type: ignore[no-untyped-call]
    return CtxpluginEmbeddingFunction


def _chroma_function(embedding: Embeddings) -> Any:
    if isinstance(embedding, _CallableEmbeddings) and callable(getattr(embedding.function, "get_config", None)):
        return embedding.function  # already a Chroma embedding function
    return _adapter_class()(embedding)
