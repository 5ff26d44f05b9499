"""Every read of a user-named model config, hardware profile or trace ends: a device
(/dev/zero), a pipe with an endless line, a binary or a huge file is a clear error naming the
file (exit status 1 or 2, no traceback, no "internal error"), never an exhausted memory.

``mplc`` runs as a subprocess with its address space capped at 1 GiB and a timeout, so an
unbounded read fails the test (a MemoryError is "out of memory" from mplc's last-resort
guard; a hang is a timeout) instead of taking the machine's memory or hanging CI."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading

import pytest

from mpl import traceio
from mpl.sim.synth import synthesize

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/zero") or sys.platform == "win32",
                                reason="needs /dev/zero, named pipes and resource limits")

LIMIT = 1 << 30


def _limit_memory():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def mplc(args, cwd, status=1):
    r = subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120, preexec_fn=_limit_memory)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert "out of memory" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == status, (r.returncode, r.stdout[-1000:], r.stderr[-1000:])
    return r.stderr + r.stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("io")
    traceio.save(synthesize("mixtral-8x7b", steps=5, seed=0), str(d / "m.mpltrace"))
    (d / "zero.jsonl").symlink_to("/dev/zero")
    (d / "zero.mpltrace").symlink_to("/dev/zero")
    (d / "zero.json").symlink_to("/dev/zero")
    cfg = {"model_type": "mixtral", "num_hidden_layers": 4, "num_local_experts": 8,
           "num_experts_per_tok": 2, "hidden_size": 64, "intermediate_size": 128}
    (d / "big_cfg.json").write_text(json.dumps({**cfg, "pad": "x" * (5 << 20)}))
    (d / "bom_cfg.json").write_text(json.dumps(cfg), encoding="utf-8-sig")
    (d / "bom_hw.json").write_text(json.dumps({"base": "h100", "link_gbps": 20}), encoding="utf-8-sig")
    (d / "nul_hw.json").write_bytes(b'{"base": "h100"}\n' + bytes(100))
    return d


# ------------------------------------------------------------------ model configs
def test_check_model_dev_zero(work):
    out = mplc(["check", "--model", "/dev/zero", "std/balanced"], work, status=2)
    assert "/dev/zero is a binary file, not a HuggingFace config.json" in out


def test_check_model_symlink_to_dev_zero_and_folder(work):
    assert "zero.json is a binary file" in mplc(["check", "--model", "zero.json", "std/balanced"],
                                               work, status=2)
    folder = work / "cfgdir"
    folder.mkdir()
    (folder / "config.json").symlink_to("/dev/zero")
    assert "config.json is a binary file" in mplc(["check", "--model", "cfgdir", "std/balanced"],
                                                  work, status=2)


def test_check_model_larger_than_the_cap(work):
    out = mplc(["check", "--model", "big_cfg.json", "std/balanced"], work, status=2)
    assert "big_cfg.json is larger than 4 MiB: not a HuggingFace config.json" in out


def test_check_model_with_byte_order_mark_is_read(work):
    # (std/lru_basic: 16 shared slots hold more than one step of this model, 4 layers x top-2)
    assert "no problems" in mplc(["check", "--model", "bom_cfg.json", "std/lru_basic"], work, status=0)


# ------------------------------------------------------------------ hardware profiles
def test_replay_hardware_dev_zero(work):
    out = mplc(["replay", "std/lru_basic", "--trace", "m.mpltrace", "--hardware", "/dev/zero"], work)
    assert "/dev/zero is a binary file, not a hardware profile" in out


def test_replay_hardware_binary_and_bom(work):
    out = mplc(["replay", "std/lru_basic", "--trace", "m.mpltrace", "--hardware", "nul_hw.json"], work)
    assert "nul_hw.json is a binary file" in out
    out = mplc(["replay", "std/lru_basic", "--trace", "m.mpltrace", "--hardware", "bom_hw.json"],
               work, status=0)
    assert "hardware bom_hw" in out


# ------------------------------------------------------------------ traces
def test_trace_info_jsonl_symlink_to_dev_zero(work):
    out = mplc(["trace", "info", "zero.jsonl"], work)
    assert "zero.jsonl:1: a NUL byte: this is a binary file, not a JSONL trace" in out


def test_trace_native_symlink_to_dev_zero(work):
    assert "zero.mpltrace: not an .mpltrace file (bad magic)" in mplc(["trace", "info", "zero.mpltrace"], work)
    out = mplc(["replay", "std/lru_basic", "--trace", "zero.jsonl"], work)
    assert "zero.jsonl:1: a NUL byte" in out


def test_jsonl_nul_byte_later_in_the_file(work):
    p = work / "nul_later.jsonl"
    p.write_bytes(b'{"num_experts": 8, "top_k": 2, "moe_layers": [0]}\n{"t": 0, "l": 0, "e": [1, 2]}\n'
                  b'{"t": 1, "l": 0, "e": [1, \x002]}\n')
    assert "nul_later.jsonl:3: a NUL byte" in mplc(["trace", "info", "nul_later.jsonl"], work)


def _feed_pipe(path, head: bytes, body: bytes):
    """A writer thread: ``head`` then ``body`` repeated until the reader goes away."""
    def run():
        try:
            with open(path, "wb") as f:
                f.write(head)
                while True:
                    f.write(body)
        except (BrokenPipeError, OSError):
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_jsonl_endless_line_from_a_pipe_stops_at_the_line_cap(work):
    p = work / "endless.jsonl"
    os.mkfifo(p)
    t = _feed_pipe(p, b'{"num_experts": 8, "top_k": 2, "moe_layers": [0]}\n', b"[" * 65536)
    out = mplc(["trace", "info", "endless.jsonl"], work)
    assert (f"endless.jsonl:2: line 2 is longer than {traceio.MAX_JSONL_LINE_BYTES:,} bytes "
            f"(64 MiB): not a JSONL trace") in out
    t.join(timeout=30)


def test_jsonl_long_line_in_a_regular_file(work):
    p = work / "long.jsonl"
    with open(p, "wb") as f:
        f.write(b'{"num_experts": 8, "top_k": 2, "moe_layers": [0]}\n')
        f.write(b" " * (traceio.MAX_JSONL_LINE_BYTES + 1) + b"\n")
    try:
        out = mplc(["trace", "convert", "long.jsonl", "long.mpltrace"], work)
        assert "long.jsonl:2: line 2 is longer than" in out
        assert not (work / "long.mpltrace").exists()
    finally:
        p.unlink()


def test_a_line_just_under_the_cap_is_read(tmp_path, monkeypatch):
    # the cap counts bytes of one line, in 64 KiB pieces: a line of exactly the cap passes
    monkeypatch.setattr(traceio, "MAX_JSONL_LINE_BYTES", 200_000)
    row = json.dumps({"t": 0, "l": 0, "e": [1, 2]})
    p = tmp_path / "w.jsonl"
    head = '{"num_experts": 8, "top_k": 2, "moe_layers": [0]}\n'
    p.write_text(head + row + " " * (200_000 - len(row) - 1) + "\n")
    assert len(traceio.load(str(p))) == 1
    p.write_text(head + row + " " * (200_000 - len(row)) + "\n")
    with pytest.raises(traceio.TraceFormatError, match=r"w.jsonl:2: line 2 is longer than 200,000"):
        traceio.load(str(p))


def test_native_header_length_field_cannot_force_a_huge_read(work):
    fixed = struct.Struct("<8sHHI")
    (work / "hlen.mpltrace").write_bytes(fixed.pack(b"MPLTRACE", 2, 0, 0xFFFFFFFF) + b"{}")
    out = mplc(["trace", "info", "hlen.mpltrace"], work)
    assert "the header length field says 4,294,967,295 bytes, more than 64 MiB" in out
    (work / "hlen2.mpltrace").write_bytes(fixed.pack(b"MPLTRACE", 2, 0, 60 << 20) + b"{}")
    out = mplc(["trace", "info", "hlen2.mpltrace"], work)
    assert f"truncated header (wanted {60 << 20} bytes, got 2)" in out
