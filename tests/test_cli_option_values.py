"""What ``mplc`` does with option values a user can get wrong, as a user meets it (``mplc`` as
a subprocess): a size must be at least one byte."""

from __future__ import annotations

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
