"""The Plan: what one dispatch decided. The only thing the mechanism (offload/) and the
replayer (sim/) consume. Plain data, no logic.

Keys are ``(layer, expert)`` where ``layer`` is the MoE-layer ordinal ``0 .. num_layers-1``
(the mechanism maps model layer ids to ordinals). Slots are indices into one global pool of
``runtime.num_slots`` device slots shared by every cache of the runtime (a shared cache or
the per-layer caches), so the mechanism can pre-allocate the pool once.
"""

from __future__ import annotations

from typing import NamedTuple

Key = tuple[int, int]

# Plan.where values other than a slot index
CPU = -1      # compute on the CPU from the host copy
STREAM = -2   # compute on the device from a transient buffer; not admitted
LOWER = -3    # memory tiers: compute on the device from a lower gpu tier's copy (its SERVE step)

# Load.kind
DEMAND = "demand"          # needed now by this dispatch (compute waits for it)
BACKGROUND = "background"  # cpu_fallback / hybrid: computed on the CPU now, loaded for later
PREFETCH = "prefetch"      # proposed by the prefetcher for a later layer


class Load(NamedTuple):
    """One transfer of a Plan. A tuple: the runtime builds plain ``(key, slot, victim,
    kind)`` tuples on the hot path and :attr:`Plan.loads` presents them as ``Load``."""
    key: Key
    slot: int
    victim: Key | None      # the key that occupied ``slot`` and leaves the device, if any
    kind: str               # DEMAND | BACKGROUND | PREFETCH


_as_load = Load._make

# Step.op (memory tiers: docs/runtime.md "Memory tiers")
READ = "read"          # disk -> the host tier above it (a disk read)
PROMOTE = "promote"    # a lower tier -> a gpu tier above it
DEMOTE = "demote"      # a tier -> the tier below it, copied (converted to its precision)
REQUANT = "requant"    # a gpu tier -> the gpu tier below it, quantized where it is (no transfer)
SERVE = "serve"        # computed on the device from a lower gpu tier's copy (where: LOWER)
LEAVE = "leave"        # a key left a gpu tier below the top with nothing moved (a dtype
                       # ladder's further victims: the last tier holds them): ``slot`` the
                       # slot it vacated, ``source`` and ``target`` that tier


class Step(NamedTuple):
    """One move of a key between memory tiers (a tiered policy's Plan only). ``source`` and
    ``target`` are tier indices in the key's set of tiers (0: the top tier); ``slot`` the slot
    it takes in the target (-1: a transient buffer); ``victim`` the key that left that slot
    (a DEMOTE or REQUANT step of it follows when it moves further down); ``dtype`` the
    precision it is held at in the target (None: the checkpoint's own); ``kind`` DEMAND,
    BACKGROUND or PREFETCH for a transfer the timeline plays, None for the others."""
    op: str
    key: tuple
    source: int
    target: int
    slot: int
    victim: tuple | None
    dtype: str | None
    kind: str | None


class Plan:
    """What one dispatch decided.

    * ``step``, ``layer``; ``experts``: distinct experts of the dispatch, in router order;
    * ``where``: per expert, its slot (>= 0), ``CPU`` or ``STREAM``;
    * ``hit``: per expert, resident when the dispatch started;
    * ``loads``: transfers to issue, in order (:class:`Load`); ``raw_loads`` is the same
      list as the runtime built it (``(key, slot, victim, kind)`` tuples, indexable like a
      Load): the mechanism and the timeline read it without building Load objects;
    * ``evicted``: every ``(key, slot)`` that left the device during this dispatch, in order:
      victims of loads, trigger evictions, capacity cuts by adapt/rebalance. A load's victim
      appears here too. Demotions inside a segmented cache move no data and do not appear.
    * ``steps``: memory tiers only (``[]`` for every other policy): the moves between tiers
      (:class:`Step`) beside the loads into the top tier, in the order they were made. With
      tiers, ``loads`` and ``evicted`` are the top tier's (``evicted``: what left its slots,
      wherever it went), and ``where`` may be ``LOWER``; with ``granularity_split = N > 1``
      keys are parts ``(layer, expert, part)`` and ``where[i]`` is a tuple of the parts'
      places (or ``CPU``). docs/runtime.md, "Memory tiers".
    """

    __slots__ = ("step", "layer", "experts", "where", "hit", "raw_loads", "evicted", "steps",
                 "_typed")

    def __init__(self, step: int, layer: int, experts: list, where: list, hit: list,
                 loads: list | None = None, evicted: list | None = None,
                 steps: list | None = None):
        self.step = step
        self.layer = layer
        self.experts = experts
        self.where = where
        self.hit = hit
        self.raw_loads = [] if loads is None else loads
        self.evicted = [] if evicted is None else evicted
        self.steps = [] if steps is None else steps
        self._typed = False

    @property
    def loads(self) -> list:
        """The transfers as :class:`Load` (built from ``raw_loads`` on first use)."""
        if not self._typed:
            self.raw_loads = [x if type(x) is Load else _as_load(x) for x in self.raw_loads]
            self._typed = True
        return self.raw_loads

    @loads.setter
    def loads(self, value: list) -> None:
        self.raw_loads = value
        self._typed = False

    def slot_of(self, expert: int) -> int:
        return self.where[self.experts.index(expert)]

    def _fields(self) -> tuple:
        return (self.step, self.layer, self.experts, self.where, self.hit, self.raw_loads,
                self.evicted, self.steps)

    def __eq__(self, other) -> bool:
        if type(other) is not Plan:
            return NotImplemented
        return self._fields() == other._fields()     # a Load equals its plain tuple

    __hash__ = None   # mutable

    def __repr__(self) -> str:
        return (f"Plan(step={self.step!r}, layer={self.layer!r}, experts={self.experts!r}, "
                f"where={self.where!r}, hit={self.hit!r}, loads={self.loads!r}, "
                f"evicted={self.evicted!r}" + (f", steps={self.steps!r}" if self.steps else "") + ")")
