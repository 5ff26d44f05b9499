"""Every handler runs guarded: an exception is logged to the client (window/logMessage, with
its traceback) and the handler answers its neutral value, so the server keeps answering."""

from __future__ import annotations

import functools
import inspect
import traceback

from lsprotocol import types
from pygls.exceptions import JsonRpcException

EXCEPTION_MARK = "mpl-lsp: internal error"


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
