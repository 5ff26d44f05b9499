"""The lock of one runtime: one dispatcher at a time, callbacks refused a second dispatch.

A runtime's dispatch state is used by one dispatcher at a time (SPEC §11, "Threads and
callbacks"). Every runtime has a :class:`Guard`:

* a dispatch or a replay holds it from start to end (``begin`` / ``end``); another thread
  that dispatches, replays, reads the statistics (``stats()``, ``resident()``, any attribute
  the compiled live dispatch holds in C) or changes an attribute meanwhile waits for it;
* the same thread entering again while it is busy - a callback the dispatch invoked (a
  logging handler on ``mpl.runtime``, a finalizer run by a garbage collection, a replay's
  tick) that dispatches, replays or changes the runtime - gets :class:`RuntimeBusyError`;
  a *read* from there is served (a snapshot of the state as it is at that moment, see
  ``mpl.runtime.fast.live_sync``).

The compiled extension has the same type in C (``mpl.runtime._fast.Guard``, which the
compiled live dispatch uses without calling Python; ``mpl.runtime.fast.make_guard`` gives
a runtime the one it can use); this module's :class:`Guard` is the pure-Python one, with the
same semantics.
"""

from __future__ import annotations

import threading


class RuntimeBusyError(RuntimeError):
    """A dispatch, replay or change of a runtime from inside one of its own dispatches (a
    callback it invoked called back into it)."""


def refusal(what: str) -> str:
    """The message of a refused re-entry (the C guard words it the same way)."""
    return (f"{what} from inside a dispatch of the same runtime: a callback the dispatch invoked "
            f"(a logging handler, a finalizer, a tick) called back into it; read its statistics "
            f"there, dispatch or change it after the call returns (docs/runtime.md, \"Threads "
            f"and callbacks\")")


class Guard:
    """A re-entrant lock with a busy mark (see the module docstring)."""

    __slots__ = ("_lock", "_owner", "_depth", "_busy")

    def __init__(self):
        self._lock = threading.Lock()
        self._owner = None
        self._depth = 0
        self._busy = False

    def _mine(self) -> bool:
        return self._depth > 0 and self._owner == threading.get_ident()

    def acquire(self) -> None:
        if self._mine():
            self._depth += 1
            return
        self._lock.acquire()
        self._owner = threading.get_ident()
        self._depth = 1

    def release(self) -> None:
        if not self._mine():
            raise RuntimeError("runtime guard: released by a thread that does not hold it")
        if self._busy and self._depth == 1:
            raise RuntimeBusyError(refusal("releasing the runtime's lock"))
        self._drop()

    def _drop(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._busy = False
            self._lock.release()

    def begin(self, what: str = "a dispatch") -> None:
        if self._mine() and self._busy:
            raise RuntimeBusyError(refusal(what))
        self.acquire()
        self._busy = True

    def end(self) -> None:
        if not (self._mine() and self._busy):
            raise RuntimeError("runtime guard: end() without begin()")
        self._busy = False
        self._drop()

    @property
    def busy(self) -> bool:
        """The calling thread is inside a dispatch or a replay of the runtime."""
        return self._mine() and self._busy

    @property
    def held(self) -> bool:
        """The calling thread holds the lock."""
        return self._mine()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False
