"""Routing capture inside a vLLM worker: every MoE layer of every forward step, with the
real batch mix, as :class:`mpl.trace.Dispatch` records.

vLLM builds each MoE layer as a ``MoERunner`` (``.layer_id``, ``.router``: a
``BaseRouter``). ``BaseRouter.set_capture_fn(fn)`` calls ``fn(topk_ids)`` with the logical
top-k ids (before any EPLB remapping) in router order; the router weights of the same call
are taken from the router's ``_compute_routing`` result, which the capture function follows
immediately. A step is one ``execute_model`` call of the model runner: the tokens of all the
requests it schedules, in the runner's batch order, each request's tokens contiguous.

This module imports vllm (only when :func:`bind` runs); the core package never imports it.
"""

from __future__ import annotations

import zlib

from mpl.trace import Dispatch, TraceHeader

from .errors import VllmIntegrationError


def _moe_runners(model):
    from vllm.model_executor.layers.fused_moe.layer import MoERunner

    return [m for m in model.modules() if isinstance(m, MoERunner)]


def _gates(model, runners) -> list:
    """Each MoE layer's gate (the linear layer that makes its router logits: the ``gate`` of
    the block that holds the layer's experts, as vLLM's MoE models name it), None where the
    block has none."""
    names = {id(m): n for n, m in model.named_modules()}
    out = []
    for r in runners:
        name = names.get(id(r), "")
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else None
        gate = getattr(parent, "gate", None) if parent is not None else None
        out.append(gate if callable(gate) else None)
    return out


def _pregate(gate, router):
    """hidden states -> the top-k ids layer ``router`` would pick for them: its gate's logits
    through its own routing (the class's, not the capture's wrapper: no capture, no EPLB
    remapping, nothing recorded)."""
    compute = type(router)._compute_routing

    def picks(hidden):
        logits = gate(hidden)
        if isinstance(logits, tuple):
            logits = logits[0]
        return compute(router, hidden, logits, None)[1]
    return picks


def check_eager(vllm_config) -> None:
    """Compiled mode traces the routers into the graph: a capture function bound after
    start-up would never run and the trace would be empty. Refuse it."""
    from vllm.config import CompilationMode

    cc = vllm_config.compilation_config
    mode = getattr(cc, "mode", None)
    if mode is not None and mode != CompilationMode.NONE:
        raise VllmIntegrationError(
            f"the engine runs in compiled mode ({CompilationMode(mode).name}): vLLM traces the "
            "MoE routers into the compiled graph, so routing capture would record nothing. "
            "Start the engine with enforce_eager=True (vllm serve --enforce-eager)")


class Capture:
    """Binds to every MoE router of ``model`` and collects the dispatches of each step
    between :meth:`begin_step` and :meth:`end_step`. ``keep``: keep the dispatches (the
    recording rank); every rank keeps a digest of the routing so ranks can be compared.
    ``on_dispatch(d)`` is called with each dispatch as the router produces it."""

    def __init__(self, model, hf_config, *, keep: bool = True, on_dispatch=None) -> None:
        runners = _moe_runners(model)
        if not runners:
            raise VllmIntegrationError(
                "the model has no MoE layers vLLM builds as MoERunner (FusedMoE): nothing to "
                "record. Is it a Mixture-of-Experts model?")
        try:
            from vllm.model_executor.layers.fused_moe.router.base_router import BaseRouter
        except ImportError as e:      # pragma: no cover - depends on the vLLM build
            raise VllmIntegrationError(f"this vLLM has no BaseRouter capture hook ({e}); "
                                       "vLLM 0.32 or newer is needed") from None
        by_layer: dict[int, object] = {}
        for r in runners:
            router = getattr(r, "router", None)
            if not isinstance(router, BaseRouter) or not hasattr(router, "set_capture_fn"):
                raise VllmIntegrationError(
                    f"MoE layer {r.layer_id} has router {type(router).__name__}, which has no "
                    "capture hook (BaseRouter.set_capture_fn): this vLLM version or MoE kernel "
                    "cannot be recorded")
            if getattr(router, "capture_fn", None) is not None:
                raise VllmIntegrationError(
                    f"MoE layer {r.layer_id} already has a routing capture function (is "
                    "--enable-return-routed-experts on, or is mpl bound twice?)")
            by_layer[int(r.layer_id)] = r
        self.layer_ids = tuple(sorted(by_layer))
        self.runners = [by_layer[i] for i in self.layer_ids]     # in ordinal order
        self._gates = _gates(model, self.runners)
        self.lookahead = None       # pre-gating (:meth:`pregate`), or None
        self._picks: dict[int, object] = {}
        first = self.runners[0].router
        self.num_experts = int(first.global_num_experts)
        self.top_k = int(first.top_k)
        text_cfg = getattr(hf_config, "get_text_config", lambda: hf_config)()
        self.num_layers = int(getattr(text_cfg, "num_hidden_layers", 0) or self.layer_ids[-1] + 1)
        self.keep = keep
        self.on_dispatch = on_dispatch
        self.dispatches: list[Dispatch] = []
        self.batches: list[list[list]] = []     # per step: [[request id, tokens], ...]
        self.digest = 0                           # crc32 of every id captured, in order
        self.step = -1
        self._in_step = False
        self._tokens = 0
        self._seen = 0
        self._weights: dict[int, object] = {}
        self.problem: str | None = None         # why the trace cannot be trusted, if so
        self._bind()

    # ------------------------------------------------------------------ binding
    def _bind(self) -> None:
        for ordinal, r in enumerate(self.runners):
            router = r.router
            orig = router._compute_routing

            def compute(*a, _orig=orig, _o=ordinal, **kw):
                w, ids = _orig(*a, **kw)
                self._weights[_o] = w
                if self.lookahead is not None and self._in_step:
                    hidden = a[0] if a else kw["hidden_states"]
                    self._picks[_o] = self.lookahead.picks(_o, hidden[:self._tokens])
                return w, ids
            router._compute_routing = compute
            router.set_capture_fn(self._capture_fn(ordinal))

    def pregate(self, distance: int) -> None:
        """Pre-gating from now on (``distance`` > 0; 0: none): at each MoE layer the next
        ``distance`` layers' gates and routers are applied to its hidden states, and their
        picks are the dispatch's predictions (a ``lookahead`` prefetch's, a ``learned``
        predictor's feature; recorded in the trace), as the HuggingFace engine makes them
        (:class:`mpl.mechanism.lookahead.Lookahead`). A layer whose block has no ``gate`` is
        not predicted."""
        self._picks.clear()
        self.lookahead = None
        if distance > 0:
            from mpl.mechanism.lookahead import Lookahead

            self.lookahead = Lookahead([None if g is None else _pregate(g, r.router)
                                        for g, r in zip(self._gates, self.runners)], distance)

    def unbind(self) -> None:
        for r in self.runners:
            r.router.set_capture_fn(None)
            r.router.__dict__.pop("_compute_routing", None)

    def _capture_fn(self, ordinal: int):
        import torch

        def capture(topk_ids) -> None:
            if not self._in_step:       # a warm-up or profiling run, not a scheduled step
                self._weights.pop(ordinal, None)
                self._picks.pop(ordinal, None)
                return
            n = self._tokens            # rows past it are padding
            ids = topk_ids[:n].to(device="cpu", dtype=torch.int32)
            w = self._weights.pop(ordinal, None)
            picks = self._picks.pop(ordinal, None)
            self.digest = zlib.crc32(ids.contiguous().numpy().tobytes(), self.digest)
            self._seen += 1
            if not self.keep and self.on_dispatch is None:
                return
            rows = ids.tolist()
            wrows = w[:n].float().tolist() if w is not None and tuple(w.shape) == tuple(topk_ids.shape) else None
            preds = (self.lookahead.decode(picks[0], picks[1].to("cpu"), n)
                     if picks is not None else None)
            d = Dispatch(self.step, ordinal, rows, wrows, preds)
            if self.keep:
                self.dispatches.append(d)
            if self.on_dispatch is not None:
                self.on_dispatch(d)
        return capture

    # ------------------------------------------------------------------ steps
    def begin_step(self, scheduler_output, req_order=None) -> bool:
        """A scheduled step starts; False when it runs no forward pass."""
        total = int(getattr(scheduler_output, "total_num_scheduled_tokens", 0) or 0)
        if total <= 0:
            return False
        self.step += 1
        self._in_step = True
        self._tokens = total
        self._seen = 0
        return True

    def end_step(self, scheduler_output, req_order) -> None:
        """The step's forward pass ran: record its batch mix (requests in batch order) and
        check that every MoE layer was captured."""
        self._in_step = False
        counts = dict(scheduler_output.num_scheduled_tokens)
        order = [r for r in (req_order or []) if r in counts] or list(counts)
        self.batches.append([[str(r), int(counts[r])] for r in order])
        if self._seen == 0 and self.problem is None:
            self.problem = (
                f"step {self.step} ran {self._tokens} tokens through the model but no MoE "
                "router called the capture function (compiled mode, or a kernel that routes "
                "inside a fused op): refusing to write an empty trace")

    def header(self, model_name: str, expert_bytes: int, source: str, extra: dict,
               stored_bits: int = 0) -> TraceHeader:
        return TraceHeader(model=model_name, num_layers=self.num_layers,
                           moe_layers=self.layer_ids, num_experts=self.num_experts,
                           top_k=self.top_k, expert_bytes=expert_bytes, source=source,
                           extra=dict(extra, batches=self.batches), stored_bits=stored_bits)
