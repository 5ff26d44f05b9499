"""Front end — checker: time of parse+check+lower (``mpl.checker.analyze``) on a typical policy
and on a generated 1,000-line file, and the share of that time spent after parsing.

    python benchmarks/bench_checker.py

Prints best-of-N times measured in this run and their ratios (the machines are shared: compare
ratios, not absolute times). ``bench_frontend.py`` calls :func:`run` for its checker section.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

POLICY = """\
policy p{i} {{
    cache {{
        capacity = {cap}
        eviction = lfu
        frequency_decay = 0.9
        pin = [0, 1]
        memory_threshold = 0.9
        memory_headroom = 0.6
    }}
    prefetch {{ strategy = history; budget = 4 }}
    schedule {{ mode = hybrid; offload_threshold_ms = 20 }}
    monitor {{ metrics = [hit_rate, stall_ms]; window = 200 }}
    adapt {{
        when hit_rate < 0.4 for 100 accesses {{ eviction = lru }}
        when hit_rate > 0.8 {{ eviction = lfu; capacity = {cap2} }}
    }}
}}
"""


def big_file(lines: int = 1000) -> str:
    """A file of about ``lines`` lines: many policies, every third one extending the previous."""
    parts, i = ["version 1\n"], 0
    while sum(p.count("\n") for p in parts) < lines:
        text = POLICY.format(i=i, cap=16 + i % 8, cap2=24 + i % 8)
        if i % 3 == 2:
            text = text.replace(f"policy p{i} {{", f"policy p{i} extends p{i - 1} {{", 1)
        parts.append(text)
        i += 1
    return "".join(parts)


def best(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) over ``repeat`` runs. On a shared
    machine the CPU time is the honest figure: wall time includes waiting for a core."""
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def run(repeat: int = 15) -> dict:
    from mpl.checker import analyze
    from mpl.syntax import parse

    with open(os.path.join(ROOT, "tests", "corpus", "balanced.moe"), encoding="utf-8") as f:
        typical = f.read()
    big = big_file()
    a = analyze(big)
    assert not a.errors, [(d.code, d.message) for d in a.errors[:3]]
    analyze(typical)          # warm the parser cache
    out = {"typical_lines": typical.count("\n"), "big_lines": big.count("\n"), "big_policies": len(a.ir)}
    for name, fn, n in (("typical_analyze", lambda: analyze(typical), repeat * 10),
                        ("typical_parse", lambda: parse(typical), repeat * 10),
                        ("big_analyze", lambda: analyze(big), repeat),
                        ("big_parse", lambda: parse(big), repeat)):
        wall, cpu = best(fn, n)
        out[name + "_ms"], out[name + "_cpu_ms"] = wall * 1e3, cpu * 1e3
    out["big_check_lower_cpu_ms"] = out["big_analyze_cpu_ms"] - out["big_parse_cpu_ms"]
    out["check_share"] = out["big_check_lower_cpu_ms"] / out["big_analyze_cpu_ms"]
    return out


def main() -> None:
    r = run()
    print("Front end — checker (best of N in this run; wall / CPU time of this process)")
    print(f"  typical policy ({r['typical_lines']} lines): parse+check+lower {r['typical_analyze_ms']:.2f} / "
          f"{r['typical_analyze_cpu_ms']:.2f} ms (parse alone {r['typical_parse_ms']:.2f} / "
          f"{r['typical_parse_cpu_ms']:.2f} ms)")
    print(f"  {r['big_lines']}-line file ({r['big_policies']} policies): parse+check+lower "
          f"{r['big_analyze_ms']:.1f} / {r['big_analyze_cpu_ms']:.1f} ms (parse {r['big_parse_ms']:.1f} / "
          f"{r['big_parse_cpu_ms']:.1f} ms; check+lower {r['big_check_lower_cpu_ms']:.1f} ms CPU = "
          f"{r['check_share']:.0%} of the total)")
    ratio = r["big_analyze_cpu_ms"] / 100
    print(f"  target: 1,000-line file under 100 ms -> CPU time {ratio:.2f}x of the budget "
          f"({'met' if ratio < 1 else 'NOT met'}); wall {r['big_analyze_ms'] / 100:.2f}x")


if __name__ == "__main__":
    main()
