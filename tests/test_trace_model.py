"""Which model a trace is from (mpl.sim.tracemodel), as a user meets it: an imported trace
whose header names a preset (``"model": "mixtral-8x7b"``, no expert size) is replayed, swept
and tuned with the preset's shape and expert size, exactly as the same trace with a complete
header; ``--model PRESET|config.json`` names the model of a trace whose header does not."""

from __future__ import annotations

import json

import pytest

import mpl.sim
from mpl import shapes
from mpl import tune as T
from mpl import traceio
from mpl.sim import synth
from mpl.sim.tracemodel import TraceModelError, with_model

from cli_helpers import clean, mplc

MIX = shapes.PRESETS["mixtral-8x7b"]
POLICY = "policy p {\n    cache {\n        capacity = 64\n    }\n}\n"
CONFIG = {"model_type": "mixtral", "num_hidden_layers": 32, "num_local_experts": 8,
          "num_experts_per_tok": 2, "hidden_size": 1024, "intermediate_size": 2048,
          "torch_dtype": "bfloat16"}


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """full.jsonl: a complete header; imported.jsonl: the same rows under a header with the
    model's name only (as the original writes it); anon.jsonl: no preset name either."""
    d = tmp_path_factory.mktemp("tracemodel")
    tr = synth.synthesize("mixtral-8x7b", steps=20, seed=1)
    traceio.save(tr, str(d / "full.jsonl"))
    rows = (d / "full.jsonl").read_text().splitlines()[1:]

    def write(name, header):
        (d / name).write_text("\n".join([json.dumps(header)] + rows) + "\n")

    write("imported.jsonl", {"model": "mixtral-8x7b", "num_experts": 8, "top_k": 2})
    write("alias.jsonl", {"model": "Mixtral", "num_experts": 8, "top_k": 2})
    write("hfid.jsonl", {"model": "mistralai/Mixtral-8x7B-Instruct-v0.1", "num_experts": 8,
                         "top_k": 2})
    write("anon.jsonl", {"model": "my-moe", "num_experts": 8, "top_k": 2})
    (d / "p.moe").write_text(POLICY)
    (d / "cfg").mkdir()
    (d / "cfg" / "config.json").write_text(json.dumps(CONFIG))
    return d


def _replay(d, trace, *extra):
    r = mplc("replay", "p.moe", "--trace", trace, "--json", "--no-belady", *extra, cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_imported_trace_naming_a_preset_replays_as_the_complete_one(d):
    full = _replay(d, "full.jsonl")
    for name in ("imported.jsonl", "alias.jsonl", "hfid.jsonl"):
        rep = _replay(d, name)
        assert rep["trace"]["expert_bytes"] == MIX.expert_bytes          # was 1.2 GB
        assert rep["trace"]["expert_bytes_source"] == "model mixtral-8x7b"
        assert rep["costs"] == full["costs"]                             # the preset's shape
        assert rep["sim"]["tokens_per_s"] == full["sim"]["tokens_per_s"]
        assert rep["stats"]["bytes_loaded"] == full["stats"]["bytes_loaded"]
    text = mplc("replay", "p.moe", "--trace", "imported.jsonl", cwd=d).stdout
    assert "336.0 MiB per expert (model mixtral-8x7b)" in text and "unknown" not in text


def test_trace_info_takes_the_expert_size_from_the_preset(d):
    r = mplc("trace", "info", "imported.jsonl", cwd=d)
    clean(r)
    assert "expert size unknown" not in r.stdout
    assert f"{MIX.expert_bytes:,} bytes each (336.0 MiB, from the mixtral-8x7b preset)" in r.stdout
    info = json.loads(mplc("trace", "info", "imported.jsonl", "--json", cwd=d).stdout)
    assert info["expert_bytes"] == MIX.expert_bytes
    r = mplc("trace", "info", "anon.jsonl", cwd=d)
    assert "expert size unknown" in r.stdout and "--model" in r.stdout


def test_model_option_for_a_trace_without_a_preset_name(d):
    full = _replay(d, "full.jsonl")
    anon = _replay(d, "anon.jsonl")
    assert anon["trace"]["expert_bytes_source"] == "default"
    assert anon["sim"]["tokens_per_s"] != full["sim"]["tokens_per_s"]
    text = mplc("replay", "p.moe", "--trace", "anon.jsonl", cwd=d).stdout
    assert "expert size unknown" in text and "--model" in text
    for spec in ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"):
        given = _replay(d, "anon.jsonl", "--model", spec)
        assert given["trace"]["expert_bytes"] == MIX.expert_bytes
        assert given["costs"] == full["costs"] and given["sim"] == full["sim"]
    # a HuggingFace config.json (a file or its folder)
    for spec in ("cfg/config.json", "cfg"):
        rep = _replay(d, "anon.jsonl", "--model", spec)
        assert rep["trace"]["expert_bytes"] == 3 * 1024 * 2048 * 2
        assert rep["trace"]["expert_bytes_source"] == "model cfg"


def test_model_that_does_not_fit_the_trace_is_an_error(d):
    r = mplc("replay", "p.moe", "--trace", "anon.jsonl", "--model", "olmoe", cwd=d)
    clean(r)
    assert r.returncode == 1
    assert "olmoe-1b-7b does not fit the trace" in r.stderr and "64" in r.stderr
    r = mplc("replay", "p.moe", "--trace", "anon.jsonl", "--model", "gpt-9", cwd=d)
    clean(r)
    assert r.returncode == 2 and "unknown model 'gpt-9'" in r.stderr


def test_the_original_header_of_deepseek_names_its_preset(tmp_path):
    """The original's JSONL header names the HuggingFace id; its rows use decoder-layer ids
    1..26 (layer 0 is dense)."""
    ds = shapes.PRESETS["deepseek-v2-lite"]
    tr = synth.synthesize("deepseek-v2-lite", steps=2, seed=0)
    traceio.save(tr, str(tmp_path / "ds.jsonl"))
    rows = (tmp_path / "ds.jsonl").read_text().splitlines()[1:]
    head = {"model": "deepseek-ai/DeepSeek-V2-Lite", "num_experts": 64, "top_k": 6,
            "num_layers": 27}
    (tmp_path / "orig.jsonl").write_text("\n".join([json.dumps(head)] + rows) + "\n")
    t = with_model(traceio.load(str(tmp_path / "orig.jsonl")))
    assert t.header.shape is not None and t.header.shape.name == "deepseek-v2-lite"
    assert t.header.expert_bytes == ds.expert_bytes
    assert t.header.shape.hidden_size == ds.hidden_size


def test_a_preset_name_that_does_not_fit_is_not_used(d):
    """A test model named after a family (a different number of experts) keeps the
    default: the preset is not forced onto it."""
    tr = synth.synthesize(shapes.ModelShape("mixtral-8x7b", 2, (0, 1), 4, 1, 8, 16), steps=3)
    tr.header.expert_bytes = 0
    assert with_model(tr) is tr
    with pytest.raises(TraceModelError, match="4 experts"):
        with_model(tr, "mixtral-8x7b")


def test_sweep_uses_the_preset_or_model_for_size_capacities(d):
    slots = (2 * 2 ** 30) // MIX.expert_bytes                # 6 experts of 336 MiB
    for trace, extra in (("imported.jsonl", []), ("anon.jsonl", ["--model", "mixtral-8x7b"])):
        r = mplc("sweep", "p.moe", "--trace", trace, "--capacity", "2GiB", "--no-belady",
                 "--json", *extra, cwd=d)
        clean(r)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["points"][0]["total_slots"] == slots
        assert out["expert_bytes"] == MIX.expert_bytes
    r = mplc("sweep", "p.moe", "--trace", "anon.jsonl", "--capacity", "2GiB", "--no-belady",
             "--json", cwd=d)
    assert json.loads(r.stdout)["points"][0]["total_slots"] == 1     # 1.2 GB assumed
    r = mplc("sweep", "p.moe", "--trace", "imported.jsonl", "--capacity", "8", cwd=d)
    assert "expert size 336.0 MiB per expert (model mixtral-8x7b)" in r.stdout


def test_tune_size_budget_uses_the_preset_or_model(d):
    slots = (4 * 2 ** 30) // MIX.expert_bytes                # 12
    for trace, extra in (("imported.jsonl", []), ("anon.jsonl", ["--model", "mixtral-8x7b"])):
        r = mplc("tune", "--trace", trace, "--budget", "4GiB", "-j", "1", "--json", *extra, cwd=d)
        clean(r)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["budget_slots"] == slots
        assert res["expert_bytes_source"] == "model mixtral-8x7b"


def test_api_takes_the_model_too(d):
    anon = traceio.load(str(d / "anon.jsonl"))
    full = mpl.sim.replay(POLICY, str(d / "full.jsonl"), belady=False)
    rep = mpl.sim.replay(POLICY, anon, belady=False, model="mixtral-8x7b")
    assert rep.sim == full.sim and rep.trace["expert_bytes"] == MIX.expert_bytes
    assert anon.header.expert_bytes == 0 and anon.header.shape is None   # the input is kept
    rep = mpl.sim.replay(POLICY, anon, belady=False, model=MIX)
    assert rep.sim == full.sim
    res = T.tune(anon, "4GiB", jobs=1, model="mixtral-8x7b")
    assert res.budget == (4 * 2 ** 30) // MIX.expert_bytes
    imported = traceio.load(str(d / "imported.jsonl"))
    assert T.tune(imported, "4GiB", jobs=1).budget == res.budget
