"""The state of one server's circuit; :class:`ctxplugin.guard.StoreGuard` keeps it under its lock.

Closed: calls go to the server. The first call that fails opens it: calls are refused at once.
A background check that passes (the server answers a ping) makes it half-open: the next call
is let through as the *trial*, and every other call is still refused while it runs. The trial
succeeding (or the server answering it with an error of its own) closes the circuit; the trial
failing again opens it with the pause before the next check doubled, up to :data:`MAX_RETRY_S`.
Without a check, the first call after the pause is the trial.

The stores of one server share its circuit, and a call of one kind may work while another
still fails (the facts write lock takes no table; the CAS table is locked). A trial of another
kind that works closes the circuit but keeps the pause: the pause goes back to ``retry_after``
once a call of the kind that failed works, and that kind failing first within the longest pause
after the closing counts as a failed trial (later, it is a failure of its own).

A server that is out fails its check, and the pause between checks is ``retry_after`` again. The
pause grows only when the server answers its check while its real calls still fail, as when
another session holds a table locked (a migration, ``VACUUM FULL``): without the trial every
passed check would close the circuit and send the next step to wait its whole timeout again.
"""

from __future__ import annotations

MAX_RETRY_S = 30.0
"""The longest pause between two checks of a server whose calls keep failing after its check
passed (``retry_after`` when that is longer)."""


class Circuit:
    """Closed (``cause`` is None), open, or half-open (``checked``); ``trial`` while the one call
    let through runs. Plain state, no clock or lock of its own: times are passed in."""

    __slots__ = ("cause", "checked", "closed_at", "failed_at", "failing", "opened_at", "pause", "retry_after", "trial")

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self.pause = retry_after
        self.cause: str | None = None
        self.opened_at = 0.0
        self.failed_at = 0.0
        self.closed_at = 0.0
        self.checked = False
        self.trial = False
        self.failing: str | None = None
        """The kind of call whose failure set the pause, until one of its kind works."""

    def fail(self, cause: str, now: float, *, trial: bool, what: str | None = None) -> bool:
        """A call (of kind ``what``) failed, or the check at connect time did. True when this
        opened the circuit.

        The trial failing reopens it with a longer pause, and so does the kind that failed
        before failing first after a call of another kind closed it; another call failing while
        it is already open (it started before the opening) only updates the cause."""
        first = self.cause is None
        self.cause = cause
        if first:
            self.opened_at = self.failed_at = now
            if self.failing is not None and now - self.closed_at >= max(MAX_RETRY_S, self.retry_after):
                self.pause = self.retry_after  # long after the closing: a failure of its own
            elif what is not None and what == self.failing:
                self._longer()
            self.failing = what
        elif trial:
            self._longer()
            self.failed_at = now
            self.checked = self.trial = False
            self.failing = what
        return first

    def _longer(self) -> None:
        self.pause = min(self.pause * 2, max(MAX_RETRY_S, self.retry_after))

    def admit(self, now: float, *, probed: bool) -> bool | None:
        """None: refuse the call; False: let it through (closed); True: let it through as the
        trial. With a background check (``probed``) the circuit is half-open once a check
        passed; without one, once the pause since the last failure is over."""
        if self.cause is None:
            return False
        if self.trial:
            return None
        if self.checked if probed else now - self.failed_at >= self.pause:
            self.trial = True
            return True
        return None

    def answered(self, what: str | None = None, now: float = 0.0) -> str | None:
        """The trial (of kind ``what``) reached the server at ``now``: close, and reset the pause
        unless another kind of call is still to work. The cause it was open for."""
        was, self.cause = self.cause, None
        self.closed_at = now
        self.worked(what)
        self.checked = self.trial = False
        return was

    def worked(self, what: str | None) -> None:
        """A call of kind ``what`` reached the server: the pause is reset when it is the kind
        that failed (or none is waited for)."""
        if self.failing is None or what == self.failing:
            self.pause = self.retry_after
            self.failing = None

    def abandoned(self) -> None:
        """The trial ended saying nothing of the server (cut short by its step): the next call
        is the trial."""
        self.trial = False


__all__ = ["MAX_RETRY_S", "Circuit"]
