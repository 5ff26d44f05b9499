"""Live trace recording: the routing of a real model (per step, MoE layer and token: the
experts and router weights, plus the lookahead pre-gating predictions for the next layers),
as an :class:`mpl.trace.Trace`.

Recording hooks the experts modules (a forward pre-hook sees exactly the ids and weights the
router handed them), so it works with or without a policy attached, in every experts
implementation. Steps are counted the way the live engine and the runtime count them: a new
step starts when a MoE layer's ordinal is not greater than the previous one.
"""

from __future__ import annotations

import torch

from mpl.trace import Dispatch, Trace, TraceHeader

from .hf import discover, model_shape
from mpl.mechanism.lookahead import Lookahead


class Recorder:
    """Context manager collecting the dispatches of every forward pass of ``model``."""

    def __init__(self, model, *, lookahead: int | None = None, name: str | None = None,
                 layers=None, on_dispatch=None, keep: bool = True) -> None:
        """``lookahead``: layers ahead to record pre-gating predictions for (0: none; default:
        the attached policy's lookahead distance when it pre-gates, so a replay sees exactly
        the predictions the live runtime got, else 1). ``layers``: the model's MoE layers
        when already discovered. ``on_dispatch``: called with each dispatch as the router
        chose it (the shadow mode feeds its policy so); ``keep``: keep the dispatches for
        :meth:`trace` (False: only ``on_dispatch`` sees them)."""
        handle = getattr(model, "_mpl_handle", None)
        if lookahead is None:
            live = handle.engine.lookahead if handle is not None else None
            lookahead = live.distance if live is not None else 1
        if layers is None:
            layers = handle.layers if handle is not None else discover(model)
        self.layers = layers
        self.model = model
        self.shape = handle.shape if handle is not None else model_shape(model, self.layers)
        self.lookahead = Lookahead([b.router for b in self.layers], lookahead) if lookahead else None
        self.dispatches: list[Dispatch] = []
        self.name = name or getattr(getattr(model, "config", None), "_name_or_path", "") or self.shape.name
        self.on_dispatch = on_dispatch
        self.keep = keep
        self.count = 0
        self._hooks = []
        self._step = -1
        self._prev = 1 << 30

    def _hook(self, ordinal):
        def pre_hook(module, args, kwargs):
            hidden = args[0] if args else kwargs.get("hidden_states")
            index = args[1] if len(args) > 1 else next(v for k, v in kwargs.items() if "ind" in k)
            weights = args[2] if len(args) > 2 else next(v for k, v in kwargs.items() if "weight" in k)
            if ordinal <= self._prev:
                self._step += 1
            self._prev = ordinal
            tokens = hidden.shape[0]
            rows = index.reshape(tokens, -1).tolist()
            wrows = weights.reshape(tokens, -1).float().tolist()
            preds = self.lookahead.predict(ordinal, hidden) if self.lookahead is not None else None
            d = Dispatch(self._step, ordinal, rows, wrows, preds)
            self.count += 1
            if self.keep:
                self.dispatches.append(d)
            if self.on_dispatch is not None:
                self.on_dispatch(d)
            return None
        return pre_hook

    def __enter__(self):
        for b in self.layers:
            self._hooks.append(b.module.register_forward_pre_hook(self._hook(b.ordinal), with_kwargs=True))
        return self

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        return False

    def header(self, source: str = "recorded") -> TraceHeader:
        """The header of this recording's trace (what a saved trace of it carries)."""
        s = self.shape
        return TraceHeader(model=str(self.name), num_layers=s.num_layers, moe_layers=s.moe_layers,
                           num_experts=s.num_experts, top_k=s.top_k, expert_bytes=s.expert_bytes,
                           source=source, stored_bits=s.bytes_per_param * 8)

    def trace(self, source: str = "recorded") -> Trace:
        return Trace(self.header(source), list(self.dispatches))


def _as_inputs(model, inputs):
    if isinstance(inputs, str):
        from .models import encode
        inputs = torch.tensor([encode(inputs)])
    if isinstance(inputs, (list, tuple)):
        inputs = torch.tensor([list(inputs)] if inputs and isinstance(inputs[0], int) else list(inputs))
    dev = next(model.parameters()).device
    if isinstance(inputs, torch.Tensor):
        return {"input_ids": inputs.to(dev)}
    if isinstance(inputs, dict) or hasattr(inputs, "keys"):
        return {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in dict(inputs).items()}
    raise TypeError(f"inputs must be token ids (tensor or list), a dict of model inputs or a "
                    f"string, got {type(inputs).__name__}")


def record(model, inputs, *, lookahead: int | None = None, **generate_kwargs) -> Trace:
    """Run ``model.generate(inputs, **generate_kwargs)`` (greedy, 16 new tokens unless told)
    and return its routing as a Trace. ``lookahead``: how many later layers to record
    pre-gating predictions for (0: none; default: the attached policy's distance, else 1)."""
    kw = {"max_new_tokens": 16, "do_sample": False}
    kw.update(generate_kwargs)
    with Recorder(model, lookahead=lookahead) as rec, torch.no_grad():
        model.generate(**_as_inputs(model, inputs), **kw)
    return rec.trace(source=f"recorded by mpl.record, max_new_tokens={kw['max_new_tokens']}")
