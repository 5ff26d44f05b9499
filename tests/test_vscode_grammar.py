"""The VS Code extension's generated grammar and its package.json stay in sync with
mpl.schema and the language server's settings.

The grammar itself is exercised token by token by vscode-tmgrammar-test in
vscode-extension/ci.sh; here: the committed files equal what the generator makes from the
schema, the grammar's name lists cover the schema, the file-level snippets (the language
server's: the extension ships none) expand to valid policies, and the settings the extension
sends are the ones the server reads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mpl import schema
from mpl.checker import analyze

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "vscode-extension"
GEN = EXT / "scripts" / "gen_grammar.py"


def _load_gen():
    spec = importlib.util.spec_from_file_location("mpl_vscode_gen_grammar", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _load_gen()


def _grammar() -> dict:
    return json.loads((EXT / "syntaxes" / "moe.tmLanguage.json").read_text(encoding="utf-8"))


def _package() -> dict:
    return json.loads((EXT / "package.json").read_text(encoding="utf-8"))


def _onig_to_py(rx: str) -> re.Pattern:
    """The grammar's regexes use only the Oniguruma subset Python's re shares."""
    return re.compile(rx)


# ------------------------------------------------------------------ generated == committed
def test_committed_files_equal_generated():
    for path, text in gen.outputs().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run python vscode-extension/scripts/gen_grammar.py")


def test_check_mode_cli_passes_and_detects_drift(tmp_path):
    ok = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # a copy of the extension with a hand-edited grammar is reported stale
    (tmp_path / "scripts").mkdir()
    (tmp_path / "syntaxes").mkdir()
    (tmp_path / "scripts" / "gen_grammar.py").write_text(GEN.read_text(encoding="utf-8"), encoding="utf-8")
    grammar = _grammar()
    grammar["repository"]["param"]["match"] = grammar["repository"]["param"]["match"].replace("capacity|", "")
    (tmp_path / "syntaxes" / "moe.tmLanguage.json").write_text(json.dumps(grammar), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bad = subprocess.run([sys.executable, str(tmp_path / "scripts" / "gen_grammar.py"), "--check"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1
    assert "moe.tmLanguage.json is stale" in bad.stderr


# ------------------------------------------------------------------ the grammar covers the schema
def _match(rule: str) -> re.Pattern:
    return _onig_to_py(_grammar()["repository"][rule]["match"])


def test_every_parameter_and_alias_is_a_parameter_scope():
    rx = _match("param")
    names = [p.name for p in schema.PARAMS.values()] + [a for p in schema.PARAMS.values() for a in p.aliases]
    for name in names:
        m = rx.match(f"{name} = 1")
        assert m and m.group(1) == name, name
        assert not rx.match(f"{name} == 1"), name           # a comparison is not an assignment
    assert not rx.match("capcity = 1")


def test_every_block_is_a_block_scope_and_qualified_params_work():
    rx = _match("block")
    for name in schema.BLOCKS:
        assert rx.match(f"{name} {{"), name
        assert not rx.match(f"{name} = 1"), name
    q = _match("qualified-param")
    for p in schema.PARAMS.values():
        m = q.match(p.key)
        assert m and m.group(1) == p.block and m.group(3) == p.name, p.key


def test_enum_values_metrics_triggers_units():
    enum = _match("enum")
    for p in schema.PARAMS.values():
        for e in p.enum_names():
            assert enum.fullmatch(e), e
    metric = _match("metric")
    for m in schema.METRICS:
        assert metric.fullmatch(m), m
    trig = _match("trigger")
    for t in schema.TRIGGERS:
        m = trig.match(f"trigger {t}")
        assert m and m.group(2) == t, t
    num = _match("number")
    for unit in set(schema.UNITS) | set(schema.RULE_DURATION_UNITS):
        for text in (f"12{unit}", f"12 {unit}", f"-0.5 {unit}"):
            m = num.match(text)
            assert m and m.group(2) == unit, text
    m = num.match("12 GBx")
    assert m and m.group(2) is None
    ops = [p["match"] for p in _grammar()["repository"]["operator"]["patterns"]
           if p["name"] == "keyword.operator.comparison.moe"][0]
    for op in schema.COMPARISON_OPS:
        assert re.match(ops, op).group(0) == op, op


def test_keywords_have_scopes():
    g = json.dumps(_grammar())
    for kw in schema.KEYWORDS:
        assert re.search(rf"\b{kw}\b", g), kw


def test_file_types_match_schema():
    assert _grammar()["fileTypes"] == [e.lstrip(".") for e in schema.FILE_EXTENSIONS]
    langs = _package()["contributes"]["languages"]
    assert langs[0]["extensions"] == list(schema.FILE_EXTENSIONS)


# ------------------------------------------------------------------ snippets expand to valid code
_PLACEHOLDER = re.compile(r"\$\{(\d+)(?::((?:[^}\\]|\\.)*)|\|((?:[^|\\]|\\.)*)\|)\}|\$(\d+)")


def expand(body: list[str], pick: int = 0) -> str:
    """Expand a snippet as accepting it would: default text, or the ``pick``-th choice."""
    def repl(m: re.Match) -> str:
        if m.group(4) is not None:
            return ""
        if m.group(3) is not None:
            choices = re.split(r"(?<!\\),", m.group(3))
            return choices[min(pick, len(choices) - 1)].replace("\\,", ",")
        return (m.group(2) or "").replace("\\$", "$").replace("\\}", "}")
    return "\n".join(_PLACEHOLDER.sub(repl, line) for line in body)


def _valid_value(name: str) -> str:
    """Some in-range value for the parameter ``name`` (fills a snippet's `value` placeholder)."""
    p = next(p for p in schema.PARAMS.values() if p.name == name)
    if p.enum:
        return next(e.name for e in p.enum if not e.replay_only)
    if p.default not in (schema.REQUIRED, schema.OFF, schema.DERIVED):
        return schema.format_value(p.default)
    lo = p.min or 0
    if p.type in (schema.INT, schema.COUNT, schema.SLOTS_OR_SIZE) or p.max is None:
        return schema.format_value(int(lo) + 1)
    return schema.format_value((lo + p.max) / 2)


def _fill_values(text: str) -> str:
    return re.sub(r"(\w+) = value\b", lambda m: f"{m.group(1)} = {_valid_value(m.group(1))}", text)


@pytest.mark.parametrize("pick", [0, 1, 2])
def test_policy_snippet_expands_to_a_valid_policy(pick):
    """The language server's `policy` snippet (offered at the top of a file only)."""
    from lsp.completion import policy_snippet

    text = _fill_values(expand(policy_snippet(True).split("\n"), pick))
    a = analyze(text)
    assert a.ok, (text, [str(d) for d in a.errors])


def test_extension_contributes_no_snippets():
    """VS Code offers an extension's snippets in every context (inside `cache { }`, after
    `eviction =`): the file-level ones (`policy`, `extends`, `import`, `version`) come from
    the language server, which offers each where it can be typed."""
    assert "snippets" not in _package()["contributes"]
    assert not (EXT / "snippets").exists()


# ------------------------------------------------------------------ the extension's package.json
def test_initialization_options_are_the_servers_settings():
    """The settings the client sends (package.json mpl.* minus the client's own) are exactly
    those lsp.settings accepts, without a complaint."""
    settings = pytest.importorskip("lsp.settings")
    props = _package()["contributes"]["configuration"]["properties"]
    sent = {"model": None, "debounceMs": props["mpl.debounceMs"]["default"], "inlayHints": {},
            "importRoots": None}
    for key, spec in props.items():
        if key.startswith("mpl.inlayHints."):
            sent["inlayHints"][key.rsplit(".", 1)[1]] = spec["default"]
    client_only = {k for k in props if k.startswith(("mpl.server.", "mpl.trace."))}
    assert set(props) - client_only == {"mpl.model", "mpl.debounceMs", "mpl.importRoots"} | {
        f"mpl.inlayHints.{k}" for k in sent["inlayHints"]}
    loaded = settings.update(settings.Settings(), sent)
    assert loaded.messages == []
    roots = settings.update(settings.Settings(), {**sent, "importRoots": ["/ws/policies", "/shared"]})
    assert roots.messages == [] and roots.settings.import_roots == ("/ws/policies", "/shared")
    flipped = {**sent, "inlayHints": {k: False for k in sent["inlayHints"]}}
    off = settings.update(settings.Settings(), flipped).settings
    assert not any(v for k, v in vars(off).items() if k.startswith("hint_"))


def test_package_json_commands_and_ci_script():
    pkg = _package()
    cmds = {c["command"] for c in pkg["contributes"]["commands"]}
    assert "mpl.restartServer" in cmds
    assert pkg["main"] == "./dist/extension.js"
    assert pkg["repository"]["url"].startswith("https://")
    assert (EXT / "package-lock.json").is_file()
    assert os.access(EXT / "ci.sh", os.X_OK)
    # the client never passes a `transport` option (the server gets exactly -m lsp.server);
    # src/choose.ts builds the executable, src/server.ts calls it
    src = (EXT / "src" / "choose.ts").read_text(encoding="utf-8")
    assert "chooseFrom(" in (EXT / "src" / "server.ts").read_text(encoding="utf-8")
    assert "transport" not in re.sub(r"//.*", "", src)
    assert 'args: ["-m", "lsp.server"]' in src


# ------------------------------------------------------------------ language configuration
def test_language_configuration_patterns():
    conf = json.loads((EXT / "language-configuration.json").read_text(encoding="utf-8"))
    assert conf["comments"]["lineComment"] == "#"
    word = re.compile(conf["wordPattern"])
    for text in ("frequency_decay", "12GiB", "-0.5", "1e3", "hit_rate"):
        assert word.fullmatch(text), text
    assert [m.group(0) for m in word.finditer("capacity=16GiB")] == ["capacity", "16GiB"]
    inc = re.compile(conf["indentationRules"]["increaseIndentPattern"])
    dec = re.compile(conf["indentationRules"]["decreaseIndentPattern"])
    for line in ("policy p {", "    cache {", "policy p extends q {  # comment", "    when hit_rate < 0.5 {"):
        assert inc.search(line), line
    for line in ("    cache { capacity = 1 }", "# a comment {", '    import "x{"', "}"):
        assert not inc.search(line), line
    for line in ("}", "    }", "  ]"):
        assert dec.search(line), line
    assert not dec.search("    capacity = 1")
    start = re.compile(conf["folding"]["markers"]["start"])
    end = re.compile(conf["folding"]["markers"]["end"])
    assert start.search("  # region caches") and end.search("# endregion")
    assert not start.search("# regional policy")
    pairs = {p["open"]: p["close"] for p in conf["autoClosingPairs"]}
    assert pairs == {"{": "}", "[": "]", '"': '"'}


# ------------------------------------------------------------------ semantic tokens keep the grammar's colours
def _load_theme_colors():
    spec = importlib.util.spec_from_file_location("mpl_vscode_theme_colors", EXT / "scripts" / "theme_colors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _grammar_assertions(text: str) -> dict[tuple[int, int], list[str]]:
    """(line, column) -> scopes asserted by a vscode-tmgrammar-test file (which ci.sh checks
    against the real grammar): ``# ^^^ scope ...`` and ``# <~~--- scope ...`` lines refer to
    the last source line above them."""
    out: dict[tuple[int, int], list[str]] = {}
    src = None
    for i, line in enumerate(text.split("\n")):
        body = line[1:].lstrip() if line.startswith("#") else ""
        if src is not None and body.startswith("^"):
            start = line.index("^")
            end = start
            while end < len(line) and line[end] == "^":
                end += 1
            cols, scopes = range(start, end), line[end:].split()
        elif src is not None and body.startswith("<"):
            marker, *scopes = body.split()
            offset = marker.count("~")
            cols = range(offset, offset + marker.count("-"))
        else:
            src = i
            continue
        for c in cols:
            out[(src, c)] = scopes
    return out


def _semantic_tokens(text: str):
    """(line, column, length, type, modifiers) from the language server's encoder."""
    st = pytest.importorskip("lsp.semantic_tokens")
    from lsp.workspace import Store
    store = Store()
    store.open("file:///grammar-test.moe", text, 1)
    data = st.encode(store.get("file:///grammar-test.moe"), "utf-32")
    line = col = 0
    for i in range(0, len(data), 5):
        dl, dc, ln, tt, mods = data[i:i + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        yield line, col, ln, st.TOKEN_TYPES[tt], [m for j, m in enumerate(st.TOKEN_MODIFIERS) if mods >> j & 1]


def test_semantic_tokens_keep_the_grammars_colours_in_the_default_themes():
    """Every semantic token the server sends for the grammar test files gets, in each of VS
    Code's default themes, the colour the TextMate grammar gives the same text: the colours
    do not change when the server starts (e.g. parameter names in Light Modern)."""
    tc = _load_theme_colors()
    themes = [tc.Theme(p) for p in sorted((EXT / "test" / "themes").glob("*.json"))]
    assert {"Light Modern", "Dark Modern", "Light+", "Dark+"} <= {t.name for t in themes}
    ext_scopes = {}
    for entry in _package()["contributes"]["semanticTokenScopes"]:
        if entry["language"] == "moe":
            ext_scopes.update(entry["scopes"])
    bad, compared, kinds = [], 0, set()
    for path in sorted((EXT / "test" / "grammar").glob("*.moe")):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        asserted = _grammar_assertions(text)
        for line, col, ln, ttype, mods in _semantic_tokens(text):
            for c in range(col, col + ln):
                if (line, c) not in asserted:
                    continue
                stack = ["source.moe", *asserted[(line, c)]]
                kinds.add(ttype)
                for th in themes:
                    want = th.scope_color(stack)
                    got = th.semantic_color(ttype, mods, "moe", ext_scopes)
                    compared += 1
                    if got is not None and got != want:
                        bad.append(f"{path.name}:{line + 1}:{c + 1} {lines[line][col:col + ln]!r} "
                                   f"{'.'.join([ttype, *mods])} in {th.name}: grammar {stack[-1]} "
                                   f"{want}, semantic {got}")
    assert not bad, "\n".join(sorted(set(bad)))
    st = pytest.importorskip("lsp.semantic_tokens")
    assert kinds == set(st.TOKEN_TYPES), f"the grammar tests exercise no {set(st.TOKEN_TYPES) - kinds}"
    assert compared > 500


def test_vendored_themes_are_vscodes():
    """test/themes/ holds VS Code's own default themes (e2e/run.sh compares them with the
    code-server it installs); each one parses and colours the basic scopes."""
    tc = _load_theme_colors()
    for p in sorted((EXT / "test" / "themes").glob("*.json")):
        th = tc.Theme(p)
        assert th.scope_color(["source.moe", "comment.line.number-sign.moe"]) is not None, p.name
        assert th.scope_color(["source.moe", "string.quoted.double.moe"]) is not None, p.name


def test_moe_editor_defaults_match_the_formatter():
    """The status bar's indentation agrees with what Format Document writes: `[moe]` defaults
    to the formatter's indent (spaces, its width), without guessing from the file."""
    fmt = pytest.importorskip("mpl.fmt")
    moe = _package()["contributes"]["configurationDefaults"]["[moe]"]
    assert moe["editor.tabSize"] == len(fmt.INDENT) and set(fmt.INDENT) == {" "}
    assert moe["editor.insertSpaces"] is True and moe["editor.detectIndentation"] is False
    formatted = fmt.format_text("policy p { cache { capacity = 8 } }\n")
    assert "\n" + " " * moe["editor.tabSize"] + "cache {" in formatted


def test_server_settings_are_read_where_users_put_them():
    """A `machine`/`machine-overridable` setting in User settings is ignored in remote windows
    (code-server, Remote-SSH, WSL, Codespaces): the server's settings are window-scoped, and
    the default import strategy runs the bundled server when the environment has none."""
    props = _package()["contributes"]["configuration"]["properties"]
    for key in ("mpl.server.pythonPath", "mpl.server.importStrategy"):
        assert props[key]["scope"] not in ("machine", "machine-overridable", "application"), key
    strategy = props["mpl.server.importStrategy"]
    assert strategy["default"] == "auto" and set(strategy["enum"]) == {"auto", "fromEnvironment", "useBundled"}
    commands = {c["command"] for c in _package()["contributes"]["commands"]}
    assert "mpl.selectServer" in commands
