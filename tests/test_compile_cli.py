"""`mplc compile` end to end, and the compiled module in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mpl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

POLICY = """
policy composed {
    cache { capacity = 12 eviction = lfu frequency_decay = 0.9 pin = [0]
            memory_threshold = 0.9 memory_budget_gb = 16 ttl = 300 }
    prefetch { strategy = history budget = 3 }
    schedule { mode = hybrid }
    monitor { window = 50 }
    adapt { when hit_rate < 0.3 for 40 accesses { eviction = lru } }
}
"""

DRIVER = r"""
import json, random, sys
sys.path.insert(0, sys.argv[1])
import composed_policy as m
assert 'lark' not in sys.modules and 'mpl.checker' not in sys.modules, sorted(sys.modules)
assert 'mpl.syntax' not in sys.modules and 'torch' not in sys.modules
rt = m.make_runtime(6, 16, 3)
r = random.Random(7)
for s in range(60):
    for layer in range(6):
        rt.dispatch(layer, r.sample(range(16), 3), tokens=1 + s % 3)
print(json.dumps({"stats": rt.stats(), "name": m.POLICY_NAME, "hash": m.SOURCE_HASH}))
"""


def mplc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT)


def test_compiled_file_in_fresh_process_matches_loads(tmp_path):
    src = tmp_path / "composed.moe"
    src.write_text(POLICY)
    r = mplc("compile", str(src))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "composed_policy.py"
    assert out.exists()
    p = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path)], capture_output=True,
                       text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    fresh = json.loads(p.stdout)
    import random
    rt = mpl.loads(POLICY).runtime(6, 16, 3)
    rnd = random.Random(7)
    for s in range(60):
        for layer in range(6):
            rt.dispatch(layer, rnd.sample(range(16), 3), tokens=1 + s % 3)
    assert fresh["stats"] == json.loads(json.dumps(rt.stats()))
    assert fresh["name"] == "composed"
    assert fresh["stats"]["accesses"] == 60 * 6 * 3


def test_output_option_and_stdout(tmp_path):
    src = tmp_path / "a.moe"
    src.write_text("policy a { cache { capacity = 4 } }")
    r = mplc("compile", str(src), "-o", str(tmp_path / "x.py"), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["policy"] == "a" and os.path.exists(tmp_path / "x.py")
    r = mplc("compile", str(src), "-o", "-")
    assert r.returncode == 0 and "def make_runtime" in r.stdout


def test_errors_print_diagnostics_and_write_nothing(tmp_path):
    src = tmp_path / "bad.moe"
    src.write_text("policy a {\n  cache { capcity = 4 }\n}\n")
    r = mplc("compile", str(src))
    assert r.returncode == 1
    assert "MPL102" in r.stderr and "bad.moe:2:" in r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.moe"]


def test_several_policies_need_policy_option(tmp_path):
    src = tmp_path / "two.moe"
    src.write_text("policy a { cache { capacity = 4 } }\npolicy b { cache { capacity = 8 } }\n")
    r = mplc("compile", str(src))
    assert r.returncode == 1 and "a, b" in r.stderr and "--policy" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["two.moe"]
    r = mplc("compile", str(src), "--policy", "b")
    assert r.returncode == 0 and (tmp_path / "two_b_policy.py").exists()
    r = mplc("compile", str(src), "--policy", "zz")
    assert r.returncode == 1 and "zz" in r.stderr


def test_unwritable_output_leaves_no_file(tmp_path):
    src = tmp_path / "a.moe"
    src.write_text("policy a { cache { capacity = 4 } }")
    r = mplc("compile", str(src), "-o", str(tmp_path / "nodir" / "x.py"))
    assert r.returncode == 1 and "cannot write" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_file_is_a_clear_error(tmp_path):
    r = mplc("compile", str(tmp_path / "nope.moe"))
    assert r.returncode == 1 and "cannot read" in r.stderr and "Traceback" not in r.stderr
