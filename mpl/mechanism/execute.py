"""Carrying out a Plan on the slot pool: the part every engine adapter does the same way.

* :func:`transfers` — the Plan's evictions (bookkeeping), then its loads (copies from the
  host store into the pool), in the Plan's order, demand loads on the demand stream and
  background / prefetch loads on the prefetch stream (``SlotPool.copy_in``);
* :func:`placements` — the Plan's placement of each expert of the dispatch: a pool entry
  (checked to hold that expert: the runtime and the mechanism must agree), STREAM (through
  a transient entry) or CPU;
* :func:`passes` — the kernel calls a dispatch needs when its streamed experts outnumber
  the transient entries: contiguous ranges of expert ids, so that an engine that
  accumulates expert by expert in id order (transformers' eager loop) gets the same
  arithmetic in passes as in one call;
* :func:`row_groups` — the kernel calls instead for an engine whose kernel sums each row's
  top-k outputs inside and computes a row the same whatever other rows it is given (vLLM's
  CPU kernel): groups of rows, each with all its experts in place at once, so every row is
  computed exactly as in one call.

What an engine does between these (which kernel, how ids reach it, where CPU-placed experts
are computed) is the adapter's: ``mpl.mechanism.live.LiveExecutor`` (a kernel over the
whole pool with remapped ids: vLLM) and ``mpl.offload.engine.Engine`` (transformers'
experts functions, with home placement and its fast paths). docs/internals.md, "Mechanism".
"""

from __future__ import annotations

from heapq import heappop, heappush

from mpl.runtime.plan import CPU, LOWER, STREAM

from .pool import DEMAND


class LiveError(RuntimeError):
    """The runtime and the mechanism disagree, or a dispatch cannot be executed."""


def disagree(layer: int, expert: int, entry: int, held) -> LiveError:
    return LiveError(
        f"the plan places expert {expert} of MoE layer {layer} in slot {entry}, but the slot "
        f"holds {held}: the runtime and the mechanism disagree")


def transfers(pool, plan, hosts, *, home: int = 0, resident: list | None = None) -> float:
    """Issue ``plan``'s evictions (bookkeeping: the entry's content leaves) and then its
    loads (copies from ``hosts[layer]``, the layer's tensors in the host store, into the
    pool), each in the Plan's order. ``home``: 0, the Plan's slot numbers index the pool;
    E (experts per layer), home placement: key ``(layer, e)`` goes to entry ``layer * E +
    e`` whatever slot the Plan names. ``resident``: per MoE layer, how many of its keys the
    pool holds, kept up to date (None: not kept). Returns the host milliseconds demand loads
    blocked (a device without queues) plus the CUDA stalls measured since the last call."""
    stall = pool.collect_stalls() if pool.cuda else 0.0
    content = pool.content
    for key, slot in plan.evicted:
        i = key[0] * home + key[1] if home else slot
        if resident is not None:
            held = content[i]
            if held is not None:
                resident[held[0]] -= 1
        pool.evict(i)
    for lkey, slot, _victim, kind in plan.raw_loads:     # Load fields, as plain tuples
        i = lkey[0] * home + lkey[1] if home else slot
        if resident is not None:
            held = content[i]
            if held is not None:
                resident[held[0]] -= 1
            resident[lkey[0]] += 1
        ms = pool.copy_in(i, hosts[lkey[0]], lkey[1], lkey, kind)
        if kind == DEMAND:
            stall += ms
    return stall


def placements(plan, content, layer: int, base: int = -1, *, lower: bool = False):
    """``(resident, streamed, cpu)`` of a dispatch of MoE layer ``layer``: ``(expert,
    entry)`` pairs computed from the pool (every entry checked to hold its expert: else
    :class:`LiveError`), the experts streamed through transient entries, the experts
    computed on the CPU; each in the Plan's (router) order. ``base >= 0``: home placement,
    expert ``e`` is in entry ``base + e``. ``lower``: the caller computes experts the Plan
    places in a lower gpu tier (``LOWER``) through transient entries too (their copy into
    the entry reads that tier), and experts the Plan places as parts (a tuple: the
    tiers' gather puts them together there): they are among the streamed ones; else such a
    placement is a :class:`LiveError`."""
    resident: list[tuple[int, int]] = []
    streamed: list[int] = []
    cpu: list[int] = []
    keep = resident.append
    for e, w in zip(plan.experts, plan.where):
        if type(w) is tuple:       # parts (granularity_split): put together in a transient entry
            if not lower:
                raise LiveError(f"the plan places expert {e} as parts {w}, which this engine "
                                f"does not compute from")
            streamed.append(e)
        elif w >= 0:
            if base >= 0:
                w = base + e
            if content[w] != (layer, e):
                raise disagree(layer, e, w, content[w])
            keep((e, w))
        elif w == STREAM:
            streamed.append(e)
        elif w == CPU:
            cpu.append(e)
        elif w == LOWER and lower:
            streamed.append(e)
        else:
            raise LiveError(f"the plan has an unknown placement {w} for expert {e}")
    return resident, streamed, cpu


def passes(resident, streamed, stream_slots: int, *, stage: bool = False) -> list[tuple]:
    """The kernel calls of one dispatch, as ``(resident pairs, streamed experts)`` per call:
    one call when the streamed experts fit the ``stream_slots`` transient entries (the
    common case: the lists as given); else **passes** over contiguous ranges of expert ids,
    ascending, each with at most ``stream_slots`` streamed experts and the resident experts
    of its range, so a computation that accumulates expert by expert in id order across the
    passes adds in the same order as one call would. ``stage``: every device expert of a
    pass takes a transient entry (an engine that first stages them there in id order), so a
    pass holds at most ``stream_slots`` experts in all."""
    need = len(streamed) + (len(resident) if stage else 0)
    if need <= stream_slots:
        return [(resident, streamed)]
    entry = dict(resident)
    moving = set(streamed)
    out = []
    res: list[tuple[int, int]] = []
    grp: list[int] = []
    for e in sorted([*entry, *moving]):
        s = e in moving
        full = (len(res) + len(grp) >= stream_slots) if stage else (s and len(grp) >= stream_slots)
        if full:
            out.append((res, grp))
            res, grp = [], []
        if s:
            grp.append(e)
        else:
            res.append((e, entry[e]))
    out.append((res, grp))
    return out


#: how many of the latest calls a row may join when rows are placed first fit, and how many
#: of the next rows a call chooses among when calls are built one after another
#: (:func:`row_groups`: either way a large step's grouping stays linear in its rows)
ROW_GROUP_WINDOW = 64
ROW_GROUP_LOOKAHEAD = 128


def row_groups(rows, streamed, stream_slots: int) -> list[tuple[list[int], list[int]]] | None:
    """The kernel calls of a dispatch whose ``streamed`` experts outnumber the
    ``stream_slots`` transient entries, for a kernel that adds each row's top-k outputs
    inside (an order passes over experts would change) and computes a row the same whatever
    other rows are in the call: ``(row indices ascending, the streamed experts the rows
    use)`` per call, each call's streamed experts at most ``stream_slots``, every row in
    exactly one call. None when one row alone uses more streamed experts than there are
    entries (top-k above ``stream_slots``): such a dispatch can only run in passes over
    experts.

    Two groupings are made and the one whose calls copy fewer experts into the entries
    (:func:`group_entries`) is kept (ties: the first): rows placed first fit, in order,
    among the last ``ROW_GROUP_WINDOW`` calls (best when the step's streamed experts are
    few against the entries: a row finds a call that has its experts), and calls built one
    after another (best when routing spreads): each starts from the row of the next
    ``ROW_GROUP_LOOKAHEAD`` that shares the most experts with the call before it (whose
    entries still hold them), then takes the row among them that adds the fewest experts,
    while they fit."""
    got = _needs(rows, streamed, stream_slots)
    if got is None:
        return None
    fit = RowGroups(_first_fit(*got, stream_slots), stream_slots)
    least = fit.copies()
    if least == len(got[2]):        # every streamed expert copied once: nothing to gain
        return fit
    built = RowGroups(_built(*got, stream_slots), stream_slots)
    return built if built.copies() < least else fit


class RowGroups(list):
    """:func:`row_groups`' calls, a list of ``(row indices, streamed experts)``, that keeps
    the copies :func:`group_entries` found for them (the choice between groupings counts
    them; the executor then makes them) so they are worked out once."""
    __slots__ = ("slots", "entries")

    def __init__(self, groups, stream_slots: int):
        super().__init__(groups)
        self.slots = stream_slots
        self.entries = _entries(self, stream_slots)

    def copies(self) -> int:
        return sum(map(len, self.entries))


def first_fit_groups(rows, streamed, stream_slots: int) -> list[tuple[list[int], list[int]]] | None:
    """:func:`row_groups`' first grouping alone (rows placed first fit, in order, among the
    last ``ROW_GROUP_WINDOW`` calls): what the other grouping gains is measured against it
    (``benchmarks/bench_row_passes.py``)."""
    got = _needs(rows, streamed, stream_slots)
    return None if got is None else _first_fit(*got, stream_slots)


def _needs(rows, streamed, stream_slots):
    """Each row's streamed experts (in order, once), as a list and as bits of ``bit``
    (expert -> its bit); None when a row's are more than the entries."""
    moving = set(streamed)
    bit: dict[int, int] = {}
    needs, masks = [], []
    for row in rows:
        need = [e for e in dict.fromkeys(row) if e in moving]
        if len(need) > stream_slots:
            return None
        m = 0
        for e in need:
            b = bit.get(e)
            if b is None:
                b = bit[e] = 1 << len(bit)
            m |= b
        needs.append(need)
        masks.append(m)
    return needs, masks, bit


def group_entries(groups, stream_slots: int) -> list[list[tuple[int, int]]]:
    """The copies the calls of ``groups`` (:func:`row_groups`) make into the
    ``stream_slots`` transient entries: per call, ``(expert, entry)`` for each of its
    streamed experts not already in an entry, ``entry`` in ``range(stream_slots)``. An entry
    keeps its expert while there is room; when there is none, the expert held that no
    expert of the call needs and that is needed again furthest ahead (or never) gives way.
    A call's own experts are never given away within it: every call's experts are in
    entries together (``len(need) <= stream_slots``)."""
    if isinstance(groups, RowGroups) and groups.slots == stream_slots:
        return groups.entries
    return _entries(groups, stream_slots)


def _entries(groups, stream_slots: int) -> list[list[tuple[int, int]]]:
    # each use's next call: per call, per expert of its own, the next call that needs that
    # expert (len(groups): none), found in one pass from the end
    end = len(groups)
    after: list[list[int]] = [[]] * end
    coming: dict[int, int] = {}
    for n in range(end - 1, -1, -1):
        need = groups[n][1]
        after[n] = [coming.get(e, end) for e in need]
        for e in need:
            coming[e] = n
    # the experts held in a max-heap on their next use, ties to the one held longest (the
    # first of them in `held`'s order); an entry is stale once its expert is used again or
    # gives way (its next use or its turn held no longer what the heap says)
    held: dict[int, int] = {}
    turn: dict[int, int] = {}
    due: dict[int, int] = {}
    heap: list[tuple[int, int, int]] = []
    free = list(range(stream_slots - 1, -1, -1))
    turns = 0
    out = []
    for n, (_, need) in enumerate(groups):
        want = set(need)
        made = []
        for e in need:
            if e in held:
                continue
            if not free:
                while True:
                    nu, t, h = heappop(heap)
                    # (a call's own expert is pushed again below, with its next use)
                    if h not in want and turn.get(h) == t and due[h] == -nu and h in held:
                        break
                free.append(held.pop(h))
            held[e] = entry = free.pop()
            turn[e] = turns
            turns += 1
            made.append((e, entry))
        for e, nu in zip(need, after[n]):
            due[e] = nu
            heappush(heap, (-nu, turn[e], e))
        out.append(made)
    return out


def _first_fit(needs, masks, bit, slots):
    groups: list[list] = []     # [row indices, experts as bits, how many, experts in order]
    for i, (need, m) in enumerate(zip(needs, masks)):
        for g in groups[-ROW_GROUP_WINDOW:]:
            new = (m & ~g[1]).bit_count()
            if g[2] + new <= slots:
                break
        else:
            g = [[], 0, 0, []]
            groups.append(g)
            new = len(need)
        g[0].append(i)
        if new:
            g[3].extend(e for e in need if not g[1] & bit[e])
            g[1] |= m
            g[2] += new
    return [(g[0], g[3]) for g in groups]


def _built(needs, masks, bit, slots):
    rest = iter(range(len(needs)))
    window: list[int] = []      # the next rows not in a call yet, in order
    wmasks: list[int] = []      # their experts, as bits

    def take(j):
        wmasks.pop(j)
        r = window.pop(j)
        nxt = next(rest, None)
        if nxt is not None:
            window.append(nxt)
            wmasks.append(masks[nxt])
        return r

    for _ in range(ROW_GROUP_LOOKAHEAD):
        nxt = next(rest, None)
        if nxt is None:
            break
        window.append(nxt)
        wmasks.append(masks[nxt])
    out = []
    held = 0
    while window:
        shared = [(m & held).bit_count() for m in wmasks]
        r = take(shared.index(max(shared)))
        have, count, idx, order = masks[r], len(needs[r]), [r], list(needs[r])
        while window:
            # the first of the rows that add the fewest experts, if they fit
            lack = ~have
            new = [(m & lack).bit_count() for m in wmasks]
            cost = min(new)
            if cost > slots - count:
                break
            r = take(new.index(cost))
            if cost:
                order.extend(e for e in needs[r] if not have & bit[e])
                have |= masks[r]
                count += cost
            idx.append(r)
        idx.sort()
        out.append((idx, order))
        held = have
    return out
