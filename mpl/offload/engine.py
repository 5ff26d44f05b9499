"""The engine: executes the runtime's Plan for each MoE dispatch of a live model.

For one call of an experts module (``hidden [T,H]``, ``top_k_index [T,K]``,
``top_k_weights [T,K]``) it

1. reads, in **one** blocking host synchronisation (``Ops.fetch``), everything the host
   needs: the expert ids, plus the routing weights when the policy scores or may compute on
   the CPU, the lookahead routers' picks when it pre-gates, and the hidden states when it
   may compute on the CPU (so those start towards the host before the device pass is
   queued); for the ids alone (the common case) ``Ops.read_ids``; asks the runtime for a
   Plan (the runtime alone decides hits, slots, victims, CPU placement, prefetches);
2. issues the Plan's transfers in order (demand loads and STREAM experts on the demand copy
   stream, background and prefetch loads on the prefetch stream);
3. makes compute wait for exactly the entries it reads, then queues the device pass of the
   mode in force *now* (``config._experts_implementation``): eager runs the eager loop's
   math per expert, in expert-id order, from index lists built on the host and uploaded
   ``non_blocking`` (no per-expert synchronisation); the other modes get ids remapped to
   pool entries (grouped_mm in windows of at most ``GROUP_LIMIT`` entries);
4. computes the experts placed on the CPU on the CPU while the device pass runs, from the
   host copy, and adds the result (uploaded ``non_blocking`` from pinned memory);
5. records what it did (copies, bytes, CPU computes, stalls, per-layer hits).

With a pool of one entry per key (a policy that can hold every expert) the engine uses home
placement: key (layer, e) lives in entry layer * E + e, so a dispatch whose Plan keeps every
expert on the device runs the experts function on the layer's window of the pool with the
router's own ids (:meth:`Engine._home`, and the per-layer closure of
:meth:`Engine.layer_forward`): no remap, no upload. Without it, a decode step of an ids-only
policy in a non-eager mode whose Plan keeps every expert on the device takes a lean path
(:meth:`Engine._lean_decode`) doing the same with less Python: the Plan's slots as the
remapped ids, a cached window view, one small upload.

Every index, mask and CPU result reaches the device through :class:`Staging` (pre-allocated
pinned and device buffers): nothing is allocated on the device per step by the mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mpl.mechanism.device import SyncOps
from mpl.mechanism.execute import disagree, passes, placements, transfers
from mpl.mechanism.pool import DEMAND, STREAMED, SlotPool
from mpl.mechanism.staging import Staging
from mpl.trace import Dispatch

from .cpu import CpuExperts, ExpertMath, _Row, positions_of
from .view import ExpertsView

GROUP_LIMIT = 1023     # torch's CUDA grouped GEMM refuses 1024 groups or more
#: home placement for pools of one entry per key (tests switch it off to compare the paths)
HOME_PLACEMENT = True
_VIEW_CACHE = 4096     # window views kept (a handful per layer in practice)
# the layout flags transformers' use_experts_implementation sets on an experts module at
# construction (the store's layout depends on them): copied into the engine's views, so the
# experts function reads them without falling through to the module
_LAYOUT_FLAGS = ("has_gate", "has_bias", "has_post_expert_norm", "is_transposed",
                 "is_concatenated")


@dataclass
class LayerBinding:
    """One MoE layer of the model, as the engine needs it."""
    ordinal: int                 # MoE-layer ordinal (the runtime's layer number)
    layer_id: int                # decoder-layer id in the model
    name: str                    # qualified name of the experts module
    module: torch.nn.Module      # the experts module
    block: torch.nn.Module       # its parent (the sparse MoE block)
    router: torch.nn.Module | None
    num_experts: int
    top_k: int
    orig_forward: object         # the class's own (eager) forward, undecorated
    host: dict = field(default_factory=dict)     # param name -> host tensor [E, ...]
    cpu: CpuExperts | None = None
    math: ExpertMath | None = None
    slot_view: ExpertsView | None = None
    home_view: ExpertsView | None = None     # the layer's home window (home placement only)
    host_view: ExpertsView | None = None     # its host tensors as experts (the CPU, untiered)


def windows(used, limit: int = GROUP_LIMIT) -> list[tuple[int, int]]:
    """Split the pool entries ``used`` into ``[lo, hi)`` windows of at most ``limit``
    entries each, covering every used entry (as few windows as the spread needs)."""
    out: list[tuple[int, int]] = []
    lo = hi = None
    for s in sorted(set(used)):
        if lo is not None and s - lo < limit:
            hi = s + 1
            continue
        if lo is not None:
            out.append((lo, hi))
        lo, hi = s, s + 1
    if lo is not None:
        out.append((lo, hi))
    return out


class _PassRows:
    """A dispatch computed in passes by an experts implementation that sums each token's
    top-k outputs in one reduction (``batched_mm``, ``grouped_mm``): the ``(token, k)``
    pairs as rows of their own (``hidden`` repeated per pair, ``index`` one id per row,
    ``unit`` weights of one), each pass's rows gathered into ``out``, then weighted and summed
    per token once (:meth:`reduce`), the kernel's own arithmetic in the kernel's order: the
    same bits as one call. The rows of a pair are the same rows, in the same order, that
    the kernel sorts and computes in one call."""

    __slots__ = ("hidden", "index", "unit", "out", "ids", "top_k", "upload")

    def __init__(self, hidden, top_k_index, top_k, upload):
        self.top_k = top_k
        self.ids = top_k_index.reshape(-1)
        self.hidden = hidden.repeat_interleave(top_k, dim=0)
        self.index = self.ids.view(-1, 1)
        self.unit = torch.ones(self.index.shape, dtype=hidden.dtype, device=hidden.device)
        self.out = torch.zeros_like(self.hidden)
        self.upload = upload

    def take(self, part, experts, num_experts: int) -> None:
        """Keep the rows of ``part`` whose expert is one of ``experts`` (this pass's)."""
        member = set(experts)
        mask = self.upload([e in member for e in range(num_experts)], torch.bool)
        self.out = torch.where(mask[self.ids].unsqueeze(-1), part, self.out)

    def reduce(self, top_k_weights, dtype):
        weighted = self.out * top_k_weights.reshape(-1, 1)
        return weighted.view(-1, self.top_k, weighted.shape[-1]).sum(dim=1).to(dtype)


def rows_keep_their_bits(b: "LayerBinding", modes, *, rows: int = 13, seed: int = 0) -> bool:
    """Whether the layer's experts functions of ``modes`` compute a token's output the same
    wherever the token lies among its experts' rows: the tokens of one call, then the same
    tokens in reverse order, on the layer's own weights (True where they cannot be run, on
    the meta device). A pass over experts whose dispatch has more experts below it than
    pool entries below its own hands the kernel rows its sort by expert (not stable) may
    order otherwise than one call; on a kernel whose arithmetic follows a row's place in its
    group (CPU ``grouped_mm`` under two threads on some machines: docs/performance.md) that
    pass is not one call bit for bit. A guard on the kernel installed, not a proof."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    m = b.module
    up = getattr(m, "gate_up_proj", None)
    if up is None:
        up = getattr(m, "up_proj", None)
    if up is None or up.device.type == "meta":
        return True
    hidden = int(up.shape[1] if getattr(m, "is_transposed", False) else up.shape[-1])
    return all(
        same_rows(ALL_EXPERTS_FUNCTIONS.get_interface(mode, b.orig_forward), m, hidden,
                  b.num_experts, b.top_k, up.device, up.dtype, rows=rows, seed=seed)
        for mode in modes)


def same_rows(fn, experts, hidden: int, num_experts: int, top_k: int, device, dtype, *,
              rows: int = 13, seed: int = 0) -> bool:
    """Whether the experts function ``fn`` on ``experts`` (a module or a view of
    ``num_experts`` entries) gives every token the same output when the tokens come in
    reverse order: ``rows`` random tokens routed to ``top_k`` of the first ``top_k + 1``
    experts."""
    top_k = max(1, min(top_k, num_experts))
    n = min(num_experts, top_k + 1)
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(n, generator=g)[:top_k] for _ in range(rows)]).to(device)
    w = torch.softmax(torch.randn(rows, top_k, generator=g), dim=-1).to(device, dtype)
    x = torch.randn(rows, hidden, generator=g).to(device, dtype)
    rev = torch.arange(rows - 1, -1, -1, device=device)
    with torch.no_grad():
        return torch.equal(fn(experts, x, ids, w)[rev], fn(experts, x[rev], ids[rev], w[rev]))


_MODE_FIELD = "_experts_implementation_internal"


def _plain_mode_field(cfg) -> bool:
    """Whether ``cfg._experts_implementation`` (the experts mode in force, read on every
    dispatch) is transformers' own property over the plain field ``_MODE_FIELD``: then the
    engine reads the field from the config's ``__dict__`` (a dict lookup instead of the
    property behind two ``__getattribute__`` overrides), and still sees every switch
    (``set_experts_implementation``, generate()'s decode switch) at call time."""
    try:
        from transformers.configuration_utils import PreTrainedConfig
    except ImportError:
        return False
    prop = PreTrainedConfig.__dict__.get("_experts_implementation")
    d = getattr(cfg, "__dict__", {})
    return (isinstance(prop, property) and getattr(type(cfg), "_experts_implementation", None) is prop
            and _MODE_FIELD in d and d[_MODE_FIELD] == cfg._experts_implementation)


class Engine:
    def __init__(self, runtime, layers: list[LayerBinding], pool: SlotPool, *,
                 lookahead=None, need_weights: bool = False, cpu_capable: bool = False,
                 tiers=None) -> None:
        self.runtime = runtime
        # memory tiers below the device (mpl.mechanism.tiered.TierExecutor): the Plan's
        # READ / DEMOTE steps and every copy from the host tier go through it; None: every
        # expert is in the host store
        self.tiers = tiers
        # the device cache holds parts of experts (granularity_split): the tiers' PartPool
        self.parts = getattr(tiers, "parts", None)
        self.layers = layers
        self.pool = pool
        self.ops = pool.ops
        self.staging = Staging(pool.ops)
        self.lookahead = lookahead
        self.need_weights = need_weights
        self.cpu_capable = cpu_capable
        self.step = -1
        self._prev = 1 << 30
        self.dispatches = 0
        self.lean_dispatches = 0     # dispatches served by _lean_decode
        self.cpu_computes = 0
        self.cpu_tokens = 0
        self.stall_ms = 0.0
        self.layer_accesses = [0] * len(layers)
        self.layer_hits = [0] * len(layers)
        self.modes: dict[str, int] = {}
        # the common case: the Plan needs the ids alone (no weights, no lookahead picks, no
        # hidden states for the CPU), read with Ops.read_ids; decode steps whose experts all
        # stay on the device then take the lean path (_lean_decode)
        self.ids_only = not need_weights and not cpu_capable and lookahead is None
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
        self._functions = ALL_EXPERTS_FUNCTIONS
        # the registry's two mappings (transformers changes them in place: register() and
        # item assignment update them), read on every call as get_interface does
        self._local_fns = getattr(ALL_EXPERTS_FUNCTIONS, "_local_mapping", {})
        self._global_fns = getattr(type(ALL_EXPERTS_FUNCTIONS), "_global_mapping", {})
        self._views: dict = {}
        self._plain_configs = {type(b.module.config) for b in layers
                               if _plain_mode_field(getattr(b.module, "config", None))}
        self._flags = {b.ordinal: {f: vars(b.module)[f] for f in _LAYOUT_FLAGS if f in vars(b.module)}
                       for b in layers}
        for b in layers:        # the gate the experts functions call, bound once (no fall-through)
            gate = getattr(type(b.module), "_apply_gate", None)
            if gate is not None and "_apply_gate" not in vars(b.module):
                self._flags[b.ordinal]["_apply_gate"] = gate.__get__(b.module)
        # home placement: a pool of exactly one entry per key (the runtime caps its pool at
        # layers x E, so this is a policy that can hold every expert) puts key (layer, e) in
        # entry layer * E + e, whatever slot number the runtime gives it. A layer's entries
        # are then its experts in id order: the experts function runs on the layer's window
        # of the pool with the router's own ids, no remap (see _home)
        E = layers[0].num_experts if layers else 0
        self.E = E
        self.home = HOME_PLACEMENT and bool(layers) and pool.num_slots == len(layers) * E and all(
            b.num_experts == E for b in layers)
        self.home_dispatches = 0     # dispatches computed on a home window (no remap)
        self.multi_pass_dispatches = 0   # dispatches computed in passes (execute.passes)
        self.host_window_dispatches = 0  # dispatches computed from the host store (_execute)
        self.host_window_streamed = 0    # the STREAM experts they read where they are
        self.gathered_passes = 0     # staged passes computed on a gathered window (_gathered_window)
        self._row_bits: dict = {}    # (threads, dtype, top_k, entry shapes) -> the kernel keeps a row's bits
        self._scratch = None         # name -> the gathered windows' area (_gathered_window)
        self._scratch_size = 0
        self.resident = [0] * len(layers)     # keys of each layer resident in the pool
        self._hosts = [b.host for b in layers]  # per MoE-layer ordinal, its host tensors
        for b in layers:
            b.math = ExpertMath(b.module)
            b.slot_view = ExpertsView(b.module, {**self._flags[b.ordinal], **pool.tensors,
                                                 "num_experts": pool.size})
            if self.home:
                lo = b.ordinal * E
                b.home_view = self._view(b, {name: t[lo:lo + E] for name, t in pool.tensors.items()},
                                         E, False)
            # the host window: on the CPU the device is host memory, and without memory tiers
            # the host store holds every expert of the layer in the model's own layout
            if not pool.cuda and tiers is None and b.host:
                b.host_view = self._view(b, b.host, b.num_experts, False)

    def release(self) -> None:
        """Drop every reference to the pool's tensors (detach)."""
        for b in self.layers:
            b.slot_view = None
            b.host_view = None
            b.math = None
        self.staging = None
        self._views = {}
        self._scratch = None
        self.pool.clear()

    # ------------------------------------------------------------------ the hot path
    def forward(self, b: LayerBinding, hidden: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        ordinal = b.ordinal
        if self.tiers is not None:      # deferred prefetch copies land before any compute
            self.tiers.settle()
        if ordinal <= self._prev:
            self.step += 1
        self._prev = ordinal
        self.dispatches += 1
        cfg = b.module.config
        if type(cfg) in self._plain_configs:
            mode = cfg.__dict__.get(_MODE_FIELD) or "eager"
        else:
            mode = getattr(cfg, "_experts_implementation", None) or "eager"
        if self.ids_only:
            # ---- 1. the one blocking read: the ids alone (the common case)
            flat = self.ops.read_ids(top_k_index)
            plan = self.runtime.dispatch(ordinal, list(dict.fromkeys(flat)), None,
                                         tokens=hidden.shape[0], step=self.step, predictions=None)
            if mode != "eager":
                if self.home:
                    out = self._home(b, mode, plan, hidden, top_k_index, top_k_weights)
                    if out is not None:
                        return out
                elif 0 < len(flat) <= b.num_experts:
                    out = self._lean_decode(b, mode, plan, flat, hidden, top_k_index, top_k_weights)
                    if out is not None:
                        return out
            return self._execute(b, mode, plan, flat, None, None, hidden, top_k_index, top_k_weights)

        # ---- 1. the one blocking read: ids (+ weights, lookahead picks, hidden states)
        step = self.step
        tokens = hidden.shape[0]
        top_k = top_k_index.shape[-1] if top_k_index.dim() > 1 else b.top_k
        want_w = self.need_weights or self.cpu_capable
        parts = [top_k_index.reshape(-1)]
        if want_w:
            parts.append(top_k_weights.reshape(-1))
        picks = self.lookahead.picks(ordinal, hidden) if self.lookahead is not None else None
        if picks is not None:
            parts.append(picks[1])
        if self.cpu_capable:
            parts.append(hidden)
        got = self.ops.fetch(parts)
        flat = got[0].tolist()
        host_w = got[1] if want_w else None
        host_hidden = got[-1] if self.cpu_capable else None
        experts = list(dict.fromkeys(flat))
        weights = None
        if self.need_weights:
            rows = [flat[i:i + top_k] for i in range(0, len(flat), top_k)]
            wl = host_w.float().tolist()
            wrows = [wl[i:i + top_k] for i in range(0, len(wl), top_k)]
            weights = Dispatch(step, ordinal, rows, wrows).mean_weights()
        predictions = None
        if picks is not None:
            predictions = self.lookahead.decode(picks[0], got[2 if want_w else 1], tokens)

        plan = self.runtime.dispatch(ordinal, experts, weights, tokens=tokens, step=step,
                                     predictions=predictions)
        return self._execute(b, mode, plan, flat, host_w, host_hidden, hidden, top_k_index,
                             top_k_weights)

    def _function(self, mode, b):
        """The registered experts function of ``mode`` (what ``get_interface`` returns: the
        local mapping first, then the global one; its errors for an unknown mode)."""
        fn = self._local_fns.get(mode) or self._global_fns.get(mode)
        return fn if fn is not None else self._functions.get_interface(mode, b.orig_forward)

    def _home(self, b, mode, plan, hidden, top_k_index, top_k_weights):
        """Home placement, a non-eager mode, a Plan keeping every expert on the device
        (resident, or loaded into its home entry now): the experts function on the layer's
        home window with the router's own ids (no remap, no upload), for decode and prefill
        alike. Returns None, having changed nothing, when the Plan has STREAM or CPU
        placements (or grouped_mm would get more than ``GROUP_LIMIT`` groups)."""
        where = plan.where
        if not where or min(where) < 0 or (mode == "grouped_mm" and self.E > GROUP_LIMIT):
            return None
        pool = self.pool
        loads = plan.raw_loads
        stall = self._transfers(plan) if (loads or plan.evicted or plan.steps or pool.cuda) else 0.0
        ordinal = b.ordinal
        E = self.E
        base = ordinal * E
        experts = plan.experts
        if self.resident[ordinal] != E:      # (a full layer holds whatever it routes to)
            self._check_home(ordinal, experts)
        self._account(ordinal, mode, len(where), sum(plan.hit) if loads else len(where), stall)
        self.home_dispatches += 1
        fn = self._function(mode, b)
        if not pool.cuda:
            return fn(b.home_view, hidden, top_k_index, top_k_weights)
        return self._home_call(fn, b.home_view, base, experts, hidden, top_k_index, top_k_weights)

    def _check_home(self, ordinal, experts) -> None:
        """Every expert of ``experts`` is in its home entry (else the runtime and the
        mechanism disagree: raise instead of computing with the wrong weights)."""
        content = self.pool.content
        base = ordinal * self.E
        for e in experts:
            if content[base + e] != (ordinal, e):
                raise disagree(ordinal, e, base + e, content[base + e])

    def _lean_decode(self, b, mode, plan, flat, hidden, top_k_index, top_k_weights):
        """A decode step of an ids-only policy in a non-eager mode whose Plan keeps every
        expert on the device (resident, or loaded into its slot now): the ids remapped to
        slots in one small upload, grouped_mm on a cached window view. Returns None, having
        changed nothing, when the dispatch needs :meth:`_execute` (STREAM or CPU placements,
        a window over ``GROUP_LIMIT``, the CPU multi-thread grouped_mm staging)."""
        where = plan.where
        if self.parts:                 # experts as parts: put together in transient entries
            return None
        lo = min(where)
        if lo < 0:
            return None
        pool = self.pool
        if mode == "grouped_mm":
            hi = max(where) + 1
            if hi - lo > GROUP_LIMIT or (not pool.cuda and torch.get_num_threads() > 1):
                return None
            view = self._window(b, lo, hi, False)
        else:                 # batched_mm & co. index the whole pool
            lo = 0
            view = b.slot_view
        stall = self._transfers(plan) if (plan.raw_loads or plan.evicted or plan.steps
                                          or pool.cuda) else 0.0
        ordinal = b.ordinal
        content = pool.content
        experts = plan.experts
        for e, w in zip(experts, where):
            if content[w] != (ordinal, e):
                raise disagree(ordinal, e, w, content[w])
        if experts == flat:            # one token (or no repeated expert): where is per id
            ids = [w - lo for w in where] if lo else where
        else:
            slot_of = dict(zip(experts, where))
            ids = [slot_of[e] - lo for e in flat]
        self._account(ordinal, mode, len(where), sum(plan.hit), stall)
        self.lean_dispatches += 1
        slot_ids = self.staging.upload_like(ids, top_k_index)
        fn = self._function(mode, b)
        if not pool.cuda:                  # no queues: nothing to wait for or to mark
            return fn(view, hidden, slot_ids, top_k_weights)
        pool.wait_for(where)
        out = fn(view, hidden, slot_ids, top_k_weights)
        pool.release(where)
        return out

    def _transfers(self, plan) -> float:
        """Issue the Plan's evictions (bookkeeping) and loads, in order, into the pool entries
        they map to (the runtime's slot, or the key's home entry), counting each layer's
        resident keys (``mpl.mechanism.execute.transfers``). Returns the host ms demand
        loads blocked (CPU path) plus the CUDA stalls measured since the last call."""
        if self.tiers is not None:
            return self.tiers.transfers(plan, home=self.E if self.home else 0,
                                        resident=self.resident)
        return transfers(self.pool, plan, self._hosts, home=self.E if self.home else 0,
                         resident=self.resident)

    def _stream_in(self, index: int, b, e: int) -> float:
        """Copy expert ``e`` of layer ``b`` into the transient pool entry ``index`` from the
        host tier holding it (the host store, or the tiers' host cache)."""
        if self.tiers is not None:
            return self.tiers.source_copy(index, b.ordinal, e, STREAMED)
        return self.pool.copy_in(index, b.host, e, (b.ordinal, e), STREAMED)

    def _account(self, ordinal, mode, accesses, hits, stall) -> None:
        self.modes[mode] = self.modes.get(mode, 0) + 1
        self.layer_accesses[ordinal] += accesses
        self.layer_hits[ordinal] += hits
        if stall:
            self.stall_ms += stall
            self.runtime.add_stall(stall)

    def _view(self, b, tensors: dict, n: int, split: bool) -> ExpertsView:
        """The experts module of layer ``b`` on ``tensors`` (its weights by name, ``n``
        entries): the layer's flags, and with ``split`` the ids at or past ``n`` skipped
        (grouped_mm's sentinel)."""
        return ExpertsView(b.module, {**self._flags[b.ordinal], **tensors, "num_experts": n,
                                      "_is_expert_parallel": split})

    def _window(self, b, lo, hi, split) -> ExpertsView:
        """The experts view of pool entries ``[lo, hi)`` for layer ``b`` (cached: the pool's
        tensors never change while attached)."""
        key = (b.ordinal, lo, hi, split)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= _VIEW_CACHE:
                self._views.clear()
            view = self._views[key] = self._view(
                b, {name: t[lo:hi] for name, t in self.pool.tensors.items()}, hi - lo, split)
        return view

    def _execute(self, b, mode, plan, flat, host_w, host_hidden, hidden, top_k_index,
                 top_k_weights):
        """Every other dispatch: transfers, STREAM and CPU placements, the device pass of
        ``mode`` (in passes when the streamed experts outnumber the transient entries), the
        CPU pass meanwhile."""
        pool = self.pool
        ordinal = b.ordinal
        tokens = hidden.shape[0]
        top_k = top_k_index.shape[-1] if top_k_index.dim() > 1 else b.top_k
        # ---- 2. transfers, the placements checked against the pool
        stall = self._transfers(plan)
        # (experts a lower gpu tier serves go through transient entries, dequantised there
        # by the tiers' source_copy)
        resident, streamed, cpu_experts = placements(
            plan, pool.content, ordinal, ordinal * self.E if self.home else -1,
            lower=self.tiers is not None)
        # CPU grouped_mm with several threads gives results that depend on where each
        # group's rows sit in the sorted input: the dispatch's experts are staged in
        # expert-id order so the rows sit exactly where the unmodified model puts them
        stage = mode == "grouped_mm" and not pool.cuda and torch.get_num_threads() > 1
        calls = passes(resident, streamed, pool.stream_slots, stage=stage)
        if len(calls) > 1 and b.host_view is not None and not cpu_experts and mode != "eager":
            # more than the transient entries hold, on the CPU: the experts function on the
            # host store's own layer tensors with the router's ids, one call (the unmodified
            # model's computation: no passes, no copies; eager's passes add as its loop does)
            self.host_window_dispatches += 1
            self.host_window_streamed += len(streamed)
            self._account(ordinal, mode, len(plan.experts), sum(plan.hit), stall)
            return self._function(mode, b)(b.host_view, hidden, top_k_index, top_k_weights)
        # ---- 3. the device pass(es) are queued first, 4. then the CPU computes meanwhile
        positions = positions_of(flat, top_k) if (mode == "eager" or cpu_experts) else None
        out = None
        rows = None
        # staged passes keep the kernel's sort: every routed expert an id in expert order
        order = sorted(set(flat)) if stage and len(calls) > 1 and not cpu_experts else None
        for res, group in calls:
            lut = [pool.zero] * b.num_experts
            used = []
            for e, w in res:
                lut[e] = w
                used.append(w)
            if stage:
                # (a pass's experts at the end of the transient area: the most entries
                # below them for the experts of the dispatch below, _ordered_window)
                top = (pool.stream_base + pool.stream_slots - len(res) - len(group)
                       if len(calls) > 1 else pool.stream_base)
                stall += self._stage_in_id_order(b, lut, used, group, ordinal, top)
            else:
                sidx = pool.stream_base
                for e in group:
                    stall += self._stream_in(sidx, b, e)
                    lut[e] = sidx
                    used.append(sidx)
                    sidx += 1
            if len(calls) == 1:
                out = self._device_pass(b, mode, hidden, top_k_index, top_k_weights, lut, used,
                                        cpu_experts, flat, positions)
            elif mode == "eager":
                # the eager loop's order across passes: one output, experts added in id
                # order (the passes are ascending id ranges), as one call would add them
                out = self._device_pass(b, mode, hidden, top_k_index, top_k_weights, lut, used,
                                        cpu_experts, flat, positions, out=out,
                                        only=[e for e, _ in res] + group)
            else:
                # the other implementations reduce each token's top-k outputs in one sum:
                # every pass computes its (token, k) pairs as rows of their own (top-1, unit
                # weight: the row is the expert's output itself), the rows are gathered, then
                # weighted and summed once, as the unmodified kernel weights and sums them
                if rows is None:
                    rows = _PassRows(hidden, top_k_index, top_k, self.staging.upload)
                part = self._device_pass(b, mode, rows.hidden, rows.index, rows.unit, lut,
                                         used, cpu_experts, flat, positions, partial=True,
                                         order=order)
                rows.take(part, [e for e, _ in res] + group, b.num_experts)
        if rows is not None:
            out = rows.reduce(top_k_weights, hidden.dtype)
        if len(calls) > 1:
            self.multi_pass_dispatches += 1
        self._account(ordinal, mode, len(plan.experts), sum(plan.hit), stall)
        if cpu_experts:
            if host_hidden is None:               # the policy was not expected to use the CPU
                host_hidden, host_w = self.ops.fetch([hidden, top_k_weights.reshape(-1)])
            cpu_out = self._cpu_pass(b, host_hidden, host_w.view(tokens, top_k), cpu_experts, positions)
            out = out + self.staging.upload(cpu_out, cpu_out.dtype).to(out.dtype)
        return out

    def _stage_in_id_order(self, b, lut, used, streamed, ordinal, base: int) -> float:
        """Place every device expert of the dispatch in the transient area in expert-id
        order from entry ``base`` on (resident ones copied device-to-device from their slot, streamed ones from
        the host); rewrites ``lut``/``used``. Returns the host ms of host copies."""
        pool = self.pool
        stream_set = set(streamed)
        device_experts = sorted([e for e in range(b.num_experts) if lut[e] != pool.zero] + streamed)
        ms = 0.0
        used.clear()
        for rank, e in enumerate(device_experts):
            dst = base + rank
            if e in stream_set:
                ms += self._stream_in(dst, b, e)
            else:
                pool.stage(lut[e], dst)
            lut[e] = dst
            used.append(dst)
        return ms

    def _device_pass(self, b, mode, hidden, top_k_index, top_k_weights, lut, used, cpu_experts,
                     flat, positions, *, out=None, only=None, partial=False, order=None):
        """One kernel call on the pool: the experts ``lut`` maps to entries ``used``, every
        other expert of the layer to the zero entry. Eager adds into ``out`` (when given) the
        experts of ``only`` (None: all of the dispatch's device experts); ``partial``: a pass
        of several (the others' experts read the zero entry too: sentinel ids, whose rows
        are skipped, changed a pass's bits in 4 of 16 measured prefills; ``order``: the dispatch's experts, ascending, for a staged grouped_mm pass:
        :meth:`_ordered_window`)."""
        pool = self.pool
        if not used:          # every expert of the dispatch is computed on the CPU
            return torch.zeros_like(hidden) if out is None else out
        pool.wait_for(used)
        if mode == "eager":
            out = self._eager_pass(b, hidden, top_k_weights, lut, cpu_experts, positions,
                                   out=out, only=only)
            pool.release(used)
            return out
        up = self.staging.upload
        idt = top_k_index.dtype
        fn = self._function(mode, b)
        weights = top_k_weights
        decode = len(flat) <= b.num_experts
        if cpu_experts:       # their device contribution: weight 0 (on the zero entry)
            cpu = set(cpu_experts)
            mask = up([e in cpu for e in range(b.num_experts)], torch.bool)
            weights = top_k_weights.masked_fill(mask[top_k_index], 0)
            used = used + [pool.zero]
        elif partial:         # the experts of the other passes read the zero entry
            used = used + [pool.zero]
        if mode != "grouped_mm":
            # batched_mm indexes the pool directly (its cost does not depend on the size)
            if decode:
                slot_ids = up([lut[e] for e in flat], idt)
            else:
                slot_ids = up(lut, idt)[top_k_index]
            out = fn(b.slot_view, hidden, slot_ids.view(top_k_index.shape), weights)
            pool.release(used)
            return out
        if order is not None:
            window = self._ordered_window(order, lut, b.num_experts)
            if window is not None:
                table, lo, first, hi = window
                if lo >= 0:
                    view = self._window(b, lo, hi, True)
                elif self._rows_keep_bits(b, fn, hidden):
                    view = None         # the zero entry, as the other implementations
                else:
                    view = self._gathered_window(b, first - lo, first, hi)
                if view is not None:
                    slot_ids = up(table, idt)[top_k_index]
                    out = fn(view, hidden, slot_ids.view(top_k_index.shape), weights)
                    pool.release(used)
                    return out
        # grouped_mm pays for every group, empty or not, and CUDA refuses 1024 or more: hand
        # it windows of the pool holding this dispatch's entries; entries outside a window
        # are the sentinel id (= its size), which grouped_mm skips and masks to zero
        lo, hi = min(used), max(used) + 1
        split = hi - lo > GROUP_LIMIT          # usually one window holds every routed entry
        out = None
        for lo, hi in (windows(used) if split else ((lo, hi),)):
            n = hi - lo
            if split:
                table = [x - lo if lo <= x < hi else n for x in lut]
                slot_ids = up([table[e] for e in flat], idt) if decode else up(table, idt)[top_k_index]
            else:
                slot_ids = up([lut[e] - lo for e in flat] if decode else [x - lo for x in lut], idt)
                if not decode:
                    slot_ids = slot_ids[top_k_index]
            part = fn(self._window(b, lo, hi, split), hidden, slot_ids.view(top_k_index.shape), weights)
            out = part if out is None else out + part
        pool.release(used)
        return out

    def _ordered_window(self, order, lut, num_experts):
        """A staged grouped_mm pass whose rows sort exactly as in one call. CPU grouped_mm
        with several threads computes a row by where it sits among its expert's rows, and the
        sort that groups them is not stable: only ids in the same relative order as the
        experts' give every row its place of one call. The pass's experts sit in
        consecutive transient entries in id order (the end of the transient area); the
        window starts ``c`` entries earlier, ``c`` the dispatch's experts below them, which
        take those entries' ids in order (their rows computed on whatever the entries hold,
        never kept), and the experts above them take sentinel ids in order (skipped,
        masked). Returns ``(table, lo, first, hi)``: the id of every expert, the window's
        first entry, the pass's first entry and the window's end; ``lo`` is negative when
        fewer than ``c`` entries lie below the pass (a pool of fewer entries than experts
        per layer: :meth:`_device_pass` then gathers the window, or reads the zero entry
        where the kernel keeps a row's bits wherever the row lies). None: the pass's
        experts are not staged in order."""
        zero = self.pool.zero
        mine = [e for e in order if lut[e] != zero]
        if not mine:
            return None
        c = order.index(mine[0])
        first = lut[mine[0]]
        n = c + len(mine)
        if order[c:n] != mine or any(lut[e] != first + i for i, e in enumerate(mine)):
            return None
        # every expert's id is its rank: below, entries lo..; the pass's own, from ``first``
        # on; above, sentinels from n on
        table = [n] * num_experts
        for j, e in enumerate(order):
            table[e] = j
        return table, first - c, first, first + len(mine)

    def _rows_keep_bits(self, b, fn, hidden) -> bool:
        """Whether ``fn`` computes a row the same wherever it lies among its expert's rows
        (:func:`same_rows`), probed once per thread count, dtype and shape of the pool's
        entries, on ``top_k + 1`` entries of random weights (the probe needs rows over more
        experts than a token's ``top_k`` to see the kernel's dependence): where it does, a
        pass with too few entries below reads the zero entry (measured bit-identical
        there); where not, it gathers its window."""
        tensors = self.pool.tensors
        key = (torch.get_num_threads(), hidden.dtype, b.top_k,
               tuple((name, tuple(t.shape[1:]), t.dtype) for name, t in tensors.items()))
        keeps = self._row_bits.get(key)
        if keeps is None:
            n = b.top_k + 1
            g = torch.Generator().manual_seed(0)
            over = {name: (torch.randn((n,) + tuple(t.shape[1:]), generator=g).to(t.device, t.dtype)
                           if t.is_floating_point() else t[:1].expand((n,) + tuple(t.shape[1:])).clone())
                    for name, t in tensors.items()}
            view = self._view(b, over, n, True)
            keeps = self._row_bits[key] = same_rows(fn, view, hidden.shape[-1], n, b.top_k,
                                                    hidden.device, hidden.dtype)
        return keeps

    def _gathered_window(self, b, c, first, hi) -> ExpertsView:
        """The ordered window of a pass with fewer than ``c`` pool entries below it: ``c``
        entries of a scratch area (zeros, or experts an earlier gathered pass left there:
        finite weights whose rows are computed and never kept), then a copy of the pass's
        entries ``[first, hi)``, so the dispatch's ``c`` experts below the pass take ids in
        order and the kernel's sort puts every row of the pass where one call puts it. The
        scratch area, one entry per expert of the layer, is made on the first such pass:
        only a kernel that needs it (:meth:`_rows_keep_bits`) under an area the caller
        named pays for it."""
        self.gathered_passes += 1
        n = c + hi - first
        if self._scratch is None or n > self._scratch_size:
            self._scratch_size = max(n, max(x.num_experts for x in self.layers))
            self._scratch = {name: t.new_zeros((self._scratch_size,) + tuple(t.shape[1:]))
                             for name, t in self.pool.tensors.items()}
        over = {}
        for name, t in self.pool.tensors.items():
            area = self._scratch[name]
            area[c:n].copy_(t[first:hi])
            over[name] = area[:n]
        return self._view(b, over, n, True)

    def _eager_pass(self, b, hidden, top_k_weights, lut, cpu_experts, positions, *, out=None,
                    only=None):
        """The eager loop's math and order (expert ids ascending, each expert's pairs as
        ``torch.where`` over the one-hot mask gives them), from host-built index lists
        uploaded once: no per-expert synchronisation. ``only``: the experts of this pass
        (None: every device expert of the dispatch), added into ``out`` when given."""
        if only is None:
            skip = set(cpu_experts)
            order = [e for e in sorted(positions) if e not in skip and 0 <= e < b.num_experts]
        else:
            order = sorted(e for e in only if e in positions)
        toks: list[int] = []
        poss: list[int] = []
        bounds = []
        for e in order:
            t, p = positions[e]
            bounds.append((e, len(toks), len(toks) + len(t)))
            toks += t
            poss += p
        n = len(toks)
        idx = self.staging.upload(toks + poss, torch.long)
        if out is None:
            out = torch.zeros_like(hidden)
        tensors = self.pool.tensors
        math = b.math
        for e, a, z in bounds:
            tok = idx[a:z]
            y = math.expert(hidden[tok], _Row(tensors, lut[e]))
            y = y * top_k_weights[tok, idx[n + a:n + z], None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out

    def _cpu_pass(self, b, hidden, weights, cpu_experts, positions):
        self.cpu_computes += len(cpu_experts)
        self.cpu_tokens += sum(len(positions[e][0]) for e in cpu_experts if e in positions)
        with torch.no_grad():
            return b.cpu.compute(cpu_experts, hidden, positions, weights)

    @torch.compiler.disable
    def forward_outside_graph(self, b, hidden, top_k_index, top_k_weights):
        """:meth:`forward`, never traced: under torch.compile Dynamo breaks the graph here."""
        return self.forward(b, hidden, top_k_index, top_k_weights)

    def layer_forward(self, b: LayerBinding):
        """The experts module's forward while attached, for layer ``b``: the engine, outside
        any torch.compile graph (while Dynamo traces, ``is_compiling()`` is true and the call
        goes through :meth:`forward_outside_graph`, which is ``torch.compiler.disable``d:
        the graph breaks there and the policy is never traced; eager calls skip the disable
        wrapper's cost).

        With home placement, an ids-only policy and the mode in the config's plain field,
        the closure does what :meth:`forward` and :meth:`_home` do with everything fixed per
        layer bound once (the view, the config's field, the counters): one read, the
        runtime's ``hits`` (True instead of a Plan when every access hit and nothing moved),
        and the experts function on the home window; any other Plan goes to :meth:`_execute`, and eager (or
        a mode read another way) to :meth:`forward`."""
        engine = self
        is_compiling = torch.compiler.is_compiling
        cfg = getattr(b.module, "config", None)
        if not (self.home and self.ids_only and type(cfg) in self._plain_configs
                and self.E <= GROUP_LIMIT and self.tiers is None):
            def forward(hidden_states, top_k_index, top_k_weights):
                if is_compiling():
                    return engine.forward_outside_graph(b, hidden_states, top_k_index, top_k_weights)
                return engine.forward(b, hidden_states, top_k_index, top_k_weights)
            return forward

        ordinal, E = b.ordinal, self.E
        base = ordinal * E
        view = b.home_view
        cfgd = cfg.__dict__
        pool = self.pool
        cuda = pool.cuda
        resident = self.resident
        ops = self.ops
        read = ops.read_ids
        # a device without queues reads a [tokens, top-k] index with tolist() itself (what
        # SyncOps.read_ids does, one call less)
        host_read = type(ops) is SyncOps
        runtime = self.runtime
        # the runtime's hits(): True instead of a Plan when every access hit and nothing
        # moved (the compiled engine answers without building a Plan)
        hits = getattr(runtime, "hits", None)
        if not callable(hits):         # a runtime of the Plan contract alone (dispatch)
            hits = None
        local, glob = self._local_fns, self._global_fns
        modes = self.modes
        accesses, hits_of = self.layer_accesses, self.layer_hits
        execute, home = self._execute, self._home

        def forward(hidden_states, top_k_index, top_k_weights):
            if is_compiling():
                return engine.forward_outside_graph(b, hidden_states, top_k_index, top_k_weights)
            mode = cfgd.get(_MODE_FIELD)
            if mode is None or mode == "eager":
                return engine.forward(b, hidden_states, top_k_index, top_k_weights)
            if ordinal <= engine._prev:
                engine.step += 1
            engine._prev = ordinal
            engine.dispatches += 1
            if host_read and top_k_index.dim() == 2:     # the one blocking read
                ops.reads += 1
                rows = top_k_index.tolist()
                flat = rows[0] if len(rows) == 1 else [x for r in rows for x in r]
            else:
                flat = read(top_k_index)
            tokens = hidden_states.shape[0]
            # one token's top-k ids are distinct (a repeat would take the runtime's pure
            # path, which removes it, so the Plan is the same)
            experts = flat if tokens == 1 else list(dict.fromkeys(flat))
            if hits is not None:
                plan = hits(ordinal, experts, None, tokens, step=engine.step)
                if plan is True:                 # every access hit, nothing moved
                    n = len(experts)
                    if resident[ordinal] != E:
                        engine._check_home(ordinal, experts)
                    modes[mode] = modes.get(mode, 0) + 1
                    accesses[ordinal] += n
                    hits_of[ordinal] += n
                    engine.home_dispatches += 1
                    fn = local.get(mode) or glob.get(mode) or engine._function(mode, b)
                    if not cuda:
                        return fn(view, hidden_states, top_k_index, top_k_weights)
                    return engine._home_call(fn, view, base, experts, hidden_states,
                                             top_k_index, top_k_weights)
            else:
                plan = runtime.dispatch(ordinal, experts, None, tokens, step=engine.step)
            # a Plan (loads, evictions, STREAM or CPU placements; or the pure runtime)
            out = home(b, mode, plan, hidden_states, top_k_index, top_k_weights)
            if out is not None:
                return out
            return execute(b, mode, plan, flat, None, None, hidden_states, top_k_index,
                           top_k_weights)
        return forward

    def _home_call(self, fn, view, base, experts, hidden, top_k_index, top_k_weights):
        """The experts function on a home window, with queues: compute waits for the
        copies into the entries it reads and marks them read."""
        pool = self.pool
        entries = [base + e for e in experts]
        pool.wait_for(entries)
        out = fn(view, hidden, top_k_index, top_k_weights)
        pool.release(entries)
        return out

    # ------------------------------------------------------------------ stats
    def flush_stalls(self) -> None:
        """Collect every pending CUDA stall measurement (waits for the copies)."""
        if self.tiers is not None:
            self.tiers.drain()
        ms = self.pool.flush_stalls()
        if ms:
            self.stall_ms += ms
            self.runtime.add_stall(ms)

    def stats(self) -> dict:
        pool = self.pool
        copies = dict(pool.copies)
        parts = self.parts
        if parts is not None:          # the Loads are part copies into the part pool
            for k, n in parts.copies.items():
                copies[k] += n
        return {
            "dispatches": self.dispatches,
            "lean_dispatches": self.lean_dispatches,
            "home_dispatches": self.home_dispatches,
            "home_placement": self.home,
            "multi_pass_dispatches": self.multi_pass_dispatches,
            "host_window_dispatches": self.host_window_dispatches,
            "host_window_streamed": self.host_window_streamed,
            "gathered_passes": self.gathered_passes,
            "steps": self.step + 1,
            "copies": copies[DEMAND] + copies["background"] + copies["prefetch"],
            "demand_copies": copies[DEMAND],
            "background_copies": copies["background"],
            "prefetch_copies": copies["prefetch"],
            "stream_copies": copies[STREAMED],
            "bytes_copied": pool.bytes_copied + (parts.bytes_copied if parts is not None else 0),
            "staging_copies": pool.staged,
            "cpu_computes": self.cpu_computes,
            "cpu_tokens": self.cpu_tokens,
            "stall_ms": self.stall_ms,
            "copy_ms_host": pool.copy_ms + (parts.copy_ms if parts is not None else 0.0),
            "host_syncs": self.ops.reads,
            "host_syncs_per_dispatch": (self.ops.reads / self.dispatches) if self.dispatches else 0.0,
            "pool_slots": pool.num_slots if parts is None else parts.num_slots,
            "stream_slots": pool.stream_slots,
            "pool_bytes": pool.nbytes + (parts.nbytes if parts is not None else 0),
            "device": str(pool.device),
            "modes": dict(self.modes),
            "tiers": self.tiers.stats() if self.tiers is not None else None,
            "lookahead_calls": self.lookahead.calls if self.lookahead is not None else 0,
            "per_layer": [{"layer": i, "accesses": a, "hits": h,
                           "hit_rate": (h / a) if a else 0.0}
                          for i, (a, h) in enumerate(zip(self.layer_accesses, self.layer_hits))],
        }
