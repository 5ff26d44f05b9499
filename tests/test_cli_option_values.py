"""What ``mplc`` does with option values a user can get wrong, as a user meets it (``mplc`` as
a subprocess): a value out of range or empty is a usage error naming the option, a size must
be at least one byte, an option that does not apply is refused rather than ignored, an output
is never one of the inputs, a figure's format is checked before the sweep, and ``compile``
writes to the standard output however it is named."""

from __future__ import annotations

import json
import os

import pytest

from mpl import traceio

from cli_helpers import clean, mplc, trace_dir, work  # noqa: F401  (trace_dir, work: fixtures)


def usage_error(r, needle: str) -> None:
    clean(r)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr, r.stderr


def refused(r, needle: str) -> None:
    clean(r)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert needle in r.stderr, r.stderr


# ------------------------------------------------------------------ ranges
@pytest.mark.parametrize("steps", ["4294967297", "99999999999999999999", "0"])
def test_trace_synth_steps_outside_the_step_field_are_refused_at_once(tmp_path, steps):
    r = mplc("trace", "synth", "--preset", "olmoe-1b-7b", "--steps", steps, "-o", "big.mpltrace",
             "--no-progress", cwd=tmp_path, timeout=60)
    usage_error(r, f"mplc trace synth: error: --steps must be in 1..4294967296 (a trace numbers "
                   f"its steps 0..2^32-1: the native format's u32 step field), got {steps}")
    assert not (tmp_path / "big.mpltrace").exists()


# ------------------------------------------------------------------ sizes
@pytest.mark.parametrize("option", ["--device-memory", "--kv-reserve"])
def test_check_refuses_a_size_below_one_byte_as_it_refuses_zero(option, tmp_path):
    sizes = {"--device-memory": "16GB", option: "1e-10GB"}
    r = mplc("check", "--model", "deepseek-v2-lite", *[x for kv in sizes.items() for x in kv],
             "std/per_layer_16gb", cwd=tmp_path)
    usage_error(r, f"{option}: cannot read '1e-10GB' as a size")
    assert "a finite number of bytes, at least one" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("args, needle", [
    (["--device-memory", "1e-10GB"], "--device-memory '1e-10GB'"),
    (["--device-memory", "80GB", "--host-memory", "1e-10GB"], "--host-memory '1e-10GB'"),
    (["--device-memory", "80GB", "--kv-reserve", "1e-10GB"], "--kv-reserve '1e-10GB'"),
    (["--budget", "1e-10GB"], "--budget '1e-10GB': not a size"),
])
def test_tune_refuses_a_size_below_one_byte(work, args, needle):
    r = mplc("tune", "--trace", "m.mpltrace", "-j", "1", "--no-progress", *args, cwd=work)
    refused(r, needle)
    assert "a finite number of bytes, at least one" in r.stderr


# ------------------------------------------------------------------ empty values
@pytest.mark.parametrize("args, option", [
    (["check", "--model", "", "a.moe"], "argument --model"),
    (["check", "", "a.moe"], "argument FILE"),
    (["compile", "-o", "", "a.moe"], "argument -o/--output"),
    (["trace", "synth", "--preset", "olmoe", "--steps", "2", "-o", ""], "argument -o/--output"),
    (["sweep", "a.moe", "--trace", "m.mpltrace", "--capacity", ""], "argument --capacity"),
    (["replay", "a.moe", "--trace", "m.mpltrace", "--hardware", ""], "argument --hardware"),
    (["tune", "--budget", "64", "--trace", "m.mpltrace", "--name", "", "-o", "best.moe"],
     "argument --name"),
])
def test_an_empty_value_is_a_usage_error_naming_the_option(work, args, option):
    before = sorted(os.listdir(work))
    r = mplc(*args, cwd=work)
    usage_error(r, f"{option}: the value is empty; give one")
    assert sorted(os.listdir(work)) == before          # no default output written instead


@pytest.mark.parametrize("option, value", [
    ("--capacity", "8,,16"), ("--capacity", "8,16,"), ("--param", "eviction=lru,,lfu"),
])
def test_an_empty_list_item_is_a_usage_error(work, option, value):
    r = mplc("sweep", "a.moe", "--trace", "m.mpltrace", option, value, "--no-progress", cwd=work)
    usage_error(r, f"argument {option}: '{value}' has an empty item")


# ------------------------------------------------------------------ outputs over inputs
def _link(work, name: str, target: str, hard: bool = False) -> str:
    (os.link if hard else os.symlink)(work / target if hard else target, work / name)
    return name


@pytest.mark.parametrize("case", ["merge", "merge-symlink", "convert-hardlink", "tune-hardware",
                                  "sweep-plot-symlink", "run-trace-symlink"])
def test_an_output_that_is_an_input_is_refused(work, case):
    if case.startswith("sweep"):
        pytest.importorskip("matplotlib")
    traceio.save(traceio.load(str(work / "m.mpltrace")), str(work / "b.jsonl"))
    (work / "hw.json").write_text('{"name": "mine"}\n')
    args = {
        "merge": ["trace", "merge", "-o", "b.jsonl", "m.mpltrace", "b.jsonl"],
        "merge-symlink": ["trace", "merge", "-o", _link(work, "l.jsonl", "b.jsonl"),
                          "m.mpltrace", "b.jsonl"],
        "convert-hardlink": ["trace", "convert", "b.jsonl", _link(work, "h.jsonl", "b.jsonl", hard=True)],
        "tune-hardware": ["tune", "--trace", "m.mpltrace", "--budget", "16", "--hardware",
                          "hw.json", "-o", "hw.json", "--force", "-j", "1"],
        "sweep-plot-symlink": ["sweep", "a.moe", "--trace", "m.mpltrace", "--plot",
                               _link(work, "p.png", "a.moe")],
        "run-trace-symlink": ["run", "a.moe", "--model", "tiny-olmoe", "--trace",
                              _link(work, "t.jsonl", "a.moe")],
    }[case]
    before = {n: (work / n).read_bytes() for n in ("a.moe", "b.jsonl", "hw.json")}
    r = mplc(*args, "--no-progress", cwd=work)
    refused(r, "refusing to write the ")
    assert " over the " in r.stderr and "; choose another " in r.stderr
    assert {n: (work / n).read_bytes() for n in before} == before


def test_plot_and_heatmap_of_one_file_are_refused_before_the_sweep(work):
    r = mplc("sweep", "a.moe", "--trace", "m.mpltrace", "--capacity", "2,4", "--plot", "f.png",
             "--heatmap", "./f.png", "--no-progress", cwd=work)
    usage_error(r, "--plot and --heatmap name one file (f.png)")
    assert r.stdout == ""


# ------------------------------------------------------------------ figures
def test_a_figure_format_matplotlib_cannot_write_is_refused_before_the_sweep(work):
    pytest.importorskip("matplotlib")
    r = mplc("sweep", "a.moe", "--trace", "m.mpltrace", "--capacity", "2,4", "--plot", "out.txt",
             "--no-progress", cwd=work)
    usage_error(r, "mplc sweep: error: --plot out.txt: matplotlib writes no 'txt' figures; end "
                   "the file name in one of ")
    assert ".png" in r.stderr and ".svg" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("as_json", [False, True])
def test_a_figure_that_cannot_be_written_keeps_the_table(work, as_json):
    pytest.importorskip("matplotlib")
    r = mplc("sweep", "a.moe", "--trace", "m.mpltrace", "--capacity", "2,4", "--plot",
             "nodir/p.png", "--no-progress", *(["--json"] if as_json else []), cwd=work)
    refused(r, "mplc sweep: error: cannot write nodir/p.png: No such file or directory")
    if as_json:
        assert len(json.loads(r.stdout)["points"]) == 2
    else:
        assert "hit rate" in r.stdout and "wrote" not in r.stdout


# ------------------------------------------------------------------ compile to stdout
def test_compile_to_dev_stdout_writes_what_dash_writes(work):
    module = mplc("compile", "a.moe", "-o", "-", cwd=work).stdout
    r = mplc("compile", "a.moe", "-o", "/dev/stdout", cwd=work)
    clean(r)
    assert r.returncode == 0 and r.stdout == module and "make_runtime" in module


def test_compile_writes_through_a_pipe_named_by_a_dev_link(work):
    """/dev/stderr -> /proc/self/fd/2 -> pipe:[N]: a link only the kernel resolves."""
    module = mplc("compile", "a.moe", "-o", "-", cwd=work).stdout
    r = mplc("compile", "a.moe", "-o", "/dev/stderr", cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stderr == module and r.stdout == "compiled policy 'a' -> /dev/stderr\n"


def test_tune_refuses_dash_as_its_output_instead_of_writing_a_file_named_dash(work):
    """tune's standard output is its report: `-o -` names no file, and none is written."""
    usage_error(mplc("tune", "-t", "m.mpltrace", "--budget", "16", "-o", "-", cwd=work),
                "-o -: the report is what tune writes on the standard output")
    assert not (work / "-").exists()


def test_compile_json_to_stdout_is_one_json_document_with_the_module(work):
    module = mplc("compile", "a.moe", "-o", "-", cwd=work).stdout
    r = mplc("compile", "a.moe", "--json", "-o", "-", cwd=work)
    clean(r)
    info = json.loads(r.stdout)
    assert r.returncode == 0 and info["module"] == module and info["output"] == "-"
    assert info["policy"] == "a" and info["source_hash"]


# ------------------------------------------------------------------ trace convert
@pytest.mark.parametrize("args, needle", [
    (["m.mpltrace", "o.mpltrace", "--model", "deepseek-v2-lite"], "--model goes with --from"),
    (["m.mpltrace", "o.mpltrace", "--prompt-tokens", "3"], "--prompt-tokens goes with --from"),
    (["m.mpltrace", "o.jsonl", "--weights", "f16"],
     "--weights chooses the float type of a native (.mpltrace) output's router weights; "
     "o.jsonl is JSONL"),
    (["x.pt", "o.mpltrace", "--from", "sglang-distribution", "--model", "mixtral-8x7b",
      "--prompt-tokens", "3"],
     "--prompt-tokens goes with --from vllm-npy or vllm-response or sglang-response (it splits "
     "each request into its prompt and generated tokens); sglang-distribution records its own "
     "steps"),
    (["x.npy", "o.mpltrace", "--from", "vllm-npy", "--model", "mixtral-8x7b",
      "--prompt-tokens", "0"], "--prompt-tokens must be at least 1, got 0"),
])
def test_trace_convert_refuses_options_that_do_not_apply(work, args, needle):
    r = mplc("trace", "convert", *args, "--no-progress", cwd=work)
    usage_error(r, f"mplc trace convert: error: {needle}")
    assert not (work / args[1]).exists()


def test_a_file_that_is_not_a_distribution_dump_is_named_as_such(work):
    pytest.importorskip("torch")
    mplc("trace", "convert", "m.mpltrace", "m.jsonl", cwd=work)
    r = mplc("trace", "convert", "--from", "sglang-distribution", "--model", "olmoe-1b-7b",
             "m.jsonl", "o.jsonl", "--no-progress", cwd=work)
    refused(r, "mplc trace convert: error: m.jsonl: not a readable SGLang expert-distribution "
               "file: not a torch.save dump of tensors, lists and dicts")
    assert "weights_only" not in r.stderr and "code execution" not in r.stderr
    assert not (work / "o.jsonl").exists()
