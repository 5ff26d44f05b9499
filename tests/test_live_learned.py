"""The compiled live dispatch (``_fast.LiveState``) holding a policy whose prefetch strategy
is ``learned``: it calls the runtime's compiled predictor (``_fast.Learned``) in C where the
pure dispatch calls its ``observe`` and ``predict``. Against the pure runtime, the
reference: random learned policies (with adapt rules, schedule modes, TTL, memory
pressure, per-layer caches) and random calls (weights, speculative predictions, several
tokens, explicit steps, bad arguments), with the predictor replaced, mutated (through the
runtime or a reference kept), swapped for the Python one, the state synced and the policy
taken off the C path mid-stream: every Plan or error, the stats, the full state and the
predictor's ``dump()`` are the same. Then the owner rules: a reference held, not leaked; a
load of a predictor of another shape refused; a read from inside a dispatch; a step beyond
the predictor's range. Derandomized (property_profiles.prop)."""

from __future__ import annotations

import gc
import random
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, strategies as st

import mpl
from mpl.runtime import fast
from mpl.runtime.prefetch import Learned
from property_profiles import prop
from runtime_helpers import full_state, state_policy
from test_live_dispatch import calls, fields, same_call
from test_live_safety import live_load_args, with_handler

needs_live = pytest.mark.skipif(fast._kernel is None or not hasattr(fast._kernel, "LiveState"),
                                reason=f"the compiled live dispatch is not available: {fast._WHY}")

SETTINGS = prop(150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

POLICY = """
policy p {
    cache { capacity = 6 eviction = lfu }
    prefetch { strategy = learned budget = 3 confidence = 0.2 lookahead = 2 context_layers = 2 }
    schedule { mode = hybrid }
    monitor { metrics = [hit_rate, prefetch_accuracy] window = 8 log_interval = 5 }
    adapt { when prefetch_accuracy < 0.3 for 40 accesses { confidence = 0.5 history_window = 4 } }
}
"""


def pair(text, L, E, K):
    pol = mpl.loads(text)
    a = pol.runtime(L, E, K, expert_bytes=2e8)
    with fast.pure():
        b = pol.runtime(L, E, K, expert_bytes=2e8)
    return a, b


def fresh(L, E, r, compiled):
    """A new predictor of the runtime's shape (the compiled one or its Python reference)."""
    shape = (L, E, r.randint(1, 3), r.randint(1, 6), r.choice([0.0, 0.1, 0.4]), r.randint(1, 3))
    return fast._kernel.Learned(*shape) if compiled else Learned(*shape)


@needs_live
@pytest.mark.parametrize("via", ["dispatch", "hits"])
@given(st.integers(0, 2 ** 32 - 1), st.data())
@SETTINGS
def test_a_learned_policy_in_live_state_equals_pure_call_by_call(via, seed, data):
    from mpl.api import from_ir
    r = random.Random(seed)
    pol = from_ir(state_policy(r, learned=True))
    L, E, K = r.choice([(1, 4, 2), (2, 8, 2), (3, 10, 3), (4, 6, 1), (3, 12, 6)])
    a = pol.runtime(L, E, K, expert_bytes=2e8)
    with fast.pure():
        b = pol.runtime(L, E, K, expert_bytes=2e8)
    assert fast.live_backend(b) == "pure"
    why = fast.live_unsupported(a)
    if a.learned is not None:        # the learned strategy is never the reason
        assert why is None or "learned" not in why, why
    held = (a.learned, b.learned)    # references kept (a read of a.learned syncs: kept once)
    seq = data.draw(st.lists(st.one_of(calls(L, E, K), st.sampled_from(
        ["read", "stall", "replace", "mutate", "held", "python", "leave", "learned"])),
        min_size=30, max_size=120))
    for item in seq:
        if item == "read":
            assert full_state(a) == full_state(b)
        elif item == "stall":
            a.add_stall(1.5)
            b.add_stall(1.5)
        elif item == "learned":      # the predictor's whole state, read between dispatches
            assert (a.learned is None) == (b.learned is None)
            if a.learned is not None:
                assert a.learned.dump() == b.learned.dump()
        elif item == "replace" and a.learned is not None:   # a new compiled predictor
            s = r.getstate()
            a.learned = fresh(L, E, r, True)
            r.setstate(s)
            b.learned = fresh(L, E, r, False)
            held = (a.learned, b.learned)
        elif item == "python" and a.learned is not None and r.random() < 0.3:
            s = r.getstate()         # the Python predictor: the pure dispatch from now on
            a.learned = fresh(L, E, r, False)
            r.setstate(s)
            b.learned = fresh(L, E, r, False)
            held = (a.learned, b.learned)
        elif item == "mutate" and a.learned is not None:    # through the runtime
            x = r.random()
            for rt in (a, b):
                rt.learned.confidence = x
                rt.learned.theta = [t * 0.5 for t in rt.learned.theta]
        elif item == "held" and held[0] is not None:        # through a reference kept
            w = r.randint(1, 5)
            for lr in held:
                lr.window = w
                lr.rate = 0.1
        elif item == "leave" and r.random() < 0.2:          # synced, then the pure dispatch
            fast.live_sync(a)
            a.__dict__.pop("dispatch", None)
            assert fast.live_backend(a) == "pure"
        elif isinstance(item, tuple):
            args, kw = item
            same_call(a, b, args, kw, via)
    assert full_state(a) == full_state(b)
    assert a.stats() == b.stats()


def trace(L, E, K, steps, seed):
    """(layer, experts, weights, predictions, tokens) per dispatch: a routing with structure
    (each layer's experts follow the previous layer's) and speculative predictions."""
    r = random.Random(seed)
    out = []
    prev = r.sample(range(E), K)
    for step in range(steps):
        for layer in range(L):
            ex = list(dict.fromkeys([(e * 3 + layer) % E for e in prev] + r.sample(range(E), K)))[:K]
            if r.random() < 0.3:
                ex = r.sample(range(E), K)
            w = [r.random() + 0.01 for _ in ex]
            t = (layer + 1) % L
            preds = {t: r.sample(range(E), K)} if r.random() < 0.4 else None
            out.append((layer, ex, w, preds, r.choice([1, 1, 1, 4, 40])))
            prev = ex
    return out


@needs_live
def test_a_long_learned_stream_stays_in_c_and_equals_the_pure_runtime():
    """A learned policy with a hybrid schedule, a monitor and an adapt rule that changes the
    predictor's confidence and window: every dispatch of a long stream (several tokens,
    predictions) runs in C (the state never leaves it), with the same Plans, stats and
    predictor state as the pure runtime; the adapt rule fired on both."""
    L, E, K = 6, 32, 4
    a, b = pair(POLICY, L, E, K)
    assert fast.live_backend(a) == "compiled" and fast.live_unsupported(a) is None
    assert type(a.__dict__["learned"]) is fast._kernel.Learned
    live = a._live
    for layer, ex, w, preds, tok in trace(L, E, K, 120, 1):
        kw = {"predictions": preds} if preds else {}
        assert fields(a.dispatch(layer, ex, w, tok, **kw)) == fields(b.dispatch(layer, ex, w, tok, **kw))
    assert live.owns        # never synced on the way: no dispatch left the C path
    assert a.stats() == b.stats()
    assert a.stats()["prefetch_loads"] > 0 and a.stats()["adapt_log"]
    assert a.learned.dump() == b.learned.dump()
    assert a.learned.confidence == b.learned.confidence == 0.5
    assert full_state(a) == full_state(b)


@needs_live
def test_the_predictor_state_is_the_same_after_every_dispatch():
    """The predictor's dump() after every dispatch (each read syncs; the next dispatch takes
    the state again): equal to the pure runtime's, and live_sync leaves the pure path to go
    on exactly where C left it."""
    L, E, K = 4, 12, 3
    a, b = pair(POLICY, L, E, K)
    stream = trace(L, E, K, 40, 2)
    for i, (layer, ex, w, preds, tok) in enumerate(stream):
        kw = {"predictions": preds} if preds else {}
        assert fields(a.dispatch(layer, ex, w, tok, **kw)) == fields(b.dispatch(layer, ex, w, tok, **kw))
        if i % 3 == 0:
            assert a.learned.dump() == b.learned.dump()
        if i == 100:                 # off the C path for good, from the synced state
            fast.live_sync(a)
            del a.dispatch
            assert fast.live_backend(a) == "pure"
    assert full_state(a) == full_state(b)


@needs_live
def test_a_step_beyond_the_predictors_range_is_the_pure_dispatchs_error():
    """The compiled predictor takes steps up to 2^62: a dispatch at a larger step raises the
    pure dispatch's ValueError (here against the pure dispatch with the compiled predictor),
    after the same partial work."""
    pol = mpl.loads(POLICY)
    a, b = pol.runtime(3, 8, 2), pol.runtime(3, 8, 2)
    del b.dispatch                      # the pure dispatch, the compiled predictor
    assert fast.live_backend(a) == "compiled" and fast.live_backend(b) == "pure"
    assert type(b.learned) is fast._kernel.Learned
    for rt in (a, b):
        rt.dispatch(0, [1, 2])
    errs = []
    for rt in (a, b):
        with pytest.raises(ValueError) as e:
            rt.dispatch(1, [3, 4], step=2 ** 62 + 1)
        errs.append(str(e.value))
    assert errs[0] == errs[1]
    assert full_state(a) == full_state(b)
    for rt in (a, b):
        rt.dispatch(2, [5], step=2 ** 62)       # the largest step it takes
    assert full_state(a) == full_state(b)


@needs_live
def test_the_predictor_is_held_not_leaked():
    """LiveState holds one reference to the predictor while it holds the state, none after
    a sync; a runtime dropped releases it."""
    a, _ = pair(POLICY, 3, 8, 2)
    lr = a.learned
    base = sys.getrefcount(lr)
    for i in range(50):
        a.dispatch(i % 3, [i % 8, (i + 3) % 8])
        fast.live_sync(a)
    assert sys.getrefcount(lr) == base
    a.dispatch(0, [1])
    assert a._live.owns
    del a
    gc.collect()
    assert sys.getrefcount(lr) == 2         # (lr and getrefcount's argument)
    assert lr.dump()["cur"][0] is not None  # the object is whole


@needs_live
def test_a_load_of_a_predictor_it_cannot_hold_is_refused():
    """LiveState.load takes only a _fast.Learned of the runtime's layers and experts (its C
    functions index the predictor's tables by them), and the learned strategy only with one."""
    a, _ = pair(POLICY, 3, 8, 2)
    a.dispatch(0, [1, 2])
    live = a._live
    args = list(live_load_args(a))
    cfg = list(args[0])
    assert type(cfg[-3]) is fast._kernel.Learned and cfg[-2] is True   # (then priority routing)
    for bad, predicts in ((fast._kernel.Learned(4, 8, 2, 5, 0.1, 1), True),
                          (fast._kernel.Learned(3, 9, 2, 5, 0.1, 1), True),
                          (Learned(3, 8, 2, 5, 0.1, 1), True), ("learned", True), (None, True)):
        args[0] = tuple(cfg[:-3] + [bad, predicts, cfg[-1]])
        with pytest.raises(ValueError):
            live.load(*args)
        assert not live.owns
    a.dispatch(1, [3])                  # the runtime goes on (taken again)
    assert a._live.owns and a.stats()["accesses"] == 3


@needs_live
def test_a_predictor_of_another_shape_or_the_python_one_takes_the_pure_dispatch():
    a, b = pair(POLICY, 3, 8, 2)
    for bad in (fast._kernel.Learned(3, 9, 2, 5, 0.1, 1), Learned(3, 8, 2, 5, 0.1, 1)):
        a, b = pair(POLICY, 3, 8, 2)
        a.dispatch(0, [1])
        b.dispatch(0, [1])
        a.learned = bad
        b.learned = Learned(3, 9, 2, 5, 0.1, 1) if isinstance(bad, fast._kernel.Learned) \
            else Learned(3, 8, 2, 5, 0.1, 1)
        got = []
        for rt in (a, b):
            try:
                rt.dispatch(1, [2, 3])
                got.append(("ok", rt.learned.dump()["cur"]))
            except Exception as e:       # (the pure dispatch's own error, on both)
                got.append((type(e).__name__, str(e)))
        assert got[0] == got[1]
        assert fast.live_backend(a) == "pure" and "learned" in a._live_why


@needs_live
def test_a_handler_inside_the_dispatch_reads_the_predictor_and_cannot_replace_it():
    """The monitor logs from inside the dispatch: a handler reading rt.learned there gets
    the runtime's predictor itself (its state is its own), as on the pure runtime; one
    setting it while C holds the state is refused (RuntimeBusyError) and the run ends as
    the pure runtime's without the handler."""
    text = POLICY.replace("log_interval = 5", "log_interval = 1")
    stream = trace(3, 8, 2, 10, 4)

    def run(rt):
        return [rt.dispatch(layer, e, w) for layer, e, w, _, _ in stream]
    a, b = pair(text, 3, 8, 2)
    seen = [with_handler(lambda record, rt=rt: rt.learned.dump()["theta"], lambda rt=rt: run(rt))
            for rt in (a, b)]
    assert seen[0] and seen[0] == seen[1] and all(k == "ok" for k, _ in seen[0])
    assert full_state(a) == full_state(b)
    a, b = pair(text, 3, 8, 2)
    seen = with_handler(lambda record: setattr(a, "learned", None), lambda: run(a))
    run(b)
    assert seen and all(k == "RuntimeBusyError" for k, _ in seen)
    assert full_state(a) == full_state(b)


@needs_live
def test_threads_dispatching_into_one_learned_runtime():
    """Dispatches from two threads into one runtime: the guard lets one in at a time; every
    access is counted and the predictor saw every dispatch (its rows are whole)."""
    a, _ = pair(POLICY, 4, 16, 3)
    stream = trace(4, 16, 3, 30, 5)
    errors = []

    def run():
        try:
            for layer, ex, w, preds, tok in stream:
                a.dispatch(layer, ex, w, tok)
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=run) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert a.stats()["accesses"] == 2 * sum(len(x[1]) for x in stream)
    assert a.learned.dump()["rows"]


@needs_live
def test_a_learned_replay_runs_through_the_live_dispatch():
    """replay_records of a learned policy runs the record loop through LiveState: the same
    stats, state and predictor as the pure loop."""
    from mpl.timemodel.timeline import Timeline
    from test_fast_equivalence import costs
    L, E, K = 4, 12, 3
    recs = [(layer, ex, w, tok, None, preds, None)
            for layer, ex, w, preds, tok in trace(L, E, K, 30, 6)]
    a, b = pair(POLICY, L, E, K)
    n = fast.live_replays
    a.replay_records(recs, Timeline(costs()))
    with fast.pure():
        b.replay_records(recs, Timeline(costs()))
    assert fast.live_replays == n + 1
    assert full_state(a) == full_state(b)
