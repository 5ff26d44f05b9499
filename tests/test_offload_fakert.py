"""A minimal runtime double implementing exactly the Plan contract (docs/internals.md), so the
offload mechanism can be tested on its own; and the mechanism's unit tests that use it.

The double: one shared LRU cache of ``capacity`` slots; accesses in router order; a miss is
loaded into a free slot or the LRU victim's slot (never a key of the current dispatch); when
no slot can be freed the expert is STREAMed; ``mode="cpu_fallback"`` computes misses on the
CPU and loads them in the background.
"""

from __future__ import annotations

from collections import OrderedDict

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mpl.runtime.plan import BACKGROUND, CPU, DEMAND, STREAM, Load, Plan  # noqa: E402


class FakeRuntime:
    def __init__(self, num_layers, num_experts, top_k, capacity, mode="gpu_only", **kw):
        self.num_slots = capacity
        self.mode = mode
        self.lru: OrderedDict = OrderedDict()       # key -> slot, LRU first
        self.free = list(range(capacity))
        self.loads = self.accesses = self.hits = 0
        self.stall = 0.0
        self.calls = []
        self.step = -1
        self.prev = 1 << 30

    def dispatch(self, layer, experts, weights=None, tokens=1, *, step=None, predictions=None):
        self.calls.append((layer, list(experts), tokens, step, predictions))
        if step is None:
            if layer <= self.prev:
                self.step += 1
            step = self.step
        self.prev = layer
        plan = Plan(step, layer, list(experts), [], [])
        current = {(layer, e) for e in experts}
        for e in experts:
            key = (layer, e)
            self.accesses += 1
            if key in self.lru:
                self.hits += 1
                self.lru.move_to_end(key)
                plan.where.append(self.lru[key])
                plan.hit.append(True)
                continue
            plan.hit.append(False)
            slot, victim = None, None
            if self.free:
                slot = self.free.pop(0)
            else:
                for k in self.lru:
                    if k not in current:
                        victim = k
                        break
                if victim is not None:
                    slot = self.lru.pop(victim)
                    plan.evicted.append((victim, slot))
            if slot is None:
                plan.where.append(STREAM)
                continue
            self.lru[key] = slot
            self.loads += 1
            if self.mode == "cpu_fallback":
                plan.where.append(CPU)
                plan.loads.append(Load(key, slot, victim, BACKGROUND))
            else:
                plan.where.append(slot)
                plan.loads.append(Load(key, slot, victim, DEMAND))
        return plan

    def add_stall(self, ms):
        self.stall += ms

    def stats(self):
        return {"accesses": self.accesses, "hits": self.hits, "loads": self.loads,
                "hit_rate": self.hits / self.accesses if self.accesses else 0.0,
                "stall_ms": self.stall}


from offload_helpers import fake_ir as _IR  # noqa: E402


class FakePolicy:
    def __init__(self, capacity, mode="gpu_only", strategy="none", lookahead=1):
        self.name = f"fake{capacity}"
        self.source = None
        self.capacity = capacity
        self.mode = mode
        self.ir = _IR({"cache.eviction": "lru", "schedule.mode": mode,
                       "prefetch.strategy": strategy, "prefetch.lookahead": lookahead})
        self.runtimes = []

    def runtime(self, num_layers, num_experts, top_k, **kw):
        cap = num_layers * num_experts if self.capacity == "all" else self.capacity
        rt = FakeRuntime(num_layers, num_experts, top_k, cap, mode=self.mode, **kw)
        self.runtimes.append(rt)
        return rt


# ---------------------------------------------------------------------------- tests
from mpl.offload.hf import attach  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("The quick brown fox")])


def _gen(model, n=6):
    with torch.no_grad():
        out = model.generate(PROMPT, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


@pytest.mark.parametrize("impl", ["eager", "batched_mm", "grouped_mm"])
@pytest.mark.parametrize("capacity", [1, "all"])
def test_fake_runtime_bit_identity_mixtral(impl, capacity):
    model = build_model("tiny-mixtral", experts_implementation=impl)
    seq0, log0 = _gen(model)
    pol = FakePolicy(capacity)
    h = attach(pol, model)
    seq1, log1 = _gen(model)
    assert torch.equal(seq0, seq1)
    assert torch.equal(log0, log1)
    rt = pol.runtimes[0]
    st = h.get_stats()["mechanism"]
    assert st["copies"] == rt.loads
    assert st["modes"] == {impl: st["dispatches"]}
    h.detach()


def test_fake_cpu_fallback_tokens_identical():
    model = build_model("tiny-mixtral", experts_implementation="batched_mm")
    seq0, log0 = _gen(model)
    pol = FakePolicy(3, mode="cpu_fallback")
    h = attach(pol, model)
    seq1, log1 = _gen(model)
    st = h.get_stats()["mechanism"]
    h.detach()
    assert torch.equal(seq0, seq1)
    assert torch.allclose(log0, log1, atol=1e-4)
    assert st["cpu_computes"] > 0 and st["background_copies"] > 0


class _LyingRuntime(FakeRuntime):
    """Claims a hit in a slot that was never loaded."""

    def dispatch(self, layer, experts, weights=None, tokens=1, *, step=None, predictions=None):
        plan = super().dispatch(layer, experts, weights, tokens, step=step, predictions=predictions)
        plan.loads.clear()
        return plan


def test_mechanism_detects_a_plan_that_disagrees_with_the_pool():
    model = build_model("tiny-olmoe")
    pol = FakePolicy(4)
    pol.runtime = lambda L, E, K, **kw: _LyingRuntime(L, E, K, 4)
    h = attach(pol, model)
    with pytest.raises(RuntimeError, match="disagree"):
        _gen(model, 1)
    h.detach()
