"""A trace whose header declares far more layers and experts than its records name (a wide
header): a runtime on that shape decides exactly as on a narrow one, on both backends (the
compiled engine holds shapes of up to 2^22 layers x experts; a wider one runs pure, and says
so); the Belady optimum too, in C, through its dense numbering of the keys that occur
(mpl.sim.belady.DENSE_KEYS) and through the reference it falls back to. The memory and time
such headers cost through ``mplc`` are measured by tests/test_hostile_inputs.py."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given

from mpl.api import from_ir
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.runtime.errors import RuntimeConfigError
from mpl.sim import belady as B
from mpl.timemodel.timeline import Timeline
from mpl.trace import Dispatch
from property_profiles import prop
from runtime_helpers import make_ir
from test_replay_backends import costs, scenarios, state

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

SETTINGS = prop(40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.data_too_large])

#: the wide shape: 2048 layers x 1024 experts = 2^21 keys (the engine holds up to 2^22)
WL, WE = 2048, 1024


def _layer(l):
    return l * 511 + 1


def _expert(e):
    return e * 80 + 7


def widen(pir, records):
    """The scenario's policy and records on the wide shape: layers and experts spread out in
    the same order (pins too); a per-layer budget derived from the layers."""
    vals = dict(pir.values)
    vals["cache.pin"] = tuple(_expert(e) for e in vals["cache.pin"])
    vals["per_layer.total_budget"] = None
    wide = make_ir(vals, blocks=tuple(pir.blocks))
    recs = []
    for layer, experts, weights, tokens, step, preds, tokens_of in records:
        recs.append((_layer(layer), [_expert(e) for e in experts], weights, tokens, step, preds,
                     None if tokens_of is None else {_expert(e): n for e, n in tokens_of.items()}))
    return wide, recs


@needs_engine
@SETTINGS
@given(scenarios())
def test_a_wide_shape_replays_alike_on_both_backends(sc):
    pir, _shape, records, overlap = sc
    wide, recs = widen(pir, records)
    policy = from_ir(wide)
    K = _shape[2]
    try:
        a = policy.runtime(WL, WE, K, expert_bytes=2e8, backend="compiled")
    except RuntimeConfigError as e:
        # a dense predictor table this wide is over the engine's limit: refused when asked
        # for by name, and the runtime a caller gets by default is the pure one, saying why
        assert "cannot hold this runtime" in str(e) and "MiB" in str(e)
        auto = policy.runtime(WL, WE, K, expert_bytes=2e8)
        assert auto.backend == "pure" and "MiB" in auto.backend_reason
        return
    b = policy.runtime(WL, WE, K, expert_bytes=2e8, backend="pure")
    tl_a, tl_b = Timeline(costs(), overlap=overlap), Timeline(costs(), overlap=overlap)
    a.replay_records(iter(recs), tl_a)
    b.replay_records(iter(recs), tl_b)
    assert state(a, tl_a) == state(b, tl_b)


COUNTS = ("accesses", "hits", "misses", "evictions", "loads", "demand_loads",
          "background_loads", "streamed", "cpu_computes")


@SETTINGS
@given(scenarios())
def test_the_header_changes_no_decision(sc):
    """The same records under the narrow header and a wide one: the same counts."""
    pir, (L, E, K), records, overlap = sc
    # a derived budget follows the header's layers, and a prefetcher looks at the next layer
    # (on the narrow shape the last layer's next is layer 0, on the wide one a layer no record
    # names): both decide by the header's numbering
    if "per_layer" in pir.blocks or "prefetch" in pir.blocks:
        return
    wide, recs = widen(pir, records)
    narrow = from_ir(pir).runtime(L, E, K, expert_bytes=2e8)
    narrow.replay_records(iter(records), Timeline(costs(), overlap=overlap))
    w = from_ir(wide).runtime(WL, WE, K, expert_bytes=2e8)
    w.replay_records(iter(recs), Timeline(costs(), overlap=overlap))
    a, b = narrow.stats(), w.stats()
    assert {k: a[k] for k in COUNTS} == {k: b[k] for k in COUNTS}
    assert sum(a["per_layer"][i]["hits"] for i in range(L)) == \
        sum(b["per_layer"][_layer(i)]["hits"] for i in range(L))


def _wide_dispatches(seed: int, n: int, L: int, E: int, K: int) -> list[Dispatch]:
    r = random.Random(seed)
    layers = r.sample(range(L), 5)
    experts = r.sample(range(E), 40)
    out = []
    for i in range(n):
        rows = [r.sample(experts, K) for _ in range(1 if r.random() < 0.9 else 3)]
        out.append(Dispatch(i // 5, layers[i % 5], rows))
    return out


@needs_engine
@pytest.mark.parametrize("seed", range(6))
def test_belady_on_a_wide_shape_equals_the_reference(seed, monkeypatch):
    L, E, K = 65536, 65536, 4
    ds = _wide_dispatches(seed, 400, L, E, K)
    caps = [3] * L
    with forced("pure"):
        shared = B.belady(ds, E, capacity=7, num_layers=L).to_dict()
        per_layer = B.belady(ds, E, capacities=caps).to_dict()
    assert B.belady(ds, E, capacity=7, num_layers=L).to_dict() == shared
    assert B.belady(ds, E, capacities=caps).to_dict() == per_layer
    # keys that occur all over the shape: the reference, through the kernel's entry point
    monkeypatch.setattr(B, "DENSE_MAX_KEYS", 1)
    assert B.belady(ds, E, capacity=7, num_layers=L).to_dict() == shared
    assert B.belady(ds, E, capacities=caps).to_dict() == per_layer
    reqs, _ = B.requests_of(ds, E)
    out_c, out_p = [None] * len(reqs), [None] * len(reqs)
    r_c = B.simulate(reqs, 7, frozenset({ds[0].layer * E + ds[0].experts[0][0]}), E, outcomes=out_c)
    r_p = B.simulate_pure(reqs, 7, frozenset({ds[0].layer * E + ds[0].experts[0][0]}), E,
                          outcomes=out_p)
    assert (r_c.to_dict(), out_c) == (r_p.to_dict(), out_p)


def test_a_shape_beyond_the_engine_runs_pure_with_the_same_results():
    """A header of 4096 x 4096 layers x experts (2^24 keys, beyond the engine's tables): the
    runtime is pure and says why; its replay is the one a pure runtime makes."""
    L, E = 4096, 4096
    r = random.Random(1)
    recs = [(l, r.sample(range(E), 8), None, 1, i, None, None)
            for i, l in enumerate(r.sample(range(L), 3000))]
    pol = from_ir(make_ir({"cache.capacity": 8}))
    rt = pol.runtime(L, E, 8)
    assert rt.backend == "pure"
    if compiled.available():
        assert "keys" in rt.backend_reason
    a = pol.runtime(L, E, 8, backend="pure")
    a.replay_records(iter(recs), Timeline(costs()))
    rt.replay_records(iter(recs), Timeline(costs()))
    assert a.stats() == rt.stats()
