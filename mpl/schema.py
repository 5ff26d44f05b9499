"""The one table: every block, parameter, type, default, range, unit, enum value and doc.

Everything else (checker, lowering, formatter order, hover, completion, docs, codegen)
reads this module. Adding a parameter is one entry in ``BLOCKS``.

Conventions
-----------
* ``Param.key`` is ``"block.name"``; it is also the key used in the IR.
* ``default`` is a plain value, or one of the sentinels ``REQUIRED`` (must be given),
  ``OFF`` (the feature is disabled unless given; lowers to ``None``) or ``DERIVED``
  (computed at lowering / runtime time; ``default_doc`` says how; lowers to ``None``).
* Ranges: ``min``/``max`` with ``min_open``/``max_open`` for exclusive bounds.
  ``max_ref``/``min_ref`` name another parameter (``"cache.memory_threshold"``) whose
  effective value bounds this one, ``count_max_ref`` one that bounds a list's length. They
  make up :data:`RELATIONS`, which drive the cross-field checks (each relation is reported
  by one rule of :mod:`mpl.rules`) as well as the docs and hover.
* ``units``: units accepted after a number; ``unit`` is the implied unit of a bare number.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):  # keep identity through pickling (parallel tuner)
        return (_sentinel, (self.name,))


def _sentinel(name: str) -> "_Sentinel":
    return {"REQUIRED": REQUIRED, "OFF": OFF, "DERIVED": DERIVED}[name]


REQUIRED = _Sentinel("REQUIRED")
OFF = _Sentinel("OFF")
DERIVED = _Sentinel("DERIVED")


# ---------------------------------------------------------------- value types
# The type names the checker understands.
INT = "int"            # integer
NUMBER = "number"      # int or float
BOOL = "bool"
ENUM = "enum"          # a NAME among Param.enum
INT_LIST = "int_list"  # [1, 2, 3]
METRIC_LIST = "metric_list"  # [hit_rate, miss_rate]
SLOTS_OR_SIZE = "slots_or_size"  # int slots, or a number with a size unit
COUNT = "count"        # int with an optional count unit (accesses, steps, ...)
STRING = "string"      # "..." (a path)
ENUM_LIST = "enum_list"  # [fp16, int8]: a list of Param.enum names
LOCATION = "location"  # gpu, gpu:N, cpu, disk (Param.enum names; gpu takes a device index)
LAYER_RANGE = "layer_range"  # a..b (inclusive) or one layer N

TYPE_DOCS: Mapping[str, str] = MappingProxyType({
    INT: "integer",
    NUMBER: "number",
    BOOL: "true or false",
    ENUM: "one of the listed names",
    INT_LIST: "list of integers",
    METRIC_LIST: "list of metric names",
    SLOTS_OR_SIZE: "integer (slots) or size (GB, GiB, MB, MiB)",
    COUNT: "integer count",
    STRING: "string",
    ENUM_LIST: "list of the listed names",
    LOCATION: "gpu, gpu:N (a device index), cpu or disk",
    LAYER_RANGE: "layer range a..b (both included), or one layer",
})


@dataclass(frozen=True)
class Unit:
    name: str
    kind: str       # "size" | "time" | "count"
    factor: float   # to the kind's base: bytes, milliseconds, or 1 for counts
    doc: str


UNITS: Mapping[str, Unit] = MappingProxyType({u.name: u for u in (
    Unit("accesses", "count", 1, "expert accesses: one per distinct (layer, expert) a dispatch needs"),
    Unit("steps", "count", 1, "forward passes of the model (one decoded token at batch 1)"),
    Unit("tokens", "count", 1, "tokens processed"),
    Unit("GB", "size", 1e9, "gigabytes (10^9 bytes)"),
    Unit("GiB", "size", 2.0 ** 30, "gibibytes (2^30 bytes)"),
    Unit("MB", "size", 1e6, "megabytes (10^6 bytes)"),
    Unit("MiB", "size", 2.0 ** 20, "mebibytes (2^20 bytes)"),
    Unit("ms", "time", 1.0, "milliseconds"),
    Unit("us", "time", 1e-3, "microseconds"),
)})

SIZE_UNITS = tuple(n for n, u in UNITS.items() if u.kind == "size")
TIME_UNITS = tuple(n for n, u in UNITS.items() if u.kind == "time")

#: The largest memory size memory_budget_gb takes, in GB: 100 TB, more than the memory of
#: any device or host (the largest hosts have tens of TB).
SIZE_MAX_GB = 100_000
#: The largest count an interval, TTL or adapt-rule duration takes: 10^9 accesses is days of
#: decoding (at 10,000 accesses/s, 28 hours); a longer interval never comes round in a run.
INTERVAL_MAX = 1_000_000_000
#: The largest window (held in memory, one entry per access or per dispatch of a layer).
ACCESS_WINDOW_MAX = 1_000_000
DISPATCH_WINDOW_MAX = 100_000
#: The most slots a runtime's slot pool holds (per_layer.total_budget; the runtime refuses a
#: policy whose layers x capacity asks for more for a model's shape): 4,194,304 slots are 64
#: layers of 65,536, far beyond any device's memory even for the smallest experts.
SLOT_POOL_MAX = 1 << 22
#: The largest expert id a pin names: a model has at most 65,536 experts per layer.
EXPERT_ID_MAX = 65535


@dataclass(frozen=True)
class EnumValue:
    name: str
    doc: str
    replay_only: bool = False   # e.g. belady: allowed in replay, refused at attach
    segment: bool = False       # can be one side of a segmented pair `a | b` (eviction)
    clocked: bool = False       # its store needs begin(step, layer) before a dispatch (eviction)
    grid: bool = False          # in the tuner's reference grid (`mplc tune --search grid`)


@dataclass(frozen=True)
class Param:
    block: str
    name: str
    type: str
    default: Any
    doc: str
    default_doc: str = ""             # how a DERIVED / OFF default is obtained
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    min_ref: str | None = None        # another param bounding this one from below
    max_ref: str | None = None        # ... from above
    count_max_ref: str | None = None  # another param bounding this list's length
    units: tuple[str, ...] = ()       # units accepted after a number
    unit: str | None = None           # implied unit of a bare number (doc only)
    enum: tuple[EnumValue, ...] = ()
    fallback: bool = False            # accepts "a | b" (segmented eviction)
    conditional: bool = False         # accepts "a : b when cond" and adapt actions
    aliases: tuple[str, ...] = ()     # alternative adapt-action names of the original
    # An adapt action on this (non-adaptable) parameter is accepted, as the original accepts
    # it, but cannot change anything while the policy runs: this says why (warning MPL408).
    adapt_no_effect: str = ""
    # The parameter only has an effect when another parameter has one of these values
    # (("cache.eviction", ("lfu", ...))); SET means "when that parameter is given / not off".
    # Drives the "no effect under this configuration" warning.
    only_with: tuple[str, tuple[str, ...]] | None = None
    # Another parameter that, when given, decides what this one would: this one is then not
    # required, and given as well it has no effect (warning MPL409, naming the winner).
    replaced_by: str | None = None
    # Accepts `weighted_sum(a = w, b = w, ...)` over the single-queue rules of its enum
    # (an eviction of a memory hierarchy).
    weighted: bool = False
    # A parameter that may be given instead of this REQUIRED one (cache.capacity_factor for
    # cache.capacity): either is enough, both are an error.
    instead: str | None = None
    # Values besides the default that the tuner's search tries for this parameter (mplc
    # tune; for the eviction rules of only_with): a spread over the range, each inside it.
    tune: tuple = ()

    @property
    def key(self) -> str:
        return f"{self.block}.{self.name}"

    @property
    def adaptable(self) -> bool:
        return self.conditional

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def enum_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.enum)

    def enum_value(self, name: str) -> EnumValue | None:
        for e in self.enum:
            if e.name == name:
                return e
        return None

    def range_text(self) -> str:
        """Human text of the allowed range, e.g. ``(0, 1]`` or ``>= 1``."""
        lo, hi = self.min, self.max
        if self.enum:
            return ", ".join(self.enum_names())
        if lo is None and hi is None:
            return "" if not self.max_ref else f"<= {self.max_ref}"
        fmt = _fmt_num
        if lo is not None and hi is not None:
            left = "(" if self.min_open else "["
            right = ")" if self.max_open else "]"
            return f"{left}{fmt(lo)}, {fmt(hi)}{right}"
        if lo is not None:
            return f"{'>' if self.min_open else '>='} {fmt(lo)}"
        return f"{'<' if self.max_open else '<='} {fmt(hi)}"

    def default_text(self) -> str:
        if self.default is REQUIRED:
            return "required"
        if self.default is OFF:
            return "off" + (f" ({self.default_doc})" if self.default_doc else "")
        if self.default is DERIVED:
            return self.default_doc or "derived"
        return format_value(self.default)


@dataclass(frozen=True)
class Block:
    name: str
    doc: str
    params: tuple[Param, ...] = ()
    rules: bool = False               # holds `when ... { ... }` rules (adapt)
    required: bool = False
    dependency: str | None = None     # a block this one only makes sense with
    # Nested items (sections) it holds, by kind (`tier`, `on`, `band`, `pin`): see SECTIONS.
    sections: tuple[str, ...] = ()
    # Where the formatter writes them: first (the tiers of a hierarchy are what it is), or
    # after the parameters (the cache's per-layer pins add to the cache its parameters make).
    sections_first: bool = True
    # False for the blocks of memory tiers: their parameters describe tiers, not one value of
    # the policy, so they are not in PARAMS (nor in an IR's values): see NESTED_PARAMS.
    flat: bool = True
    # The required block this one stands in for (a memory hierarchy instead of the cache).
    instead_of: str | None = None
    # Blocks a policy with this one must not have.
    excludes: tuple[str, ...] = ()

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


@dataclass(frozen=True)
class Metric:
    name: str
    doc: str
    min: float = 0.0
    max: float | None = 1.0          # None: unbounded above
    unit: str = ""


def _fmt_num(x: float) -> str:
    if float(x).is_integer():
        return str(int(x))
    return repr(float(x))


def format_value(v: Any) -> str:
    """Render a Python value the way it is written in a .moe file."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None or v is OFF:
        return "off"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    if isinstance(v, float):
        return _fmt_num(v)
    return str(v)


SET = "<set>"  # marker inside Param.only_with: "when that parameter is given"


# ---------------------------------------------------------------- the table
_EVICTION = (
    EnumValue("lru", "least recently used: evict the key accessed longest ago (a prefetch arrival counts as an access)", segment=True, grid=True),
    EnumValue("lfu", "least frequently used: +1 per access, frequencies decayed by frequency_decay every decay_interval accesses; ties go to the least recent", segment=True, grid=True),
    EnumValue("score", "lowest exponential moving average of the router weight (score_ema_alpha)", segment=True, grid=True),
    EnumValue("frequency_threshold", "admit a missed key only if its share of its layer's last freq_window accesses is >= freq_threshold; evict the lowest share", segment=True, grid=True),
    EnumValue("fallback", "segmented cache, the same as `lfu | lru`: lfu manages 2/3 of the slots and demotes its victims into an lru segment", grid=True),
    EnumValue("arc", "Adaptive Replacement Cache (Megiddo & Modha, 2003): balances recency and frequency with ghost lists", grid=True),
    EnumValue("s3fifo", "S3-FIFO (Yang et al., 2023): small probationary FIFO, main FIFO with reinsertion, ghost queue", grid=True),
    EnumValue("lfru", "Least Frequently Recently Used: a privileged LRU partition over an unprivileged LFU partition", grid=True),
    EnumValue("least_stale", "SpecMD's Least-Stale (Hoang et al., 2026; a reconstruction): evict the keys not touched in the current step first, oldest first, then the current step's in the order they entered it", clocked=True),
    EnumValue("crf", "llama.cpp's expert cache: evict the lowest CRF, a use count decayed with a half-life of crf_half_life steps and kept across evictions", clocked=True),
    EnumValue("classlru", "llama.cpp's ClassLRU: a key's class is floor(log2 CRF) (at most 7) at its last use; among keys not used this step evict the largest age / 2^class", clocked=True),
    EnumValue("vllm_lfru", "vLLM's expert-cache LFRU: evict the lowest uses / (accesses since the last use + 1), counted per cache"),
    EnumValue("farthest_layer", "layer-aware for shared caches: evict a key of the layer the forward pass reaches last from here (least recent within it); per-layer: lru", clocked=True),
    EnumValue("belady", "the offline optimum (evict the key used farthest in the future); trace replay only", replay_only=True),
)

_CACHE = Block("cache", "Which experts stay resident on the GPU: the expert cache, its size and eviction rule.", required=True, sections=("pin",), sections_first=False, params=(
    Param("cache", "capacity", SLOTS_OR_SIZE, REQUIRED,
          "Number of expert slots on the device. Without per_layer one shared cache of this many slots holds keys of every layer; with per_layer it is every layer's capacity (a size: per layer), and the total is layers x capacity, unless per_layer.total_budget is given: the total then decides every layer's capacity, and capacity is neither needed nor used (MPL409). A size (e.g. 12GiB) means as many experts as fit once the expert size is known. At most 65,536 slots (SPEC); a size gives at most every expert of the model (the slot pool stops there). capacity_factor may give the size instead.",
          min=1, max=65536, units=SIZE_UNITS, unit="slots", conditional=True,
          replaced_by="per_layer.total_budget", instead="cache.capacity_factor"),
    Param("cache", "capacity_factor", NUMBER, OFF,
          "The cache's size as a fraction of the experts it can hold, instead of capacity: the model's every MoE layer's experts for the shared cache, one layer's experts with per_layer (0.25: a quarter of them, rounded up to whole slots). The slots follow from the model's shape, known once the policy is attached or replayed (or with mplc check --model).",
          default_doc="capacity gives the size", min=0, max=1, min_open=True),
    Param("cache", "eviction", ENUM, "lru",
          "Which resident expert to evict when a slot is needed. `a | b` builds a segmented cache.",
          enum=_EVICTION, fallback=True, conditional=True),
    Param("cache", "pin", INT_LIST, (),
          "Expert ids pinned in every MoE layer: they occupy slots and are never evicted. Ids are 0..65535: a model has at most 65,536 experts per layer. Experts pinned in some layers only: `pin layers = FIRST..LAST { experts = [...] }` items beside it (pinned there in addition to these).",
          min=0, max=EXPERT_ID_MAX, count_max_ref="cache.capacity"),
    Param("cache", "frequency_decay", NUMBER, 0.95,
          "LFU: multiply every frequency by this factor every decay_interval accesses.",
          min=0, max=1, min_open=True, conditional=True, aliases=("lfu_decay",),
          only_with=("cache.eviction", ("lfu", "fallback", "lfru")), tune=(0.5, 0.8, 1.0)),
    Param("cache", "decay_interval", COUNT, 100,
          "LFU: accesses between two decays. At most 10^9: an interval is a counter, and a longer one never comes round in a run (10^9 accesses is over a day of decoding).", min=1, max=INTERVAL_MAX, units=("accesses",), unit="accesses", conditional=True,
          only_with=("cache.eviction", ("lfu", "fallback", "lfru"))),
    Param("cache", "freq_threshold", NUMBER, 0.05,
          "frequency_threshold: minimum share of the layer's recent accesses for admission.",
          min=0, max=1, conditional=True,
          only_with=("cache.eviction", ("frequency_threshold",)), tune=(0.01, 0.1, 0.2)),
    Param("cache", "freq_window", COUNT, 100,
          "frequency_threshold: number of recent accesses of a layer the share is measured over. At most 10^6: the window is held in memory, one entry per access.",
          min=1, max=ACCESS_WINDOW_MAX, units=("accesses",), unit="accesses", conditional=True,
          only_with=("cache.eviction", ("frequency_threshold",))),
    Param("cache", "score_ema_alpha", NUMBER, 0.3,
          "score: weight of the newest router weight in the moving average s = a*w + (1-a)*s.",
          min=0, max=1, min_open=True, conditional=True,
          only_with=("cache.eviction", ("score",))),
    Param("cache", "memory_threshold", NUMBER, OFF,
          "Memory-pressure trigger: when resident bytes / memory_budget_gb reaches this fraction, evict down to memory_headroom.",
          default_doc="no memory-pressure trigger", min=0, max=1, min_open=True, conditional=True),
    Param("cache", "memory_headroom", NUMBER, 0.7,
          "Memory-pressure trigger: the fraction of the budget to evict down to. At most memory_threshold, and so at most 1.",
          min=0, min_open=True, max=1, max_ref="cache.memory_threshold", conditional=True,
          only_with=("cache.memory_threshold", (SET,))),
    Param("cache", "memory_budget_gb", NUMBER, 16,
          "Device memory (GB) the memory-pressure trigger measures resident expert bytes against. At most 100,000 GB: more memory than any device or host has.",
          min=0, min_open=True, max=SIZE_MAX_GB, units=SIZE_UNITS, unit="GB", conditional=True,
          only_with=("cache.memory_threshold", (SET,))),
    Param("cache", "expert_size_gb", NUMBER, DERIVED,
          "Bytes of one expert's weights, in GB. A live run uses the attached model's own size; a replay uses this value when set, else the trace header's. At least 1e-9 GB (one byte) and at most 1,000 GB: one expert larger than that fits no device's memory.",
          default_doc="from the model, else 1.2", min=1e-9, max=1000, units=SIZE_UNITS, unit="GB",
          adapt_no_effect="the size of an expert's weights is fixed when the runtime starts (the "
                          "model's, or the policy's or trace header's in a replay), not something a "
                          "running policy can change"),
    Param("cache", "crf_half_life", COUNT, 128,
          "crf, classlru: steps after which an unused key's CRF (decayed use count) has halved. At most 10^9: a key unused for longer than a run lasts has faded anyway.",
          min=1, max=INTERVAL_MAX, units=("steps",), unit="steps", conditional=True,
          only_with=("cache.eviction", ("crf", "classlru")), tune=(8, 32, 512)),
    Param("cache", "ttl", COUNT, OFF,
          "TTL trigger: evict a resident key not accessed in the last ttl accesses (or steps, with the `steps` unit). At most 10^9: a key unused for longer than a run lasts never expires anyway.",
          default_doc="no TTL trigger", min=1, max=INTERVAL_MAX, units=("accesses", "steps"), unit="accesses", conditional=True),
))

_PREFETCH = Block("prefetch", "Which experts to load before the router asks for them.", params=(
    Param("prefetch", "strategy", ENUM, "none",
          "How to predict the experts of the next layers.",
          enum=(
              EnumValue("none", "no prefetching"),
              EnumValue("history", "the experts most often selected at the target layer in the last history_window steps", grid=True),
              EnumValue("affinity", "a transition table P(e' at L+1 | e at L) learned online; keeps predictions >= affinity_threshold", grid=True),
              EnumValue("lookahead", "apply the next layers' routers to the current hidden state (live) or use the trace's speculative predictions (replay); history as fallback", grid=True),
              EnumValue("learned", "an online logistic model over several earlier layers' experts (weighted by router weight), the target layer's last step and recent frequency, and any speculative predictions; keeps predictions >= confidence"),
          ), conditional=True, aliases=("prefetch_strategy",)),
    Param("prefetch", "budget", INT, 4,
          "Most keys proposed after each dispatch. At most 65,536 (and the cache's capacity): no cache holds more.",
          min=1, max=65536, max_ref="cache.capacity", conditional=True, aliases=("prefetch_budget",),
          only_with=("prefetch.strategy", ("history", "affinity", "lookahead", "learned"))),
    Param("prefetch", "lookahead", INT, 1,
          "How many layers ahead to prefetch (L+1 .. L+lookahead, wrapping into the next step). At most 128: more than the MoE layers of today's largest models (94), and the runtime stops at the model's layers anyway.",
          min=1, max=128, unit="layers", conditional=True,
          only_with=("prefetch.strategy", ("affinity", "lookahead", "learned"))),
    Param("prefetch", "affinity_threshold", NUMBER, 0.3,
          "affinity: minimum transition probability for a proposal.",
          min=0, max=1, conditional=True,
          only_with=("prefetch.strategy", ("affinity",))),
    Param("prefetch", "history_window", COUNT, 50,
          "history: number of recent steps counted. At most 100,000: the window is held in memory, one row per dispatch of each layer, and 100,000 steps already measure a long-run frequency.",
          min=1, max=DISPATCH_WINDOW_MAX, units=("steps",), unit="steps", conditional=True,
          only_with=("prefetch.strategy", ("history", "lookahead", "learned"))),
    Param("prefetch", "confidence", NUMBER, 0.5,
          "learned: minimum predicted probability of use for a proposal.",
          min=0, max=1, conditional=True,
          only_with=("prefetch.strategy", ("learned",))),
    Param("prefetch", "context_layers", INT, 2,
          "learned: how many earlier layers' experts a prediction reads. At most 8: each "
          "context layer is one weight of the model, and layers further back predict no "
          "better than the recent steps of the same layer.",
          min=1, max=8, unit="layers",
          adapt_no_effect="the learned predictor's model has one weight per context layer, "
                          "fixed when the policy starts",
          only_with=("prefetch.strategy", ("learned",))),
))

_SCHEDULE = Block("schedule", "What to do on a miss: wait for the transfer, or compute on the CPU.", params=(
    Param("schedule", "mode", ENUM, "gpu_only",
          "Where a missed expert is computed.",
          enum=(
              EnumValue("gpu_only", "load the missed expert and compute it on the GPU (waits for the transfer)"),
              EnumValue("cpu_fallback", "compute the missed expert on the CPU from the host copy; load it in the background so later accesses hit"),
              EnumValue("hybrid", "per miss, the cheaper of transfer and CPU compute by the cost model; transfers above offload_threshold_ms go to the CPU"),
          ), conditional=True, aliases=("schedule_mode",)),
    Param("schedule", "offload_threshold_ms", NUMBER, 50,
          "hybrid: a transfer estimated above this many milliseconds always goes to the CPU. At most 3,600,000 ms (an hour): no expert transfer takes longer.",
          min=0, min_open=True, max=3_600_000, units=TIME_UNITS, unit="ms", conditional=True,
          only_with=("schedule.mode", ("hybrid",))),
    Param("schedule", "overlap", BOOL, True,
          "Overlap transfers with compute on a separate copy stream. hybrid requires it.",
          adapt_no_effect="the copy stream is set up once, when the policy is attached (and a "
                          "replay models the whole run with one setting)"),
    Param("schedule", "priority_routing", BOOL, False,
          "Serve the highest-weighted experts of a dispatch first (loads ordered by router weight).",
          conditional=True),
))

_METRICS = (
    Metric("hit_rate", "hits / accesses over the window"),
    Metric("miss_rate", "misses / accesses over the window"),
    Metric("eviction_rate", "evictions / accesses over the window"),
    Metric("prefetch_accuracy", "prefetched keys accessed before eviction / prefetched keys loaded, over the window"),
    Metric("transfer_rate", "loads (demand, background and prefetch) per access over the window", max=None),
    Metric("stall_ms", "time spent waiting for transfers over the window, in ms (live, or simulated in replay)", max=None, unit="ms"),
)
METRICS: Mapping[str, Metric] = MappingProxyType({m.name: m for m in _METRICS})

_MONITOR = Block("monitor", "Which metrics to track and over what window (used by conditions and adapt rules).", params=(
    Param("monitor", "metrics", METRIC_LIST, ("hit_rate",),
          "Metrics to compute and log. A name that is not a metric is a warning (the original recorded any name) and is not recorded."),
    Param("monitor", "window", COUNT, 100,
          "Sliding window, in accesses, of every metric. An adapt rule that changes it keeps the most recent accesses the new window can hold. At most 10^6: the window is held in memory, one entry per access.",
          min=1, max=ACCESS_WINDOW_MAX, units=("accesses",), unit="accesses", conditional=True),
    Param("monitor", "log_interval", COUNT, 50,
          "Accesses between two metric log records. At most 10^9: an interval is a counter, and a longer one never comes round in a run.", min=1, max=INTERVAL_MAX, units=("accesses",), unit="accesses",
          conditional=True),
    Param("monitor", "warmup", ENUM, "first_eviction",
          "When adapt rules start judging the windowed metrics. A cold cache misses every expert it has not seen yet; those compulsory misses say nothing about the policy, and a rule such as `when hit_rate < 0.4 for 100 accesses` would fire on them at once. The window is cleared when the warm-up ends.",
          enum=(
              EnumValue("first_eviction", "from the dispatch after the cache has filled once: its first eviction, or every slot of its pool occupied (a cache that holds every expert)"),
              EnumValue("none", "from the first access, cold misses included (the original's behaviour)"),
          )),
))

_PER_LAYER = Block("per_layer", "One cache per MoE layer, splitting a total budget by an allocation rule.", dependency="cache", params=(
    Param("per_layer", "allocation", ENUM, "uniform",
          "How total_budget is split across layers.",
          enum=(
              EnumValue("uniform", "equal capacity for every layer"),
              EnumValue("entropy", "proportional to each layer's routing entropy over entropy_window dispatches"),
              EnumValue("frequency", "proportional to the number of distinct experts each layer used in the window"),
          ), conditional=True),
    Param("per_layer", "total_budget", SLOTS_OR_SIZE, DERIVED,
          "Total slots over all layers, split by allocation; or a size (e.g. 10GiB: as many experts as fit, over all layers). When given it decides every layer's capacity, and cache.capacity is not needed (written too, it has no effect: MPL409). An adapt rule that changes it rebalances at once. At most 4,194,304 slots (2^22, 64 layers of 65,536): the most slots a runtime's slot pool holds.",
          default_doc="layers x cache.capacity", min=1, max=SLOT_POOL_MAX, units=SIZE_UNITS,
          unit="slots", conditional=True),
    Param("per_layer", "min_capacity", INT, 2,
          "Smallest capacity a layer may get. An adapt rule that changes it rebalances at once. At most 65,536, the range of cache.capacity.",
          min=1, max=65536, max_ref="per_layer.max_capacity", unit="slots", conditional=True),
    Param("per_layer", "max_capacity", INT, 64,
          "Largest capacity a layer may get. An adapt rule that changes it rebalances at once. At most 65,536, the range of cache.capacity.",
          min=1, max=65536, min_ref="per_layer.min_capacity", unit="slots", conditional=True),
    Param("per_layer", "rebalance_interval", INT, 500,
          "Dispatches between two rebalancings; 0 = never. At most 10^9: an interval is a counter, and a longer one never comes round in a run.", min=0, max=INTERVAL_MAX, unit="dispatches",
          conditional=True),
    Param("per_layer", "entropy_window", INT, 200,
          "Dispatches per layer the allocation signal is measured over. At most 100,000: the window is held in memory, one row per dispatch of each layer.", min=1, max=DISPATCH_WINDOW_MAX, unit="dispatches",
          conditional=True, only_with=("per_layer.allocation", ("entropy", "frequency"))),
))

_ADAPT = Block("adapt", "Rules that change the policy at runtime: `when METRIC OP NUMBER [for N accesses] { actions }`.", rules=True)


# ---------------------------------------------------------------- memory tiers (SPEC §12)
@dataclass(frozen=True)
class Dtype:
    name: str
    bits: int
    stored: bool       # a checkpoint's own precision (else a weight-only quantized copy)
    doc: str


DTYPES: Mapping[str, Dtype] = MappingProxyType({d.name: d for d in (
    Dtype("fp32", 32, True, "32-bit float, a checkpoint's own precision"),
    Dtype("fp16", 16, True, "16-bit float (IEEE half), a checkpoint's own precision"),
    Dtype("bf16", 16, True, "16-bit bfloat, a checkpoint's own precision"),
    Dtype("int8", 8, False, "8-bit weight-only quantized copy made from the checkpoint (approximate)"),
    Dtype("int4", 4, False, "4-bit weight-only quantized copy made from the checkpoint (approximate)"),
)})

_DTYPE_VALUES = tuple(EnumValue(d.name, d.doc) for d in DTYPES.values())

#: where a tier keeps its experts (`gpu` takes a device index: gpu:1)
LOCATIONS: tuple[EnumValue, ...] = (
    EnumValue("gpu", "device memory: the device the model runs on, or gpu:N for device N"),
    EnumValue("cpu", "host memory"),
    EnumValue("disk", "files on a disk (at most one such tier, the last: it holds every expert)"),
)
#: the largest device index of a `gpu:N` location
DEVICE_INDEX_MAX = 255
#: the largest layer index of a band (`band layers = a..b`): ten times the MoE layers of the
#: largest models today (94)
LAYER_INDEX_MAX = 1023

#: the call-like eviction value of a hierarchy: `weighted_sum(lru = 0.5, lfu = 0.5)`
WEIGHTED_SUM = "weighted_sum"
WEIGHTED_SUM_DOC = ("ranks the victims by the weighted sum of the named rules' normalised ranks; "
                    "each rule is a single-queue rule, named once, with a weight in (0, 1] (only the "
                    "weights' ratios matter)")

#: a tier's and a hierarchy's eviction rules: the cache's, except the segmented pair
#: (`fallback`) and the replay-only oracle
_TIER_EVICTION = tuple(e for e in _EVICTION if not e.replay_only and e.name != "fallback")

#: the head of a section: a label (`tier hot`), a selector (`band layers = 0..7`) or an
#: edge (`on demote(hot -> warm)`)
LABEL, SELECTOR, EDGE = "label", "selector", "edge"


@dataclass(frozen=True)
class Section:
    """A nested item of a block: ``KIND head { params and sections }``."""
    kind: str
    head: str                          # LABEL | SELECTOR | EDGE
    doc: str
    syntax: str                        # how it is written, for messages and docs
    head_name: str                     # what its head is, for messages ("the tier's name")
    params: tuple[Param, ...] = ()
    sections: tuple[str, ...] = ()     # kinds of the sections it holds
    selector: Param | None = None      # SELECTOR: the parameter its head sets
    events: tuple[EnumValue, ...] = () # EDGE: the events
    parents: tuple[str, ...] = ()      # the blocks and sections it may appear in

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def event(self, name: str) -> EnumValue | None:
        for e in self.events:
            if e.name == name:
                return e
        return None


def _level_params(owner: str) -> tuple[Param, ...]:
    """The parameters of a set of tiers (a hierarchy, a band)."""
    return (
        Param(owner, "eviction", ENUM, "lru",
              "Which resident expert a tier evicts when it needs room, for every tier without its own eviction. `weighted_sum(lru = 0.5, lfu = 0.5)` " + WEIGHTED_SUM_DOC + ".",
              enum=_TIER_EVICTION, weighted=True),
        Param(owner, "granularity_split", INT, 1,
              "An expert is moved and cached as this many equal parts (1: whole). At most 64: each part is one transfer, and beyond 64 parts of an expert the per-transfer latency dominates.",
              min=1, max=64, unit="parts"),
    )


_TIER_PARAMS = (
    Param("tier", "location", LOCATION, REQUIRED,
          "Where the tier keeps its experts.", enum=LOCATIONS),
    Param("tier", "dtype", ENUM, DERIVED,
          "The precision the tier holds an expert in: the checkpoint's own (fp16, bf16, fp32), or a weight-only quantized copy (int8, int4) made from it, which is computed from approximately (the checker gives a hint).",
          default_doc="the checkpoint's own precision", enum=_DTYPE_VALUES),
    Param("tier", "dtype_ladder", ENUM_LIST, OFF,
          "Precisions from the highest to the lowest: the tier keeps each expert at the highest one that fits. Its first rung is the tier's dtype.",
          default_doc="one precision: dtype", enum=_DTYPE_VALUES),
    Param("tier", "capacity", SLOTS_OR_SIZE, DERIVED,
          "Expert slots of the tier, or a size (as many experts, at the tier's precision, as fit). Required on a gpu tier and on a host tier above a disk tier; the last tier holds every expert. At most 4,194,304 slots (2^22), the most a runtime's slot pool holds.",
          default_doc="the last tier: every expert; required on the others",
          min=1, max=SLOT_POOL_MAX, units=SIZE_UNITS, unit="slots"),
    Param("tier", "residency", ENUM, "on_demand",
          "Whether the tier's contents change.",
          enum=(EnumValue("on_demand", "a cache: keys come in by promotion and demotion and go by its eviction rule"),
                EnumValue("always", "fixed (pinned): filled by the first keys promoted into it, then never evicted from and never demoted into"))),
    Param("tier", "eviction", ENUM, DERIVED,
          "Which resident expert this tier evicts when it needs room. `weighted_sum(...)` " + WEIGHTED_SUM_DOC + ".",
          default_doc="the hierarchy's (or band's) eviction", enum=_TIER_EVICTION, weighted=True),
    Param("tier", "path", STRING, DERIVED,
          "disk: where the expert files are: the checkpoint's own safetensors, or a folder written once.",
          default_doc="the checkpoint's own files"),
)

_TRANSITION_PARAMS = (
    Param("on", "mechanism", ENUM, "copy",
          "How a key moves between the two tiers.",
          enum=(EnumValue("copy", "copied (converted to the target tier's precision on the way)"),
                EnumValue("in_place_requant", "demotion only, between two tiers of one device: quantized where it is, no transfer"))),
    Param("on", "trigger_threshold", NUMBER, OFF,
          "Promotion: the key is admitted into the tier above only when its share of its layer's last freq_window accesses (cache.freq_window's default) is at least this. At most 1.",
          default_doc="every promoted key is admitted, by the tier's eviction rule", min=0, max=1),
)

_SECTION_LIST = (
    Section("tier", LABEL, "One place an expert can be: a memory (device, host, disk), a precision and a size. Tiers are ordered as written, fastest first.",
            "tier NAME { ... }", "the tier's name", params=_TIER_PARAMS,
            parents=("hierarchy", "band")),
    Section("on", EDGE, "A transition between two adjacent tiers: `demote` (a key evicted from a tier goes to the next tier down) or `promote` (a key served from a tier is loaded into the tier above).",
            "on demote(UPPER -> LOWER) { ... }", "'promote' or 'demote' and two tiers",
            params=_TRANSITION_PARAMS,
            events=(EnumValue("promote", "a key served from the lower tier is loaded into the tier above it: promote(LOWER -> UPPER)"),
                    EnumValue("demote", "a key evicted from the upper tier goes to the tier below it: demote(UPPER -> LOWER)")),
            parents=("hierarchy", "band")),
    Section("band", SELECTOR, "A band of layers with its own tiers: every MoE layer in exactly one band. With a hierarchy block too, a band starts from the hierarchy's tiers and overrides them by name.",
            "band layers = FIRST..LAST { ... }", "'layers = FIRST..LAST'",
            params=_level_params("band"), sections=("tier", "on"),
            selector=Param("band", "layers", LAYER_RANGE, REQUIRED,
                           "The layers of the band, both ends included (the model's decoder-layer ids, as in traces); one layer alone is `layers = 5`.",
                           min=0, max=LAYER_INDEX_MAX, unit="layers"),
            parents=("per_layer_hierarchy",)),
    Section("pin", SELECTOR, "Experts pinned in some layers only (the hot experts of each layer, as a profile places them): they occupy slots of the cache that holds their layer's keys and are never evicted, in addition to the ids of `pin` (pinned in every layer). Ranges of two pin items never share a layer.",
            "pin layers = FIRST..LAST { experts = [ID, ...] }", "'layers = FIRST..LAST'",
            params=(Param("pin", "experts", INT_LIST, REQUIRED,
                          "Expert ids pinned in each layer of the item's range: they occupy slots and are never evicted. Ids are 0..65535.",
                          min=0, max=EXPERT_ID_MAX),),
            selector=Param("pin", "layers", LAYER_RANGE, REQUIRED,
                           "The layers these experts are pinned in, both ends included (the model's decoder-layer ids, as in traces and bands); one layer alone is `layers = 5`.",
                           min=0, max=LAYER_INDEX_MAX, unit="layers"),
            parents=("cache",)),
)
SECTIONS: Mapping[str, Section] = MappingProxyType({x.kind: x for x in _SECTION_LIST})

_HIERARCHY = Block("hierarchy", "Memory tiers: where an expert can be, fastest first, and how keys move between them (instead of the cache block).",
                   params=_level_params("hierarchy"), sections=("tier", "on"), flat=False,
                   instead_of="cache", excludes=("cache", "per_layer"))
_PER_LAYER_HIERARCHY = Block("per_layer_hierarchy", "Memory tiers per band of layers (instead of the cache block).",
                             sections=("band",), flat=False, instead_of="cache",
                             excludes=("cache", "per_layer"))

BLOCKS: Mapping[str, Block] = MappingProxyType({b.name: b for b in (
    _CACHE, _HIERARCHY, _PER_LAYER_HIERARCHY, _PREFETCH, _SCHEDULE, _MONITOR, _PER_LAYER, _ADAPT)})

#: canonical order of blocks (formatter, docs)
BLOCK_ORDER: tuple[str, ...] = tuple(BLOCKS)

#: the parameters of a policy: one value each (the IR's values); the blocks of memory tiers
#: are not flat (NESTED_PARAMS)
PARAMS: Mapping[str, Param] = MappingProxyType(
    {p.key: p for b in BLOCKS.values() if b.flat for p in b.params})

#: the parameters of the memory-tier blocks and of the sections, by key: "hierarchy.eviction",
#: "tier.location", "on.mechanism", "band.layers" (a band's selector), ...
NESTED_PARAMS: Mapping[str, Param] = MappingProxyType({
    **{p.key: p for b in BLOCKS.values() if not b.flat for p in b.params},
    **{p.key: p for x in SECTIONS.values() for p in ((x.selector,) if x.selector else ()) + x.params},
})


def find(key: str) -> Param | None:
    """The parameter ``key`` of PARAMS or NESTED_PARAMS, or None."""
    return PARAMS.get(key) or NESTED_PARAMS.get(key)


def container(name: str) -> Block | Section | None:
    """The block or the section kind ``name`` (what holds parameters and sections)."""
    return BLOCKS.get(name) or SECTIONS.get(name)

#: adapt-action name -> parameter key (unqualified names, the original's aliases); the
#: targets an action may name: adaptable parameters and those whose action has no effect
ADAPT_TARGETS: Mapping[str, str] = MappingProxyType({
    **{p.name: p.key for p in PARAMS.values() if p.conditional or p.adapt_no_effect},
    **{a: p.key for p in PARAMS.values() for a in p.aliases},
    **{p.key: p.key for p in PARAMS.values() if p.conditional or p.adapt_no_effect},
})

#: `trigger NAME` actions
TRIGGERS: Mapping[str, str] = MappingProxyType({
    "memory_pressure": "run the memory-pressure eviction now (evict down to memory_headroom)",
    "ttl": "run the TTL sweep now",
    "flush": "evict every resident key that is neither pinned nor in use",
})

#: `rebalance NAME` actions: NAME is an allocation rule (needs a per_layer block)
REBALANCE = "per_layer.allocation"

#: the block of per-layer caches: `rebalance` and its parameters only take effect with it
PER_LAYER_BLOCK = PARAMS[REBALANCE].block

#: the parameters a policy must give (``default = REQUIRED``): the checker reports a missing
#: one (MPL105), lowering refuses it, the runtime refuses parameters without it
REQUIRED_KEYS: tuple[str, ...] = tuple(k for k, p in PARAMS.items() if p.required)


def missing_required(given) -> list[str]:
    """The required parameters a policy lacks, ``given(key)`` saying whether it gives a
    parameter: a required parameter whose ``replaced_by`` or ``instead`` is given is not
    missing (``cache.capacity`` beside ``per_layer.total_budget`` or ``cache.capacity_factor``). The checker (MPL105), lowering
    and the runtime read this one rule."""
    return [k for k in REQUIRED_KEYS
            if not given(k) and not (PARAMS[k].replaced_by and given(PARAMS[k].replaced_by))
            and not (PARAMS[k].instead and given(PARAMS[k].instead))]

def factor_slots(factor, experts: int) -> int:
    """The slots of ``cache.capacity_factor = factor`` over ``experts`` experts: the fraction
    of them rounded up to whole slots, at least one. The factor is read as the decimal it
    was written as (0.3 of 10 experts is 3 slots, not the 4 that 0.3 * 10 in binary floating
    point rounds up to). The checker's model-aware rules and the runtime's slot layout both
    count with it."""
    from fractions import Fraction

    f = Fraction(repr(float(factor)))
    return max(1, -(-(f * experts).numerator // (f * experts).denominator))


#: what ``eviction = fallback`` means (the original's name for LFU with an LRU fallback)
FALLBACK_PAIR = "lfu|lru"


@dataclass(frozen=True)
class Relation:
    """``low <= high`` between the effective values of two parameters (``count``: the
    number of elements of ``low``, a list)."""
    low: str
    high: str
    count: bool = False


def _relations() -> tuple[Relation, ...]:
    out: dict[tuple[str, str], Relation] = {}
    for p in PARAMS.values():
        for rel in ((Relation(p.key, p.count_max_ref, count=True) if p.count_max_ref else None),
                    (Relation(p.key, p.max_ref) if p.max_ref else None),
                    (Relation(p.min_ref, p.key) if p.min_ref else None)):
            if rel is not None:
                out.setdefault((rel.low, rel.high), rel)
    return tuple(out.values())


#: every relation between two parameters, in schema order (min_ref and max_ref of one pair
#: are one relation)
RELATIONS: tuple[Relation, ...] = _relations()

COMPARISON_OPS: tuple[str, ...] = ("<", ">", "<=", ">=", "!=", "==")

#: units allowed after `for N` in an adapt rule
RULE_DURATION_UNITS: tuple[str, ...] = ("accesses", "steps", "tokens")

#: the longest `for N` an adapt rule takes (a condition held longer than a run lasts never
#: makes the rule fire); the runtime counts up to it
RULE_DURATION_MAX = INTERVAL_MAX

SUPPORTED_VERSIONS: tuple[int, ...] = (1, 2)

#: `version` 0 .. 0.7 (any number in that range: 0.5, .5, 5e-1, 0.0) are the original's
#: language versions: accepted, and they mean what version 1 means
ORIGINAL_VERSIONS: tuple[float, float] = (0.0, 0.7)

FILE_EXTENSIONS: tuple[str, ...] = (".moe", ".policy")

KEYWORDS: tuple[str, ...] = ("version", "import", "policy", "extends", "when", "for",
                             "trigger", "rebalance", "true", "false")


def param(key: str) -> Param:
    """The parameter ``"block.name"``; KeyError if unknown."""
    return PARAMS[key]


def block(name: str) -> Block | None:
    return BLOCKS.get(name)


#: what :func:`parse_size` takes, as the size options' error messages say it
SIZE_RULE = "a finite number of bytes, at least one"


def parse_size(text: str) -> int | None:
    """``16GiB`` / ``80 GB`` / ``512MiB`` -> bytes, or None: not a finite size of at least one
    byte (``0GiB``, ``1e-10GB``, ``nan``, ``inf`` and ``1e400`` alike; a size that rounds
    to no bytes is no more a size than 0 is). Every size option of mplc reads through it."""
    t = text.strip()
    for name in sorted(SIZE_UNITS, key=len, reverse=True):
        if t.endswith(name):
            num = t[: -len(name)].strip()
            try:
                v = float(num)
            except ValueError:
                return None
            b = v * UNITS[name].factor
            return int(b) if 1 <= b < float("inf") else None     # also rejects nan
    return None
