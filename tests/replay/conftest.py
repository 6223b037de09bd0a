"""Fixtures shared by the replay tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def counted_key() -> type[str]:
    """A ``str`` subclass that counts, on the class, how often one of its values is compared with
    another: a loader's keys wrapped in it show whether reading a file compares each conversation
    with every other."""

    class CountedKey(str):
        compared = 0

        def __eq__(self, other: object) -> bool:
            CountedKey.compared += 1
            return str.__eq__(self, other)

        def __ne__(self, other: object) -> bool:
            return not self.__eq__(other)

        __hash__ = str.__hash__

    return CountedKey
