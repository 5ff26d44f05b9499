"""Hostile policy files and trace files through ``mplc check`` and ``mplc replay``, as a user
runs them, on both runtime backends: the fast subset of the corpus of
tests/hostile/make_corpus.py (every value class of the sanitizer's findings: windows,
intervals, TTLs, adapt durations at 2^62 and 2^64, an expert size of 1e300; bit flips,
truncations, crafted records and headers; headers of 4,096 / 65,536 layers x 65,536 experts
with one dispatch; top-255 of 300 experts; hostile JSONL). Each command runs in its own
process under 2 GB of address space and 60 s, and must exit 0 or 1 with a message naming
what is wrong, print no traceback, and answer the same on both backends.
``python tests/hostile/run_all.py`` runs the whole corpus (docs/traces.md, "Limits")."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from mpl.runtime import compiled as _compiled

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile"))

import make_corpus  # noqa: E402
import run_all  # noqa: E402

MEM = 2 << 30
TIMEOUT = 60.0
CASES = [c for c in make_corpus.build(None) if c.fast]
BACKENDS = ("compiled", "pure") if _compiled.available() else ("pure",)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every command of the subset on every backend, two at a time (the suite's machines
    have two cores)."""
    d = tmp_path_factory.mktemp("hostile")
    make_corpus.build(d)
    jobs = [(c, tuple(a.replace("{f}", c.name) for a in args), b)
            for c in CASES for args in c.runs for b in BACKENDS]
    with ThreadPoolExecutor(2) as ex:
        done = list(ex.map(lambda j: run_all.run_one(list(j[1]), d, j[2], MEM, TIMEOUT, j[0].name), jobs))
    out: dict = {}
    for (c, args, b), r in zip(jobs, done):
        out.setdefault((c.name, args), {})[b] = r
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_clear_answer_within_limits_on_both_backends(case, results):
    for args in case.runs:
        res = results[(case.name, tuple(a.replace("{f}", case.name) for a in args))]
        bad = run_all.verdict(case, res, MEM / (1 << 20), TIMEOUT)
        assert not bad, f"mplc {' '.join(args)}: " + "; ".join(bad) + "\n" + "\n".join(
            f"[{b}] rc={r.rc} {r.seconds:.1f}s {r.maxrss_mb:.0f}MB\n{r.stdout[-600:]}{r.stderr[-600:]}"
            for b, r in res.items())


def test_the_subset_covers_every_class_of_the_findings():
    groups = {c.group for c in CASES}
    assert {"policy value", "adapt value", "adapt duration", "bit flip", "bit flip, checksum fixed",
            "truncation", "header fields", "record fields", "wide header", "huge top-k",
            "jsonl"} <= groups, groups
    wide = {c.name for c in CASES if c.group == "wide header"}
    assert {"wide_4096x65536_1.mpltrace", "wide_65536x65536_1.mpltrace"} <= wide


def test_running_out_of_memory_is_a_clear_error_naming_the_input(tmp_path):
    """The last resort for what no range bounds statically (a trace's content): a replay that
    runs out of memory exits 1 naming the trace, its size and its declared shape."""
    make_corpus.build(tmp_path)
    prefill = [[(i * 7 + j) % 16 for j in range(2)] for i in range(65535)]
    data = make_corpus.native_bytes(make_corpus.header(4, 16, 2),
                                    [make_corpus.record(s, s % 4, prefill, wide=False) for s in range(36)])
    (tmp_path / "big.mpltrace").write_bytes(data)
    for b in BACKENDS:
        r = run_all.run_one(["replay", "base_lru.moe", "--trace", "big.mpltrace", "--no-progress"],
                            tmp_path, b, 96 << 20, TIMEOUT)
        assert r.rc == 1 and "Traceback" not in r.stderr, (b, r.rc, r.stderr[-1000:])
        assert "out of memory with trace big.mpltrace" in r.stderr, r.stderr
        assert f"{len(data):,} bytes, 4 MoE layers x 16 experts" in r.stderr, r.stderr
