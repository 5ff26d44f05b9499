"""The offline optimum: Belady's MIN for demand caching of expert keys.

Model (the same as the runtime's, SPEC §5): a dispatch needs its distinct keys all at once.
A key resident when the dispatch starts is a hit and cannot be evicted during the dispatch
(in use). A missed key is transferred either way; the optimum then chooses whether to admit
it (evicting a resident key not used by this dispatch) or to stream it through a transient
buffer. Pinned keys are always resident and take slots.

The algorithm keeps, after each dispatch, the resident keys with the *nearest* next use
(Belady with bypass): next-use indices are precomputed backwards in one pass, residents sit in
a max-heap on next use with lazy invalidation, so a trace of N accesses costs O(N log C).
``tests/test_belady*.py`` checks it against an exhaustive search on tiny traces and against
every eviction rule of the runtime on random ones.

Cache structures: ``shared`` (one cache over every layer's keys) or per-layer (one cache per
MoE layer with its own capacity; the layers are independent, so the optimum is the per-layer
optimum on each layer's sub-sequence).

Where the compiled backend is in use (mpl.runtime.compiled), the same algorithm runs in C
(``mpl/runtime/c/belady.c``: the same priorities, heap order and decisions; the functions here
are its reference, ``MPL_PURE=1`` forces them, ``tests/test_belady.py`` holds the two equal
decision by decision); ``belady()`` then reads a lazily read trace's columns without building
its dispatches.
"""

from __future__ import annotations

import heapq
from array import array
from itertools import compress
from operator import gt
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from mpl.trace import Dispatch


@dataclass
class BeladyResult:
    accesses: int = 0
    hits: int = 0
    misses: int = 0
    loads: int = 0          # missed keys admitted into a slot
    streamed: int = 0       # missed keys computed from a transient buffer, not admitted
    evictions: int = 0
    per_layer: dict[int, list[int]] = field(default_factory=dict)   # layer -> [accesses, hits]
    structure: str = "shared"
    capacities: list[int] | int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.accesses if self.accesses else 0.0

    def merge(self, other: "BeladyResult") -> None:
        self.accesses += other.accesses
        self.hits += other.hits
        self.misses += other.misses
        self.loads += other.loads
        self.streamed += other.streamed
        self.evictions += other.evictions
        for l, (a, h) in other.per_layer.items():
            cur = self.per_layer.setdefault(l, [0, 0])
            cur[0] += a
            cur[1] += h

    def to_dict(self) -> dict:
        return {"structure": self.structure, "capacities": self.capacities,
                "accesses": self.accesses, "hits": self.hits, "misses": self.misses,
                "hit_rate": self.hit_rate, "loads": self.loads, "streamed": self.streamed,
                "evictions": self.evictions,
                "per_layer": [{"layer": l, "accesses": a, "hits": h,
                               "hit_rate": h / a if a else 0.0}
                              for l, (a, h) in sorted(self.per_layer.items())]}


def requests_of(dispatches: Iterable[Dispatch], num_experts: int) -> tuple[list[list[int]], list[int]]:
    """Per dispatch, its distinct keys encoded as ``layer * num_experts + expert`` (router
    order), and the dispatch's layer."""
    reqs, layers = [], []
    add, addl = reqs.append, layers.append
    for d in dispatches:
        base = d.layer * num_experts
        ex = d.experts
        if len(ex) == 1:
            row = ex[0]
            keys = [base + e for e in row]
            if len(set(row)) != len(row):
                keys = list(dict.fromkeys(keys))
        else:
            keys = list(dict.fromkeys(base + e for r in ex for e in r))
        add(keys)
        addl(d.layer)
    return reqs, layers


def simulate(requests: Sequence[Sequence[int]], capacity: int, pinned: frozenset[int] = frozenset(),
             num_experts: int = 0, outcomes: list | None = None) -> BeladyResult:
    """Belady with bypass and in-use protection over one cache (compiled where the backend
    is; see :func:`simulate_pure`, the reference, for the arguments)."""
    kernel = _kernel()
    if kernel is not None:
        arrays = _arrays_of_requests(requests, num_experts)
        if arrays is not None:
            offs, layers, experts, E, used = arrays
            pins = _pins_in_layers(pinned, used, E) if num_experts else len(pinned)
            return _run_kernel(kernel, offs, layers, experts, E, capacity - pins, pinned, -1,
                               num_experts, outcomes, capacity)
    return simulate_pure(requests, capacity, pinned, num_experts, outcomes)


def _kernel():
    from mpl.runtime.compiled import kernel
    return kernel("belady")


def _arrays_of_requests(requests, num_experts: int):
    """(offs, layers, experts, E, the layers with keys) for the kernel: keys are
    ``layer * E + expert`` (``E`` the model's experts, or one past the largest key when
    per-layer counts are not wanted); None when a request mixes layers or holds a negative
    key (the reference takes any keys)."""
    E = num_experts or (max((max(ks) for ks in requests if ks), default=0) + 1)
    offs = array("q", [0])
    layers = array("i")
    experts = array("i")
    used = set()
    t = 0
    for ks in requests:
        if ks:
            layer = ks[0] // E
            base = layer * E
            row = [k - base for k in ks]
            if layer < 0 or min(row) < 0 or max(row) >= E:
                return None
            experts.extend(row)
            t += len(row)
            used.add(layer)
        else:
            layer = 0
        layers.append(layer)
        offs.append(t)
    return offs, layers, experts, E, used


def _run_kernel(kernel, offs, layers, experts, E, slots, pinned, only_layer, num_experts,
                outcomes, capacity, dense=None, nl=None) -> BeladyResult:
    """One cache's optimum in C over the dispatches of ``only_layer`` (-1: all): ``slots``
    left once the pins take theirs (as :func:`simulate_pure` counts them), ``pinned`` keys
    (``layer * E + expert``), ``outcomes`` as there; ``capacity`` is reported. ``dense``
    (:class:`_Dense`): ``layers`` and ``experts`` are already numbered densely (a wide model
    shape, see DENSE_KEYS; computed here when it is wide and none is given). ``nl``:
    ``max(layers) + 1`` of the model's layers when the caller knows it (a caller that runs a
    cache per layer reads the layers once, not once per layer)."""
    if nl is None:
        nl = (max(layers) + 1) if len(layers) else 0
    if dense is None and nl * E > DENSE_KEYS:
        dense = _Dense(layers, experts)
        layers, experts = dense.lay, dense.exp
    if dense is not None and len(dense.layers) * len(dense.experts) > DENSE_MAX_KEYS:
        return _run_pure(offs, dense, E, pinned, only_layer, num_experts, outcomes, capacity)
    if dense is not None:      # the model's keys and layer -> the dense ones
        pinned = dense.keys(pinned, E)
        if only_layer >= 0:      # (a layer no dispatch has: none kept)
            only_layer = dense.lmap.get(only_layer, len(dense.layers))
        E, nl = len(dense.experts), len(dense.layers)
    keys = array("q", sorted(pinned)) if pinned else None    # (the kernel takes any keys)
    oc = bytearray(offs[-1]) if outcomes is not None else None
    acc, hits, loads, streamed, evictions, lacc, lhit, order = kernel(
        offs, layers, experts, E, max(slots, 0), keys, only_layer, oc)
    if dense is not None:      # per-layer counts in the model's layer numbering
        lays = dense.layers
        lacc = {lays[l]: lacc[l] for l in order}
        lhit = {lays[l]: lhit[l] for l in order}
        order = [lays[l] for l in order]
    if oc is not None:           # per dispatch kept, its keys' codes
        at = 0
        for d in range(len(layers)):
            if only_layer >= 0 and layers[d] != only_layer:
                continue
            m = offs[d + 1] - offs[d]
            outcomes[d] = list(oc[at:at + m])
            at += m
    per_layer = {l: [lacc[l], lhit[l]] for l in order} if num_experts else {}
    return BeladyResult(acc, hits, acc - hits, loads, streamed, evictions, per_layer, "shared",
                        capacity)


#: The compiled optimum's tables take 20 bytes per key of the layers x experts it is given:
#: beyond DENSE_KEYS it is given the layers and experts the requests name, numbered densely
#: in their order (every key keeps its place among the others, so ties break as in the
#: model's numbering): a header that declares 65,536 x 65,536 for one dispatch costs that
#: dispatch, not the header
DENSE_KEYS = 1 << 20
#: ... and beyond DENSE_MAX_KEYS even then (layers and experts that occur all over a wide
#: shape: 160 MB of tables) the optimum is the reference's, whose memory grows with the keys
#: requested
DENSE_MAX_KEYS = 1 << 23


def _run_pure(offs, dense, E, pinned, only_layer, num_experts, outcomes, capacity) -> BeladyResult:
    """:func:`_run_kernel`'s answer from :func:`simulate_pure` (the same decisions), over the
    dispatches of ``only_layer`` (-1: all) of dense arrays, in the model's keys."""
    lays, exps, lay, exp = dense.layers, dense.experts, dense.lay, dense.exp
    kept, reqs = [], []
    for d in range(len(lay)):
        layer = lays[lay[d]]
        if only_layer >= 0 and layer != only_layer:
            continue
        base = layer * E
        kept.append(d)
        reqs.append([base + exps[exp[a]] for a in range(offs[d], offs[d + 1])])
    sub = [None] * len(reqs) if outcomes is not None else None
    r = simulate_pure(reqs, capacity, pinned, num_experts, sub)
    if sub is not None:
        for d, o in zip(kept, sub):
            outcomes[d] = o
    return r


class _Dense:
    """The layers and experts that occur (sorted), their maps to dense ids, and the layer and
    expert arrays renumbered (``lay``, ``exp``)."""

    def __init__(self, layers, experts):
        self.layers = sorted(set(layers)) or [0]
        self.experts = sorted(set(experts)) or [0]
        self.lmap = {x: i for i, x in enumerate(self.layers)}
        self.emap = {x: i for i, x in enumerate(self.experts)}
        self.lay = array("i", [self.lmap[x] for x in layers])
        self.exp = array("i", [self.emap[x] for x in experts])

    def keys(self, keys, E: int) -> frozenset:
        """Keys ``layer * E + expert`` of the model in the dense numbering (those whose layer
        and expert occur: no request names the others)."""
        lmap, emap, E2 = self.lmap, self.emap, len(self.experts)
        return frozenset(lmap[k // E] * E2 + emap[k % E] for k in keys
                         if k // E in lmap and k % E in emap)


def simulate_pure(requests: Sequence[Sequence[int]], capacity: int, pinned: frozenset[int] = frozenset(),
                  num_experts: int = 0, outcomes: list | None = None) -> BeladyResult:
    """Belady with bypass and in-use protection over one cache. ``requests``: per dispatch,
    its distinct keys. ``pinned`` keys are always hits and take slots. ``num_experts`` (when
    > 0) lets the result count per-layer hits (key // num_experts). ``outcomes`` (a list of
    len(requests)) receives, per dispatch, a code per key: 0 hit, 1 loaded, 2 streamed.

    A missed key admitted earlier in the same dispatch may be displaced by a later one with a
    nearer next use: physically that key was streamed, and it is counted so."""
    n = len(requests)
    # Priority of a key after its use at dispatch d: its next use, ties broken by the rest of
    # its future (lexicographically). Two keys with the same next use m are both needed by
    # dispatch m, where only the resident one hits and then stays; so the one whose *later*
    # future is nearer must win. rank[m][k] orders the futures of dispatch m's keys; the
    # priority is next_use * W + rank, one int comparison on the hot path.
    W = max((len(ks) for ks in requests), default=0) + 1
    INF = (n + 1) * W
    nxt: list[list[int]] = [None] * n      # type: ignore[list-item]
    last: dict[int, int] = {}               # key -> priority seen from before its next use
    get = last.get
    for d in range(n - 1, -1, -1):
        ks = requests[d]
        pr = [get(k, INF) for k in ks]
        nxt[d] = pr
        base = d * W
        if len(pr) == 1:
            last[ks[0]] = base
        else:
            srt = sorted(pr)
            idx = srt.index
            for k, v in zip(ks, pr):
                last[k] = base + idx(v)
    pinned_here = {k for k in pinned if k in last}
    cap = capacity - (_pins_in_layers(pinned, {k // num_experts for k in last}, num_experts)
                      if num_experts else len(pinned))
    cap = max(cap, 0)
    resident: dict[int, int] = {}           # key -> its next use
    heap: list[tuple[int, int]] = []        # (-next_use, key), lazily invalidated
    push, pop, replace = heapq.heappush, heapq.heappop, heapq.heapreplace
    hits = loads = streamed = evictions = accesses = 0
    missed_keys: list[int] = []              # for per-layer counts
    miss = missed_keys.append
    limit = 4 * (cap + 16)
    for d in range(n):
        ks = requests[d]
        nus = nxt[d]
        accesses += len(ks)
        new_entries = None
        admitted = None                      # keys loaded by this dispatch -> position
        for pos, (k, nu) in enumerate(zip(ks, nus)):
            if k in resident:
                hits += 1
                resident[k] = nu            # old heap entry becomes stale: protected now
                if new_entries is None:
                    new_entries = [(-nu, k)]
                else:
                    new_entries.append((-nu, k))
                continue
            if k in pinned_here:
                hits += 1
                continue
            miss(k)
            if nu >= INF or cap == 0:
                streamed += 1                # never used again: admitting cannot help
                continue
            if len(resident) < cap:
                resident[k] = nu
                push(heap, (-nu, k))
                loads += 1
                if admitted is None:
                    admitted = {k: pos}
                else:
                    admitted[k] = pos
                continue
            # the farthest-next-use resident that is not in use by this dispatch
            while heap:
                negv, vk = heap[0]
                if resident.get(vk) != -negv:
                    pop(heap)                # stale (evicted, or re-used: protected)
                    continue
                break
            if heap and -heap[0][0] > nu:
                vk = replace(heap, (-nu, k))[1]   # the victim leaves, k enters: one sift
                del resident[vk]
                if admitted is not None and vk in admitted:
                    loads -= 1               # loaded by this very dispatch: it streamed
                    streamed += 1
                    del admitted[vk]
                else:
                    evictions += 1
                resident[k] = nu
                loads += 1
                if admitted is None:
                    admitted = {k: pos}
                else:
                    admitted[k] = pos
            else:
                streamed += 1
        if outcomes is not None:
            oc = [2] * len(ks)
            for pos, k in enumerate(ks):
                if k in pinned_here:
                    oc[pos] = 0
            if new_entries is not None:
                hitset = {k for _, k in new_entries}
                for pos, k in enumerate(ks):
                    if k in hitset:
                        oc[pos] = 0
            if admitted is not None:
                for k, pos in admitted.items():
                    oc[pos] = 1
            outcomes[d] = oc
        if new_entries is not None:
            for e in new_entries:
                push(heap, e)
            if len(heap) > limit:            # keep the lazy heap small
                heap = [(-v, k) for k, v in resident.items()]
                heapq.heapify(heap)
    per_layer: dict[int, list[int]] = {}
    if num_experts:
        for ks in requests:            # a dispatch's keys all belong to one layer
            if not ks:
                continue
            n = len(ks)
            l = ks[0] // num_experts
            pl = per_layer.get(l)
            if pl is None:
                per_layer[l] = [n, n]
            else:
                pl[0] += n
                pl[1] += n
        for k in missed_keys:
            per_layer[k // num_experts][1] -= 1
    misses = accesses - hits
    return BeladyResult(accesses, hits, misses, loads, streamed, evictions, per_layer,
                        "shared", capacity)


def _pins_in_layers(pinned: frozenset[int], layers, num_experts: int) -> int:
    """Slots taken by pins in a cache: every pinned key of the ``layers`` it serves (those
    with a key in its requests)."""
    return sum(1 for k in pinned if k // num_experts in layers)


def belady(dispatches: Sequence[Dispatch], num_experts: int, *, capacity: int | None = None,
           capacities: Sequence[int] | None = None, pin: Iterable[int] = (),
           num_layers: int | None = None) -> BeladyResult:
    """The optimum for a shared cache of ``capacity`` slots, or for per-layer caches with
    ``capacities[layer]`` slots each. ``pin``: expert ids pinned in every layer."""
    pin = tuple(pin)
    if capacities is None and capacity is None:
        raise ValueError("give capacity (shared cache) or capacities (per-layer caches)")
    kernel = _kernel()
    if kernel is not None:
        return _belady_compiled(kernel, dispatches, num_experts, capacity, capacities, pin, num_layers)
    reqs, layers = requests_of(dispatches, num_experts)
    if capacities is None:
        nl = num_layers if num_layers is not None else (max(layers) + 1 if layers else 0)
        pinned = frozenset(l * num_experts + e for l in range(nl) for e in pin if e < num_experts)
        r = simulate(reqs, capacity, pinned, num_experts)
        r.structure, r.capacities = "shared", capacity
        return r
    by_layer: dict[int, list[list[int]]] = {}
    for ks, l in zip(reqs, layers):
        by_layer.setdefault(l, []).append(ks)
    total = BeladyResult(structure="per_layer", capacities=list(capacities))
    for l, lr in sorted(by_layer.items()):
        if l >= len(capacities):
            raise ValueError(f"trace has layer {l} but only {len(capacities)} capacities")
        pinned = frozenset(l * num_experts + e for e in pin if e < num_experts)
        r = simulate(lr, capacities[l], pinned, num_experts)
        total.merge(r)
    return total


def _belady_compiled(kernel, dispatches, E, capacity, capacities, pin, num_layers) -> BeladyResult:
    """:func:`belady` in C, on the dispatches' pack (a lazily read trace's columns)."""
    from mpl.sim.tracepack import pack_of

    p = pack_of(dispatches, E)
    offs = array("q", p.offs)
    layers, experts = p.layers, p.experts
    n = len(layers)
    # the layers of the dispatches that name an expert (the iteration in C)
    with_keys = set(compress(layers, map(gt, offs[1:n + 1], offs[:n]))) if n else set()
    top = (max(layers) + 1) if n else 0
    dense = None
    if n and top * E > DENSE_KEYS:    # once for every layer's call
        dense = _Dense(layers, experts)
    if capacities is None:
        nl = num_layers if num_layers is not None else (max(layers) + 1 if len(layers) else 0)
        pinned = frozenset(l * E + e for l in range(nl) for e in pin if e < E)
        pins = _pins_in_layers(pinned, with_keys, E)
        r = _run_kernel(kernel, offs, *_given(layers, experts, dense), E, capacity - pins, pinned,
                        -1, E, None, capacity, dense, top)
        r.structure, r.capacities = "shared", capacity
        return r
    total = BeladyResult(structure="per_layer", capacities=list(capacities))
    for l in sorted(set(layers)):
        if l >= len(capacities):
            raise ValueError(f"trace has layer {l} but only {len(capacities)} capacities")
        pinned = frozenset(l * E + e for e in pin if e < E)
        pins = _pins_in_layers(pinned, with_keys, E)
        total.merge(_run_kernel(kernel, offs, *_given(layers, experts, dense), E,
                                capacities[l] - pins, pinned, l, E, None, capacities[l], dense, top))
    return total


def _given(layers, experts, dense):
    """The layer and expert arrays :func:`_run_kernel` is given (dense ones with ``dense``)."""
    return (layers, experts) if dense is None else (dense.lay, dense.exp)
