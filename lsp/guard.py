"""Every handler runs guarded: an exception is logged to the client (window/logMessage, with
its traceback) and the handler answers its neutral value, so the server keeps answering."""

from __future__ import annotations

import functools
import inspect
import logging
import traceback

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

EXCEPTION_MARK = "mpl-lsp: internal error"


class Refusal(JsonRpcInvalidParams):
    """A request the server answers with an error on purpose (a rename it cannot do, a bad
    new name): the client shows the message; the log gets one line at info level
    (``MplLanguageServer.report_server_error``), not a traceback."""


class _NoRefusalTracebacks(logging.Filter):
    """pygls logs every error response with ``logger.exception`` (a traceback on stderr,
    which VS Code's output channel shows at [error]); a :class:`Refusal` is not a fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, Refusal)


def quiet_refusals() -> None:
    """Install the filter on the loggers of pygls that report handler errors (idempotent)."""
    for name in ("pygls.protocol.json_rpc", "pygls.protocol", "pygls"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, _NoRefusalTracebacks) for f in lg.filters):
            lg.addFilter(_NoRefusalTracebacks())


def log(ls, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
    try:
        ls.window_log_message(types.LogMessageParams(type=kind, message=message))
    except Exception:  # the transport is gone: nothing more to do
        pass


def log_exception(ls, where: str) -> None:
    log(ls, f"{EXCEPTION_MARK} in {where}:\n{traceback.format_exc()}", types.MessageType.Error)


def guarded(default=None):
    """Decorate ``handler(ls, params)``; on an exception log it and return ``default()``
    (a callable, so mutable defaults are fresh) or ``default``."""
    def deco(fn):
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def awrapper(ls, params):
                try:
                    return await fn(ls, params)
                except JsonRpcException:   # a deliberate error response (e.g. a bad rename)
                    raise
                except Exception:
                    log_exception(ls, fn.__name__)
                    return default() if callable(default) else default
            return awrapper

        @functools.wraps(fn)
        def wrapper(ls, params):
            try:
                return fn(ls, params)
            except JsonRpcException:   # a deliberate error response (e.g. a bad rename)
                raise
            except Exception:
                log_exception(ls, fn.__name__)
                return default() if callable(default) else default
        return wrapper
    return deco
