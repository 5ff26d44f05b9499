"""Headless Neovim smoke test: Neovim itself starts the server (vim.lsp.start, or
start_client on Neovim 0.7), opens a file with errors, and we check the diagnostics, a hover
and a completion it got. Neovim is installed with apt-get when missing; the test is skipped
(with the reason) only when that is impossible."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from mpl import schema

from lsp_harness import REPO, server_env

HERE = os.path.dirname(os.path.abspath(__file__))


def _ensure_nvim() -> str:
    nvim = shutil.which("nvim")
    if nvim:
        return nvim
    if not shutil.which("apt-get"):
        pytest.skip("nvim is not installed and apt-get is not available to install it")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        pytest.skip("nvim is not installed and installing it needs root (apt-get install neovim)")
    try:
        subprocess.run(["apt-get", "update"], capture_output=True, timeout=300)
        r = subprocess.run(["apt-get", "install", "-y", "neovim"], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"could not install neovim: {e}")
    nvim = shutil.which("nvim")
    if not nvim:
        pytest.skip(f"could not install neovim with apt-get: {r.stderr.strip()[-300:]}")
    return nvim


def test_neovim_headless_smoke(tmp_path):
    nvim = _ensure_nvim()
    src = tmp_path / "broken.moe"
    src.write_text("policy p {\n  cache {\n    capcity = 8\n    eviction = \n  }\n}\n", encoding="utf-8")
    out = tmp_path / "out.json"
    env = server_env()
    env.update(MPL_FILE=str(src), MPL_OUT=str(out), MPL_PY=sys.executable, MPL_ROOT=str(tmp_path),
               HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    proc = subprocess.run([nvim, "--headless", "--clean", "-u", "NONE", "-i", "NONE",
                           "-c", f"luafile {os.path.join(HERE, 'nvim_smoke.lua')}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"nvim wrote no result (rc {proc.returncode}): {proc.stderr[-2000:]}"
    res = json.loads(out.read_text())
    assert not res["errors"], res["errors"]
    codes = {d["code"] for d in res["diagnostics"]}
    assert "MPL102" in codes, res["diagnostics"]
    typo = next(d for d in res["diagnostics"] if d["code"] == "MPL102")
    assert (typo["lnum"], typo["col"]) == (2, 4) and "did you mean 'capacity'" in typo["message"]
    assert typo["source"] == "mpl"
    # hover on "eviction" shows the schema's doc; completion after "eviction = " its values
    assert res["hover"] and schema.PARAMS["cache.eviction"].doc in res["hover"], res["hover"]
    assert set(schema.PARAMS["cache.eviction"].enum_names()) <= set(res["completion"])
    # colours out of the box (Neovim 0.9+ has semantic tokens; 0.7/0.8, as on Debian 12, not)
    major, minor = (int(x) for x in res["version"].split(".")[:2])
    if (major, minor) >= (0, 9):
        assert res["semantic"], "no semantic token on 'eviction'"
        tok = res["semantic"][0]
        assert tok["type"] == "parameter", tok
        assert tok["link"], f"@lsp.type.{tok['type']} has no default highlight in Neovim {res['version']}"
    else:
        assert res["semantic"] is None
