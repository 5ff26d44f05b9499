"""MoE-PolicyLang: a checked, compiled language for Mixture-of-Experts offloading policies.

``import mpl`` needs only lark and the standard library: everything heavier (torch for
``attach``/``record``, matplotlib for plots) is imported on first use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY = {
    "load": "mpl.api",
    "loads": "mpl.api",
    "compile": "mpl.api",
    "Policy": "mpl.api",
    "PolicyError": "mpl.api",
    "PolicyDoesNotFit": "mpl.mechanism.preflight",
    "check": "mpl.checker",
    "check_text": "mpl.checker",
    "analyze": "mpl.checker",
    "Diagnostic": "mpl.diagnostics",
    "Severity": "mpl.diagnostics",
    "attach": "mpl.offload",
    "auto_attach": "mpl.offload",
    "record": "mpl.offload",
    "replay": "mpl.sim",
    "Trace": "mpl.sim",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'mpl' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
