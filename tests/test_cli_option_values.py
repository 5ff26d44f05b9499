"""What ``mplc`` does with option values a user can get wrong, as a user meets it (``mplc`` as
a subprocess): a value out of range or empty is a usage error naming the option, and a size
must be at least one byte."""

from __future__ import annotations

import os

import pytest

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
