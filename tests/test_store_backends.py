"""The eviction stores, one behaviour suite on both backends: the Python store classes
(mpl/runtime/eviction_*.py, the reference) and the compiled engine's stores
(mpl/runtime/c/store_*.c, driven op by op through the test-only ``_engine._store_run``, which
checks every argument, every victim (resident, in range, not excluded) and that ``keys()``
gives ``len()`` keys).

* Random op sequences per rule (every rule, every segmented pair of two single-queue rules,
  parameters varied, set_param and resize mid-sequence, steps and layers for the clocked
  rules): every result of every op (victims, ``keys()`` order, ``len``, ``admits``) is the
  same on both. The sequence is made against the Python store (a hit only for a resident key,
  a load evicting first when the store is full, as a cache does) and replayed on the C one.
* Each rule's documented behaviour, checked on both backends by the same test.
* The compiled registry names the rules of the Python registry and of the schema, with the
  same flags; a bad call of ``_store_run`` is a Python exception, never a crash.
"""

from __future__ import annotations

import math
import random
import struct

import pytest
from hypothesis import example, given, strategies as st

import mpl
from mpl import schema
from mpl.runtime.eviction import RULES, SEGMENT_RULES, make_store
from mpl.runtime.eviction_published import LeastStale
from property_profiles import prop

try:
    from mpl.runtime import _engine
    _WHY = ""
except ImportError as e:        # no compiler at install time: the compiled half is skipped
    _engine = None
    _WHY = f"the compiled engine mpl.runtime._engine is not built ({e})"

needs_engine = pytest.mark.skipif(_engine is None, reason=_WHY)

#: the store parameters in the engine's SP_* order (_engine.STORE_PARAMS; a test holds them equal)
PARAM_NAMES = ("cache.frequency_decay", "cache.decay_interval", "cache.freq_threshold",
               "cache.freq_window", "cache.score_ema_alpha", "cache.crf_half_life")
DEFAULTS = tuple(schema.param(p).default for p in PARAM_NAMES)

SINGLE = list(RULES)
PAIRS = [f"{a}|{b}" if (i + j) % 2 else f"{a} | {b}"
         for i, a in enumerate(SEGMENT_RULES) for j, b in enumerate(SEGMENT_RULES)]


# ------------------------------------------------------------------ the two backends
class PyRun:
    """The Python store of ``rule`` driven by the ops of ``_store_run`` (keys as ints
    layer * E + expert; the store sees (layer, expert) tuples, as the runtime gives them)."""

    def __init__(self, rule, cap, klo, khi, L, E, params):
        self.store = make_store(rule, cap, dict(zip(PARAM_NAMES, params)))
        self.E = E

    def key(self, k):
        return divmod(k, self.E)

    def int_key(self, key):
        return key[0] * self.E + key[1]

    def __contains__(self, k):
        return self.key(k) in self.store

    def op(self, op):
        s, key = self.store, self.key
        name, *a = op
        if name == "hit":
            s.hit(key(a[0]), a[1])
        elif name == "miss":
            if s.needs_miss:
                s.miss(key(a[0]), a[1])
        elif name == "admits":
            return s.admits(key(a[0])) if s.filters else True
        elif name == "evict":
            excl, inc, only = a
            if excl is None:
                ex = None
            else:
                ex = {key(excl)} if only else {key(k) for k in excl}
            v = s.evict(ex, None if inc is None else key(inc))
            return None if v is None else self.int_key(v)
        elif name == "insert":
            s.insert(key(a[0]), a[1])
        elif name == "discard":
            s.discard(key(a[0]))
        elif name == "keys":
            return [self.int_key(k) for k in s.keys()]
        elif name == "len":
            return len(s)
        elif name == "resize":
            s.resize(a[0])
        elif name == "set_param":
            s.set_param(PARAM_NAMES[a[0]], a[1])
        elif name == "begin":
            s.begin(a[0], a[1])
        elif name != "prepare":
            raise ValueError(f"no op {name}")
        return None


def py_run(rule, cap, klo, khi, L, E, params, ops):
    r = PyRun(rule, cap, klo, khi, L, E, params)
    return [r.op(op) for op in ops]


OP_CODES = ("hit", "miss", "insert", "admits", "evict", "discard", "keys", "len", "resize",
            "set_param", "begin", "prepare")


def packed(*records):
    """_store_run's ops buffer: records (op code, a, b, c, w), native "qqqqd"."""
    return struct.pack("=" + "qqqqd" * len(records), *(x for r in records for x in r))


def pack_op(op):
    """One op of the tests' form (name, args...) as _store_run's record: a key, a step, a
    capacity or a parameter code in a; a layer, a count or the incoming key (-1: None) in b;
    an evict's exclusion in c and a (c 0: none; 1: the keys of a's bits; 2: the one key a);
    a weight or a parameter's value in w."""
    name, *a = op
    code = OP_CODES.index(name)
    if name in ("hit", "miss", "insert"):
        return code, a[0], 0, 0, a[1]
    if name == "evict":
        excl, inc, only = a
        inc = -1 if inc is None else inc
        if excl is None:
            return code, 0, inc, 0, 0.0
        if only:
            return code, excl, inc, 2, 0.0
        return code, sum(1 << k for k in set(excl)), inc, 1, 0.0
    if name == "set_param":
        return code, a[0], 0, 0, a[1]
    return code, *(list(a) + [0, 0])[:2], 0, 0.0


def c_run(rule, cap, klo, khi, L, E, params, ops):
    return _engine._store_run(rule, cap, klo, khi, L, E, params, packed(*map(pack_op, ops)))


BACKENDS = [pytest.param(py_run, id="python"),
            pytest.param(c_run, id="compiled", marks=needs_engine)]


# ------------------------------------------------------------------ random op sequences
#: per parameter (PARAM_NAMES order) the values a sequence may use; decay 0.001 with an
#: interval of 1 reaches LFU's renormalisation (inc > 1e150) within 51 accesses
PARAM_CHOICES = (
    (0.95, 0.5, 1.0, 0.001),
    (100, 1, 2, 3),
    (0.05, 0.0, 0.2, 0.5, 1.0),
    (100, 1, 2, 3, 5),
    (0.3, 1.0, 0.01, 0.7),
    (128, 1, 2, 3),
)
WEIGHTS = (0.0, 0.125, 0.25, 1 / 3, 0.5, 0.9, 1.0)
#: first steps (the stores take any int64; a store's step is 0 before its first begin, and a
#: step far behind a key's last use overflows Python's 2.0 ** x in crf and classlru, where C
#: gives inf: the steps go back by a little only, as a user's explicit step may)
START_STEPS = (0, 1, 7, -5, 2**62, 2**63 - 100)
KINDS = ("access", "access", "access", "access", "prefetch", "trigger", "only", "discard",
         "begin", "begin", "resize", "set_param", "prepare", "admits")
I64_MAX = 2**63 - 1

configs = st.tuples(
    st.integers(1, 3),                      # L
    st.integers(1, 5),                      # E
    st.integers(0, 2),                      # the keys: shared, one layer's, any range
    st.integers(0, 99),                     # ... which
    st.integers(0, 99),                     # the capacity (mod keys + 3)
    st.tuples(*[st.integers(0, len(c) - 1) for c in PARAM_CHOICES]),
    st.sampled_from(START_STEPS),
)
plans = st.lists(st.tuples(st.integers(0, len(KINDS) - 1), st.integers(0, 2**16),
                           st.integers(0, 2**16), st.sampled_from(WEIGHTS)),
                 min_size=20, max_size=90)


def shape(config):
    L, E, rk, rsel, capsel, pidx, step0 = config
    K = L * E
    if rk == 0:
        klo, khi = 0, K
    elif rk == 1:
        klo, khi = (rsel % L) * E, (rsel % L + 1) * E
    else:
        klo = rsel % K
        khi = klo + 1 + (rsel // 7) % (K - klo)
    cap = capsel % (khi - klo + 3)
    params = tuple(c[i] for c, i in zip(PARAM_CHOICES, pidx))
    return cap, klo, khi, L, E, params, step0


def interpret(rule, config, plan):
    """(the _store_run arguments, the Python store's results): the plan's abstract choices
    made into valid ops against the Python store, run on it as they are made."""
    cap0, klo, khi, L, E, params, step = shape(config)
    cap, n = cap0, khi - klo             # (cap: the capacity as resize ops change it)
    run = PyRun(rule, cap, klo, khi, L, E, params)
    ops, results = [], []

    def do(*op):
        r = run.op(op)
        ops.append(op)
        results.append(r)
        return r

    def residents():
        return [k for k in range(klo, khi) if k in run]

    def excluded(b, extra=()):
        if b % 5 == 0:
            return None
        return [k for j, k in enumerate(residents()) if b >> (j % 16) & 1] + list(extra)

    def load(k, b, w):
        """a load as a cache makes it: the filter, a victim when full (the keys in use
        excluded, the incoming one among them), the insert"""
        if run.store.filters and not do("admits", k):
            return
        if len(run.store) >= cap:
            if do("evict", excluded(b, [k] if b & 2 else []), k, False) is None:
                return
        do("insert", k, w)

    for kind, a, b, w in plan:
        kind = KINDS[kind]
        k = klo + a % (n if b & 4 else min(n, 3))    # some locality: hits, not only misses
        if kind == "access":
            if k in run:
                do("hit", k, w)
            else:
                do("miss", k, w)
                load(k, b, w)
        elif kind == "prefetch":
            if k not in run:
                load(k, b, w)
        elif kind == "trigger":
            do("evict", excluded(b), None, False)
        elif kind == "only":
            res = residents()
            only = None if b % 3 == 0 or not res else res[b % len(res)]
            do("evict", only, None if b % 2 else k, True)
        elif kind == "discard":
            do("discard", k)
        elif kind == "begin":
            c = b % 8
            if c in (1, 2, 3, 4):
                step += 1
            elif c == 5:
                step += a % 50 + 2
            elif c == 6:
                step -= 1
            elif c == 7:
                step = 2**62 + a if step < 2**62 else step + 1
            step = max(-(2**63), min(I64_MAX, step))
            do("begin", step, a % L)
        elif kind == "resize":
            cap = a % (n + 3)
            do("resize", cap)
        elif kind == "set_param":
            code = a % len(PARAM_NAMES)
            do("set_param", code, PARAM_CHOICES[code][b % len(PARAM_CHOICES[code])])
        elif kind == "prepare":
            do("prepare", a % L, b % 12)
        elif kind == "admits":
            do("admits", k)
        do("len")
        do("keys")
    return (rule, cap0, klo, khi, L, E, params, ops), results


def first_difference(args, expected):
    """Where the compiled store parts from the Python one: the op and the two results."""
    ops = args[-1]
    for m in range(1, len(ops) + 1):
        try:
            got = c_run(*args[:-1], ops[:m])
        except Exception as e:      # the C store parted earlier (a victim the plan did not expect)
            return f"op {m - 1} {ops[m - 1]!r}: compiled raised {e!r}; before it {ops[max(0, m - 6):m - 1]!r}"
        if got != expected[:m]:
            return (f"op {m - 1} {ops[m - 1]!r}: python {expected[m - 1]!r}, compiled {got[-1]!r}; "
                    f"before it {ops[max(0, m - 6):m - 1]!r}")
    return "no difference"


def check_same(rule, config, plan):
    args, expected = interpret(rule, config, plan)
    try:
        got = c_run(*args)
    except Exception:
        got = None
    if got != expected:
        pytest.fail(f"{rule} {shape(config)}: {first_difference(args, expected)}")


@needs_engine
@pytest.mark.parametrize("rule", SINGLE + PAIRS)
@given(config=configs, plan=plans)
@example(config=(1, 1, 0, 0, 1, (0, 0, 0, 0, 0, 0), 0), plan=[(0, 0, 0, 0.0)] * 2)  # crf: a
#   second hit in a step (the Python store raised TypeError; test_crf_a_second_hit_in_a_step)
@example(config=(1, 1, 0, 0, 1, (0, 0, 0, 0, 0, 0), 2**62),
         plan=[(0, 0, 0, 0.0)] * 14 + [(8, 0, 0, 0.0), (0, 0, 0, 0.0), (8, 0, 1, 0.0), (0, 0, 0, 0.0),
                                       (8, 0, 6, 0.0), (0, 0, 0, 0.0)])  # crf: a step that went
#   back (the Python store raised TypeError; test_crf_a_use_at_an_earlier_step)
@prop(40)
def test_random_sequences_give_the_same_results(rule, config, plan):
    check_same(rule, config, plan)


@needs_engine
@pytest.mark.parametrize("decay", [1, 3], ids=["decay0.5", "decay0.001"])
@pytest.mark.parametrize("rule", ["lfu", "lfu|score", "lfu | lfu"])
def test_lfu_renormalises_alike(rule, decay, monkeypatch):
    """A decay every access: the increment passes 1e150 (after 499 accesses at 0.5, 51 at
    0.001) and the stored values are renormalised, old ones down to 0 at 0.001 (ties: the
    least recent): the same results on both backends throughout. (In a pair only a counts
    accesses: an lfu b never decays.)"""
    from mpl.runtime.eviction_basic import LFU
    calls = []
    renormalise = LFU._renormalise
    monkeypatch.setattr(LFU, "_renormalise", lambda self: (calls.append(1), renormalise(self)))
    r = random.Random(rule)
    config = (2, 4, 0, 0, 6, (decay, 1, 1, 0, 0, 0), 0)
    plan = [(r.choice([0, 0, 0, 4, 5, 7]), r.randrange(2**16), r.randrange(2**16),
             r.choice(WEIGHTS)) for _ in range(1500)]
    check_same(rule, config, plan)
    assert len(calls) >= (1 if decay == 1 else 10)


# ------------------------------------------------------------------ each rule's behaviour
P = DEFAULTS


def drive(run, rule, ops, *, cap=4, klo=0, khi=8, L=2, E=4, params=P):
    return run(rule, cap, klo, khi, L, E, params, ops)


def ins(*ks, w=0.5):
    return [("insert", k, w) for k in ks]


@pytest.mark.parametrize("run", BACKENDS)
def test_lru_evicts_the_least_recent_and_skips_the_excluded(run):
    out = drive(run, "lru", ins(0, 1, 2) + [("hit", 0, 1.0), ("keys",),
                                             ("evict", [1], None, False), ("keys",)])
    assert out[-3:] == [[1, 2, 0], 2, [1, 0]]


@pytest.mark.parametrize("run", BACKENDS)
def test_lfu_lowest_frequency_ties_to_the_least_recent(run):
    ops = ins(0, 1, 2) + [("hit", 2, 1.0), ("hit", 0, 1.0), ("keys",), ("evict", None, 3, False)]
    assert drive(run, "lfu", ops)[-2:] == [[1, 2, 0], 1]


@pytest.mark.parametrize("run", BACKENDS)
def test_lfu_decay_makes_old_frequencies_count_less(run):
    """decay 0.5 every access: key 0's two early hits weigh less than key 1's late one."""
    params = (0.5, 1, *P[2:])
    ops = ins(0, 1) + [("hit", 0, 1.0), ("hit", 0, 1.0), ("miss", 5, 1.0), ("miss", 5, 1.0),
                       ("miss", 5, 1.0), ("hit", 1, 1.0), ("keys",)]
    assert drive(run, "lfu", ops, params=params)[-1] == [0, 1]


@pytest.mark.parametrize("run", BACKENDS)
def test_score_is_a_moving_average_of_the_weight(run):
    params = (*P[:4], 0.5, P[5])
    ops = [("insert", 0, 0.8), ("insert", 1, 0.4), ("hit", 0, 0.0), ("keys",),
           ("hit", 1, 0.0), ("keys",)]
    # 0: 0.5*0 + 0.5*0.8 = 0.4 ties 1's 0.4, and 1 is the less recent; then 1: 0.2
    assert drive(run, "score", ops, params=params)[-3:] == [[1, 0], None, [1, 0]]


@pytest.mark.parametrize("run", BACKENDS)
def test_frequency_threshold_admits_by_share_of_its_layer(run):
    params = (P[0], P[1], 0.5, 4, *P[4:])
    ops = [("miss", 0, 1.0), ("admits", 0), ("miss", 1, 1.0), ("miss", 1, 1.0), ("admits", 1),
           ("admits", 0), ("miss", 5, 1.0), ("admits", 5)]
    # layer 0's window: [0] -> share 1; [0, 1, 1] -> 1: 2/3, 0: 1/3; layer 1 is its own
    assert drive(run, "frequency_threshold", ops, params=params) == [
        None, True, None, None, True, False, None, True]


@pytest.mark.parametrize("run", BACKENDS)
def test_frequency_threshold_a_shrunk_window_drops_its_oldest_entries(run):
    params = (P[0], P[1], 0.5, 4, *P[4:])
    ops = [("miss", 0, 1.0), ("miss", 0, 1.0), ("miss", 1, 1.0), ("set_param", 3, 1),
           ("admits", 0), ("miss", 2, 1.0), ("admits", 0), ("admits", 2),
           ("set_param", 3, 3), ("prepare", 0, 3), ("miss", 1, 1.0), ("admits", 1)]
    assert drive(run, "frequency_threshold", ops, params=params) == [
        None, None, None, None, True, None, False, True, None, None, None, True]


@pytest.mark.parametrize("run", BACKENDS)
def test_segmented_demotes_into_b_and_promotes_on_a_hit(run):
    """capacity 3: a holds 2, b 1; b's victims leave first, a hit in b promotes."""
    ops = ins(0, 1, 2) + [("keys",), ("hit", 0, 1.0), ("keys",), ("evict", None, 5, False)]
    out = drive(run, "lfu|lru", ops, cap=3)
    assert out[3] == [0, 1, 2]     # b [0] (lfu's least, demoted), then a [1, 2]
    assert out[5] == [1, 2, 0]     # the hit promoted 0 into a, which demoted its least (1)
    assert out[6] == 1             # b's victim leaves first


@pytest.mark.parametrize("run", BACKENDS)
def test_segmented_filters_only_when_a_filters(run):
    params = (P[0], P[1], 1.0, 4, *P[4:])
    ops = [("miss", 0, 1.0), ("miss", 1, 1.0), ("admits", 1)]
    assert drive(run, "frequency_threshold|lru", ops, params=params)[-1] is False
    assert drive(run, "lru|frequency_threshold", ops, params=params)[-1] is True


@pytest.mark.parametrize("run", BACKENDS)
def test_arc_a_ghost_hit_adapts_and_enters_t2(run):
    ops = ins(0, 1) + [("hit", 0, 1.0), ("miss", 2, 1.0), ("evict", None, 2, False),
                       ("insert", 2, 1.0), ("miss", 1, 1.0), ("evict", None, 1, False),
                       ("insert", 1, 1.0), ("keys",)]
    out = drive(run, "arc", ops, cap=2)
    assert out[4] == 1                  # T1 [1] over p = 0: REPLACE takes T1's, into B1
    assert out[7] == 0                  # 1 in B1: p = 1, |T1| = 1 is not above it: T2's
    assert out[-1] == [2, 1]            # T1 [2], T2 [1]: the ghost came back into T2


@pytest.mark.parametrize("run", BACKENDS)
def test_arc_replace_takes_t1_at_p_when_the_incoming_key_is_in_b2(run):
    """Fig. 4's REPLACE: |T1| = p with the incoming key in B2 still takes T1's LRU key."""
    seq = [1, 2, 3, "h1", "h1", 5, 0, "h0", "h1", "h1", 4, "h1", 3, 5]
    ops = []
    for x in seq:
        if isinstance(x, str):
            ops.append(("hit", int(x[1:]), 1.0))
            continue
        ops.append(("miss", x, 1.0))
        if x not in (1, 2, 3) or ops.count(("miss", x, 1.0)) > 1:
            ops.append(("evict", None, x, False))
        ops.append(("insert", x, 1.0))
    ops += [("miss", 0, 1.0), ("keys",), ("evict", None, 0, False), ("keys",)]
    # T1 [4], T2 [3, 5], 0 in B2 and p = 1 = |T1| after the miss
    assert drive(run, "arc", ops, cap=3, khi=8, L=1, E=8)[-3:] == [[4, 3, 5], 4, [3, 5]]


@pytest.mark.parametrize("run", BACKENDS)
def test_s3fifo_a_key_hit_twice_in_s_moves_to_m(run):
    ops = ins(0, 1, 2) + [("hit", 0, 1.0), ("hit", 0, 1.0), ("evict", None, 3, False), ("keys",)]
    assert drive(run, "s3fifo", ops, cap=3)[-2:] == [1, [2, 0]]


@pytest.mark.parametrize("run", BACKENDS)
def test_lfru_evicts_unprivileged_first(run):
    ops = ins(0, 1, 2) + [("hit", 1, 1.0), ("keys",), ("evict", None, 3, False)]
    assert drive(run, "lfru", ops, cap=3)[-2:] == [[0, 2, 1], 0]


@pytest.mark.parametrize("run", BACKENDS)
def test_crf_keeps_the_crf_across_evictions(run):
    """A key used at steps 0 and 1 comes back with its CRF: it outlives a key used once."""
    ops = [("begin", 0, 0), ("miss", 0, 1.0), ("insert", 0, 1.0), ("begin", 1, 0),
           ("hit", 0, 1.0), ("discard", 0), ("begin", 2, 0), ("miss", 1, 1.0), ("insert", 1, 1.0),
           ("miss", 0, 1.0), ("insert", 0, 1.0), ("begin", 3, 0), ("keys",)]
    assert drive(run, "crf", ops)[-1] == [1, 0]


@pytest.mark.parametrize("run", BACKENDS)
def test_crf_a_second_hit_in_a_step_changes_nothing(run):
    """(The Python store once pushed an entry equal to the live one and compared the keys of
    the two, a TypeError; tests/test_eviction_engines.py has the runtime that met it.)"""
    ops = [("begin", 4, 0)] + ins(0, 1) + [("hit", 0, 1.0), ("hit", 0, 1.0), ("keys",)]
    assert drive(run, "crf", ops)[-1] == [1, 0]   # 1 never used: CRF 0; 0's CRF is 1


@pytest.mark.parametrize("run", BACKENDS)
def test_crf_a_use_at_an_earlier_step(run):
    """A key used at step S + 1 and again at step S (an explicit step that went back), far
    from step 0: its new heap entry ties its stale one on (g, last, seq), g being rounded at
    2^62 / 128. (The Python store compared the live key with the stale entry's None.)"""
    s = 2 ** 62
    ops = [("begin", s, 0)] + ins(0, 1) + [("hit", 0, 1.0), ("begin", s + 1, 0), ("hit", 0, 1.0),
                                          ("begin", s, 0), ("hit", 0, 1.0), ("keys",)]
    assert drive(run, "crf", ops)[-1] == [1, 0]


@needs_engine
@pytest.mark.parametrize("rule", ["crf", "classlru"])
def test_a_step_far_back_saturates_the_crf(rule):
    """A use 2^62 steps before a key's last use multiplies its CRF by 2^(2^62 / H), which
    overflows: the CRF saturates at the largest finite float (the top class), and a later use
    decays it to 0 rather than to NaN (inf * 0), so classes, orders and victims stay defined,
    the same on both backends. (The Python classlru raised on a class of -1.)"""
    far = 2 ** 62
    ops = [("begin", far, 0)] + [x for k in (0, 1, 2) for x in (("miss", k, 1.0), ("insert", k, 1.0))] + [
        ("begin", 0, 0), ("hit", 0, 1.0), ("keys",), ("begin", far, 0), ("hit", 1, 1.0), ("keys",),
        ("begin", far + 1, 0), ("hit", 0, 1.0), ("keys",), ("evict", None, 3, False), ("keys",)]
    outs = [run(rule, 4, 0, 8, 2, 4, P, ops) for run in (py_run, c_run)]
    assert outs[0] == outs[1]
    assert sorted(outs[0][-1]) == sorted({0, 1, 2} - {outs[0][-2]})


@pytest.mark.parametrize("run", BACKENDS)
def test_classlru_spares_the_keys_of_the_current_step(run):
    ops = [("begin", 0, 0)] + [x for k in (0, 1) for x in (("miss", k, 1.0), ("insert", k, 1.0))] + [
        ("begin", 1, 0), ("hit", 0, 1.0), ("evict", None, 2, False), ("evict", None, 2, False)]
    assert drive(run, "classlru", ops)[-2:] == [1, None]


@pytest.mark.parametrize("run", BACKENDS)
def test_classlru_equal_age_over_class_goes_to_the_lower_class(run):
    """A half-life of 10^9 steps: a CRF counts uses. Key 0 used at steps 0, 1, 2 is class 1
    (CRF just under 3); key 1 used at step 3 is class 0. At step 4 both have age / 2^class 1."""
    params = (*P[:5], 10**9)
    ops = [("begin", 0, 0), ("miss", 0, 1.0), ("insert", 0, 1.0), ("begin", 1, 0),
           ("hit", 0, 1.0), ("begin", 2, 0), ("hit", 0, 1.0), ("begin", 3, 0), ("miss", 1, 1.0),
           ("insert", 1, 1.0), ("begin", 4, 0), ("keys",), ("evict", None, 2, False)]
    assert drive(run, "classlru", ops, params=params)[-2:] == [[1, 0], 1]


@pytest.mark.parametrize("run", BACKENDS)
def test_vllm_lfru_lowest_uses_over_age(run):
    ops = ins(0, 1, 2) + [("hit", 0, 1.0), ("hit", 0, 1.0), ("keys",), ("evict", None, 3, False)]
    # clock 5: 0: 3/(5-5+1) = 3; 1: 1/(5-2+1) = 0.25; 2: 1/(5-3+1) = 1/3
    assert drive(run, "vllm_lfru", ops)[-2:] == [[1, 2, 0], 1]


@pytest.mark.parametrize("run", BACKENDS)
def test_farthest_layer_evicts_the_layer_reached_last(run):
    """L = 3 shared: at layer 1 the order of victims is layer 1, 0, then 2."""
    ops = [("insert", k, 1.0) for k in (0, 4, 8, 1)] + [("begin", 0, 1), ("keys",),
                                                          ("evict", [4], None, False), ("keys",)]
    out = drive(run, "farthest_layer", ops, khi=12, L=3, E=4)
    assert out[-3:] == [[4, 0, 1, 8], 0, [4, 1, 8]]


# ------------------------------------------------------------------ least_stale
LS = "least_stale"


@pytest.mark.parametrize("run", BACKENDS)
def test_least_stale_a_new_step_makes_every_current_key_stale_in_order(run):
    ops = [("begin", 0, 0)] + ins(2, 0, 1) + [("keys",), ("begin", 1, 0), ("keys",),
                                               ("insert", 3, 0.5), ("keys",)]
    out = drive(run, LS, ops)
    assert out[4] == [2, 0, 1] and out[6] == [2, 0, 1] and out[-1] == [2, 0, 1, 3]
    assert drive(run, LS, ops + [("evict", None, 4, False)])[-1] == 2


@pytest.mark.parametrize("run", BACKENDS)
def test_least_stale_a_hit_moves_a_stale_key_to_current_and_leaves_a_current_one(run):
    ops = [("begin", 0, 0)] + ins(0, 1, 2) + [("begin", 1, 1), ("hit", 1, 1.0), ("hit", 0, 1.0),
                                              ("keys",), ("hit", 1, 1.0), ("keys",)]
    out = drive(run, LS, ops)
    # stale [2], current [1, 0]; the second hit on 1 (current) moves nothing (FIFO)
    assert out[-3] == [2, 1, 0] and out[-1] == [2, 1, 0]


@pytest.mark.parametrize("run", BACKENDS)
def test_least_stale_the_same_step_again_is_not_a_new_step(run):
    ops = [("begin", 5, 0)] + ins(0, 1) + [("begin", 5, 1), ("hit", 0, 1.0), ("keys",),
                                           ("begin", 6, 0), ("hit", 0, 1.0), ("keys",)]
    out = drive(run, LS, ops)
    assert out[5] == [0, 1]     # 0 is still current: the hit leaves it
    assert out[-1] == [1, 0]    # step 6: 0 was stale, the hit made it current


@pytest.mark.parametrize("run", BACKENDS)
def test_least_stale_victim_is_stale_first_then_current_sparing_the_excluded(run):
    ops = [("begin", 0, 0)] + ins(0, 1) + [("begin", 1, 0)] + ins(2, 3) + [
        ("evict", [0], None, False),     # stale [0, 1]: 0 is in use -> 1
        ("evict", [0], None, False),     # stale [0] all in use -> current's head 2
        ("evict", [0, 3], None, False),  # nothing left but what is excluded
        ("evict", 0, None, True),        # a segmented-style exclusion of one key
        ("evict", None, None, False), ("len",)]
    assert drive(run, LS, ops)[-6:] == [1, 2, None, 3, 0, 0]


@pytest.mark.parametrize("run", BACKENDS)
def test_least_stale_keys_loaded_before_any_step_go_stale_at_the_first(run):
    ops = ins(1, 0) + [("begin", 3, 0), ("insert", 2, 0.5), ("hit", 0, 1.0), ("keys",)]
    assert drive(run, LS, ops)[-1] == [1, 2, 0]


@pytest.mark.parametrize("run", BACKENDS)
def test_least_stale_discard_forgets_from_either_queue(run):
    ops = [("begin", 0, 0)] + ins(0, 1) + [("begin", 1, 0), ("insert", 2, 0.5), ("discard", 0),
                                           ("discard", 2), ("discard", 7), ("keys",), ("len",)]
    assert drive(run, LS, ops)[-2:] == [[1], 1]


def test_least_stale_is_clocked_and_not_a_segmented_side():
    assert LeastStale.clocked and not LeastStale.needs_miss and not LeastStale.filters
    assert LS not in SEGMENT_RULES
    with pytest.raises(ValueError, match="cannot be one side"):
        make_store("least_stale|lru", 6, dict(zip(PARAM_NAMES, DEFAULTS)))
    ev = schema.param("cache.eviction").enum_value(LS)
    assert ev.clocked and not ev.segment and not ev.replay_only
    diags = mpl.check_text("policy p { cache { capacity = 6 eviction = least_stale | lru } }\n")
    assert [d.code for d in diags] == ["MPL208"]


@needs_engine
def test_least_stale_is_no_segmented_side_in_c_either():
    with pytest.raises(ValueError, match="single-queue"):
        c_run("lru | least_stale", 3, 0, 8, 2, 4, P, [])


def test_least_stale_runs_in_the_runtime_as_its_two_queues_say():
    """Both runtimes call begin for it (a clocked rule): a shared cache over a random trace
    with repeated steps evicts what a literal two-queue model of the description evicts."""
    L, E, cap = 3, 5, 4
    for backend in ("pure", "compiled"):
        _least_stale_run(backend, L, E, cap)


def _least_stale_run(backend, L, E, cap):
    from mpl.runtime import compiled
    if backend == "compiled" and not compiled.available():
        return
    rt = mpl.loads(f"policy p {{ cache {{ capacity = {cap} eviction = least_stale }} }}").runtime(
        L, E, 2, backend=backend)
    stale, current, seen = [], [], None
    r = random.Random(5)
    step = evictions = 0
    for _ in range(300):
        step += r.choice([0, 0, 1])
        layer = r.randrange(L)
        experts = r.sample(range(E), 2)
        plan = rt.dispatch(layer, experts, step=step)
        if step != seen:                       # the reference
            seen = step
            stale += current
            current = []
        victims = []
        for e in experts:
            k = (layer, e)
            if k in current:
                continue
            if k in stale:
                stale.remove(k)
                current.append(k)
                continue
            if len(stale) + len(current) >= cap:
                inuse = {(layer, x) for x in experts}
                v = next((x for x in stale + current if x not in inuse), None)
                if v is None:
                    continue                   # streamed
                (stale if v in stale else current).remove(v)
                victims.append(v)
            current.append(k)
        assert [k for k, _slot in plan.evicted] == victims
        evictions += len(victims)
    assert evictions > 100


# ------------------------------------------------------------------ the registry
@needs_engine
def test_the_engine_names_the_registry_and_the_schema_rules_with_their_flags():
    names = [n for n, _ in _engine.rules()]
    assert names == list(RULES)
    enum = schema.param("cache.eviction").enum
    assert set(names) == {e.name for e in enum if not e.replay_only and e.name != "fallback"}
    assert _engine.STORE_PARAMS == PARAM_NAMES
    for name, flags in _engine.rules():
        cls, ev = RULES[name], schema.param("cache.eviction").enum_value(name)
        assert bool(flags & _engine.STORE_NEEDS_MISS) == cls.needs_miss, name
        assert bool(flags & _engine.STORE_FILTERS) == cls.filters, name
        assert bool(flags & _engine.STORE_CLOCKED) == cls.clocked == ev.clocked, name
        assert bool(flags & _engine.STORE_SIDE) == (name in SEGMENT_RULES) == ev.segment, name


@needs_engine
@pytest.mark.parametrize("code", range(len(PARAM_NAMES)))
def test_the_engine_takes_a_store_parameter_within_the_schemas_range_only(code):
    """The engine reads each store parameter's range from the schema: its bounds are taken or
    refused as the schema says, a count takes whole numbers only, and the error names the
    schema's range."""
    p = schema.param(PARAM_NAMES[code])
    step = max(1.0, float(p.max)) * 1e-6

    def takes(v):
        try:
            _engine._store_run("lfu", 3, 0, 8, 2, 4, P, ops_of(("set_param", code, v)))
        except ValueError as e:
            assert PARAM_NAMES[code] in str(e) and p.range_text() in str(e)
            return False
        return True

    assert takes(p.min) is not p.min_open
    assert takes(p.max) is not p.max_open
    assert not takes(p.min - step) and not takes(p.max + step) and not takes(math.nan)
    assert takes(float(p.default))
    assert takes((p.min + p.max) / 2) is (p.type != schema.COUNT or (p.min + p.max) % 2 == 0)


# ------------------------------------------------------------------ bad calls
def ops_of(*ops):
    return packed(*map(pack_op, ops))


NO_OPS = b""
BAD_CALLS = [
    (("nope", 3, 0, 8, 2, 4, P, NO_OPS), ValueError, "unknown"),
    (("belady", 3, 0, 8, 2, 4, P, NO_OPS), ValueError, "unknown"),
    (("arc|lru", 3, 0, 8, 2, 4, P, NO_OPS), ValueError, "single-queue"),
    (("lru|", 3, 0, 8, 2, 4, P, NO_OPS), ValueError, "unknown"),
    (("lru|" + "x" * 200, 3, 0, 8, 2, 4, P, NO_OPS), ValueError, "unknown"),
    (("lr\0u", 3, 0, 8, 2, 4, P, NO_OPS), ValueError, None),
    (("lru", -1, 0, 8, 2, 4, P, NO_OPS), ValueError, "capacity"),
    (("lru", 2**31, 0, 8, 2, 4, P, NO_OPS), OverflowError, None),
    (("lru", 3.0, 0, 8, 2, 4, P, NO_OPS), TypeError, None),
    (("lru", 3, 0, 8, 0, 4, P, NO_OPS), ValueError, "L"),
    (("lru", 3, 0, 8, 2**20, 2**20, P, NO_OPS), ValueError, "L, E"),
    (("lru", 3, 5, 5, 2, 4, P, NO_OPS), ValueError, "khi"),
    (("lru", 3, 0, 9, 2, 4, P, NO_OPS), ValueError, "khi"),
    (("lru", 3, -1, 8, 2, 4, P, NO_OPS), ValueError, "klo"),
    (("lru", 3, 0, 8, 2, 4, P[:5], NO_OPS), TypeError, None),
    (("lfu", 3, 0, 8, 2, 4, (0.0, *P[1:]), NO_OPS), ValueError, "frequency_decay"),
    (("lfu", 3, 0, 8, 2, 4, (P[0], 1.5, *P[2:]), NO_OPS), ValueError, "decay_interval"),
    (("lfu", 3, 0, 8, 2, 4, (P[0], 1e30, *P[2:]), NO_OPS), ValueError, "decay_interval"),
    (("lfu", 3, 0, 8, 2, 4, (*P[:3], math.nan, *P[4:]), NO_OPS), ValueError, "freq_window"),
    (("lfu", 3, 0, 8, 2, 4, (*P[:5], -1), NO_OPS), ValueError, "crf_half_life"),
    (("lfu", 3, 0, 8, 2, 4, ("x", *P[1:]), NO_OPS), TypeError, None),
    (("lru", 3, 0, 8, 2, 4, P, [("keys",)]), TypeError, None),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("keys",))[:-1]), ValueError, "whole"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("hit", 1, 1.0))), ValueError, "not resident"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(*[("insert", 1, 1.0)] * 2)), ValueError, "which is resident"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("miss", 8, 1.0))), ValueError, "key"),
    (("lru", 3, 4, 8, 2, 4, P, ops_of(("insert", 3, 1.0))), ValueError, "key"),
    (("lru", 3, 4, 8, 2, 4, P, ops_of(("admits", 3))), ValueError, "key"),
    (("lru", 3, 4, 8, 2, 4, P, ops_of(("discard", 8))), ValueError, "key"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("insert", 1, math.inf))), ValueError, "finite"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("insert", 1, math.nan))), ValueError, "finite"),
    (("lru", 3, 0, 8, 2, 4, P, packed((12, 0, 0, 0, 0.0))), ValueError, "no such op"),
    (("lru", 3, 0, 8, 2, 4, P, packed((-1, 0, 0, 0, 0.0))), ValueError, "no such op"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("evict", [9], None, False))), ValueError, "excluded"),
    (("lru", 3, 0, 8, 2, 4, P, packed((4, -1, -1, 1, 0.0))), ValueError, "excluded"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("evict", 8, None, True))), ValueError, "excluded"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("evict", -2, None, True))), ValueError, "excluded"),
    (("lru", 3, 0, 8, 2, 4, P, packed((4, 0, -1, 3, 0.0))), ValueError, "excluded"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("evict", None, 2**40, False))), ValueError, "incoming"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("evict", None, -2, False))), ValueError, "incoming"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("resize", -2))), ValueError, "capacity"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("resize", 2**31))), ValueError, "capacity"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("set_param", 6, 1.0))), ValueError, "parameter"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("set_param", -1, 1.0))), ValueError, "parameter"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("set_param", 4, 0.0))), ValueError, "score_ema_alpha"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("begin", 0, 2))), ValueError, "layer"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("begin", 0, -1))), ValueError, "layer"),
    (("lru", 3, 0, 8, 2, 4, P, ops_of(("prepare", 2, 1))), ValueError, "layer"),
    (("frequency_threshold", 3, 0, 8, 2, 4, P, ops_of(("prepare", 0, -1))), ValueError, "count"),
]


@needs_engine
@pytest.mark.parametrize("args,exc,match", BAD_CALLS, ids=[str(i) for i in range(len(BAD_CALLS))])
def test_a_bad_call_is_an_exception(args, exc, match):
    with pytest.raises(exc, match=match):
        _engine._store_run(*args)


@needs_engine
def test_an_exclusion_names_keys_by_bit_or_one_key():
    """The bits of an evict's exclusion name keys 0..62 of the model: key 63 cannot be
    excluded by them (it is the second victim here); one key is excluded by number, any key
    of the model. (A bit past the model's keys is an error: BAD_CALLS.)"""
    ops = [("insert", k, 0.5) for k in (0, 1, 62, 63)] + [("evict", [0, 62], None, False),
                                                        ("evict", [0, 62], None, False),
                                                        ("evict", [0, 62], None, False)]
    assert c_run("lru", 4, 0, 64, 1, 64, P, ops)[-3:] == [1, 63, None]
    assert c_run("lru", 4, 0, 64, 1, 64, P, ops[:4] + [("evict", 0, None, True)] * 2)[-2:] == [1, 62]


@needs_engine
def test_a_huge_prepare_is_a_memory_error_or_nothing():
    """A window never takes more room than freq_window entries: asking for 2**40 accesses
    reserves only the window (10^6 entries at most), on both a store and a pair."""
    params = (*P[:3], 10**6, *P[4:])
    for rule in ("frequency_threshold", "frequency_threshold|lru"):
        assert c_run(rule, 3, 0, 8, 2, 4, params, [("prepare", 1, 2**40), ("miss", 4, 1.0),
                                                   ("admits", 4)]) == [None, None, True]
