"""The lock of one pure runtime (SPEC §5, "Threads and callbacks").

Every entry point of a runtime holds its lock: a change (a dispatch, a replay, ``set``,
``add_stall``) with :meth:`Guard.begin` / :meth:`Guard.end`, a read (``stats()``,
``resident()``, ...) with :meth:`Guard.read`. Another thread waits for it. While a change
holds it, no user code runs:

* the arguments are converted before it is taken (``__index__``, ``__float__``);
* the garbage collector is held off (a finalizer is user code, and a collection can start at
  any allocation of the dispatch);
* log records are handed to the logger after it is released.

A replay calls user code as it goes (its progress ``tick``, logging handlers, a timeline of
the caller's): around those calls the state is whole and *frozen* (:meth:`Guard.frozen`):
a read from any thread is served at once, a change from the replaying thread is refused
with :class:`RuntimeBusyError`, one from another thread waits for the replay to end. So no
runtime's lock is waited for while user code that could take another's runs, and two
runtimes read from each other's callbacks never deadlock.

The compiled engine has the same rules in C (mpl/runtime/c/engine.c, ``engine_lock``).
"""

from __future__ import annotations

import gc
import threading


class RuntimeBusyError(RuntimeError):
    """A dispatch, replay or change of a runtime from inside a callback of its own replay
    (a progress tick, a logging handler) on the replaying thread."""


def refusal(what: str) -> str:
    """The message of a refused re-entry (the compiled engine words it the same way)."""
    return (f"{what} from inside a replay of the same runtime (a progress tick, a logging "
            f"handler or a timeline called back into it): read its statistics there, dispatch "
            f"or change it after the replay returns")


# The collector is held off while any pure runtime changes its state: one count for the
# process (several threads may dispatch several runtimes), the collector's own state restored
# when the last one ends.
_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_on = False


def _gc_off() -> None:
    global _gc_depth, _gc_was_on
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_on = gc.isenabled()
            gc.disable()
        _gc_depth += 1


def _gc_on() -> None:
    global _gc_depth
    with _gc_lock:
        _gc_depth -= 1
        if _gc_depth == 0 and _gc_was_on:
            gc.enable()


class Guard:
    """A runtime's lock, with the owner thread and the frozen mark (see the module
    docstring)."""

    __slots__ = ("_lock", "_owner", "_frozen")

    def __init__(self):
        self._lock = threading.Lock()
        self._owner = None
        self._frozen = False

    def begin(self, what: str = "a dispatch") -> None:
        """A change starts: waits for the lock; RuntimeBusyError from the thread holding it
        (a callback of its own replay)."""
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeBusyError(refusal(what))
        _gc_off()                       # (first: no collection between the lock and this)
        try:
            self._lock.acquire()
        except BaseException:
            _gc_on()
            raise
        self._owner = me

    def end(self) -> None:
        self._owner = None
        self._lock.release()
        _gc_on()                        # (last: a finalizer it runs finds the lock free)

    def read(self) -> "_Read":
        """``with guard.read():`` around a read: waits for a change in progress, unless the
        state is frozen (a replay's callback runs)."""
        return _Read(self)

    def frozen(self) -> "_Frozen":
        """``with guard.frozen():`` around the user code a replay calls (the lock stays held,
        the collector runs again meanwhile)."""
        return _Frozen(self)

    @property
    def busy(self) -> bool:
        """The calling thread holds the lock (a replay's callback runs on it)."""
        return self._owner == threading.get_ident()


class _Read:
    __slots__ = ("g", "locked")

    def __init__(self, g: Guard):
        self.g = g
        self.locked = False

    def __enter__(self):
        g = self.g
        if g._frozen and g._owner is not None:
            return self                  # a replay's callback runs: the state is whole
        if g._owner == threading.get_ident():
            raise RuntimeBusyError("a read while this thread changes the runtime")
        _gc_off()                        # (a read runs no user code either)
        try:
            g._lock.acquire()
        except BaseException:
            _gc_on()
            raise
        self.locked = True
        return self

    def __exit__(self, *exc):
        if self.locked:
            self.locked = False
            self.g._lock.release()
            _gc_on()
        return False


class _Frozen:
    __slots__ = ("g",)

    def __init__(self, g: Guard):
        self.g = g

    def __enter__(self):
        self.g._frozen = True
        _gc_on()
        return self

    def __exit__(self, *exc):
        _gc_off()
        self.g._frozen = False
        return False
