"""One command-line grammar across the ``mplc`` subcommands, as a user meets it: the same
options for the same things (a policy file is the positional POLICY, a policy inside it is
``--policy-name``, the old spellings warn and still work), ``--no-progress`` and a progress
bar on every long command, one error prefix, help on every positional, a misspelt option
answered by the command's own usage with a suggestion, ``mplc explain`` listing every code,
a missing optional dependency naming its extra (exit 1, never "internal error"), ``mplc
doctor``'s dependency table, and Ctrl-C stopping ``mplc tune``'s workers without a
traceback."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time

import pytest

from cli_helpers import GOOD, clean, mplc, trace_dir, work  # noqa: F401  (fixtures)
from mpl.cli.main import COMMANDS, build_parser

TWO = GOOD + "policy b {\n    cache {\n        capacity = 4\n    }\n}\n"


# ------------------------------------------------------------------ help on every positional
def _parsers():
    """(name, parser) of every command and trace subcommand, as mplc builds them."""
    for name in COMMANDS:
        top = build_parser(name)
        sub = next(a for a in top._actions if a.dest == "command").choices[name]
        yield name, sub
        for a in sub._actions:
            if a.dest == "trace_command":
                for leaf_name, leaf in a.choices.items():
                    yield f"{name} {leaf_name}", leaf


def test_every_positional_has_help():
    missing = [f"mplc {name}: {a.metavar or a.dest}" for name, p in _parsers()
               for a in p._actions if not a.option_strings and a.dest not in ("command", "trace_command")
               and not a.help]
    assert missing == []


@pytest.mark.parametrize("name", [name for name, _ in _parsers()])
def test_every_help_renders(tmp_path, name):
    """argparse formats help strings with %: a bare one (a "10% reserve") prints the
    option's repr instead of its help."""
    r = mplc(*name.split(), "--help", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0 and r.stderr == ""
    assert "{'option_strings'" not in r.stdout and "%(" not in r.stdout
    if name == "tune":
        assert "a 10% reserve" in " ".join(r.stdout.split())


def test_positional_help_is_shown(tmp_path):
    r = mplc("trace", "convert", "--help", cwd=tmp_path)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "IN the trace to read" in text and "OUT the trace to write" in text
    r = mplc("trace", "merge", "--help", cwd=tmp_path)
    assert "the traces to merge" in r.stdout


# ------------------------------------------------------------------ policy file and name
LONG = ["replay", "sweep", "tune", "demo", "run"]


@pytest.mark.parametrize("name", ["compile", "replay", "sweep", "run", "demo"])
def test_policy_file_is_positional_and_name_is_policy_name(name):
    p = dict(_parsers())[name]
    positional = [a for a in p._actions if not a.option_strings and a.dest == "policy"]
    assert positional and positional[0].metavar == "POLICY"
    assert any("--policy-name" in a.option_strings for a in p._actions)


def test_policy_name_selects_and_old_spelling_warns(work):
    (work / "two.moe").write_text(TWO)
    r = mplc("replay", "two.moe", "-t", "m.mpltrace", "--policy-name", "b", "--json",
             "--no-belady", cwd=work)
    clean(r)
    assert r.returncode == 0 and json.loads(r.stdout)["policy"] == "b" and r.stderr == ""
    r = mplc("replay", "two.moe", "-t", "m.mpltrace", "--policy", "b", "--json", "--no-belady",
             cwd=work)
    assert r.returncode == 0 and json.loads(r.stdout)["policy"] == "b"
    assert "mplc replay: warning: --policy is a deprecated spelling; write --policy-name NAME" in r.stderr
    r = mplc("compile", "two.moe", "--policy-name", "b", "-o", "-", cwd=work)
    assert r.returncode == 0 and "POLICY_NAME = 'b'" in r.stdout
    r = mplc("compile", "two.moe", cwd=work)
    assert r.returncode == 1 and "choose one with --policy-name NAME" in r.stderr
    r = mplc("sweep", "two.moe", "-t", "m.mpltrace", "--policy-name", "b", "--capacity", "4,8",
             "--no-belady", "--json", cwd=work)
    clean(r)
    assert r.returncode == 0 and {p["policy"] for p in json.loads(r.stdout)["points"]} == {"b"}


def test_misspelt_option_gets_the_commands_usage_and_a_suggestion(work):
    r = mplc("replay", "a.moe", "-t", "m.mpltrace", "--polcy-name", "a", cwd=work)
    assert r.returncode == 2
    assert r.stderr.startswith("usage: mplc replay ")
    assert "mplc replay: error: unrecognized arguments: --polcy-name a; did you mean --policy-name?" \
        in r.stderr
    r = mplc("trace", "synth", "--preset", "olmoe", "--stpes", "3", cwd=work)
    assert r.returncode == 2 and r.stderr.startswith("usage: mplc trace synth ")
    assert "did you mean --steps?" in r.stderr


# ------------------------------------------------------------------ progress
@pytest.mark.parametrize("argv", [
    ["replay", "a.moe"], ["sweep", "a.moe"], ["tune"], ["demo"], ["run", "a.moe"],
    ["trace", "synth"], ["trace", "convert", "a", "b"], ["trace", "merge", "a"],
    ["trace", "record"]])
def test_every_long_command_takes_no_progress(work, argv):
    r = mplc(*argv, "--help", cwd=work)
    assert r.returncode == 0 and "--no-progress" in r.stdout


def _on_a_terminal(argv, cwd) -> tuple[int, str]:
    """Run mplc with its standard error on a pseudo-terminal (where the bar is drawn)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-m", "mpl.cli.main", *argv], cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=slave,
                             env={**os.environ, "NO_COLOR": "1"})
        os.close(slave)
        chunks = []
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        return p.wait(timeout=300), b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(master)


@pytest.mark.parametrize("argv, label", [
    (["trace", "synth", "--preset", "olmoe", "--steps", "300", "-o", "s.mpltrace"], "synth"),
    (["trace", "convert", "m.mpltrace", "c.jsonl"], "convert: writing"),
])
def test_trace_commands_draw_a_bar_on_a_terminal(work, argv, label):
    rc, err = _on_a_terminal(argv, work)
    assert rc == 0 and f"{label} [" in err and "100%" in err
    rc, err = _on_a_terminal([*argv, "--no-progress"], work)
    assert rc == 0 and f"{label} [" not in err


# ------------------------------------------------------------------ one error prefix
@pytest.mark.parametrize("argv, prefix", [
    (["replay", "a.moe", "-t", "missing.mpltrace"], "mplc replay: error: "),
    (["sweep", "a.moe", "-t", "m.mpltrace", "--capacity", "0"], "mplc sweep: error: "),
    (["tune", "-t", "m.mpltrace", "-b", "8", "--jobs", "-1"], "mplc tune: error: "),
    (["trace", "synth", "--preset", "nope"], "mplc trace synth: error: "),
    (["trace", "info", "missing.mpltrace"], "mplc trace info: error: "),
    (["trace", "convert", "m.mpltrace", "x.txt"], "mplc trace convert: error: "),
    (["compile", "a.moe", "-o", "b.moe"], "mplc compile: error: "),
    (["run", "missing.moe", "--model", "tiny-mixtral"], "mplc run: error: "),
    (["demo", "missing.moe"], "mplc demo: error: "),
    (["check", "a.moe", "--model", "nope"], "mplc check: error: "),
    (["explain", "MPL999"], "mplc explain: error: "),
])
def test_one_error_prefix(work, argv, prefix):
    r = mplc(*argv, cwd=work)
    clean(r)
    assert r.returncode in (1, 2)
    assert r.stderr.startswith(prefix), r.stderr


# ------------------------------------------------------------------ explain
def test_explain_alone_lists_every_code(tmp_path):
    from mpl.rules import CODES

    r = mplc("explain", cwd=tmp_path)
    assert r.returncode == 0
    listed = [line.split()[0] for line in r.stdout.splitlines() if line.startswith("MPL")]
    assert listed == list(CODES)
    assert "MPL102  error    structure    unknown parameter" in r.stdout


# ------------------------------------------------------------------ optional dependencies
def _without(modules, *argv, cwd):
    """mplc with ``modules`` made unimportable (as in an installation without the extra)."""
    code = ("import sys\nfor m in sys.argv[1].split(','):\n    sys.modules[m] = None\n"
            "from mpl.cli.main import main\nsys.exit(main(sys.argv[2:]))\n")
    return subprocess.run([sys.executable, "-c", code, ",".join(modules), *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.parametrize("argv", [
    ["demo"], ["run", "std/lru_basic", "--model", "tiny-mixtral"],
    ["trace", "record", "--model", "tiny-mixtral", "-o", "t.mpltrace"]])
def test_without_torch_the_extra_is_named(work, argv):
    r = _without(["torch", "transformers"], *argv, cwd=work)
    clean(r)
    assert r.returncode == 1
    assert "error: torch is not installed" in r.stderr or "error: transformers is not installed" in r.stderr
    assert "pip install 'mpl-policylang[hf]'" in r.stderr


def test_without_matplotlib_a_plot_is_refused_before_the_sweep(work):
    r = _without(["matplotlib"], "sweep", "a.moe", "-t", "m.mpltrace", "--capacity", "4",
                 "--plot", "p.png", cwd=work)
    clean(r)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("mplc sweep: error: --plot: matplotlib is not installed")
    assert "mpl-policylang[plot]" in r.stderr


def test_without_pygls_the_language_server_names_its_extra(tmp_path):
    r = _without(["pygls", "lsprotocol"], "lsp", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "mpl-policylang[lsp]" in r.stderr


def test_doctor_lists_every_optional_dependency(tmp_path):
    from mpl.extras import OPTIONAL

    r = mplc("doctor", cwd=tmp_path)
    assert r.returncode == 0
    table = r.stdout.split("dependency", 1)[1]
    for name in ("torch", "transformers", "accelerate", "matplotlib", "pygls", "lsprotocol", "vllm"):
        row = next(line for line in table.splitlines() if line.startswith(name + " "))
        assert OPTIONAL[name].enables in row
        assert "not installed" in row or any(c.isdigit() for c in row.split()[1])
    d = json.loads(mplc("doctor", "--json", cwd=tmp_path).stdout)
    assert [x["module"] for x in d["dependencies"]] == list(OPTIONAL)
    import torch
    assert next(x for x in d["dependencies"] if x["module"] == "torch")["version"] == torch.__version__


# ------------------------------------------------------------------ Ctrl-C
def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc/N/stat)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            out.append(int(name))
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
def test_ctrl_c_stops_tune_and_its_workers_without_a_traceback(tmp_path):
    from mpl import traceio
    from mpl.sim import synth

    # a trace long enough that the search is still running well after its workers start
    traceio.save(synth.synthesize("deepseek-v2-lite", steps=8000, seed=1), str(tmp_path / "d.mpltrace"))
    p = subprocess.Popen([sys.executable, "-m", "mpl.cli.main", "tune", "-t", "d.mpltrace",
                          "-b", "208", "--jobs", "2", "--no-progress"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while len(_children(p.pid)) < 2 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert p.poll() is None, p.communicate()
    workers = _children(p.pid)
    time.sleep(0.5)                       # the workers are replaying
    assert p.poll() is None, "the search ended before the interrupt: lengthen its trace"
    os.killpg(p.pid, signal.SIGINT)       # what a terminal's Ctrl-C does: the whole group
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip() == "mplc tune: interrupted"
    for w in workers:
        assert not os.path.exists(f"/proc/{w}") or open(f"/proc/{w}/stat").read().split()[2] == "Z"


# ------------------------------------------------------------------ vLLM tensor parallelism
VLLM_CONFIG = {"model_type": "qwen3_moe", "num_hidden_layers": 2, "num_experts": 8,
               "num_experts_per_tok": 2, "hidden_size": 64, "moe_intermediate_size": 32,
               "intermediate_size": 64, "torch_dtype": "float32"}


def test_tensor_parallel_size_reaches_the_engine(tmp_path):
    model = tmp_path / "tinyq"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(VLLM_CONFIG))
    fake = tmp_path / "fake-python"      # stands in for vLLM's Python: shows what it is given
    fake.write_text("#!/bin/sh\necho \"$@\"\n")
    fake.chmod(0o755)
    r = mplc("run", "std/lru_basic", "--engine", "vllm", "--model", model, "--vllm-python", fake,
             "--tensor-parallel-size", "2", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("-m mpl.vllm.cli run ") and "--tensor-parallel-size 2" in r.stdout
    r = mplc("trace", "record", "--engine", "vllm", "--model", model, "--vllm-python", fake,
             "--tensor-parallel-size", "2", "-o", "t.mpltrace", cwd=tmp_path)
    assert r.returncode == 0 and "--tensor-parallel-size 2" in r.stdout
    r = mplc("run", "std/lru_basic", "--model", "tiny-mixtral", "--tensor-parallel-size", "2",
             cwd=tmp_path)
    assert r.returncode == 2 and "mplc run: error: --tensor-parallel-size needs --engine vllm" in r.stderr
    r = mplc("run", "std/lru_basic", "--engine", "vllm", "--model", model, "--vllm-python", fake,
             "--tensor-parallel-size", "0", cwd=tmp_path)
    assert r.returncode == 2 and "--tensor-parallel-size must be >= 1" in r.stderr
