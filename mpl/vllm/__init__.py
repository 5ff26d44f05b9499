"""The vLLM integration: record the routing of a vLLM engine into an :class:`mpl.trace.Trace`
and run a policy in shadow mode beside it. This package is the only place in mpl that
imports vllm (and only when an engine is started); see docs/vllm.md.

* :class:`PolicyRunner` (Python API), :class:`Result`
* ``mpl.vllm.plugin`` (the ``vllm.general_plugins`` entry point for ``vllm serve``)
* ``python -m mpl.vllm.cli`` (what ``mplc trace record/run --engine vllm`` run)
"""

from __future__ import annotations

from .errors import PolicyDoesNotFit, VllmIntegrationError

__all__ = ["PolicyRunner", "Result", "VllmIntegrationError", "PolicyDoesNotFit"]


def __getattr__(name: str):
    if name in ("PolicyRunner", "Result"):
        from . import runner
        return getattr(runner, name)
    raise AttributeError(f"module 'mpl.vllm' has no attribute {name!r}")
