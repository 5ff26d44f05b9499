"""The live mechanism (torch): executes a policy's Plans on a HuggingFace MoE model.

``attach(policy, model)`` -> :class:`Handle`; ``auto_attach(model, memory=...)``;
``record(model, inputs)`` -> :class:`mpl.trace.Trace`. torch and transformers are imported
when one of these is first used, never by ``import mpl``.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "attach": "mpl.offload.hf",
    "Handle": "mpl.offload.hf",
    "discover": "mpl.offload.hf",
    "AttachError": "mpl.offload.errors",
    "auto_attach": "mpl.offload.auto",
    "record": "mpl.offload.recorder",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'mpl.offload' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
