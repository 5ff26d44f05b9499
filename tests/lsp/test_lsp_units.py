"""Unit tests of the server's own pieces: position conversion, the forgiving tokenizer and
cursor context, settings, minimal formatting edits, per-layer capacities, the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pygls")

from hypothesis import given, strategies as st  # noqa: E402
from property_profiles import prop  # noqa: E402
from lsprotocol import types  # noqa: E402

from lsp import context, settings  # noqa: E402
from lsp.formatting import minimal_edit  # noqa: E402
from lsp.inlay_hints import per_layer_capacities  # noqa: E402
from lsp.positions import LineIndex  # noqa: E402
from lsp.tokens import tokenize  # noqa: E402
from mpl import schema, shapes  # noqa: E402
from mpl.diagnostics import Span  # noqa: E402

from lsp_harness import REPO, server_env, units  # noqa: E402
from parser_helpers import line_starts  # noqa: E402
from tier_helpers import malformed  # noqa: E402

TEXTS = st.text(alphabet=st.sampled_from(list("ab =\n{}#\"é😀\r\t") + ["ß", "\u200b", "𝔘"]), max_size=60)


@given(TEXTS, st.sampled_from(["utf-8", "utf-16", "utf-32"]))
@prop(200)
def test_positions_round_trip(text, enc):
    """Lines end at '\n', '\r\n' and a lone '\r', as the LSP specification says."""
    ends = line_starts(text)[1:]
    idx = LineIndex(text, enc)
    for off in range(len(text) + 1):
        if 0 < off < len(text) and text[off - 1:off + 1] == "\r\n":
            continue                 # inside a line end: no position of a client is there
        p = idx.position(off)
        done = [e for e in ends if e <= off]
        assert p.line == len(done)
        assert p.character == units(text[(done[-1] if done else 0):off], enc)
        assert idx.offset(p) == off


def test_position_past_line_end_clamps():
    idx = LineIndex("ab😀\ncd", "utf-16")
    assert idx.offset(types.Position(0, 99)) == 3
    assert idx.offset(types.Position(9, 0)) == len("ab😀\ncd")
    # the middle of a surrogate pair is the character after it
    assert idx.offset(types.Position(0, 3)) == 3


def test_position_past_line_end_stops_before_the_line_end():
    """Past the end of a line means before its '\r\n' or lone '\r': an edit there never
    splits a CRLF (which would make a line of its own)."""
    for text, want in (("ab\r\ncd", 2), ("ab\rcd", 2), ("ab\ncd", 2), ("\r\n", 0)):
        assert LineIndex(text, "utf-16").offset(types.Position(0, 9)) == want, text
    assert LineIndex("ab\rcd", "utf-16").offset(types.Position(1, 1)) == 4


def test_span_range_uses_line_and_column_for_crlf():
    text = "a\r\nbc\r\n"
    idx = LineIndex(text, "utf-16")
    # the checker sees "a\nbc\n": 'c' is line 2, column 2, offset 3 there (4 here)
    rng = idx.span_range(Span(2, 2, 2, 3, 3, 4))
    assert rng == types.Range(types.Position(1, 1), types.Position(1, 2))


@given(st.text(max_size=200))
@prop(200)
def test_tokenizer_and_context_never_fail(text):
    toks = tokenize(text)
    covered = set()
    for t in toks:
        assert text[t.start:t.end] == t.text and t.end > t.start
        covered.update(range(t.start, t.end))
    assert all(i in covered for i, c in enumerate(text) if c not in " \t\r\n\f\v")
    infos = context.classify(toks)
    assert len(infos) == len(toks)
    for off in range(0, len(text) + 1, 7):
        context.context_at(text, off)


def test_tokenizer_covers_every_character():
    text = 'policy p { cache { capacity = 12GiB } } # é\n"unterminated\n@'
    toks = tokenize(text)
    assert [t.text for t in toks][-3:] == ["# é", '"unterminated', "@"]
    assert [t.kind for t in toks][-1] == "error"


@pytest.mark.parametrize("text,kind,param", [
    ("policy p { ", "block_name", None),
    ("policy p { cache { ", "param_name", None),
    ("policy p { cache { eviction = ", "value", "cache.eviction"),
    ("policy p { cache { eviction = lru | ", "value", "cache.eviction"),
    ("policy p { cache { capacity = 4 : 8 when ", "metric", None),
    ("policy p { cache { capacity = 4 : 8 when hit_rate ", "op", None),
    ("policy p { cache { capacity = 12G", "unit", "cache.capacity"),
    ("policy p { cache { capacity = 12 ", "unit", "cache.capacity"),
    ("policy p { cache { capacity = 12", "value", "cache.capacity"),
    ("policy p { adapt { when hit_rate < 0.5 for 10 ", "duration_unit", None),
    ("policy p { adapt { when hit_rate < 0.5 { ", "rule_action", None),
    ("policy p { adapt { when hit_rate < 0.5 { trigger ", "trigger", None),
    ("policy p { adapt { when hit_rate < 0.5 { capacity = ", "value", "cache.capacity"),
    ("policy p { monitor { metrics = [hit_rate, ", "value", "monitor.metrics"),
    ("policy q extends ", "extends", None),
    ('import "', "import_path", None),
    ("", "top", None),
    ("policy p { cache { capacity = 4 }\n}\n", "top", None),
])
def test_cursor_context(text, kind, param):
    ctx = context.context_at(text, len(text))
    assert ctx.kind == kind
    if param:
        assert ctx.param == param


def test_settings_parse_and_report():
    s = settings.Settings()
    got = settings.update(s, {"mpl": {"model": "mixtral", "debounceMs": 50,
                                      "inlayHints": {"defaults": False, "perLayer": "yes"}, "x": 1}})
    assert got.settings.model == "mixtral" and got.settings.debounce_ms == 50
    assert got.settings.hint_defaults is False and got.settings.hint_per_layer is True
    assert got.shape is not None and got.shape.num_experts == 8
    assert any("perLayer" in m for m in got.messages) and any("'x'" in m for m in got.messages)
    bad = settings.update(got.settings, {"model": "nope", "debounceMs": -1})
    assert bad.shape is None and bad.settings.debounce_ms == 50
    assert any("unknown model 'nope'" in m for m in bad.messages)
    assert settings.update(s, "garbage").messages


@prop(100)
@given(st.text(alphabet=st.sampled_from(list("ab \r\n{}#")), max_size=40) | st.text(max_size=40),
       st.text(alphabet=st.sampled_from(list("ab \r\n{}#")), max_size=40) | st.text(max_size=40))
def test_minimal_edit(old, new):
    e = minimal_edit(old, new)
    if old == new:
        assert e is None
    else:
        s, t, text = e
        assert old[:s] + text + old[t:] == new
        for i in (s, t):             # never inside a CRLF, where no LSP position lies
            assert not (0 < i < len(old) and old[i - 1:i + 1] == "\r\n"), (old, new, e)


def test_minimal_edit_of_a_crlf_file_to_newlines():
    """Formatting a CRLF file: the edit's ends are positions a client can apply."""
    old = "policy p {\r\n  cache { capacity = 8 }\r\n}\r\n"
    new = "policy p {\n    cache {\n        capacity = 8\n    }\n}\n"
    s, t, text = minimal_edit(old, new)
    idx = LineIndex(old, "utf-16")
    rng = idx.range(s, t)
    assert old[:idx.offset(rng.start)] + text + old[idx.offset(rng.end):] == new


def test_per_layer_capacities_uniform_split():
    shape = shapes.preset("deepseek-v2-lite")
    vals = {"cache.capacity": 8, "per_layer.total_budget": None, "per_layer.min_capacity": 2,
            "per_layer.max_capacity": 64}
    assert per_layer_capacities(vals, shape) == [8] * 26
    vals["per_layer.total_budget"] = 100
    caps = per_layer_capacities(vals, shape)
    assert sum(caps) == 100 and max(caps) - min(caps) == 1
    vals["per_layer.max_capacity"] = 3
    assert per_layer_capacities(vals, shape) == [3] * 26


def test_per_layer_capacities_of_a_size_use_the_checkers_slot_count():
    from mpl import schema
    from mpl.ir import Size
    shape = shapes.preset("deepseek-v2-lite")
    gb = schema.UNITS["GB"].factor
    vals = {"cache.capacity": Size(int(10 * shape.expert_bytes)), "per_layer.total_budget": None,
            "per_layer.min_capacity": 1, "per_layer.max_capacity": 64}
    assert per_layer_capacities(vals, shape) == [10] * 26
    # a written expert size wins over the model's (as in the checker and the runtime)
    vals["cache.expert_size_gb"] = 5 * shape.expert_bytes / gb
    assert per_layer_capacities(vals, shape) == [2] * 26
    # a size smaller than one expert gives no slot (an error, MPL507): no capacities, not 1
    vals["cache.capacity"] = Size(int(shape.expert_bytes // 2))
    vals.pop("cache.expert_size_gb")
    assert per_layer_capacities(vals, shape) == []


def test_command_line():
    env = server_env()
    out = subprocess.run([sys.executable, "-m", "lsp.server", "--version"], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("mpl-lsp ")
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "lsp", "--help"], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=60)
    assert out.returncode == 0 and "--stdio" in out.stdout and "--tcp" in out.stdout
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "lsp", "--version"], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("mpl-lsp ")
    out = subprocess.run([sys.executable, "-m", "lsp.server", "--tcp", "99999"], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=60)
    assert out.returncode == 2 and "1..65535" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "lsp.server", "--bogus"], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_server_imports_no_heavy_modules():
    code = ("import sys, lsp.server as s; s.create_server(); "
            "bad=[m for m in sys.modules if m.split('.')[0] in ('torch','transformers','matplotlib') "
            "or m.startswith(('mpl.runtime','mpl.sim','mpl.offload'))]; print(bad); assert not bad")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=server_env(),
                         cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_schema_drives_completion_snippets():
    from lsp.completion import block_snippet, policy_snippet
    snip = policy_snippet(True)
    for b in schema.BLOCKS.values():
        if b.required:
            assert f"{b.name} {{" in snip
            for p in b.params:
                if p.required:
                    assert f"{p.name} = " in snip
    assert "when ${1|" in block_snippet(schema.BLOCKS["adapt"], True)


def test_tcp_mode():
    import json
    import socket
    import time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lsp.server", "--tcp", str(port)], env=server_env(), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "server did not listen"
                time.sleep(0.1)
        with conn:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
            conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            head, rest = buf.split(b"\r\n\r\n", 1)
            headers = dict(line.split(b":", 1) for line in head.split(b"\r\n"))
            n = int(headers[b"Content-Length"])
            while len(rest) < n:
                rest += conn.recv(65536)
            msg = json.loads(rest[:n])
            assert msg["id"] == 1 and msg["result"]["serverInfo"]["name"] == "mpl-lsp"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _in_process_server():
    from lsp.server import create_server
    return create_server()


@pytest.mark.parametrize("cut", [None, 0.5])
def test_every_feature_on_stdlib_and_corpus_files(cut):
    """Every feature, called in process at every token of every shipped policy (whole, and
    cut in the middle: a half-typed file), answers without an exception."""
    import glob
    import os

    from lsp import completion, folding, hover, inlay_hints, semantic_tokens, symbols
    from mpl.stdlib_path import stdlib_dir

    ls = _in_process_server()
    files = sorted(glob.glob(os.path.join(stdlib_dir(), "*.moe"))) + sorted(
        glob.glob(os.path.join(REPO, "tests", "corpus", "*.moe")))
    assert len(files) > 5
    n = 0
    for path in files:
        text = open(path, encoding="utf-8").read()
        if cut:
            text = text[: int(len(text) * cut)]
        uri = "file://" + path + (".cut" if cut else "")
        doc = ls.store.open(uri, text, 1)
        doc.path = path if not cut else path + ".cut.moe"
        whole = types.Range(types.Position(0, 0), doc.index().end_position)
        assert isinstance(symbols.document_symbols(ls.store, doc, "utf-16"), list)
        assert isinstance(folding.folding_ranges(ls.store, doc), list)
        assert len(semantic_tokens.encode(doc, "utf-16")) % 5 == 0
        inlay_hints.inlay_hints(ls, doc, whole)
        for t in doc.tokens[::2]:
            for off in (t.start, t.end):
                hover.hover_markdown(ls, doc, off)
                completion.complete(ls, doc, off)
                n += 1
        ls.store.close(uri)
    assert n > 250


@prop(40)
@given(malformed())
def test_every_feature_on_malformed_tiers(text):
    """Malformed memory tiers (tests/tier_helpers.py): every feature, in process, at every
    token, answers without an exception; the outline keeps the policies the parser saw."""
    from lsp import analysis, completion, folding, hover, inlay_hints, semantic_tokens, symbols

    ls = _in_process_server()
    doc = ls.store.open("file:///fuzz_tiers.moe", text, 1)
    whole = types.Range(types.Position(0, 0), doc.index().end_position)
    syms = symbols.document_symbols(ls.store, doc, "utf-16")
    assert [s.name for s in syms] == [p.name.text if p.name else "policy"
                                      for p in analysis.document(ls.store, doc).policies]
    assert isinstance(folding.folding_ranges(ls.store, doc), list)
    assert len(semantic_tokens.encode(doc, "utf-16")) % 5 == 0
    inlay_hints.inlay_hints(ls, doc, whole)
    for t in doc.tokens:
        for off in (t.start, t.end):
            hover.hover_markdown(ls, doc, off)
            completion.complete(ls, doc, off)
    ls.store.close("file:///fuzz_tiers.moe")


@given(st.integers(1, 60), st.integers(1, 64), st.integers(1, 8), st.integers(1, 80), st.booleans())
@prop(300)
def test_per_layer_hint_matches_runtime_initial_split(layers, cap, lo, hi, with_total):
    """The hint's capacities are the runtime's start (mpl.runtime.budgets.allocate with equal
    weights); the server cannot import the runtime, so it re-derives them: check they agree."""
    import dataclasses

    from mpl.runtime.budgets import BudgetError, allocate
    if hi < lo:
        lo, hi = hi, lo
    shape = dataclasses.replace(shapes.preset("olmoe"), moe_layers=tuple(range(layers)))
    total = layers * cap + (7 if with_total else 0)
    vals = {"cache.capacity": cap, "per_layer.total_budget": total if with_total else None,
            "per_layer.min_capacity": lo, "per_layer.max_capacity": hi}
    try:
        want = allocate([1.0] * layers, total, lo, hi)
    except BudgetError:
        return   # the checker reports this policy (MPL309/MPL505): no IR, no hint
    assert per_layer_capacities(vals, shape) == want


def test_settings_model_from_config_json(tmp_path):
    import json
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "mixtral", "num_hidden_layers": 4, "num_local_experts": 6,
                               "num_experts_per_tok": 2, "hidden_size": 64, "intermediate_size": 128}))
    got = settings.update(settings.Settings(), {"model": str(cfg)})
    assert got.shape is not None and (got.shape.num_moe_layers, got.shape.num_experts) == (4, 6)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    got = settings.update(settings.Settings(), {"model": str(bad)})
    assert got.shape is None and any("cannot read" in m for m in got.messages)


def test_unclosed_block_recovers_at_the_next_block():
    text = "policy p {\n  cache {\n    capacity = 8\n  prefetch {\n    "
    ctx = context.context_at(text, len(text))
    assert (ctx.kind, ctx.block, ctx.policy) == ("param_name", "prefetch", "p")
    toks = tokenize(text)
    roles = {t.text: i.role for t, i in zip(toks, context.classify(toks))}
    assert roles["prefetch"] == context.BLOCK and roles["cache"] == context.BLOCK


#: the @lsp.type.* groups Neovim (0.10+) links to a highlight group by default (`:hi @lsp`,
#: src/nvim/highlight_group.c): a token type outside this set shows uncoloured in Neovim,
#: which has no grammar for .moe
NEOVIM_DEFAULT_LINKED = {"class", "comment", "decorator", "enum", "enumMember", "event", "function",
                         "interface", "keyword", "macro", "method", "modifier", "namespace", "number",
                         "operator", "parameter", "property", "regexp", "string", "struct", "type",
                         "typeParameter", "variable"}


def test_semantic_token_types_are_coloured_by_neovim_out_of_the_box():
    from lsp.semantic_tokens import TOKEN_MODIFIERS, TOKEN_TYPES
    assert set(TOKEN_TYPES) <= NEOVIM_DEFAULT_LINKED, set(TOKEN_TYPES) - NEOVIM_DEFAULT_LINKED
    standard = {"declaration", "definition", "readonly", "static", "deprecated", "abstract", "async",
                "modification", "documentation", "defaultLibrary"}
    assert set(TOKEN_MODIFIERS) <= standard


def test_a_publish_reads_and_indexes_a_file_that_is_not_open_once(tmp_path, monkeypatch):
    """Diagnostics that point into a file that is not open (30 policies that redefine the
    imported ones, an MPL106 with its related location each) read and index that file once
    per publish, and the ranges are the file's own."""
    from lsp import analysis, diagnostics
    from lsp.workspace import Store
    names = [f"p{i}" for i in range(30)]
    lib = "".join(f"policy {n} {{ cache {{ capacity = 8 }} }}\n" for n in names)
    (tmp_path / "lib.moe").write_text(lib, encoding="utf-8")
    main = 'import "lib.moe"\n' + "".join(f"policy {n} {{ cache {{ capacity = 4 }} }}\n" for n in names)
    (tmp_path / "main.moe").write_text(main, encoding="utf-8")
    store = Store()
    doc = store.open((tmp_path / "main.moe").as_uri(), main, 1)
    analysis.analyze(store, doc)
    builds: list[str] = []

    class CountingIndex(LineIndex):
        def __init__(self, text, *args, **kwargs):
            builds.append(text)
            super().__init__(text, *args, **kwargs)

    monkeypatch.setattr(diagnostics, "LineIndex", CountingIndex)
    got = diagnostics.lsp_diagnostics(store, doc, "utf-16")
    related = [r for d in got if d.code == "MPL106" for r in d.related_information]
    assert len(related) == len(names)
    assert builds == [lib]
    idx = LineIndex(lib, "utf-16")
    for n, r in zip(names, related):
        start = lib.index(f"policy {n} ") + len("policy ")
        assert r.location.uri == (tmp_path / "lib.moe").as_uri()
        assert (r.location.range.start, r.location.range.end) == (idx.position(start), idx.position(start + len(n)))
    diagnostics.lsp_diagnostics(store, doc, "utf-16")
    assert builds == [lib, lib]               # read again on the next publish: it may have changed
