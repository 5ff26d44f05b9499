"""The live mechanism (torch): executes a policy's Plans on a HuggingFace MoE model.

``attach(policy, model)`` -> :class:`Handle`; ``shadow(policy, model)`` -> :class:`ShadowHandle`
(the policy beside the model, which stays unchanged); ``auto_attach(model, memory=...)``;
``record(model, inputs)`` -> :class:`mpl.trace.Trace`; ``from_pretrained(folder, policy)``
-> :class:`Handle` (a model whose experts are never loaded, served by a disk tier reading
its checkpoint: ``mpl.offload.skeleton``). A policy that does not fit the model
is refused with :class:`PolicyDoesNotFit` (located diagnostics) before anything changes.
torch and transformers are imported when one of these is first used, never by ``import mpl``.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "attach": "mpl.offload.hf",
    "Handle": "mpl.offload.hf",
    "discover": "mpl.offload.hf",
    "AttachError": "mpl.offload.errors",
    "PolicyDoesNotFit": "mpl.offload.errors",
    "shadow": "mpl.offload.shadow_mode",
    "ShadowHandle": "mpl.offload.shadow_mode",
    "auto_attach": "mpl.offload.auto",
    "record": "mpl.offload.recorder",
    "from_pretrained": "mpl.offload.skeleton",
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
