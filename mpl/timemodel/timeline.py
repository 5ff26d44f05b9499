"""Simulated time: plays the Plans of a replay on a model of one GPU, its copy engine and the
host CPU (formulas in ``docs/simulation.md``).

Three resources, each with its own clock:

* the **compute stream** runs, per dispatch, the layer's non-expert part then its GPU experts,
  each as soon as its weights are on the device;
* the **copy stream** (the host link) runs transfers one after another in issue order:
  demand loads and streamed experts when the dispatch starts, background loads
  (cpu_fallback/hybrid) likewise, prefetch loads when the dispatch ends;
* the **CPU** computes the experts the schedule sent there, in parallel with the GPU.

A dispatch ends when both its GPU and CPU work are done. The time the compute stream waits for
a transfer (a demand load, a stream, or a prefetch still in flight) is the dispatch's stall;
the replayer reports it to the runtime (``add_stall``) so ``stall_ms`` metrics see it. With
``schedule.overlap = false`` transfers do not overlap compute: the compute stream waits for
every transfer of the dispatch before it starts.
"""

from __future__ import annotations

from mpl.runtime.plan import BACKGROUND, CPU, PREFETCH, STREAM, Plan
from mpl.timemodel.hardware import Costs


class Timeline:
    def __init__(self, costs: Costs, *, overlap: bool = True):
        self.c = costs
        self.overlap = overlap
        self.now = 0.0               # compute stream clock, ms
        self.link_free = 0.0         # copy stream clock
        self.arrival: dict = {}      # key -> time its (prefetch/background) transfer lands
        self.stall_ms = 0.0
        self.transfer_ms = 0.0       # busy time of the link
        self.gpu_ms = 0.0            # busy time of the compute stream (experts + dense)
        self.cpu_ms = 0.0            # busy time of the CPU
        self.cpu_wait_ms = 0.0       # time the GPU idled waiting for CPU experts
        self.transfers = 0
        self.bytes = 0
        # hits on a key whose transfer had not landed when the dispatch started (a prefetch or
        # background load still in flight: the dispatch waits for it): SPEC §5's late
        # prefetches, counted apart from hits (arrived_stats); per MoE layer, only the layers
        # with one
        self.late = 0
        self.late_layers: dict = {}
        self._t_xfer = costs.transfer_ms()
        self._gpu1 = costs.gpu_expert_ms(1)
        self._cpu1 = costs.cpu_expert_ms(1)
        self._dense1 = costs.dense_ms(1) if costs.dense_bytes_per_layer else 0.0

    def demand(self, n: int, m: int, dense: float | None = None) -> float:
        """Advance the clocks by a one-token dispatch of ``n`` experts whose ``m`` misses
        are all transferred at its start (demand loads or streams), nothing in flight;
        returns its stall in ms. The m transfers land txf apart from s0; with overlap the
        compute stream runs the resident experts, then each transferred one as it lands:
        ``t = max(t0 + early + m*g, max_j (s0 + j*txf + (m - j + 1)*g))``; without overlap
        it waits for the last transfer, then runs all n: ``t = s0 + m*txf + n*g``.
        The compiled replay loop of a demand-only policy carries the same formula inline
        (mpl.codegen.generator._emit_timeline); tests/test_replay_kernel.py holds the two equal."""
        if dense is None:
            dense = self._dense1
        gpu1 = self._gpu1
        t0 = self.now + dense
        busy = n * gpu1
        t = t0 + busy
        if m:
            txf = self._t_xfer
            link = self.link_free
            s0 = t0 if t0 > link else link
            link = s0 + m * txf
            if not self.overlap:
                last = link + busy
            elif txf >= gpu1:
                last = link + gpu1
            else:
                last = s0 + txf + m * gpu1
            if last > t:
                t = last
            self.link_free = link
            self.transfers += m
            self.transfer_ms += m * txf
            self.bytes += m * self.c.expert_bytes
        stall = t - t0 - busy
        self.gpu_ms += busy + dense
        self.stall_ms += stall
        self.now = t
        return stall

    def unit_costs(self) -> tuple[float, float, float]:
        """(dense part of a one-token dispatch, one expert on the GPU, one transfer), in ms:
        the constants of ``demand``'s formula."""
        return self._dense1, self._gpu1, self._t_xfer

    def clocks(self) -> tuple[float, float, float, float, float]:
        """(now, link_free, stall_ms, gpu_ms, transfer_ms): what a compiled replay loop
        carries in local variables while it applies ``demand``'s formula inline."""
        return self.now, self.link_free, self.stall_ms, self.gpu_ms, self.transfer_ms

    def set_clocks(self, now: float, link_free: float, stall_ms: float, gpu_ms: float,
                   transfer_ms: float, transfers: int) -> None:
        """Take back the clocks of ``clocks()`` and count ``transfers`` more transfers."""
        self.now, self.link_free, self.stall_ms, self.gpu_ms, self.transfer_ms = \
            now, link_free, stall_ms, gpu_ms, transfer_ms
        if transfers:
            self.transfers += transfers
            self.bytes += transfers * self.c.expert_bytes

    def dispatch(self, plan: Plan, tokens_of: dict | None = None, tokens: int = 1) -> float:
        """Advance the clocks by one dispatch; returns its stall in ms.
        ``tokens_of``: expert -> tokens routed to it (default 1 each)."""
        c = self.c
        now = self.now
        dense = self._dense1 if tokens == 1 else c.dense_ms(tokens)
        t0 = now + dense
        layer = plan.layer
        loads = plan.raw_loads          # (key, slot, victim, kind) tuples
        arrival = self.arrival
        txf = self._t_xfer
        link = self.link_free
        nx = 0
        early = 0.0                     # compute of experts whose weights are there at t0
        unsorted = False
        late = None                     # (ready, compute) of the others
        n_late = 0                      # hits still in flight at t0
        cpu_busy = 0.0
        gpu1, cpu1 = self._gpu1, self._cpu1
        hits = plan.hit
        wh = plan.where
        if not arrival and tokens_of is None and CPU not in wh:
            ns = wh.count(STREAM)
            if len(loads) + ns == hits.count(False):   # every miss a demand load or a stream
                return self.demand(len(hits), len(loads) + ns, dense)
        for e, where, hit in zip(plan.experts, plan.where, plan.hit):
            n = tokens_of.get(e, 1) if tokens_of else 1
            if where == CPU:
                cpu_busy += cpu1 if n == 1 else c.cpu_expert_ms(n)
                continue
            comp = gpu1 if n == 1 else c.gpu_expert_ms(n)
            if hit:
                ready = arrival.get((layer, e), 0.0) if arrival else 0.0
                if ready > t0:
                    n_late += 1
            elif where == STREAM or not arrival or (layer, e) not in arrival:
                link = (t0 if t0 > link else link) + txf      # a demand load or a stream
                nx += 1
                ready = link
            else:   # a miss already in flight (issued by an earlier prefetch/background load)
                ready = arrival[(layer, e)]
            if ready <= t0:
                early += comp
            elif late is None:
                late = [(ready, comp)]
            else:
                if ready < late[-1][0]:
                    unsorted = True
                late.append((ready, comp))
        # background loads start with the dispatch (the CPU computes meanwhile)
        if loads:
            for ld in loads:
                if ld[3] == BACKGROUND:
                    link = (t0 if t0 > link else link) + txf
                    nx += 1
                    arrival[ld[0]] = link
        t, busy = compute_end(t0, early, late, unsorted, self.overlap)
        stall = t - t0 - busy
        cpu_end = t0 + cpu_busy
        end = t if t >= cpu_end else cpu_end
        if cpu_busy:
            self.cpu_wait_ms += end - t
            self.cpu_ms += cpu_busy
        self.gpu_ms += busy + dense
        self.stall_ms += stall
        # prefetches are issued when the dispatch ends
        if loads:
            for ld in loads:
                if ld[3] == PREFETCH:
                    link = (end if end > link else link) + txf
                    nx += 1
                    arrival[ld[0]] = link
        if arrival:
            for key, _slot in plan.evicted:
                arrival.pop(key, None)
            if len(arrival) > 4096:       # forget transfers that have long landed
                self.arrival = {k: v for k, v in arrival.items() if v > end}
        self.link_free = link
        if n_late:
            self.count_late(layer, n_late)
        if nx:
            self.transfers += nx
            self.transfer_ms += nx * txf
            self.bytes += nx * c.expert_bytes
        self.now = end
        return stall

    def count_late(self, layer: int, n: int) -> None:
        """``n`` hits of MoE layer ``layer`` were still in flight when their dispatch started
        (late prefetches)."""
        self.late += n
        self.late_layers[layer] = self.late_layers.get(layer, 0) + n

    def to_dict(self) -> dict:
        return {"total_ms": self.now, "stall_ms": self.stall_ms, "gpu_busy_ms": self.gpu_ms,
                "cpu_busy_ms": self.cpu_ms, "cpu_wait_ms": self.cpu_wait_ms,
                "link_busy_ms": self.transfer_ms, "link_free_ms": self.link_free,
                "transfers": self.transfers,
                "bytes_transferred": self.bytes, "late_prefetches": self.late}


def compute_end(start: float, early: float, late, unsorted: bool, overlap: bool) -> tuple:
    """``(end, busy)`` of a dispatch's device compute from ``start``: ``early`` ms of experts
    whose weights are there, then ``late`` ``(ready, compute)`` pairs, each started when its
    weights land (``overlap``) or all after the last one lands; ``unsorted``: ``late`` is not
    in order of readiness (demand loads arrive in issue order; only in-flight hits mix it)."""
    busy = early
    if late is None:
        return start + early, busy
    if overlap:
        if unsorted:
            late.sort()
        t = start + early
        for ready, comp in late:
            if ready > t:
                t = ready
            t += comp
            busy += comp
        return t, busy
    busy += sum(comp for _, comp in late)
    return max(r for r, _ in late) + busy, busy


def arrived_stats(stats: dict, tl: Timeline) -> dict:
    """A runtime's statistics with the timeline's late prefetches counted apart
    (:func:`mpl.runtime.arrival.arrived`): a hit whose key was still in flight when its
    dispatch started is not a hit but a late prefetch."""
    from mpl.runtime.arrival import arrived

    return arrived(stats, tl.late, tl.late_layers)


def summary(tl: Timeline, steps: int, tokens: int) -> dict:
    """The timeline's totals (``to_dict``) with the steps and tokens played, the time per step
    and tokens/s: a replay report's ``sim`` and a live shadow's."""
    out = tl.to_dict()
    total = out["total_ms"]
    out.update(steps=steps, tokens=tokens,
               time_per_step_ms=total / steps if steps else 0.0,
               tokens_per_s=tokens / (total / 1e3) if total > 0 else 0.0)
    return out
