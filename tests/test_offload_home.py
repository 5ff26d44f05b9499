"""Home placement: a pool of one entry per key (a policy that can hold every expert) keeps key
(layer, e) in entry layer * E + e, and a dispatch whose experts are all on the device runs
the experts function on the layer's window of the pool with the router's own ids (no remap,
no upload). Checked: bit-identity for every family and implementation, the engine's counters
against the runtime's, and the home path against the remap path (the same policy with home
placement switched off) on the same generation: equal outputs, runtime statistics and
mechanism counts, also with evictions and reloads (TTL, an adapt rule cutting the
capacity)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mpl.offload import engine as engine_mod  # noqa: E402
from mpl.runtime import compiled  # noqa: E402
from mpl.runtime.backend import forced  # noqa: E402
from mpl.offload.hf import attach, discover  # noqa: E402
from mpl.offload.models import PRESETS, build_model, encode  # noqa: E402

from offload_helpers import generate, policy  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("Home is where the experts are")])
IMPLS = ("eager", "batched_mm", "grouped_mm")
# statistics that are times, or say which path served a dispatch
_TIMES = {"stall_ms", "copy_ms_host"}
_PATHS = {"lean_dispatches", "home_dispatches", "home_placement"}


def _every_expert(model) -> str:
    ls = discover(model)
    return f"cache {{ capacity = {len(ls) * ls[0].num_experts} }}"


def _resident_counts_match(h) -> bool:
    counts = [0] * len(h.layers)
    for key in h.pool.content:
        if key is not None:
            counts[key[0]] += 1
    return counts == h.engine.resident


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", sorted(PRESETS))
def test_home_placement_is_bit_identical(family, impl):
    model = build_model(family, experts_implementation=impl)
    ref = generate(model, PROMPT, 4)
    h = attach(policy(_every_expert(model)), model)
    try:
        out = generate(model, PROMPT, 4)
        st = h.get_stats()
        mech = st["mechanism"]
        assert _resident_counts_match(h)
    finally:
        h.detach()
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    assert mech["home_placement"]
    if impl == "eager":                    # the eager loop's math runs on the general path
        assert mech["home_dispatches"] == 0
    else:                                  # prefill and decode alike
        assert mech["home_dispatches"] == mech["dispatches"]
    assert mech["host_syncs"] == mech["dispatches"]
    # the engine's per-layer counts are the runtime's
    assert [(p["accesses"], p["hits"]) for p in mech["per_layer"]] == \
        [(p["accesses"], p["hits"]) for p in st["per_layer"]]
    assert mech["copies"] == st["loads"] and mech["bytes_copied"] == st["bytes_loaded"]
    assert st["evictions"] == 0 and mech["copies"] == st["misses"]    # every miss loaded once


def _run(family, impl, body, home=True, monkeypatch=None, pure=False):
    """(model, output, stats) of a generation with ``body`` attached (home placement on or
    off; the pure runtime instead of the compiled engine), checked for its resident
    counts, the model detached again."""
    if monkeypatch is not None:
        monkeypatch.setattr(engine_mod, "HOME_PLACEMENT", home)
    model = build_model(family, experts_implementation=impl)
    if pure:
        with forced("pure"):
            h = attach(policy(body), model)
    else:
        h = attach(policy(body), model)
    live = h.runtime.backend == "compiled"
    try:
        out = generate(model, PROMPT, 6)
        st = h.get_stats()
        assert _resident_counts_match(h)
    finally:
        h.detach()
    st["live"] = live
    return model, out, st


BODIES = {
    "every expert": "cache { capacity = 24 }",
    "ttl": "cache { capacity = 24\n ttl = 5 }",
    "adapt cut": ("cache { capacity = 24 }\n monitor { window = 10 }\n"
                  " adapt { when hit_rate > 0.5 { capacity = 6 } }"),
}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("label", list(BODIES))
def test_home_path_equals_the_remap_path(label, impl, monkeypatch):
    family = "tiny-qwen3-moe"                 # top-4 of 8: groups of several experts
    model, home_out, home = _run(family, impl, BODIES[label], True, monkeypatch)
    _, remap_out, remap = _run(family, impl, BODIES[label], False, monkeypatch)
    ref = generate(model, PROMPT, 6)          # detached: the unmodified model
    for out in (home_out, remap_out):
        assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    hm, rm = home.pop("mechanism"), remap.pop("mechanism")
    home.pop("memory"), remap.pop("memory")
    home.pop("live"), remap.pop("live")
    for k in _TIMES:
        home.pop(k, None), remap.pop(k, None)
    assert home == remap                      # the runtime's statistics
    assert hm["home_placement"] and not rm["home_placement"]
    if impl != "eager":
        assert hm["home_dispatches"] > 0 and rm["home_dispatches"] == 0
    for k in _TIMES | _PATHS:
        hm.pop(k), rm.pop(k)
    assert hm == rm                           # what the mechanism did: copies, bytes, counts
    if label != "every expert":               # evictions and reloads into home entries
        assert home["evictions"] > 0 and hm["copies"] > 24


def test_home_path_checks_what_the_plan_says(monkeypatch):
    """A layer not fully resident is checked key by key: a Plan naming an expert the
    mechanism does not hold raises instead of computing with the wrong weights."""
    model = build_model("tiny-mixtral", experts_implementation="grouped_mm")
    h = attach(policy("cache { capacity = 24 }"), model)
    try:
        generate(model, PROMPT, 1)
        e = h.engine
        lo = 0
        key = h.pool.content[lo + 3]
        assert key == (0, 3)
        h.pool.content[lo + 3] = None          # as if the mechanism had lost it
        e.resident[0] -= 1
        with pytest.raises(RuntimeError, match="disagree"):
            for _ in range(8):                 # until layer 0 routes to expert 3
                generate(model, torch.tensor([[5 + _ * 17, 9, 200 - _]]), 2)
    finally:
        h.pool.content[lo + 3] = key
        h.engine.resident[0] += 1
        h.detach()


@pytest.mark.parametrize("label", list(BODIES))
def test_compiled_and_pure_runtimes_give_the_same_home_run(label):
    """The home closure asks the runtime's hits() (no Plan when every access
    hit and nothing moved) where the runtime has it, the Plan of the pure dispatch
    otherwise: the same outputs, statistics and mechanism counts."""
    runs = []
    for pure in (False, True):
        model, out, st = _run("tiny-olmoe", "grouped_mm", BODIES[label], pure=pure)
        ref = generate(model, PROMPT, 6)
        assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
        mech = st.pop("mechanism")
        st.pop("memory")
        for k in _TIMES:
            st.pop(k, None)
            mech.pop(k, None)
        assert mech["home_dispatches"] == mech["dispatches"]
        runs.append((st.pop("live"), st, mech))
    (live_a, st_a, mech_a), (live_b, st_b, mech_b) = runs
    assert live_b is False
    assert live_a is compiled.available()
    assert st_a == st_b and mech_a == mech_b
