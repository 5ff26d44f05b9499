"""Worker processes of the parallel commands (``mplc tune``, ``mplc sweep --jobs``) and
Ctrl-C: the workers ignore SIGINT and the parent stops them, so an interrupted command says
so once (``mplc COMMAND: interrupted``, exit 130) instead of printing a traceback from every
worker."""

from __future__ import annotations


def quiet_interrupt() -> None:
    """A worker process leaves Ctrl-C to its parent: the terminal sends SIGINT to the whole
    process group, and the parent (which stops the pool) reports it once, without a
    traceback from every worker."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_pool(pool) -> None:
    """Stop a ProcessPoolExecutor now (after Ctrl-C): pending work is cancelled and the
    workers, which ignore SIGINT, are terminated rather than waited for."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.terminate()
        except (OSError, AttributeError, ValueError):
            pass
    for p in procs:
        try:
            p.join(5)
        except (OSError, AttributeError, ValueError, AssertionError):
            pass
