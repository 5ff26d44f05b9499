"""Which model a trace is from: its shape (hidden sizes, shared experts) and the size of one
expert, for the cost model, size capacities and budgets, and the checker's model-aware rules.

A trace header names its model and, when the recorder knew it, the bytes of one expert. An
imported trace often has only the name (``"model": "mixtral-8x7b"``). :func:`with_model`
completes the header:

- with ``model=None``: when the header's name is a preset of :mod:`mpl.shapes` (an alias, or
  a HuggingFace id such as ``deepseek-ai/DeepSeek-V2-Lite``) whose experts per layer and number of MoE layers are the trace's, and whose expert size is
  the header's (when the header has one), the preset gives the shape and the expert size;
  otherwise nothing changes (a same-named test model of another size keeps its own numbers);
- with ``model`` (``--model PRESET|config.json`` of ``mplc replay/sweep/tune``; a name, a
  path or a :class:`~mpl.shapes.ModelShape`): that model, which must have the trace's experts
  per layer and MoE layers (:class:`TraceModelError` otherwise). An expert size the header
  records wins over the model's (it was measured).

The trace's own layer ids and top-k stay: the shape is the model's with the trace's routing.
"""

from __future__ import annotations

import os
from dataclasses import replace

from mpl import shapes
from mpl.trace import Trace, TraceHeader


class TraceModelError(ValueError):
    """The model given for a trace does not fit it (the message says how)."""


def _misfit(shape: shapes.ModelShape, h: TraceHeader) -> str | None:
    """Why ``shape`` cannot be the model of a trace with header ``h`` (None: it can be)."""
    if shape.num_experts != h.num_experts:
        return (f"the trace has {h.num_experts} experts per MoE layer, {shape.name} has "
                f"{shape.num_experts}")
    if shape.num_moe_layers != h.num_moe_layers:
        return (f"the trace has {h.num_moe_layers} MoE layers, {shape.name} has "
                f"{shape.num_moe_layers}")
    return None


def _for_trace(shape: shapes.ModelShape, h: TraceHeader) -> shapes.ModelShape:
    """The model's shape with the trace's MoE layer ids and top-k."""
    layers = max(shape.num_layers, h.num_layers, max(h.moe_layers) + 1)
    return replace(shape, num_layers=layers, moe_layers=tuple(h.moe_layers), top_k=h.top_k)


def named_preset(name: str) -> shapes.ModelShape | None:
    """The preset a model name means: a preset name or alias (``mixtral``), or a HuggingFace
    id whose last part starts with one (``mistralai/Mixtral-8x7B-Instruct-v0.1``,
    ``deepseek-ai/DeepSeek-V2-Lite``, ``allenai/OLMoE-1B-7B-0924``); else None."""
    s = shapes.preset(name)
    if s is not None:
        return s
    base = name.strip().lower().rsplit("/", 1)[-1]
    s = shapes.preset(base)
    if s is not None:
        return s
    for key in sorted(shapes.PRESETS, key=len, reverse=True):
        if base.startswith(key + "-"):
            return shapes.PRESETS[key]
    return None


def header_preset(h: TraceHeader) -> shapes.ModelShape | None:
    """The preset the header names (:func:`named_preset`), when it fits the trace (experts,
    MoE layers, expert size): else None."""
    s = named_preset(h.model) if h.model else None
    if s is None or _misfit(s, h) is not None:
        return None
    if h.expert_bytes and h.expert_bytes != s.expert_bytes:
        return None
    return s


def model_shape(spec) -> shapes.ModelShape:
    """``--model``: a preset name (or a HuggingFace id of a preset's model, when no such path
    exists), a HuggingFace ``config.json`` path (or its folder), or a ModelShape;
    mpl.shapes.ShapeError naming the presets otherwise."""
    if isinstance(spec, shapes.ModelShape):
        return spec
    if not isinstance(spec, str):
        raise shapes.ShapeError(f"model must be a preset name or a config.json path, not "
                                f"{type(spec).__name__}")
    if shapes.preset(spec) is None and not os.path.exists(spec):
        s = named_preset(spec)               # a HuggingFace id of a preset's model
        if s is not None:
            return s
    return shapes.resolve(spec)


def with_model(trace: Trace, model=None) -> Trace:
    """``trace`` with its header's ``shape`` and ``expert_bytes`` filled in (see the module
    doc); the same object when there is nothing to fill. The dispatches are shared."""
    h = trace.header
    if model is None:
        if h.shape is not None:
            return trace
        shape = header_preset(h)
        if shape is None:
            return trace
    else:
        shape = model_shape(model)
        why = _misfit(shape, h)
        if why is not None:
            raise TraceModelError(f"model {shape.name} does not fit the trace ({h.model}): {why}")
    header = replace(h, expert_bytes=h.expert_bytes or shape.expert_bytes,
                     shape=_for_trace(shape, h))
    return Trace(header, trace.dispatches, trace.derived)


def expert_size_source(h: TraceHeader, from_policy: bool = False) -> str:
    """Where the expert size of a replay comes from: ``"policy"`` (its cache.expert_size_gb,
    ``from_policy``), ``"model NAME"`` (a preset or --model), ``"trace header"``, or
    ``"default"``."""
    if from_policy:
        return "policy"
    if h.shape is not None and h.expert_bytes == h.shape.expert_bytes:
        return f"model {h.shape.name}"
    if h.expert_bytes:
        return "trace header"
    return "default"


def trace_expert_size(h: TraceHeader) -> tuple[int, str]:
    """The expert size a replay of this trace uses when the policy sets none, and its
    source (see :func:`expert_size_source`)."""
    from mpl.timemodel.hardware import DEFAULT_EXPERT_BYTES

    return (h.expert_bytes or DEFAULT_EXPERT_BYTES), expert_size_source(h)


def describe_expert_size(nbytes: int, source: str) -> str:
    """``336.0 MiB per expert (model mixtral-8x7b)``; for the default size, a hint to give
    the model."""
    mib = nbytes / 2 ** 20
    size = (f"{mib:,.1f} MiB per expert" if mib >= 1 or nbytes == 0
            else f"{nbytes / 2 ** 10:,.1f} KiB per expert")
    if source == "default":
        return (f"{size} (expert size unknown: the default assumed; give --model "
                f"PRESET|config.json)")
    if source == "policy":
        return f"{size} (the policy's cache.expert_size_gb)"
    return f"{size} ({source})"
