"""A CUDA-semantics test double of ``mpl.mechanism.device``'s operations, for the CPU.

``FakeCudaOps`` is what the engine sees on a GPU (``cuda = True``: streams, events,
``non_blocking`` copies, pinned memory, one blocking read per dispatch), but every copy and
compute runs at once on CPU tensors, so the model's outputs stay exact. It subclasses the
real ``CudaOps`` and replaces only the CUDA primitives (streams, events, copies, memory):
what ``CudaOps`` builds from them (``fetch``, ``read_ids``: the reused pinned read buffer)
runs as on a GPU. What it adds is a
log of every call and a model of CUDA's ordering: each stream is a FIFO queue; an event
captures the point of its stream where it was recorded; ``wait`` makes a stream's later work
start after that point; a host synchronisation (``fetch`` waits for the current stream,
``synchronize`` for an event) makes everything up to that point complete before the host
issues anything else. Ordering is tracked with vector clocks: op A *happens before* op B iff
B's clock has seen A's position on A's stream.

The invariant checks at the bottom replay a log and return the violations (empty: holds):

* ``slot_write_while_read``: a copy into a pool slot is ordered after every compute issued
  before it that reads that slot (no write-after-read hazard);
* ``compute_before_copy``: compute reading a slot is ordered after the copy that filled it;
* ``foreign_waits``: the compute stream waits only for the copies of slots its next compute
  reads;
* ``demand_delayed_by_prefetch``: no demand load is queued (same FIFO stream) behind a
  prefetch or background copy into another slot still in flight;
* ``unpinned_async_copies``: every ``non_blocking`` copy has its host side (source of an
  upload, destination of a read) in pinned memory;
* ``host_buffer_reused_in_flight``: a reusable pinned buffer (``host_buffer``: staging, the
  read buffer) is touched by a new copy (and so possibly rewritten by the host just
  before) only after every earlier copy touching the same bytes has completed as the host
  knows it (an event wait or a query that found it complete);
* ``host_record_rewritten_in_flight``: the host writes a host record (a disk tier's read
  into its host cache or bounce buffer, marked by ``Ops.host_write``) only after every
  device copy that read or wrote those bytes has completed as the host knows it;
* ``slot_reused_before_demotion``: a copy into a pool slot is ordered after every earlier
  device-to-host copy (a demotion) reading that slot;
* ``copies_out_of_order``: any two copies touching the same bytes (the later reading what the
  earlier wrote, or writing what it read or wrote) are ordered, whatever pool or area the
  bytes belong to (the part slots, a gpu tier's area, its stash);
* allocations: ``ops.allocations`` / the ``alloc`` entries of the log (no per-step device
  allocation), ``ops.host_allocations`` (no per-step pinned host allocation).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from mpl.mechanism.device import CudaOps, SyncOps


class FakeStream:
    def __init__(self, name: str, priority: int = 0) -> None:
        self.name = name
        self.priority = priority
        self.clock: dict = {}
        self.last_tag = None

    def __repr__(self) -> str:
        return f"<stream {self.name}>"


class FakeEvent:
    def __init__(self, timing: bool = False) -> None:
        self.timing = timing
        self.clock: dict | None = None     # None: never recorded (complete, like CUDA)
        self.stream: FakeStream | None = None
        self.tag = None                    # tag of the last op on its stream when recorded


@dataclass
class Op:
    seq: int
    kind: str                   # copy | compute | record | wait | fetch | sync | alloc
    stream: FakeStream | None
    clock: dict = field(default_factory=dict)
    host: dict = field(default_factory=dict)   # host clock when issued
    tag: object = None
    reads: frozenset = frozenset()
    non_blocking: bool = False
    src_pinned: bool = False
    dst_pinned: bool = False
    buffer: tuple | None = None   # (start, end, buffer start): bytes of a reusable host buffer it touches
    event: FakeEvent | None = None
    src: tuple | None = None      # (start, end): the bytes a copy reads; a host_write, writes
    dst: tuple | None = None      # (start, end): the bytes a copy writes


def _merge(a: dict, b: dict) -> None:
    for k, v in b.items():
        if a.get(k, 0) < v:
            a[k] = v


def happens_before(a: Op, b: Op) -> bool:
    return a.clock.get(a.stream, 0) <= b.clock.get(a.stream, 0)


class FakeCudaOps(CudaOps):
    cuda = True

    def __init__(self, device=torch.device("cpu")) -> None:
        super().__init__(torch.device("cpu"))
        self.host_allocations = 0          # pinned host buffers allocated (host_buffer)
        self._buffers: list[tuple[int, int]] = []     # byte ranges of host_buffer()s
        self.log: list[Op] = []
        self.compute_stream = FakeStream("compute")
        self._current = self.compute_stream
        self.streams = [self.compute_stream]
        self.host_clock: dict = {}
        self.pinned: set[int] = set()
        self.step = 0

    # ---------------------------------------------------------------- helpers
    def _issue(self, kind: str, stream: FakeStream, **info) -> Op:
        _merge(stream.clock, self.host_clock)
        stream.clock[stream] = stream.clock.get(stream, 0) + 1
        op = Op(len(self.log), kind, stream, dict(stream.clock), dict(self.host_clock), **info)
        stream.last_tag = info.get("tag")
        self.log.append(op)
        return op

    def _note(self, kind: str, stream=None, **info) -> Op:
        op = Op(len(self.log), kind, stream, dict(stream.clock) if stream else {},
                dict(self.host_clock), **info)
        self.log.append(op)
        return op

    # ---------------------------------------------------------------- streams and events
    def stream(self, priority: int = 0):
        s = FakeStream(f"copy{len(self.streams)}(p{priority})", priority)
        self.streams.append(s)
        return s

    def current_stream(self):
        return self._current

    @contextlib.contextmanager
    def use(self, stream):
        prev, self._current = self._current, stream
        try:
            yield stream
        finally:
            self._current = prev

    def event(self, timing: bool = False):
        return FakeEvent(timing)

    def record(self, event, stream=None) -> None:
        s = stream if stream is not None else self._current
        _merge(s.clock, self.host_clock)
        event.clock = dict(s.clock)
        event.stream = s
        event.tag = getattr(s, "last_tag", None)
        self._note("record", s, event=event)

    def wait(self, stream, event) -> None:
        if event.clock is not None:
            _merge(stream.clock, event.clock)
        self._note("wait", stream, event=event)

    def query(self, event) -> bool:
        if event.clock is None:
            return True
        return all(self.host_clock.get(k, 0) >= v for k, v in event.clock.items())

    def elapsed_ms(self, start, end) -> float:
        return 0.0

    def synchronize(self, event=None) -> None:
        if event is None:
            for s in self.streams:
                _merge(self.host_clock, s.clock)
        elif event.clock is not None:
            _merge(self.host_clock, event.clock)
        self._note("sync")

    # ---------------------------------------------------------------- memory and copies
    def _ptr(self, t: torch.Tensor) -> int:
        return t.untyped_storage().data_ptr()

    def alloc(self, shape, dtype):
        self.allocations += 1
        self._note("alloc", tag=self.step)
        return torch.zeros(shape, dtype=dtype)

    def host_arena(self, nbytes: int, huge_pages: bool = False):
        t = SyncOps.host_arena(self, nbytes, huge_pages)
        self.pinned.add(self._ptr(t))
        self.arena_bytes = t.numel()
        return t

    def release_arena(self, arena) -> None:
        pass

    def host_buffer(self, numel: int, dtype):
        t = SyncOps.host_buffer(self, numel, dtype)
        self.host_allocations += 1
        self.pinned.add(self._ptr(t))
        start = t.untyped_storage().data_ptr()
        self._buffers.append((start, start + t.untyped_storage().nbytes()))
        return t

    def _buffer_range(self, t):
        """(start, end, the buffer's start): the bytes of a reusable host buffer ``t``
        covers, or None."""
        p = t.data_ptr()
        for start, end in self._buffers:
            if start <= p < end:
                return (p, p + t.numel() * t.element_size(), start)
        return None

    def is_pinned(self, t) -> bool:
        return self._ptr(t) in self.pinned

    def copy(self, dst, src, *, non_blocking=False, tag=None) -> None:
        dst.copy_(src)
        self._issue("copy", self._current, tag=tag, non_blocking=non_blocking,
                    src_pinned=self.is_pinned(src), dst_pinned=self.is_pinned(dst),
                    buffer=self._buffer_range(src) or self._buffer_range(dst),
                    src=_span(src), dst=_span(dst))

    def host_write(self, t, tag=None) -> None:
        self._note("host_write", tag=tag, src=_span(t))

    def compute(self, reads) -> None:
        self._issue("compute", self._current, reads=frozenset(reads))

    def fetch(self, tensors):
        out = super().fetch(tensors)          # CudaOps.fetch: copies, event, wait
        self._note("fetch", self._current)
        return out


def _span(t) -> tuple:
    """The bytes a (possibly strided) tensor covers, first to last."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())


# ---------------------------------------------------------------------------- invariants
def small_pool(ops, slots: int = 4):
    """A SlotPool of ``slots`` entries of one 4 x 4 float tensor on ``ops``, and a pinned host
    store of 8 experts to copy from (the pool tests' fixture)."""
    from mpl.mechanism.pool import SlotPool
    tmpl = {"w": torch.zeros(8, 4, 4)}
    store = ops.host_arena(8 * 4 * 4 * 4).view(torch.float32).view(8, 4, 4)
    return SlotPool(tmpl, slots, 2, torch.device("cpu"), ops), {"w": store}


def _slot(op: Op):
    tag = op.tag
    if op.kind == "copy" and isinstance(tag, tuple) and isinstance(tag[1], int) and tag[0] != "upload":
        return tag[1]
    return None


def slot_write_while_read(log) -> list[str]:
    bad = []
    computes: list[Op] = []
    for op in log:
        if op.kind == "compute":
            computes.append(op)
        s = _slot(op)
        if s is None:
            continue
        for c in computes:
            if s in c.reads and not happens_before(c, op):
                bad.append(f"copy #{op.seq} into slot {s} may overwrite it while compute #{c.seq} reads it")
    return bad


def compute_before_copy(log) -> list[str]:
    bad = []
    last: dict[int, Op] = {}
    for op in log:
        s = _slot(op)
        if s is not None:
            last[s] = op
        elif op.kind == "compute":
            for r in op.reads:
                c = last.get(r)
                if c is not None and not happens_before(c, op):
                    bad.append(f"compute #{op.seq} reads slot {r} before copy #{c.seq} into it is done")
    return bad


def foreign_waits(log, compute_stream) -> list[str]:
    bad = []
    pending: list[Op] = []
    for op in log:
        if op.kind == "wait" and op.stream is compute_stream and op.event.stream is not compute_stream:
            pending.append(op)
        elif op.kind == "compute" and op.stream is compute_stream:
            for w in pending:
                tag = w.event.tag
                slot = tag[1] if isinstance(tag, tuple) else None
                if slot not in op.reads:
                    bad.append(f"compute #{op.seq} waited (#{w.seq}) for a copy of slot {slot}, which it does not read")
            pending = []
    return bad


def demand_delayed_by_prefetch(log) -> list[str]:
    """A demand (or streamed) copy issued while a prefetch/background copy into another slot
    is still in flight on the same FIFO stream is queued behind it."""
    bad = []
    spec: list[Op] = []
    for op in log:
        if op.kind != "copy" or _slot(op) is None:
            continue
        kind = op.tag[0]
        if kind in ("prefetch", "background"):
            spec.append(op)
        elif kind in ("demand", "stream"):
            for p in spec:
                done = p.clock.get(p.stream, 0) <= op.host.get(p.stream, 0)
                if not done and p.stream is op.stream and _slot(p) != _slot(op):
                    bad.append(f"demand copy #{op.seq} (slot {_slot(op)}) queued behind {p.tag[0]} "
                               f"copy #{p.seq} (slot {_slot(p)}) on {op.stream}")
    return bad


def unpinned_async_copies(log) -> list[str]:
    return [f"non_blocking copy #{op.seq} ({op.tag}) from/to pageable memory"
            for op in log if op.kind == "copy" and op.non_blocking
            and not (op.src_pinned or op.dst_pinned)]


def host_buffer_reused_in_flight(log) -> list[str]:
    bad = []
    touched: list[Op] = []
    for op in log:
        if op.kind != "copy" or op.buffer is None:
            continue
        a, z, _ = op.buffer
        for prev in touched:
            pa, pz, _ = prev.buffer
            done = prev.clock.get(prev.stream, 0) <= op.host.get(prev.stream, 0)
            if pa < z and a < pz and not done:
                bad.append(f"copy #{op.seq} ({op.tag}) reuses host buffer bytes that copy "
                           f"#{prev.seq} ({prev.tag}) may still be reading or writing")
        touched = [p for p in touched if p.clock.get(p.stream, 0) > op.host.get(p.stream, 0)]
        touched.append(op)
    return bad


def host_record_rewritten_in_flight(log) -> list[str]:
    """A host write (``host_write``) into bytes an earlier device copy read or wrote, before
    that copy completed as the host knows it."""
    bad = []
    copies: list[Op] = []
    for op in log:
        if op.kind == "copy":
            copies.append(op)
        elif op.kind == "host_write":
            a, z = op.src
            for c in copies:
                done = c.clock.get(c.stream, 0) <= op.host.get(c.stream, 0)
                if done:
                    continue
                for r in (c.src, c.dst):
                    if r is not None and r[0] < z and a < r[1]:
                        bad.append(f"host write #{op.seq} ({op.tag}) rewrites bytes copy #{c.seq} "
                                   f"({c.tag}) may still be using")
                        break
    return bad


def slot_reused_before_demotion(log) -> list[str]:
    """A copy into a pool slot not ordered after an earlier demotion (device-to-host copy)
    reading the same bytes."""
    bad = []
    demotions: list[Op] = []
    for op in log:
        if op.kind != "copy":
            continue
        if isinstance(op.tag, tuple) and op.tag[0] == "demote":
            demotions.append(op)
            continue
        if _slot(op) is None or op.dst is None:
            continue
        a, z = op.dst
        for d in demotions:
            if d.src[0] < z and a < d.src[1] and not happens_before(d, op):
                bad.append(f"copy #{op.seq} into slot {_slot(op)} may overwrite it while "
                           f"demotion #{d.seq} reads it")
    return bad


def copies_out_of_order(log) -> list[str]:
    """Two copies touching the same bytes, the later reading what the earlier wrote or
    writing what it read or wrote, not ordered one after the other."""
    bad = []
    seen = []
    for op in log:
        if op.kind != "copy" or op.dst is None or op.src is None:
            continue
        for a in seen:
            clash = any(x[0] < y[1] and y[0] < x[1]
                        for x, y in ((a.dst, op.src), (a.src, op.dst), (a.dst, op.dst)))
            if clash and not happens_before(a, op):
                bad.append(f"copy #{op.seq} ({op.tag}) not ordered after copy #{a.seq} ({a.tag})")
        seen.append(op)
    return bad


#: the ordering rules every live path keeps (the others are passed by the tests they apply to)
COMMON_CHECKS = (slot_write_while_read, compute_before_copy, unpinned_async_copies)


def ordering_violations(ops: FakeCudaOps, *checks) -> dict:
    """``{check name: its findings}`` for every check of :data:`COMMON_CHECKS`,
    ``foreign_waits`` and ``checks`` that found something in ``ops.log`` (empty: the run kept
    those rules)."""
    found = {f.__name__: f(ops.log) for f in (*COMMON_CHECKS, *checks)}
    found["foreign_waits"] = foreign_waits(ops.log, ops.compute_stream)
    return {name: v for name, v in found.items() if v}


def generate_on_double(policy, model, gen, **attach):
    """``gen(model)`` with ``policy`` attached on a fresh :class:`FakeCudaOps` (``attach``:
    more arguments of attach): (its output, the handle's statistics, the ops), detached
    whatever happens."""
    ops = FakeCudaOps()
    h = policy.attach(model, ops=ops, **attach)
    try:
        out = gen(model)
        stats = h.get_stats()
    finally:
        h.detach()
    return out, stats, ops
