"""`mplc check` as a user runs it: rendered output (snapshots in tests/snapshots/), JSON,
exit codes, model-aware flags, unreadable inputs, colour.

Regenerate the snapshots after an intended change with
``MPL_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_cli_check.py``.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAP = os.path.join(ROOT, "tests", "snapshots")


def mplc(*args, cwd=SNAP, env=None):
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], capture_output=True,
                          text=True, cwd=cwd, env=e)


@pytest.mark.parametrize("name,code", [("typos", 1), ("warnings", 0), ("crossfield", 1),
                                       ("syntax", 1), ("clean", 0)])
def test_snapshot(name, code):
    out = mplc("check", f"{name}.moe")
    assert out.returncode == code, out.stderr
    assert out.stderr == ""
    snap = os.path.join(SNAP, f"{name}.txt")
    if os.environ.get("MPL_UPDATE_SNAPSHOTS"):
        with open(snap, "w", encoding="utf-8") as f:
            f.write(out.stdout)
    with open(snap, encoding="utf-8") as f:
        assert out.stdout == f.read()


def test_json_output():
    out = mplc("check", "--format", "json", "typos.moe", "clean.moe")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert [d["code"] for d in data] == ["MPL102", "MPL202", "MPL209"]
    first = data[0]
    assert first["file"] == "typos.moe" and first["severity"] == "error"
    assert first["span"]["line"] == 4 and first["span"]["column"] == 9
    assert first["fixes"][0]["edits"][0]["new_text"] == "capacity"
    assert json.loads(mplc("check", "--json", "clean.moe").stdout) == []


def test_no_warnings_flag():
    out = mplc("check", "--no-warnings", "warnings.moe")
    assert out.returncode == 0
    assert out.stdout.strip() == "1 file checked: no problems"


def test_model_aware(tmp_path):
    p = tmp_path / "m.moe"
    p.write_text("policy p { cache { capacity = 4; pin = [70] } }\n")
    plain = mplc("check", str(p))
    assert plain.returncode == 0
    out = mplc("check", "--model", "deepseek-v2-lite", "--format", "json", str(p))
    codes = sorted(d["code"] for d in json.loads(out.stdout))
    assert out.returncode == 1 and codes == ["MPL501", "MPL502", "MPL506"]
    # a HuggingFace config.json works like a preset
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 4, "num_local_experts": 8, "num_experts_per_tok": 2,
                               "hidden_size": 64, "intermediate_size": 128}))
    out = mplc("check", "--model", str(cfg), "--json", str(p))
    # (4 MoE layers x top-2 = 8 accesses a step: a shared cache of 4 thrashes, MPL508)
    assert sorted(d["code"] for d in json.loads(out.stdout)) == ["MPL501", "MPL508"]
    # device memory
    q = tmp_path / "mem.moe"
    q.write_text("policy p { cache { capacity = 8; eviction = farthest_layer; memory_threshold = 0.9; "
                 "memory_budget_gb = 80 } }\n")
    out = mplc("check", "--model", "mixtral", "--device-memory", "24GiB", "--json", str(q))
    assert [d["code"] for d in json.loads(out.stdout)] == ["MPL504"]


def test_usage_errors():
    out = mplc("check", "--model", "no-such-model", "clean.moe")
    assert out.returncode == 2
    assert "unknown model 'no-such-model'" in out.stderr and "deepseek-v2-lite" in out.stderr
    out = mplc("check", "--model", "mixtral", "--device-memory", "lots", "clean.moe")
    assert out.returncode == 2 and "--device-memory" in out.stderr
    out = mplc("check")
    assert out.returncode == 2
    for o in (out,):
        assert "Traceback" not in o.stderr


def test_unreadable_inputs(tmp_path):
    (tmp_path / "bin.moe").write_bytes(b"\x00\x01\x02")
    out = mplc("check", "missing.moe", str(tmp_path), str(tmp_path / "bin.moe"), "clean.moe")
    assert out.returncode == 1
    assert "Traceback" not in out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "missing.moe:1:1: error[MPL100]: no such file: 'missing.moe'" in lines
    assert f"{tmp_path}:1:1: error[MPL100]: '{tmp_path}' is a directory, not a policy file" in lines
    assert any("bin.moe' is a binary file" in line for line in lines)
    assert lines[-1] == "4 files checked: 3 errors"


def test_colour_only_on_a_terminal():
    out = mplc("check", "typos.moe")
    assert "\x1b[" not in out.stdout
    # force a pseudo-terminal: colour appears, and NO_COLOR turns it off
    pty = pytest.importorskip("pty")
    code = ("import sys; from mpl.cli.main import main; sys.exit(main(['check', 'typos.moe']))")
    for no_color, expect in ((None, True), ("1", False)):
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        if no_color:
            env["NO_COLOR"] = no_color
        master, slave = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=slave, stderr=slave, cwd=SNAP, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait()
        os.close(master)
        text = b"".join(chunks).decode()
        assert ("\x1b[" in text) is expect
        assert "error[MPL102]" in text.replace("\x1b[1;31m", "").replace("\x1b[0m", "")


def test_policy_extension_and_imports_in_output(tmp_path):
    (tmp_path / "lib.policy").write_text("policy base { cache { capacity = 0 } }\n")
    (tmp_path / "main.moe").write_text('import "lib.policy"\npolicy p extends base { }\n')
    out = mplc("check", "main.moe", cwd=str(tmp_path))
    assert out.returncode == 1
    assert out.stdout.startswith("lib.policy:1:34: error[MPL203]: 'capacity' must be in [1, 65536], got 0; use 1")
    assert "1 | policy base { cache { capacity = 0 } }" in out.stdout


def test_renderer_units():
    from mpl.cli.render import render, summary
    from mpl.diagnostics import Related, Span
    from mpl.rules import make
    text = "policy p {\n\tcache { capacity = 0 }\n}\n"
    start = text.index("0")
    d = make("MPL203", "bad", Span.from_offsets(text, start, start + 1), file="x.moe",
             related=(Related("elsewhere", Span.from_offsets("a\nbb\n", 2, 4), file="other.moe"),))
    out = render(d, text, sources={"other.moe": "a\nbb\n"}).splitlines()
    assert out[0] == "x.moe:2:21: error[MPL203]: bad"
    assert out[2] == "2 |     cache { capacity = 0 }"        # the tab shown as 4 columns
    assert out[3] == "  | " + " " * 23 + "^"
    assert out[4] == "  = note: elsewhere (other.moe:2:1)"
    assert out[6:8] == ["2 | bb", "  | --"]
    # a span over several lines is underlined to the end of its first line; EOF spans get a caret
    d = make("MPL003", "eof", Span.from_offsets(text, 0, len(text)))
    assert render(d, text).splitlines()[3] == "  | ^" + "~" * 9
    d = make("MPL003", "eof", Span.point(text, len(text)))
    assert render(d, text).splitlines()[1:4] == ["  |", "4 | ", "  | ^"]
    # no source: the header only
    assert render(d, None) == "<input>:4:1: error[MPL003]: eof"
    assert summary([], 1) == "1 file checked: no problems"
    assert summary([d, d], 3) == "3 files checked: 2 errors"


def test_standard_input(tmp_path):
    text = 'import "std/lru_basic"\npolicy p extends lru_basic {\n  cache { capcity = 3 }\n}\n'
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "check", "-"], input=text,
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "<stdin>:3:11: error[MPL102]: unknown parameter 'capcity'" in out.stdout
    assert "cache { capcity = 3 }" in out.stdout          # the snippet comes from stdin too
    clean = subprocess.run([sys.executable, "-m", "mpl.cli.main", "check", "-", "--json"],
                           input="policy p { cache { capacity = 3 } }", capture_output=True,
                           text=True, cwd=tmp_path)
    assert clean.returncode == 0 and json.loads(clean.stdout) == []


def test_rendering_splits_a_source_once_however_many_diagnostics():
    """Rendering was quadratic: every snippet split the whole file again."""
    from mpl.checker import analyze
    from mpl.cli import render

    text = "".join(f"policy p{i} {{ cache {{ capacity = 0 }} }}\n" for i in range(300))
    diags = [d for d in analyze(text, "many.moe").diagnostics if d.is_error]
    assert len(diags) == 300
    render._split_lines.cache_clear()
    out = render.render_all(diags, {"many.moe": text, None: text})
    assert out.count("capacity = 0") >= 300
    info = render._split_lines.cache_info()
    assert info.misses == 1 and info.hits >= 299
