"""The in-memory fact store's vectors: rows in fixed-size chunks, scored a block at a time.

A search scores every fact a reader may see, and only those: its cost does not grow with the
facts of other sessions. One at a time in Python, a dot product of 256 doubles costs
microseconds and a session's facts add up to milliseconds per search; as rows of an array, the
products and their sums run in one pass. Chunks of :data:`CHUNK` rows grow the
store without copying what it holds and waste at most one chunk. numpy is imported on first use
(``import ctxplugin`` does not load it).

Rows are single precision while every vector kept is (the static embedding's are: half the
memory), and doubles from the first vector that is not: a product of a single with a double is
computed in doubles, so the cosines are those of rows kept in doubles, to the bit.

A turn's question is searched for again on many calls, among nearly the same facts: the cosines
worked out for the last few query vectors are kept per fact, and a search works out only those of
facts it has not met (each row's cosine is the same whichever rows are scored with it).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxplugin._lru import LRU
from ctxplugin.errors import StoreError

if TYPE_CHECKING:
    import numpy as np

CHUNK = 2048
"""Rows per chunk."""
QUERIES = 16
"""Query vectors whose cosines are kept (the questions of the sessions searched last)."""


def _norm(vector: Sequence[float]) -> float:
    """The Euclidean norm of ``vector``, summed in order as Python sums it."""
    return math.sqrt(sum(map(operator.mul, vector, vector)))


class Vectors:
    """Each fact's vector and its norm, by fact id. Not locked: the store that owns it holds
    its own lock around every call."""

    def __init__(self) -> None:
        self._rows: dict[str, int] = {}
        self._chunks: list[np.ndarray] = []  # the vectors, CHUNK rows each
        self._norms: list[np.ndarray] = []  # their norms, CHUNK each
        self._width: int | None = None
        self._next = 0  # the next free row (rows of dropped vectors are not reused)
        self._narrow = True  # whether every vector put so far is single precision (rows are too)
        # per query vector searched lately: the cosines worked out, by fact id
        self._scored: LRU[bytes, dict[str, float]] = LRU(QUERIES)

    def check(self, vectors: Sequence[Sequence[float]]) -> None:
        """Refuse ``vectors`` before anything is written when they are not all as long as the
        vectors kept (the store is left as it was).

        Raises:
            StoreError: a vector of another length: the store takes one embedding's vectors.
        """
        widths = {len(v) for v in vectors} | ({self._width} if self._width is not None else set())
        if len(widths) > 1:
            raise StoreError(
                f"the embedding gave vectors of {sorted(widths)} numbers: a fact store keeps one embedding's vectors"
            )

    def put(self, fact_id: str, vector: Sequence[float]) -> None:
        """Keep ``vector`` for ``fact_id`` (replacing any it had).

        Raises:
            ValueError: ``vector`` is not as long as the vectors kept before.
        """
        if self._width is None:
            self._width = len(vector)
        elif len(vector) != self._width:
            raise ValueError(f"a vector of {len(vector)} numbers among vectors of {self._width}: one embedding per store")
        import numpy as np

        norm = _norm(vector)
        values = np.asarray(vector, dtype=np.float64)
        self._forget(fact_id)
        if self._narrow and not np.array_equal(values.astype(np.float32), values):
            self._narrow = False
            self._chunks = [chunk.astype(np.float64) for chunk in self._chunks]
        row = self._rows.get(fact_id)
        if row is None:
            row = self._rows[fact_id] = self._next
            self._next += 1
            if row // CHUNK == len(self._chunks):
                self._chunks.append(np.zeros((CHUNK, self._width), dtype=np.float32 if self._narrow else np.float64))
                self._norms.append(np.zeros(CHUNK, dtype=np.float64))
        self._chunks[row // CHUNK][row % CHUNK] = values
        self._norms[row // CHUNK][row % CHUNK] = norm

    def drop(self, fact_id: str) -> None:
        """Forget ``fact_id``'s vector (its row is zeroed, not reused)."""
        row = self._rows.pop(fact_id, None)
        self._forget(fact_id)
        if row is not None:
            self._chunks[row // CHUNK][row % CHUNK] = 0.0
            self._norms[row // CHUNK][row % CHUNK] = 0.0

    def _forget(self, fact_id: str) -> None:
        """Drop the cosines kept for ``fact_id``: its vector changes or goes."""
        for scored in self._scored.values():
            scored.pop(fact_id, None)

    def cosines(self, fact_ids: Sequence[str], vector: Sequence[float]) -> list[float]:
        """The cosine of ``vector`` with each fact's vector, in the order of ``fact_ids``
        (0.0 where either vector is all zeros).

        Raises:
            StoreError: ``vector`` is not as long as the vectors kept (another embedding's).
        """
        if not fact_ids:
            return []
        self.check([vector])
        norm = _norm(vector)
        if not norm:
            return [0.0] * len(fact_ids)
        import numpy as np

        query = np.asarray(vector, dtype=np.float64)
        asked = query.tobytes()  # the vector to the bit
        scored = self._scored.hit(asked)
        if scored is None:
            scored = {}
            self._scored.put(asked, scored)
        unscored = [i for i in dict.fromkeys(fact_ids) if i not in scored]
        if unscored:
            scored.update(zip(unscored, self._score(unscored, query, norm), strict=True))
        return [scored[i] for i in fact_ids]

    def _score(self, fact_ids: Sequence[str], query: np.ndarray, norm: float) -> list[float]:
        """The cosines of :meth:`cosines`, worked out (``norm``: the norm of ``query``, not 0)."""
        import numpy as np

        rows = np.fromiter((self._rows[i] for i in fact_ids), dtype=np.int64, count=len(fact_ids))
        dots = np.empty(len(fact_ids), dtype=np.float64)
        norms = np.empty(len(fact_ids), dtype=np.float64)
        chunk_of = rows // CHUNK
        for chunk in sorted(set(chunk_of.tolist())):
            at = chunk_of == chunk
            within = rows[at] % CHUNK
            dots[at] = (self._chunks[chunk][within] * query).sum(axis=1)
            norms[at] = self._norms[chunk][within]
        scores = np.zeros(len(fact_ids), dtype=np.float64)
        np.divide(dots, norm * norms, out=scores, where=norms != 0)
        return scores.tolist()

    @property
    def nbytes(self) -> int:
        """Bytes of the rows and norms held (a chunk at a time)."""
        return sum(c.nbytes for c in self._chunks) + sum(n.nbytes for n in self._norms)

    def __len__(self) -> int:
        return len(self._rows)


__all__ = ["CHUNK", "QUERIES", "Vectors"]
