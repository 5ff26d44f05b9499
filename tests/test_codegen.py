"""The code generator and the loader."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

import mpl
from mpl.codegen import generate
from mpl.codegen import loader
from runtime_helpers import make_ir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_deterministic_and_records_header():
    ir = make_ir({"cache.capacity": 8, "cache.eviction": "lfu"}, name="p1")
    a, b = generate(ir), generate(ir)
    assert a == b
    ns = {}
    exec(compile(a, "m", "exec"), ns)
    assert ns["POLICY_NAME"] == "p1"
    assert ns["MPL_VERSION"] == mpl.__version__
    assert len(ns["SOURCE_HASH"]) == 64
    assert ns["IR_JSON"] == ir.to_json()


def test_imports_only_the_runtime():
    pol = mpl.loads("""policy c { cache { capacity = 8 eviction = score ttl = 3 }
        prefetch { strategy = affinity } schedule { mode = hybrid }
        adapt { when hit_rate < 0.2 { eviction = lru } } }""")
    tree = ast.parse(pol.source)
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mods.add(node.module)
    assert mods and all(m.startswith("mpl.runtime") for m in mods)
    assert "eval(" not in pol.source and "exec(" not in pol.source


def test_specialised_dispatch_omits_unreachable_features():
    plain = mpl.loads("policy a { cache { capacity = 4 } }").source
    assert "_issue" not in plain and "_prefetch" not in plain and "_ttl_sweep" not in plain and "_observe" not in plain
    assert "move_to_end" in plain           # lru hit path inlined
    rich = mpl.loads("policy b { cache { capacity = 4 ttl = 5 } prefetch { strategy = history } }").source
    assert "self._issue(" in rich and "_ttl_sweep" in rich


def test_adapt_reachable_values_are_compiled_in():
    src = mpl.loads("""policy a { cache { capacity = 4 }
        adapt { when hit_rate < 0.5 { prefetch_strategy = history } } }""").source
    assert "self._issue(" in src and "self.history.observe" in src


def test_hostile_policy_name_is_only_a_string_literal():
    name = 'x"""; import os; os.system("echo pwned") #'
    ir = make_ir({"cache.capacity": 2}, name=name)
    src = generate(ir)
    ns = {}
    exec(compile(src, "m", "exec"), ns)
    assert ns["POLICY_NAME"] == name
    cls = [k for k in ns if k.startswith("Policy_")]
    assert cls and cls[0].isidentifier()
    tree = ast.parse(src)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "os" not in names                       # the text only lives in string literals
    assert all(isinstance(n, (ast.Expr, ast.ImportFrom, ast.Assign, ast.ClassDef, ast.FunctionDef))
               for n in tree.body)


def test_loader_memory_and_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("MPL_NO_CACHE", raising=False)
    loader.clear_memory_cache()
    src = generate(make_ir({"cache.capacity": 3}, name="cached"))
    m1 = loader.load_source(src)
    assert loader.load_source(src) is m1
    files = list((tmp_path / "mpl" / "modules").iterdir())
    assert len(files) == 1 and not files[0].name.startswith(".tmp")
    loader.clear_memory_cache()
    m2 = loader.load_source(src)                 # from the disk entry
    assert m2 is not m1 and m2.POLICY_NAME == "cached"
    # a corrupt entry is ignored (recompiled), never trusted
    files[0].write_bytes(b"garbage")
    loader.clear_memory_cache()
    assert loader.load_source(src).POLICY_NAME == "cached"


def test_loader_no_cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("MPL_NO_CACHE", "1")
    loader.clear_memory_cache()
    loader.load_source(generate(make_ir({"cache.capacity": 5}, name="nc")))
    assert not (tmp_path / "mpl").exists()


def test_ir_missing_a_key_is_refused():
    ir = make_ir({"cache.capacity": 2})
    vals = dict(ir.values)
    del vals["cache.ttl"]
    from mpl.ir import PolicyIR
    with pytest.raises(ValueError, match="cache.ttl"):
        generate(PolicyIR(name="x", values=vals, blocks=frozenset({"cache"})))


def test_belady_is_refused_by_the_runtime_with_a_clear_error():
    ir = make_ir({"cache.capacity": 2, "cache.eviction": "belady"})
    pol = mpl.api.from_ir(ir)
    with pytest.raises(ValueError, match="replay"):
        pol.runtime(2, 8, 1)


# The inlined miss path (one reachable schedule mode) must decide exactly like the runtime's
# generic miss methods (used when an adapt rule can switch the mode).
@pytest.mark.parametrize("mode", ["gpu_only", "cpu_fallback", "hybrid"])
@pytest.mark.parametrize("eviction", ["lru", "lfu", "frequency_threshold", "lfu|lru", "arc"])
def test_inlined_miss_path_matches_generic_path(mode, eviction):
    from mpl import ir as _ir
    from runtime_helpers import zipf_trace
    vals = {"cache.capacity": 5, "cache.eviction": eviction, "cache.pin": (0,),
            "cache.ttl": _ir.Count(40, "accesses"), "schedule.mode": mode,
            "prefetch.strategy": "history", "prefetch.budget": 2,
            "cache.freq_threshold": 0.1, "cache.freq_window": 30}
    other = "gpu_only" if mode != "gpu_only" else "cpu_fallback"
    never = _ir.AdaptRule(0, _ir.Condition("hit_rate", "<", -1.0), _ir.Count(0),
                          (_ir.SetAction("schedule.mode", other),))
    inline = mpl.api.from_ir(make_ir(vals, blocks=("cache", "prefetch", "schedule")))
    generic = mpl.api.from_ir(make_ir(vals, blocks=("cache", "prefetch", "schedule", "adapt"),
                                      adapt=(never,)))
    assert "miss = self._miss   #" in generic.source       # the generic (method) path
    assert "to_cpu" in inline.source or mode != "hybrid"
    a, b = inline.runtime(3, 10, 3), generic.runtime(3, 10, 3)
    for n, (layer, ex, _) in enumerate(zipf_trace(120, 3, 10, 3, seed=9)):
        tokens = 1 + n % 12          # hybrid: CPU below 8 tokens, transfer above
        pa, pb = a.dispatch(layer, ex, tokens=tokens), b.dispatch(layer, ex, tokens=tokens)
        assert pa == pb, n
    sa, sb = a.stats(), b.stats()
    assert sa == sb


def test_runtime_package_stays_pure():
    code = ("import sys, mpl.runtime, mpl.runtime.core, mpl.runtime.eviction_published, "
            "mpl.runtime.eviction_segmented; "
            "bad = [m for m in ('lark', 'torch', 'numpy', 'mpl.checker', 'mpl.ir', 'mpl.syntax', "
            "'mpl.codegen', 'mpl.lower') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _shipped_policies():
    """Every policy of the shipped .moe files (stdlib, examples, tests' own) that checks."""
    import glob
    from mpl.checker import analyze
    out = []
    for pattern in ("stdlib/*.moe", "examples/**/*.moe", "tests/**/*.moe"):
        for f in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            with open(f, encoding="utf-8") as fh:
                a = analyze(fh.read(), f)
            if not a.errors:
                out += [(f"{os.path.relpath(f, ROOT)}:{n}", p) for n, p in a.ir.items()]
    return out


def test_policy_tables_are_the_generated_modules():
    """A Policy makes its runtime from the IR's tables (mpl.codegen.tables), without the
    module: they equal the module's literals, value for value and type for type."""
    from mpl.codegen.tables import tables
    from mpl.runtime.values import Count, Size
    cases = _shipped_policies()
    assert len(cases) > 20 and any(p.adapt for _, p in cases)
    for where, pir in cases:
        mod = loader.load_source(generate(pir))
        t = tables(pir, Size, Count)
        got = (t.params, t.features, t.conditions, t.actions, t.rules)
        want = (mod.PARAMS, mod.FEATURES, mod._CONDITIONS, mod._ACTIONS, mod._RULES)
        assert got == want, where
        assert repr(got) == repr(want), where        # Size and Count, not equal tuples


@pytest.mark.parametrize("backend", ["compiled", "pure"])
def test_policy_runtime_is_the_modules_make_runtime(backend):
    """policy.runtime and the generated module's make_runtime: the same runtime, plan for
    plan, on every shipped policy that runs on a 4x12 top-3 model."""
    import random
    from mpl.runtime import compiled
    from mpl.runtime.errors import RuntimeConfigError
    from runtime_helpers import random_dispatches
    if backend == "compiled" and not compiled.available():
        pytest.skip(compiled.WHY)
    ran = 0
    for where, pir in _shipped_policies():
        pol = mpl.api.from_ir(pir)
        try:
            a = pol.runtime(4, 12, 3, expert_bytes=1e7, backend=backend)
        except (RuntimeConfigError, ValueError) as e:     # a shape or backend it cannot take
            with pytest.raises(type(e)):
                pol.module.make_runtime(4, 12, 3, expert_bytes=1e7, backend=backend)
            continue
        b = pol.module.make_runtime(4, 12, 3, expert_bytes=1e7, backend=backend)
        assert a.backend == b.backend == backend
        for d in random_dispatches(random.Random(len(where)), 200, 4, 12, 3):
            ex, w = d.distinct_weights()
            pa = a.dispatch(d.layer, ex, w, tokens=d.tokens, step=d.step)
            pb = b.dispatch(d.layer, ex, w, tokens=d.tokens, step=d.step)
            assert pa == pb, where
        assert a.stats() == b.stats(), where
        ran += 1
    assert ran > 20


def test_a_compiled_runtime_needs_no_generated_module(monkeypatch):
    """Loading a policy and replaying it on the compiled engine generates no module (what
    makes the tuner's hundreds of candidates cheap); the pure backend generates it once."""
    from mpl.runtime import compiled
    if not compiled.available():
        pytest.skip(compiled.WHY)
    import mpl.codegen
    made = []
    real = mpl.codegen.generate
    monkeypatch.setattr(mpl.codegen, "generate", lambda pir: made.append(pir) or real(pir))
    pol = mpl.loads("policy lazy { cache { capacity = 5 eviction = lfu } }")
    pol.runtime(2, 8, 2, backend="compiled").dispatch(0, [1, 2])
    assert made == []
    pol.runtime(2, 8, 2, backend="pure").dispatch(0, [1, 2])
    pol.runtime(2, 8, 2, backend="pure")
    assert "class Policy_lazy" in pol.source and len(made) == 1
