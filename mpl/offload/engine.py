"""The engine: executes the runtime's Plan for each MoE dispatch of a live model.

For one call of an experts module (``hidden [T,H]``, ``top_k_index [T,K]``,
``top_k_weights [T,K]``) it

1. reads the distinct experts in router order (one host sync), asks the runtime for a Plan
   (the runtime alone decides hits, slots, victims, CPU placement, prefetches);
2. issues the Plan's transfers in order (demand, background and prefetch loads into the
   slots it names; STREAM experts into the transient buffer);
3. makes compute wait for exactly the entries it reads, then runs the experts function of
   the mode in force *now* (``config._experts_implementation``: eager, batched_mm,
   grouped_mm or any registered one) on a view of the module whose weights are the pool:
   eager keeps the original ids (so its id-order loop is unchanged) and maps each id to its
   pool entry; the other modes get ids remapped to pool entries, unsplit;
4. computes the experts placed on the CPU on the CPU, from the host copy, and adds them;
5. records what it did (copies, bytes, CPU computes, stalls, per-layer hits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mpl.runtime.plan import CPU, STREAM
from mpl.trace import Dispatch

from .cpu import CpuExperts
from .pool import DEMAND, STREAMED, SlotPool
from .view import ExpertsView, IndexedWeights


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
    eager_view: ExpertsView | None = None
    slot_view: ExpertsView | None = None
    indexed: list = field(default_factory=list)  # IndexedWeights of eager_view


class Engine:
    def __init__(self, runtime, layers: list[LayerBinding], pool: SlotPool, *,
                 lookahead=None, need_weights: bool = False) -> None:
        self.runtime = runtime
        self.layers = layers
        self.pool = pool
        self.lookahead = lookahead
        self.need_weights = need_weights
        self.step = -1
        self._prev = 1 << 30
        self.dispatches = 0
        self.cpu_computes = 0
        self.cpu_tokens = 0
        self.stall_ms = 0.0
        self.layer_accesses = [0] * len(layers)
        self.layer_hits = [0] * len(layers)
        self.modes: dict[str, int] = {}
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
        self._functions = ALL_EXPERTS_FUNCTIONS
        for b in layers:
            self._bind_views(b)

    def _bind_views(self, b: LayerBinding) -> None:
        pool = self.pool
        b.indexed = [IndexedWeights(pool.tensors[n], None) for n in pool.names]
        b.eager_view = ExpertsView(b.module, dict(zip(pool.names, b.indexed)))
        b.slot_view = ExpertsView(b.module, {**pool.tensors, "num_experts": pool.size})

    # ------------------------------------------------------------------ the hot path
    def forward(self, b: LayerBinding, hidden: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        pool = self.pool
        rt = self.runtime
        ordinal = b.ordinal
        if ordinal <= self._prev:
            self.step += 1
        self._prev = ordinal
        step = self.step
        self.dispatches += 1

        flat = top_k_index.reshape(-1).tolist()               # the one host sync
        experts = list(dict.fromkeys(flat))
        tokens = hidden.shape[0]
        weights = None
        if self.need_weights:
            rows = top_k_index.reshape(tokens, -1).tolist()
            wrows = top_k_weights.reshape(tokens, -1).float().tolist()
            weights = Dispatch(step, ordinal, rows, wrows).mean_weights()
        predictions = self.lookahead.predict(ordinal, hidden) if self.lookahead is not None else None

        plan = rt.dispatch(ordinal, experts, weights, tokens=tokens, step=step,
                           predictions=predictions)

        stall = pool.collect_stalls() if pool.cuda else 0.0
        for _key, slot in plan.evicted:
            pool.evict(slot)
        layers = self.layers
        for lkey, slot, _victim, kind in plan.raw_loads:     # Load fields, as plain tuples
            ms = pool.copy_in(slot, layers[lkey[0]].host, lkey[1], lkey, kind)
            if kind == DEMAND:
                stall += ms

        lut = [pool.zero] * b.num_experts
        used: list[int] = []
        cpu_experts: list[int] = []
        streamed: list[int] = []
        hits = 0
        content = pool.content
        for e, w, h in zip(plan.experts, plan.where, plan.hit):
            if w >= 0:
                if content[w] != (ordinal, e):
                    raise RuntimeError(
                        f"plan places expert {e} of MoE layer {ordinal} in slot {w}, but the slot "
                        f"holds {content[w]}: the runtime and the mechanism disagree")
                lut[e] = w
                used.append(w)
            elif w == STREAM:
                streamed.append(e)
            elif w == CPU:
                cpu_experts.append(e)
            else:
                raise RuntimeError(f"plan has an unknown placement {w} for expert {e}")
            hits += bool(h)
        if len(streamed) > pool.stream_slots:
            raise RuntimeError("more streamed experts in one dispatch than transient slots")
        mode = getattr(b.module.config, "_experts_implementation", None) or "eager"
        self.modes[mode] = self.modes.get(mode, 0) + 1
        if mode == "grouped_mm" and not pool.cuda and torch.get_num_threads() > 1:
            # CPU grouped_mm with several threads gives results that depend on where each
            # group's rows sit in the sorted input: stage the dispatch's experts in
            # expert-id order so the rows sit exactly where the unmodified model puts them
            stall += self._stage_in_id_order(b, lut, used, streamed, ordinal)
        else:
            sidx = pool.stream_base
            for e in streamed:
                stall += pool.copy_in(sidx, b.host, e, (ordinal, e), STREAMED)
                lut[e] = sidx
                used.append(sidx)
                sidx += 1
        self.layer_accesses[ordinal] += len(plan.experts)
        self.layer_hits[ordinal] += hits
        if stall:
            self.stall_ms += stall
            rt.add_stall(stall)

        out = self._device_pass(b, mode, hidden, top_k_index, top_k_weights, lut, used, cpu_experts, flat)
        if cpu_experts:
            out = out + self._cpu_pass(b, hidden, top_k_index, top_k_weights, cpu_experts).to(
                device=out.device, dtype=out.dtype)
        return out

    def _stage_in_id_order(self, b, lut, used, streamed, ordinal) -> float:
        """Place every device expert of the dispatch in the transient area in expert-id
        order (resident ones copied device-to-device from their slot, streamed ones from
        the host); rewrites ``lut``/``used``. Returns the host ms of host copies."""
        pool = self.pool
        stream_set = set(streamed)
        device_experts = sorted([e for e in range(b.num_experts) if lut[e] != pool.zero] + streamed)
        ms = 0.0
        used.clear()
        for rank, e in enumerate(device_experts):
            dst = pool.stream_base + rank
            if e in stream_set:
                ms += pool.copy_in(dst, b.host, e, (ordinal, e), STREAMED)
            else:
                pool.stage(lut[e], dst)
            lut[e] = dst
            used.append(dst)
        return ms

    def _device_pass(self, b, mode, hidden, top_k_index, top_k_weights, lut, used, cpu_experts, flat):
        pool = self.pool
        if not used:          # every expert of the dispatch is computed on the CPU
            return torch.zeros_like(hidden)
        pool.wait_for(used)
        weights = top_k_weights
        if cpu_experts:       # their device contribution: the zero entry times weight 0
            mask = torch.zeros(b.num_experts, dtype=torch.bool)
            mask[cpu_experts] = True
            weights = top_k_weights.masked_fill(mask.to(hidden.device)[top_k_index], 0)
            used = used + [pool.zero]
        if mode == "eager":
            for iw in b.indexed:
                iw.lut = lut
            out = b.orig_forward(b.eager_view, hidden, top_k_index, weights)
        else:
            fn = self._functions.get_interface(mode, b.orig_forward)
            # hand the function only the window of the pool this dispatch uses: grouped_mm
            # pays for every group, empty or not (about 3 us each on the CPU)
            lo, hi = (0, pool.size) if mode == "batched_mm" else (min(used), max(used) + 1)
            if len(flat) <= b.num_experts:      # decode: a tensor of the few ids
                slot_ids = torch.tensor([lut[e] - lo for e in flat], dtype=top_k_index.dtype)
            else:                               # prefill: a lookup table, indexed on the device
                table = torch.tensor([x - lo for x in lut], dtype=top_k_index.dtype)
                slot_ids = table.to(hidden.device, non_blocking=True)[top_k_index]
            if lo == 0 and hi == pool.size:
                view = b.slot_view
            else:
                over = {n: t[lo:hi] for n, t in pool.tensors.items()}
                over["num_experts"] = hi - lo
                view = ExpertsView(b.module, over)
            slot_ids = slot_ids.view(top_k_index.shape).to(hidden.device, non_blocking=True)
            out = fn(view, hidden, slot_ids, weights)
        pool.release(used)
        return out

    def _cpu_pass(self, b, hidden, top_k_index, top_k_weights, cpu_experts):
        self.cpu_computes += len(cpu_experts)
        idx = top_k_index.to("cpu")
        self.cpu_tokens += int(torch.isin(idx, torch.tensor(cpu_experts, dtype=idx.dtype)).sum())
        return b.cpu.compute(cpu_experts, hidden.to("cpu"), idx, top_k_weights.to("cpu"))

    # ------------------------------------------------------------------ stats
    def flush_stalls(self) -> None:
        """Collect every pending CUDA stall measurement (waits for the copies)."""
        if self.pool.cuda:
            ms = self.pool.collect_stalls(block=True)
            if ms:
                self.stall_ms += ms
                self.runtime.add_stall(ms)

    def stats(self) -> dict:
        pool = self.pool
        copies = dict(pool.copies)
        return {
            "dispatches": self.dispatches,
            "steps": self.step + 1,
            "copies": copies[DEMAND] + copies["background"] + copies["prefetch"],
            "demand_copies": copies[DEMAND],
            "background_copies": copies["background"],
            "prefetch_copies": copies["prefetch"],
            "stream_copies": copies[STREAMED],
            "bytes_copied": pool.bytes_copied,
            "staging_copies": pool.staged,
            "cpu_computes": self.cpu_computes,
            "cpu_tokens": self.cpu_tokens,
            "stall_ms": self.stall_ms,
            "copy_ms_host": pool.copy_ms,
            "pool_slots": pool.num_slots,
            "stream_slots": pool.stream_slots,
            "pool_bytes": pool.nbytes,
            "device": str(pool.device),
            "modes": dict(self.modes),
            "lookahead_calls": self.lookahead.calls if self.lookahead is not None else 0,
            "per_layer": [{"layer": i, "accesses": a, "hits": h,
                           "hit_rate": (h / a) if a else 0.0}
                          for i, (a, h) in enumerate(zip(self.layer_accesses, self.layer_hits))],
        }
