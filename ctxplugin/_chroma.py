"""Chroma and transport errors as ctxplugin's store errors, for every Chroma-backed store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ctxplugin.errors import ConfigError, StoreError, StoreUnavailableError


@contextmanager
def translated(action: str, refine: Callable[[Exception], BaseException | None] | None = None) -> Iterator[None]:
    """Raise Chroma errors as ``StoreError`` and an unreachable server as
    ``StoreUnavailableError`` (``action`` completes "could not ..."). ``refine`` may name a
    better error for anything else; what it leaves (None) is raised as it is."""
    import chromadb.errors as chroma_errors

    try:
        yield
    except (StoreError, ConfigError):
        raise
    except chroma_errors.ChromaError as exc:
        raise StoreError(f"Chroma could not {action}: {exc}") from exc
    except (ConnectionError, TimeoutError) as exc:
        raise StoreUnavailableError(f"Chroma server unreachable, could not {action}: {exc}") from exc
    except Exception as exc:
        if _is_transport_error(exc) or (isinstance(exc, ValueError) and "connect" in str(exc).lower()):
            raise StoreUnavailableError(f"Chroma server unreachable, could not {action}: {exc}") from exc
        better = refine(exc) if refine is not None else None
        if better is not None:
            raise better from exc
        raise


def _is_transport_error(exc: BaseException) -> bool:
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx ships with chromadb
        return False
    return isinstance(exc, httpx.TransportError)
