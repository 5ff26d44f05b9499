"""Front-end benchmark: parse (and, where the checker is there, check + lower) times, the
worst half-typed file against a clean parse, and the cold start of ``mplc check``.

    python benchmarks/bench_frontend.py [--quick]

Everything is measured in this one run; in-process times are the best CPU time of several
repetitions (the machines are shared and noisy: wall time mostly measures waiting for a core;
the parse line prints the best wall time too). Ratios compare measurements taken next to each
other. Sections:

* ``parse``: a typical policy (the seed's ``balanced``) and a generated 1,000-line file;
* ``cut``: every prefix of a corpus file (a file being typed) against the clean parse;
* ``check``: parse + check + lower of the same two files (skipped while the checker is absent);
* ``cold start``: ``python -m mpl.cli.main check FILE`` against ``python -c pass``, with
  byte-code caching on (as after an install, even where PYTHONDONTWRITEBYTECODE is set).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CORPUS = os.path.join(ROOT, "tests", "corpus")
TYPICAL = os.path.join(CORPUS, "balanced.moe")
CUT_FILE = os.path.join(CORPUS, "full_syntax.moe")


def best(fn, repeat: int, clock=time.process_time) -> float:
    """Best time of ``repeat`` calls, in seconds: CPU time of this process by default (on a
    shared machine, wall time mostly measures waiting for a core)."""
    b = float("inf")
    for _ in range(repeat):
        t = clock()
        fn()
        b = min(b, clock() - t)
    return b


def generated_policy_file(lines: int = 1000) -> str:
    """A realistic file of at least ``lines`` lines: many policies, every block, comments."""
    out: list[str] = ["# generated for the front-end benchmark", "version 1", ""]
    i = 0
    while len(out) < lines:
        out += [
            f"# policy {i}: LFU with history prefetch and an adapt rule",
            f"policy p{i} {{",
            "    cache {",
            f"        capacity = {8 + i % 24}",
            "        eviction = lfu | lru  # segmented",
            f"        pin = [{i % 8}, {(i + 3) % 8}]",
            "        frequency_decay = 0.9",
            "        ttl = 4096 steps",
            "    }",
            "    prefetch {",
            "        strategy = history",
            "        budget = 2",
            "    }",
            "    schedule {",
            "        mode = cpu_fallback",
            "    }",
            "    monitor {",
            "        metrics = [hit_rate, miss_rate]",
            "        window = 256",
            "    }",
            "    adapt {",
            "        when hit_rate < 0.4 for 100 accesses {",
            "            eviction = lru",
            "            trigger memory_pressure",
            "        }",
            "    }",
            "}",
            "",
        ]
        i += 1
    return "\n".join(out)


def parse_figures(repeat: int) -> dict:
    from mpl.syntax import parse

    typical = open(TYPICAL, encoding="utf-8").read()
    big = generated_policy_file()
    assert parse(typical).ok and parse(big).ok
    return {
        "typical_lines": typical.count("\n"),
        "typical_parse_ms": best(lambda: parse(typical), repeat * 10) * 1e3,
        "typical_parse_wall_ms": best(lambda: parse(typical), repeat * 10, time.perf_counter) * 1e3,
        "big_lines": big.count("\n"),
        "big_parse_ms": best(lambda: parse(big), repeat) * 1e3,
        "big_parse_wall_ms": best(lambda: parse(big), repeat, time.perf_counter) * 1e3,
    }


def lark_comparison(repeat: int) -> dict | None:
    """The shipped-table driver vs Lark's own LALR parser (inline transformer, same tokens,
    same AST builder) on the generated file; None when Lark is not installed."""
    try:
        from lark import Lark, Transformer
        from lark.lexer import Lexer
    except ImportError:
        return None
    from mpl.syntax import lalr, tablegen
    from mpl.syntax.lexer import tokenize

    class _Tokens(Lexer):
        def __init__(self, conf):
            pass

        def lex(self, data):
            return iter(data)

    class _Builder(Transformer, lalr.AstBuilder):
        pass

    t = time.process_time()
    lark_parser = Lark(tablegen.grammar_text(), parser="lalr", lexer=_Tokens,
                       transformer=_Builder(), maybe_placeholders=False)
    build = time.process_time() - t
    tokens = tokenize(generated_policy_file()).tokens
    ours = best(lambda: lalr.parse_tokens(tokens), repeat)
    theirs = best(lambda: lark_parser.parse(tokens), repeat)
    return {"driver_ms": ours * 1e3, "lark_ms": theirs * 1e3, "ratio": ours / theirs,
            "lark_build_ms": build * 1e3}


def cut_figures(repeat: int) -> dict:
    """Worst ratio parse(prefix) / parse(whole file) over every prefix of CUT_FILE."""
    from mpl.syntax import parse

    text = open(CUT_FILE, encoding="utf-8").read()
    clean = best(lambda: parse(text), repeat * 5)
    first = [(best(lambda: parse(text[:i]), 3), i) for i in range(len(text) + 1)]
    first.sort(reverse=True)
    # re-measure the slowest prefixes carefully, each next to a fresh clean measurement
    worst = 0.0
    worst_at = 0
    for _, i in first[:15]:
        cut = best(lambda: parse(text[:i]), repeat * 5)
        ref = best(lambda: parse(text), repeat * 5)
        if cut / ref > worst:
            worst, worst_at = cut / ref, i
    line = text.count("\n", 0, worst_at) + 1
    return {"cut_file": os.path.relpath(CUT_FILE, ROOT), "cut_positions": len(text) + 1,
            "clean_parse_ms": clean * 1e3, "worst_cut_ratio": worst, "worst_cut_line": line}


def check_figures(repeat: int) -> dict | None:
    """parse + check + lower; None while mpl.checker.analyze is not available."""
    try:
        from mpl.checker import analyze
    except ImportError:
        return None
    typical = open(TYPICAL, encoding="utf-8").read()
    big = generated_policy_file()
    return {
        "typical_check_ms": best(lambda: analyze(typical, TYPICAL), repeat * 5) * 1e3,
        "big_check_ms": best(lambda: analyze(big, "big.moe"), repeat) * 1e3,
    }


def cold_start(repeat: int) -> dict | None:
    """``mplc check`` on the typical file vs a bare Python start: best wall time and best
    CPU time (user + system of the child) of interleaved runs."""
    import resource

    # as installed: byte-code cached (the probe run below writes __pycache__ if allowed)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def run(args) -> tuple[float, float]:
        c, t = cpu(), time.perf_counter()
        subprocess.run([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        return time.perf_counter() - t, cpu() - c

    probe = subprocess.run([sys.executable, "-m", "mpl.cli.main", "check", TYPICAL], cwd=ROOT,
                           env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        return None
    bare, check = [], []
    for _ in range(repeat):  # interleaved, so both see the same machine load
        bare.append(run(["-c", "pass"]))
        check.append(run(["-m", "mpl.cli.main", "check", TYPICAL]))
    bw, bc = min(x[0] for x in bare), min(x[1] for x in bare)
    cw, cc = min(x[0] for x in check), min(x[1] for x in check)
    return {"python_pass_ms": bw * 1e3, "mplc_check_ms": cw * 1e3, "ratio": cw / bw,
            "python_pass_cpu_ms": bc * 1e3, "mplc_check_cpu_ms": cc * 1e3,
            "cpu_ratio": cc / bc if bc else float("nan")}


def checker_split() -> dict | None:
    """The checker's own share: check + lower CPU time on bench_checker's 1,000-line file
    (see benchmarks/bench_checker.py); None while the checker is absent."""
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_checker
    except ImportError:
        return None
    return bench_checker.run(repeat=5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    repeat = 3 if args.quick else 10

    p = parse_figures(repeat)
    print(f"parse  typical policy ({p['typical_lines']} lines):  {p['typical_parse_ms']:.2f} ms CPU, "
          f"{p['typical_parse_wall_ms']:.2f} ms wall")
    print(f"parse  generated file ({p['big_lines']} lines):  {p['big_parse_ms']:.1f} ms CPU, "
          f"{p['big_parse_wall_ms']:.1f} ms wall")
    lc = lark_comparison(repeat)
    if lc is not None:
        print(f"parse  LALR on the generated file's tokens: shipped table {lc['driver_ms']:.1f} ms, "
              f"Lark's parser {lc['lark_ms']:.1f} ms ({lc['ratio']:.2f}x); building Lark's tables "
              f"{lc['lark_build_ms']:.0f} ms")
    c = check_figures(repeat)
    if c is None:
        print("check  skipped: mpl.checker is not available")
    else:
        print(f"check  typical policy, parse+check+lower:  {c['typical_check_ms']:.2f} ms")
        print(f"check  generated file, parse+check+lower:  {c['big_check_ms']:.1f} ms")
    x = checker_split()
    if x is not None:
        print(f"check  {x['big_lines']}-line file ({x['big_policies']} policies), CPU time: "
              f"parse+check+lower {x['big_analyze_cpu_ms']:.1f} ms, of which check+lower "
              f"{x['big_check_lower_cpu_ms']:.1f} ms ({x['check_share']:.0%})")
    k = cut_figures(repeat)
    print(f"cut    {k['cut_file']} cut at each of {k['cut_positions']} positions: worst prefix "
          f"parse = {k['worst_cut_ratio']:.2f}x the clean parse ({k['clean_parse_ms']:.2f} ms), "
          f"at line {k['worst_cut_line']}")
    s = cold_start(repeat)
    if s is None:
        print("cold   skipped: 'mplc check' is not available or fails on the typical policy")
    else:
        print(f"cold   mplc check {s['mplc_check_ms']:.0f} ms vs python -c pass "
              f"{s['python_pass_ms']:.0f} ms wall: {s['ratio']:.2f}x; CPU "
              f"{s['mplc_check_cpu_ms']:.0f} ms vs {s['python_pass_cpu_ms']:.0f} ms: "
              f"{s['cpu_ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
