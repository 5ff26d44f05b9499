"""Files written for the original (1.3.2 / 1.15.0) that it accepts are accepted
here (``mplc check`` as a subprocess), and hostile inputs get one clear, located diagnostic
each: no cascades, no file echoed, no read of the standard input."""

from __future__ import annotations

import json
import os

import pytest

from cli_helpers import clean, mplc


def _check(tmp_path, text, *args, name="p.moe"):
    f = tmp_path / name
    f.write_text(text)
    r = mplc("check", "--json", *args, f.name, cwd=tmp_path)
    clean(r)
    return r.returncode, [(d["code"], d["severity"], d["message"]) for d in json.loads(r.stdout)]


POLICY = "policy p {\n    cache { capacity = 8 }\n}\n"


@pytest.mark.parametrize("version", ["0.7", "0.6", "0.5", "0", "0.0", ".5", "5e-1", "1", "2"])
def test_original_versions_are_accepted(tmp_path, version):
    assert _check(tmp_path, f"version {version}\n" + POLICY) == (0, [])


@pytest.mark.parametrize("version", ["0.8", "3", "1.5", "-1"])
def test_other_versions_are_refused(tmp_path, version):
    rc, diags = _check(tmp_path, f"version {version}\n" + POLICY)
    assert rc == 1 and [d[0] for d in diags] == ["MPL111"]
    assert "0 .. 0.7, the original's versions" in diags[0][2]


def test_unknown_monitor_metric_is_a_warning_with_did_you_mean(tmp_path):
    text = "policy p {\n    cache { capacity = 8 }\n    monitor { metrics = [hit_rate, latency, hitrate] }\n}\n"
    rc, diags = _check(tmp_path, text)
    assert rc == 0 and [(c, s) for c, s, _ in diags] == [("MPL407", "warning")] * 2
    assert "did you mean 'hit_rate'?" in diags[1][2]
    # in a condition that must be evaluated it stays an error
    text = "policy p {\n    cache { capacity = 8 }\n    adapt { when latency > 5 { capacity = 4 } }\n}\n"
    rc, diags = _check(tmp_path, text)
    assert rc == 1 and [(c, s) for c, s, _ in diags] == [("MPL205", "error")]


@pytest.mark.parametrize("between", ["\n            ", "  # a comment\n            ", " # c\n  # d\n  "])
def test_a_line_break_or_comment_between_for_n_and_its_unit(tmp_path, between):
    text = ("policy p {\n    cache { capacity = 8 }\n    adapt {\n"
            f"        when hit_rate < 0.5 for 100{between}accesses {{ capacity = 4 }}\n    }}\n}}\n")
    assert _check(tmp_path, text) == (0, [])


@pytest.mark.parametrize("literal", ["40.", "16.", "5.e-1"])
def test_numbers_with_a_trailing_dot(tmp_path, literal):
    name = "capacity" if literal != "5.e-1" else "memory_threshold"
    extra = "" if name == "capacity" else " capacity = 8 memory_headroom = 0.25"
    text = f"policy p {{\n    cache {{ {name} = {literal}{extra} }}\n}}\n"
    assert _check(tmp_path, text) == (0, [])


def test_repeated_list_elements_are_a_warning_with_a_fix(tmp_path):
    text = "policy p {\n    cache { capacity = 8 pin = [1, 1] }\n    monitor { metrics = [hit_rate, hit_rate] }\n}\n"
    f = tmp_path / "p.moe"
    f.write_text(text)
    r = mplc("check", "--json", "p.moe", cwd=tmp_path)
    clean(r)
    diags = json.loads(r.stdout)
    assert r.returncode == 0 and [(d["code"], d["severity"]) for d in diags] == [("MPL209", "warning")] * 2
    # applying the fixes leaves a clean file
    for d in sorted(diags, key=lambda d: -d["span"]["offset"]):
        [e] = d["fixes"][0]["edits"]
        text = text[:e["span"]["offset"]] + e["new_text"] + text[e["span"]["end_offset"]:]
    assert "[1]" in text and "[hit_rate]" in text
    assert _check(tmp_path, text) == (0, [])


@pytest.mark.parametrize("kw", ["when", "for", "policy", "extends", "version", "import",
                                "trigger", "rebalance", "true", "false"])
def test_keywords_as_policy_names(tmp_path, kw):
    text = f"policy {kw} {{\n    cache {{ capacity = 8 }}\n}}\npolicy child extends {kw} {{ }}\n"
    assert _check(tmp_path, text) == (0, [])
    r = mplc("compile", "p.moe", "--policy", kw, "-o", "out.py", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0 and (tmp_path / "out.py").exists()


def test_adapt_actions_of_the_original(tmp_path):
    text = ("policy p {\n    cache { capacity = 8 }\n    adapt {\n"
            "        when hit_rate < 0.5 { capacity = 16.0 prefetch_budget = 2.0 window = 50 }\n"
            "        when hit_rate > 0.9 { rebalance entropy }\n    }\n}\n")
    rc, diags = _check(tmp_path, text)
    assert rc == 0 and [(c, s) for c, s, _ in diags] == [("MPL404", "hint"), ("MPL308", "warning")]
    assert "has no effect" in diags[1][2]


@pytest.mark.parametrize("header,bad", [("policy my-policy {", "my-policy"),
                                        ("policy p {\n    cache\u200b", "\u200b")])
def test_a_header_syntax_error_is_the_only_error(tmp_path, header, bad):
    if "cache" in header:
        text = header + " { capacity = 8 }\n}\n"
    else:
        text = header + "\n    cache { capacity = 8 }\n}\n"
    rc, diags = _check(tmp_path, text)
    assert rc == 1 and [d[0] for d in diags] == ["MPL001"], diags
    assert not any("has no cache block" in d[2] for d in diags)


@pytest.mark.parametrize("word,fixed", [("cpu-fallback", "cpu_fallback"), ("gpu-only", "gpu_only")])
def test_readme_spellings_get_one_did_you_mean(tmp_path, word, fixed):
    text = f"policy p {{\n    cache {{ capacity = 8 }}\n    schedule {{ mode = {word} }}\n}}\n"
    rc, diags = _check(tmp_path, text)
    assert rc == 1 and diags == [("MPL001", "error",
                                  f"'{word}' is not a name: names use '_', not '-'; did you mean '{fixed}'?")]


def test_freq_threshold_spelling(tmp_path):
    text = "policy p {\n    cache { capacity = 8 eviction = frequency_threshold freq-threshold = 0.1 }\n}\n"
    rc, diags = _check(tmp_path, text)
    assert rc == 1 and [d[0] for d in diags] == ["MPL001"] and "'freq_threshold'" in diags[0][2]


def test_import_without_extension_finds_dot_policy(tmp_path):
    (tmp_path / "b.policy").write_text("policy b { cache { capacity = 8 } }\n")
    assert _check(tmp_path, 'import "b"\npolicy a extends b { }\n', name="a.moe") == (0, [])


def test_import_of_a_file_that_is_not_a_policy_echoes_one_line(tmp_path):
    secret = tmp_path / "secrets.txt"
    secret.write_text("".join(f"user{i}:x:{i}:hunter{i}\n" for i in range(50)))
    (tmp_path / "a.moe").write_text(f'import "{secret}"\n' + POLICY)
    r = mplc("check", "a.moe", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1
    assert "user0:x:0:hunter0" in r.stdout                 # the first offending line, once
    assert "hunter1" not in r.stdout and r.stdout.count("hunter0") == 1
    assert "not a policy file" in r.stdout


@pytest.mark.skipif(not os.path.exists("/dev/stdin"), reason="needs /dev/stdin")
def test_import_of_a_device_is_refused_without_reading(tmp_path):
    (tmp_path / "a.moe").write_text('import "/dev/stdin"\n' + POLICY)
    r = mplc("check", "a.moe", cwd=tmp_path, stdin="policy stolen { cache { capacity = 1 } }\n")
    clean(r)
    assert r.returncode == 1 and "not a regular file" in r.stdout and "stolen" not in r.stdout


def test_import_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "lib.moe").write_text("policy base { cache { capacity = 8 } }\n")
    (root / "a.moe").write_text('import "../lib"\nimport "std/lru_basic"\npolicy a extends base { }\n')
    r = mplc("check", "--import-root", root, "root/a.moe", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "outside the import roots" in r.stdout
    assert "root/a.moe:1:8: error[MPL100]" in r.stdout and r.stdout.count("error[") == 1
    for args in ((), ("--import-root", tmp_path)):
        r = mplc("check", *args, "root/a.moe", cwd=tmp_path)
        clean(r)
        assert r.returncode == 0, r.stdout
    # the other commands that read policies take it too
    r = mplc("compile", "--import-root", root, "root/a.moe", "-o", "x.py", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "outside the import roots" in (r.stdout + r.stderr)
    r = mplc("check", "--import-root", tmp_path / "nope", "root/a.moe", cwd=tmp_path)
    assert r.returncode == 2 and "not a folder" in r.stderr
