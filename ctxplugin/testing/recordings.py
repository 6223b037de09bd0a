"""Where a checkout of ctxplugin finds the recorded conversations its tests replay."""

from __future__ import annotations

import os
from pathlib import Path


def recordings_root() -> Path:
    """``$CTXPLUGIN_DATA`` when set; else ``shared/data`` two levels above the checkout (a
    workspace holding several checkouts beside ``shared``), else one level above it. The path
    may not exist: a test that needs it skips, saying so."""
    given = os.environ.get("CTXPLUGIN_DATA")
    if given:
        return Path(given)
    checkout = Path(__file__).resolve().parents[2]
    beside = checkout.parent.parent / "shared" / "data"
    return beside if beside.is_dir() else checkout.parent / "shared" / "data"


__all__ = ["recordings_root"]
