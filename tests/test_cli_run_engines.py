"""``mplc run`` and ``mplc trace record`` choose the engine from one table
(``mpl.cli.engines``) and run its adapter's entry points: the preflight first (a policy that
does not fit the model is printed with its located diagnostics, whichever engine, before
the model is built when its shape can be read from a config), then live or shadow mode.
The HuggingFace engine's shadow mode (``--shadow``) leaves the model's output unchanged and
reports what ``mplc replay`` reports for the routing it recorded (``--trace``). As a user
runs them: ``mplc`` subprocesses on tiny random-initialised models."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from cli_helpers import clean, mplc

pytest.importorskip("torch")
pytest.importorskip("transformers")

MISFIT = "policy p {\n    cache {\n        capacity = 8\n        pin = [1, 12]\n    }\n}\n"
HW = "a100-80gb"
RUN = ["--prompt", "engines from a table", "--max-new-tokens", "4", "--no-progress"]


@pytest.fixture
def misfit(tmp_path):
    (tmp_path / "p.moe").write_text(MISFIT)
    return tmp_path


@pytest.mark.parametrize("mode", [[], ["--shadow"]])
def test_a_misfit_is_printed_located_and_the_model_is_not_run(misfit, mode):
    r = mplc("run", "p.moe", "--model", "tiny-mixtral", *mode, *RUN, cwd=misfit)
    clean(r)
    assert r.returncode == 1 and r.stdout == ""
    assert "p.moe:4:19: error[MPL501]: expert 12 does not exist" in r.stderr.replace("\\", "/")
    assert "4 |         pin = [1, 12]" in r.stderr                     # the source line
    assert r.stderr.rstrip().endswith("mplc run: error: p.moe: does not fit the model for "
                                      "mixtral (1 error); the model was not changed")


def test_a_misfit_is_found_before_a_model_from_a_config_is_built(misfit):
    # a config.json the host could not even hold (about 47 B parameters): the policy is
    # checked against its shape before anything is built, as --engine vllm checks it
    big = misfit / "big"
    big.mkdir()
    (big / "config.json").write_text(json.dumps({
        "model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
        "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000}))
    r = mplc("run", "p.moe", "--model", big, *RUN, cwd=misfit)
    clean(r)
    assert r.returncode == 1
    assert "error[MPL501]: expert 12 does not exist" in r.stderr
    assert "does not fit the model for big (2 errors); the model was not changed" in r.stderr
    assert "host memory" not in r.stderr                                 # never got that far


def test_trace_record_under_a_misfit_policy_writes_nothing(misfit):
    r = mplc("trace", "record", "p.moe", "--model", "tiny-mixtral", "--max-new-tokens", "2",
             "-o", "t.mpltrace", cwd=misfit)
    clean(r)
    assert r.returncode == 1 and "error[MPL501]" in r.stderr
    assert "mplc trace record: error: p.moe: does not fit the model" in r.stderr
    assert not (misfit / "t.mpltrace").exists()


def test_shadow_mode_keeps_the_output_and_equals_a_replay_of_its_trace(tmp_path):
    live = mplc("run", "std/generous", "--model", "tiny-qwen3-moe", "--json", *RUN, cwd=tmp_path)
    clean(live)
    assert live.returncode == 0, live.stderr
    r = mplc("run", "std/generous", "--model", "tiny-qwen3-moe", "--shadow", "--hardware", HW,
             "--trace", "t.mpltrace", "--json", *RUN, cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (rep["engine"], rep["mode"], rep["hardware"]) == ("hf", "shadow", HW)
    assert rep["tokens"] == json.loads(live.stdout)["tokens"]       # the model's own output
    assert rep["stats"]["accesses"] > 0 and rep["trace"] == "t.mpltrace"
    replay = mplc("replay", "std/generous", "--trace", "t.mpltrace", "--hardware", HW, "--json",
                  "--no-belady", "--no-progress", cwd=tmp_path)
    clean(replay)
    assert replay.returncode == 0, replay.stderr
    rr = json.loads(replay.stdout)
    assert rep["stats"] == rr["stats"] and rep["sim"] == rr["sim"]
    text = mplc("run", "std/generous", "--model", "tiny-qwen3-moe", "--shadow", *RUN, cwd=tmp_path)
    clean(text)
    assert text.returncode == 0
    assert "policy generous in shadow mode beside tiny-qwen3-moe" in text.stdout
    assert "(simulated)" in text.stdout and "output: " in text.stdout


def test_the_live_run_can_keep_its_trace_too(tmp_path):
    r = mplc("run", "std/balanced", "--model", "tiny-olmoe", "--trace", "t.mpltrace", "--json",
             *RUN, cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    replay = mplc("replay", "std/balanced", "--trace", "t.mpltrace", "--json", "--no-belady",
                  "--no-progress", cwd=tmp_path)
    rr = json.loads(replay.stdout)["stats"]
    assert all(rep["stats"][k] == rr[k] for k in ("accesses", "loads", "evictions"))
    # the same decisions: nothing is late live on the CPU; the replay's link may be
    assert rep["stats"]["hits"] == rr["hits"] + rr["late_prefetches"]


@pytest.mark.parametrize("argv, message", [
    (["--shadow", "--offload", "--engine", "vllm"], "--shadow and --offload are two modes"),
    (["--hardware", HW], "--hardware needs --engine vllm or --shadow"),
    (["--vllm-python", "python3"], "--vllm-python needs --engine vllm"),
    (["--engine", "vllm", "--device", "cpu"], "--device needs --engine hf"),
    (["--engine", "vllm", "--experts-implementation", "eager"],
     "--experts-implementation needs --engine hf"),
    (["--shadow", "--stream-slots", "2"], "--stream-slots needs --engine vllm"),
])
def test_options_of_another_engine_or_mode_are_usage_errors(tmp_path, argv, message):
    r = mplc("run", "std/generous", "--model", "tiny-mixtral", *argv, cwd=tmp_path)
    clean(r)
    assert r.returncode == 2 and f"mplc run: error: {message}" in r.stderr


def _tiny_qwen_and_echo_python(tmp_path):
    """A tiny Qwen3-MoE model folder (its config.json) and a stand-in for vLLM's Python that
    prints the arguments it is given."""
    model = tmp_path / "tinyq"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "model_type": "qwen3_moe", "num_hidden_layers": 2, "num_experts": 8,
        "num_experts_per_tok": 2, "hidden_size": 64, "moe_intermediate_size": 32,
        "intermediate_size": 64}))
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho \"$@\"\n")
    fake.chmod(0o755)
    return model, fake


def test_trace_record_options_follow_the_table(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    r = mplc("trace", "record", "std/generous", "--engine", "vllm", "--model", model, "-o",
             "t.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 2 and "a policy needs --engine hf" in r.stderr


def test_trace_record_with_vllm_passes_the_lookahead_on(tmp_path):
    """``--lookahead N`` reaches the vLLM side's recorder (its pre-gating distance); a
    negative one is refused before any engine starts."""
    model, fake = _tiny_qwen_and_echo_python(tmp_path)
    r = mplc("trace", "record", "--engine", "vllm", "--model", model, "--vllm-python", fake,
             "--lookahead", "2", "-o", "t.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("-m mpl.vllm.cli record ") and "--lookahead 2" in r.stdout
    r = mplc("trace", "record", "--engine", "vllm", "--model", model, "--vllm-python", fake,
             "--lookahead", "-1", "-o", "t.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "--lookahead must be >= 0" in r.stderr


def test_engine_vllm_takes_shadow_as_its_default_mode(tmp_path):
    model, fake = _tiny_qwen_and_echo_python(tmp_path)
    for mode, live in (([], False), (["--shadow"], False), (["--offload"], True)):
        r = mplc("run", "std/lru_basic", "--engine", "vllm", "--model", model, "--vllm-python",
                 fake, *mode, cwd=tmp_path)
        clean(r)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("-m mpl.vllm.cli run ") and ("--offload" in r.stdout) == live


def test_every_engine_is_one_row_whose_entry_points_resolve():
    # the parsers offer exactly the table's engines, and every row's entry points exist in
    # its adapter (importing the vLLM adapter's launcher imports no vllm)
    from mpl.cli import engines

    code = ("import sys\nfrom mpl.cli import engines\n"
            "for e in engines.ENGINES.values():\n"
            "    for n in ('preflight', 'run', 'shadow', 'record'):\n"
            "        assert callable(e.entry(n)), (e.name, n)\n"
            "print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    for command in (["run", "--help"], ["trace", "record", "--help"]):
        r = mplc(*command, cwd=".")
        assert r.returncode == 0
        assert "{" + ",".join(engines.ENGINES) + "}" in r.stdout
    assert engines.DEFAULT in engines.ENGINES
    for e in engines.ENGINES.values():
        assert e.default_mode in ("live", "shadow")
        importlib.import_module(e.adapter)
