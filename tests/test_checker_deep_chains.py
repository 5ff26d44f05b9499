"""Deep import and ``extends`` chains (1500 levels, past Python's recursion limit): the
resolver walks them with loops, so ``mplc check``, ``mpl.check``/``mpl.load`` and the
language server's analysis check them like any other file (no RecursionError, no
"internal error")."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

import mpl
from mpl.checker import analyze

DEPTH = 1500          # well past Python's default recursion limit (1000)
DEFAULT_LIMIT = 1000


@pytest.fixture(autouse=True)
def default_recursion_limit():
    """Each test runs under Python's default recursion limit, whatever an earlier test in the
    same process left (hypothesis and torch raise it; which of them ran first depends on
    how the test files were spread over the workers)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(DEFAULT_LIMIT)
    yield
    sys.setrecursionlimit(before)


def test_depth_is_past_the_recursion_limit():
    assert DEPTH > sys.getrecursionlimit() == DEFAULT_LIMIT


@pytest.fixture(scope="module")
def import_chain(tmp_path_factory):
    """chain0.moe imports chain1 imports ... chain1499; each defines a tiny policy, and each
    policy extends the next file's (the last one has the cache)."""
    d = tmp_path_factory.mktemp("chain")
    for i in range(DEPTH):
        head = f'import "chain{i + 1}"\n' if i < DEPTH - 1 else ""
        body = (f"policy q{i} extends q{i + 1} {{ }}\n" if i < DEPTH - 1
                else f"policy q{i} {{ cache {{ capacity = 8 }} }}\n")
        (d / f"chain{i}.moe").write_text(head + body)
    return d / "chain0.moe"


def _extends_text(child_first: bool) -> str:
    lines = [f"policy p{i} extends p{i + 1} {{ }}" for i in range(DEPTH - 1)]
    lines.append(f"policy p{DEPTH - 1} {{ cache {{ capacity = 8 }} }}")
    if not child_first:
        lines.reverse()
    return "\n".join(lines) + "\n"


def _mplc_check(path):
    r = subprocess.run([sys.executable, "-m", "mpl", "check", str(path)], capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert "RecursionError" not in out and "internal" not in out, out[-2000:]
    return r, out


def test_import_chain_cli(import_chain):
    r, out = _mplc_check(import_chain)
    assert r.returncode == 0 and "1 file checked: no problems" in out, out[-2000:]


def test_import_chain_api(import_chain):
    assert mpl.check(str(import_chain)) == []
    p = mpl.load(str(import_chain), policy="q0")
    assert p.ir["cache.capacity"] == 8 and p.ir.parent == "q1"


def test_import_chain_error_at_the_far_end_is_located(tmp_path):
    """A typo in the deepest file is reported there (the chain itself is fine)."""
    for i in range(DEPTH):
        head = f'import "c{i + 1}"\n' if i < DEPTH - 1 else ""
        value = "lruu" if i == DEPTH - 1 else "lru"
        (tmp_path / f"c{i}.moe").write_text(head + f"policy q{i} {{ cache {{ capacity = 8 eviction = {value} }} }}\n")
    diags = mpl.check(str(tmp_path / "c0.moe"))
    assert [(d.code, d.file, d.span.line) for d in diags] == [("MPL202", str(tmp_path / f"c{DEPTH - 1}.moe"), 1)]


def test_import_cycle_at_depth_is_reported(tmp_path):
    """The last file imports the first: one MPL109 at that import, no recursion."""
    for i in range(DEPTH):
        nxt = (i + 1) % DEPTH
        (tmp_path / f"c{i}.moe").write_text(f'import "c{nxt}"\npolicy q{i} {{ cache {{ capacity = 8 }} }}\n')
    diags = mpl.check(str(tmp_path / "c0.moe"))
    assert [d.code for d in diags] == ["MPL109"]
    assert diags[0].file == str(tmp_path / f"c{DEPTH - 1}.moe") and diags[0].span.line == 1


@pytest.mark.parametrize("child_first", [True, False])
def test_extends_chain_cli_and_api(tmp_path, child_first):
    text = _extends_text(child_first)
    path = tmp_path / "ext.moe"
    path.write_text(text)
    r, out = _mplc_check(path)
    assert r.returncode == 0 and "no problems" in out, out[-2000:]
    a = analyze(text, str(path))
    assert a.diagnostics == [] and len(a.ir) == DEPTH
    p = mpl.loads(text, policy="p0")
    assert p.ir["cache.capacity"] == 8 and p.ir.parent == "p1"


def test_extends_chain_with_an_unknown_root(tmp_path):
    lines = [f"policy p{i} extends p{i + 1} {{ cache {{ capacity = 8 }} }}" for i in range(DEPTH)]
    text = "\n".join(lines) + "\n"
    a = analyze(text)
    assert [(d.code, d.span.line) for d in a.diagnostics] == [("MPL107", DEPTH)]
    assert a.ir == {}          # every policy inherits from the broken one


def test_long_extends_cycle():
    n = 300          # every policy on the cycle gets MPL110, naming the whole cycle
    lines = [f"policy p{i} extends p{(i + 1) % n} {{ cache {{ capacity = 8 }} }}" for i in range(n)]
    a = analyze("\n".join(lines) + "\n")
    assert [d.code for d in a.diagnostics] == ["MPL110"] * n
    first = a.diagnostics[0].message
    assert first.startswith("extends cycle: p0 -> p1 -> p2") and first.endswith(f"p{n - 1} -> p0; remove one 'extends'")
    assert a.diagnostics[5].message.startswith("extends cycle: p5 -> p6")


def test_language_server_analysis_on_a_worker_thread(import_chain):
    """The server computes diagnostics with lsp.analysis.compute on a worker thread."""
    pytest.importorskip("pygls")
    from lsp.analysis import compute
    from lsp.workspace import Store

    got = {}

    def work():
        try:
            got["a"] = compute(Store(), import_chain.read_text(), str(import_chain), None)
        except BaseException as e:          # noqa: BLE001 - reported below
            got["e"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "e" not in got, repr(got.get("e"))
    assert got["a"].diagnostics == [] and "q0" in got["a"].ir
    text = _extends_text(True)
    assert compute(Store(), text, None, None).diagnostics == []
