"""Every stdlib policy compiled with `mplc compile` runs in a fresh process that never imports
the compiler, and gives the same stats as `mpl.load` on the same dispatch sequence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import mpl
from mpl.stdlib_path import stdlib_file, stdlib_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIA_CLI = {"composed_full", "epcb_entropy", "segmented"}   # every mechanism, an import, a | b
SHAPE = dict(num_layers=6, num_experts=16, top_k=3)
STEPS = 15
#: an expert size that turns the policies sized in bytes (10 GiB) into a few slots per layer
EXPERT_BYTES = 200 * 2 ** 20

# the same deterministic sequence in both processes (no shared helper: the fresh process
# must import nothing but the compiled modules and mpl.runtime)
SEQUENCE = textwrap.dedent("""
    def sequence(num_layers, num_experts, top_k, steps):
        x = 12345
        for step in range(steps):
            for layer in range(num_layers):
                chosen = []
                while len(chosen) < top_k:
                    x = (1103515245 * x + 12345) % 2147483648
                    e = (x >> 8) % num_experts
                    e = e if e < num_experts // 2 or x % 3 else e // 4      # skewed
                    if e not in chosen:
                        chosen.append(e)
                w = [1.0 / (i + 1) for i in range(top_k)]
                s = sum(w)
                yield layer, chosen, [v / s for v in w]
""")

RUNNER = SEQUENCE + textwrap.dedent("""
    import importlib.util, json, sys
    out = {}
    for name, path in json.loads(sys.argv[1]).items():
        spec = importlib.util.spec_from_file_location(name + "_policy", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        shape = json.loads(sys.argv[2])
        rt = mod.make_runtime(shape["num_layers"], shape["num_experts"], shape["top_k"],
                              expert_bytes=int(sys.argv[4]))
        for layer, experts, weights in sequence(steps=int(sys.argv[3]), **shape):
            rt.dispatch(layer, experts, weights)
        out[name] = {"stats": rt.stats(), "policy": mod.POLICY_NAME}
    heavy = [m for m in ("mpl.checker", "mpl.syntax", "mpl.codegen", "lark", "torch") if m in sys.modules]
    print(json.dumps({"results": out, "heavy": heavy}, default=str))
""")


def test_compiled_stdlib_modules_match_mpl_load(tmp_path):
    namespace: dict = {}
    exec(SEQUENCE, namespace)
    sequence = namespace["sequence"]
    modules = {}
    for name in stdlib_names():
        out = tmp_path / f"{name}_policy.py"
        if name in VIA_CLI:                 # as a user does; the rest in-process (faster)
            r = subprocess.run([sys.executable, "-m", "mpl.cli.main", "compile", stdlib_file(name),
                                "-o", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
            assert r.returncode == 0 and out.is_file(), r.stdout + r.stderr
            assert out.read_text() == mpl.compile(stdlib_file(name))
        else:
            out.write_text(mpl.compile(stdlib_file(name)))
        modules[name] = str(out)
    r = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(modules), json.dumps(SHAPE), str(STEPS),
                        str(EXPERT_BYTES)],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    fresh = json.loads(r.stdout)
    assert fresh["heavy"] == []
    for name in stdlib_names():
        rt = mpl.load(stdlib_file(name)).runtime(**SHAPE, expert_bytes=EXPERT_BYTES)
        for layer, experts, weights in sequence(steps=STEPS, **SHAPE):
            rt.dispatch(layer, experts, weights)
        here = json.loads(json.dumps(rt.stats(), default=str))
        assert fresh["results"][name]["policy"] == name
        assert fresh["results"][name]["stats"] == here, name
