"""Helpers for the runtime / codegen tests: IRs built by hand from the schema defaults,
deterministic synthetic routing."""

from __future__ import annotations

import random

import pytest

from mpl import ir as _ir
from mpl import schema


def make_ir(values: dict, *, name: str = "t", blocks=("cache",), adapt=()) -> _ir.PolicyIR:
    """An IR with every schema key at its schema default, then ``values`` applied."""
    vals = {}
    for key, p in schema.PARAMS.items():
        d = p.default
        vals[key] = None if d in (schema.OFF, schema.DERIVED, schema.REQUIRED) else d
    vals.update(values)
    assert vals["cache.capacity"] is not None, "give cache.capacity"
    return _ir.PolicyIR(name=name, values=vals, blocks=frozenset(blocks), adapt=tuple(adapt))


def runtime_for(values: dict, L=4, E=16, K=2, *, blocks=("cache",), adapt=(), **kw):
    from mpl.api import from_ir
    return from_ir(make_ir(values, blocks=blocks, adapt=adapt)).runtime(L, E, K, **kw)


def zipf_trace(steps, L, E, K, *, seed=0, s=1.1, reuse=0.3, weights=False):
    """(layer, experts, weights) in step order: Zipf popularity per layer (each layer its
    own permutation), with some temporal reuse of the previous step's experts."""
    r = random.Random(seed)
    perms = [r.sample(range(E), E) for _ in range(L)]
    pw = [1.0 / (i + 1) ** s for i in range(E)]
    prev = [[] for _ in range(L)]
    out = []
    for _ in range(steps):
        for layer in range(L):
            chosen = []
            while len(chosen) < K:
                if prev[layer] and r.random() < reuse:
                    e = r.choice(prev[layer])
                else:
                    e = perms[layer][r.choices(range(E), pw)[0]]
                if e not in chosen:
                    chosen.append(e)
            prev[layer] = chosen
            w = None
            if weights:
                raw = [r.random() + 0.01 for _ in chosen]
                t = sum(raw)
                w = [x / t for x in raw]
            out.append((layer, chosen, w))
    return out


@pytest.fixture(params=["compiled", "pure"], autouse=True)
def both_backends(request, monkeypatch):
    """Run every test of a module that imports this fixture on both runtime backends: the
    compiled replay kernel (skipped where it is not built) and the pure-Python runtime
    (forced in this process and, through MPL_PURE, in subprocesses)."""
    from mpl.runtime import fast

    if request.param == "pure":
        monkeypatch.setenv(fast.ENV_PURE, "1")
        with fast.pure():
            yield "pure"
    else:
        if fast._kernel is None:
            pytest.skip(f"the compiled kernel is not available: {fast._WHY}")
        monkeypatch.delenv(fast.ENV_PURE, raising=False)
        yield "compiled"
