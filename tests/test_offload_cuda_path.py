"""Defects of the CUDA path that a CPU run can show: grouped_mm's group limit on
large pools, torch.compile, the pinned host arena, detach() freeing the pool, placement and
refusals, auto_attach's memory budget. (The stream/event ordering and the host
synchronisations are in test_offload_cuda_semantics.py.)"""

from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism.device import ALIGN  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.hf import _resolve_device, attach  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.runtime.plan import DEMAND, Load, Plan  # noqa: E402

from offload_cuda_double import FakeCudaOps  # noqa: E402
from offload_helpers import fake_ir, generate  # noqa: E402
from offload_helpers import policy as pol  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("Large pools, small windows")])


def gen(model, n=4):
    return generate(model, PROMPT, n)


# ---------------------------------------------------------------------------- 1. grouped_mm
class _SpreadRuntime:
    """Every expert gets its own slot, spread over a pool of thousands (as a big model's
    runtime would place them); ``stream_every``: every n-th miss is STREAMed instead."""

    def __init__(self, L, E, K, slots):
        self.num_slots = slots
        # a layer's experts spread over the whole pool
        self.slot = {(lay, e): (e * L + lay) * (slots // (L * E)) for lay in range(L) for e in range(E)}
        self.loaded = set()

    def dispatch(self, layer, experts, weights=None, tokens=1, *, step=None, predictions=None):
        plan = Plan(step or 0, layer, list(experts), [], [])
        for e in experts:
            key = (layer, e)
            plan.where.append(self.slot[key])
            plan.hit.append(key in self.loaded)
            if key not in self.loaded:
                plan.loads.append(Load(key, self.slot[key], None, DEMAND))
                self.loaded.add(key)
        return plan

    def add_stall(self, ms):
        pass

    def stats(self):
        return {"hit_rate": 0.0}


class _SpreadPolicy:
    name = "spread"
    source = None

    ir = fake_ir({"cache.eviction": "lru", "schedule.mode": "gpu_only", "prefetch.strategy": "none"})

    def runtime(self, L, E, K, **kw):
        return _SpreadRuntime(L, E, K, 3000)


def test_grouped_mm_never_gets_1024_groups(monkeypatch):
    import torch.nn.functional as F

    model = build_model("tiny-mixtral", experts_implementation="grouped_mm")
    ref = gen(model)
    real = F.grouped_mm
    groups = []

    def limited(input, weight, *a, **k):     # what torch's CUDA grouped GEMM enforces
        groups.append(weight.shape[0])
        if weight.shape[0] >= 1024:
            raise RuntimeError("Can't process more than 1024 groups")
        return real(input, weight, *a, **k)
    monkeypatch.setattr(F, "grouped_mm", limited)
    h = attach(_SpreadPolicy(), model, check=False)
    try:
        assert h.pool.size > 3000
        out = gen(model)
    finally:
        h.detach()
    assert groups and max(groups) < 1024
    assert max(groups) > 100               # a real window, not one group per call
    # the same tokens; logits up to the order of float sums (rows sit elsewhere in the
    # grouped GEMM's sorted input when a dispatch is split into windows)
    assert torch.equal(ref[0], out[0]) and torch.allclose(ref[1], out[1], atol=1e-5)


def test_windows_cover_every_entry():
    from mpl.offload.engine import windows
    used = [0, 5, 1022, 1023, 2999, 3000, 3001, 7000]
    ws = windows(used, 1023)
    assert all(hi - lo <= 1023 for lo, hi in ws)
    assert all(any(lo <= u < hi for lo, hi in ws) for u in used)
    assert windows([3, 9, 4]) == [(3, 10)]


# ---------------------------------------------------------------------------- 2. torch.compile
@pytest.mark.parametrize("impl", ["eager", "batched_mm", "grouped_mm"])
def test_compiled_forward_matches_eager(impl):
    model = build_model("tiny-mixtral", experts_implementation=impl)
    ref = gen(model)
    out, st = _compiled_run(model, "cache { capacity = 5 }\n prefetch { strategy = history\n budget = 1 }",
                            backend="eager")
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    assert st["dispatches"] == 3 * 4          # the engine ran (not traced away)


def test_compiled_module_forward_matches_eager():
    """``torch.compile(model)`` (the module wrapper), as users write it: the forward through
    it equals the unmodified model's, bit for bit."""
    model = build_model("tiny-olmoe", experts_implementation="grouped_mm")
    seq = gen(model)[0]
    with torch.no_grad():
        ref = model(input_ids=seq).logits
    h = attach(pol("cache { capacity = 3 }"), model)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="eager")
        with torch.no_grad():
            out = compiled(input_ids=seq).logits
        dispatches = h.engine.dispatches
    finally:
        torch._dynamo.reset()
        h.detach()
    assert torch.equal(ref, out)
    assert dispatches == 3


def _compiled_gen(model, n=4, **compile_kw):
    """generate() with the model's forward compiled (static shapes), then put back."""
    eager_forward = model.forward
    try:
        torch._dynamo.reset()
        model.forward = torch.compile(eager_forward, dynamic=False, **compile_kw)
        return gen(model, n)
    finally:
        model.forward = eager_forward
        torch._dynamo.reset()


def _compiled_run(model, body, **compile_kw):
    """Attach ``body``, generate with the model's forward compiled, detach: (output, stats)."""
    h = attach(pol(body), model)
    try:
        out = _compiled_gen(model, **compile_kw)
        st = h.get_stats()["mechanism"]
    finally:
        h.detach()
    return out, st


def _need_inductor():
    import shutil
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("inductor needs a C++ compiler on the CPU")


@pytest.mark.slow
def test_inductor_compiled_forward_matches_eager():
    """The default backend (inductor, C++ on the CPU): about two minutes on a 2-core machine.
    Inductor fuses the skeleton's ops differently from eager, so the logits are compared
    within float rounding; the tokens exactly."""
    _need_inductor()
    model = build_model("tiny-mixtral", experts_implementation="batched_mm")
    ref = gen(model)
    out, st = _compiled_run(model, "cache { capacity = 4 }")
    assert torch.equal(ref[0], out[0])
    assert torch.allclose(ref[1], out[1], atol=1e-5)
    assert st["dispatches"] == 3 * 4


@pytest.mark.slow
def test_inductor_mechanism_adds_no_numeric_change():
    """Under inductor even the unmodified model differs from eager in the last bits, and the
    attached model's graph break at the experts call changes what inductor fuses. Against the
    unmodified model compiled with the same graph break at the same place (its experts'
    forward run under ``torch.compiler.disable``), the attached model is bit-identical:
    tokens and logits (about 15 s: two decoder layers, three new tokens)."""
    from torch._dynamo.utils import counters

    from mpl.offload.hf import discover
    _need_inductor()
    ref_model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    for b in discover(ref_model):          # the reference: break the graph at the experts call
        b.module.forward = torch.compiler.disable(type(b.module).forward.__get__(b.module))
    counters.clear()
    try:
        ref = _compiled_gen(ref_model, 3)
    except torch._dynamo.exc.BackendCompilerFailed as e:    # the unmodified model, no mpl code
        pytest.skip(f"inductor cannot compile here: {str(e).splitlines()[0]}")
    assert counters["stats"]["unique_graphs"] > 0      # inductor compiled the skeleton
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    h = attach(pol("cache { capacity = 3 }"), model)
    try:
        out = _compiled_gen(model, 3)
        st = h.get_stats()["mechanism"]
    finally:
        h.detach()
    assert st["dispatches"] == 2 * 3 and st["demand_copies"] > 0   # the engine ran, and offloaded
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])


def test_generated_policy_modules_are_importable_by_name():
    import importlib
    import sys

    p = pol("cache { capacity = 3 }")
    rt = p.runtime(2, 8, 2)
    mod = sys.modules[type(rt).__module__] if type(rt).__module__ in sys.modules else None
    assert mod is not None, f"{type(rt).__module__} is not in sys.modules"
    assert importlib.import_module(type(rt).__module__) is mod


# ---------------------------------------------------------------------------- 5. pinned arena
def test_store_is_one_pinned_arena():
    ops = FakeCudaOps()
    model = build_model("tiny-qwen3-moe")
    h = attach(pol("cache { capacity = 4 }"), model, ops=ops)
    try:
        store = h.store
        tensors = [t for layer in store.layers for t in layer.values()]
        arena = store.arena
        base, end = arena.data_ptr(), arena.data_ptr() + arena.numel()
        assert all(base <= t.data_ptr() and t.data_ptr() + t.numel() * t.element_size() <= end
                   for t in tensors)
        assert all(t.data_ptr() % ALIGN == base % ALIGN for t in tensors)
        assert all(ops.is_pinned(t) for t in tensors)
        assert 0 <= store.arena_bytes - store.nbytes < ALIGN * len(tensors)
        assert store.nbytes == sum(p.numel() * p.element_size() for p in tensors)
        # the model's expert parameters hold the arena (nothing duplicated)
        saved = [p for params, _ in h._saved.values() for p in params.values()]
        assert {p.data_ptr() for p in saved} == {t.data_ptr() for t in tensors}
    finally:
        h.detach()


# ---------------------------------------------------------------------------- 6. detach frees
@pytest.mark.parametrize("impl", ["eager", "grouped_mm"])
def test_detach_frees_the_pool(impl):
    model = build_model("tiny-olmoe", experts_implementation=impl)
    h = attach(pol("cache { capacity = 6 }"), model)
    gen(model, 2)
    refs = [weakref.ref(t) for t in h.pool.tensors.values()]
    h.detach()
    gc.collect()
    assert [r() is None for r in refs] == [True] * len(refs), "detach left the pool alive"
    gen(model, 2)                      # and the model still runs


# ---------------------------------------------------------------------------- 7. placement
def _fake_cuda(monkeypatch, current=0):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)


def test_device_is_the_models_not_the_current_one(monkeypatch):
    model = build_model("tiny-olmoe")
    model.hf_device_map = {"": 1}         # loaded on cuda:1 while the current device is 0
    _fake_cuda(monkeypatch, current=0)
    assert _resolve_device(None, model) == torch.device("cuda", 1)
    assert _resolve_device("cuda", model) == torch.device("cuda", 1)
    assert _resolve_device("cuda:0", model) == torch.device("cuda", 0)
    del model.hf_device_map
    assert _resolve_device(None, model) == torch.device("cuda", 0)


def test_refuses_a_model_over_several_gpus():
    model = build_model("tiny-olmoe")
    model.hf_device_map = {"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": 1,
                           "model.layers.2": "cuda:2", "lm_head": "cpu"}
    with pytest.raises(AttachError, match="spread over 3 GPUs") as err:
        attach(pol("cache { capacity = 4 }"), model, remove_hooks=True)
    assert "one device" in str(err.value)
    assert not hasattr(model, "_mpl_handle")


def test_every_refusal_comes_before_any_change():
    from accelerate.hooks import ModelHook, add_hook_to_module
    model = build_model("tiny-olmoe")
    add_hook_to_module(model.model.layers[0], ModelHook())
    params = {n: p for n, p in model.named_parameters()}
    # refused by the model-aware check, which runs after the model checks
    with pytest.raises(AttachError, match="does not fit"):
        attach(pol("cache { capacity = 4\n pin = [99] }"), model, remove_hooks=True)
    assert hasattr(model.model.layers[0], "_hf_hook"), "a refused attach removed the hooks"
    # refused by the runtime (capacity over the model's experts is allowed; zero slots are not)
    bad = pol("cache { capacity = 4 }")
    bad.runtime = lambda *a, **k: (_ for _ in ()).throw(ValueError("no room"))
    with pytest.raises(AttachError, match="cannot run on this model"):
        attach(bad, model, remove_hooks=True)
    assert hasattr(model.model.layers[0], "_hf_hook")
    assert {n: p for n, p in model.named_parameters()} == params
    h = attach(pol("cache { capacity = 4 }"), model, remove_hooks=True)
    assert not hasattr(model.model.layers[0], "_hf_hook")
    h.detach()


def test_auto_attach_counts_the_skeleton_once(monkeypatch):
    import mpl.offload.auto as auto
    model = build_model("tiny-olmoe")
    layers = auto.discover(model)
    expert_ids = {id(p) for b in layers for p in b.module.parameters(recurse=False)}
    skeleton = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in expert_ids)
    skeleton += sum(b.numel() * b.element_size() for b in model.buffers())
    eb = auto.model_shape(model, layers).expert_bytes
    free = skeleton + 22 * eb           # what the OS reports with the model already loaded
    monkeypatch.setattr(auto, "free_memory", lambda dev: free)
    # the skeleton already sits in that memory: the budget is free + skeleton, minus it once
    want, _ = auto.choose(model, free + skeleton, torch.device("cpu"))
    h = mpl.auto_attach(model, device="cpu")
    try:
        assert want in h.policy_text
        assert h.runtime.num_slots == mpl.loads("version 1\n" + want).runtime(3, 8, 2).num_slots
    finally:
        h.detach()
