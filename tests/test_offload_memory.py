"""The mechanism's memory on a tiny model, measured on its own tensors (the slot pool and the
host store, ``get_stats()["memory"]``), not the process RSS: a size budget far above the
model's experts allocates only what the capped pool needs, the stats say requested vs
effective slots, the model-aware warning says the cache holds every expert, and a size that
holds no expert is a located refusal, never a raw MemoryError/OverflowError."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.hf import attach, discover  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

torch.set_num_threads(1)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = torch.tensor([encode("How much memory?")])


def gen(model):
    with torch.no_grad():
        return model.generate(PROMPT, max_new_tokens=4, do_sample=False)


def model_bytes(model) -> int:
    return (sum(p.numel() * p.element_size() for p in model.parameters())
            + sum(b.numel() * b.element_size() for b in model.buffers()))


@pytest.fixture(scope="module")
def tiny():
    model = build_model("tiny-mixtral")
    layers = discover(model)
    L, E = len(layers), layers[0].num_experts
    eb = sum(p[0].numel() * p.element_size() for p in layers[0].module.parameters(recurse=False))
    return model, L, E, eb, model_bytes(model), gen(model)


@pytest.mark.parametrize("source", ["cache { capacity = 256MiB }", "cache { capacity = 10GiB }",
                                    "cache { capacity = 999999999999999999 GiB }", "std/consumer_16gb"])
def test_a_size_budget_allocates_only_what_the_model_needs(tiny, source):
    model, L, E, eb, size, ref = tiny
    policy = mpl.load(source) if source.startswith("std/") else mpl.loads(f"policy p {{ {source} }}")
    h = attach(policy, model)
    try:
        seq = gen(model)
        st = h.get_stats()
    finally:
        h.detach()
    assert torch.equal(seq, ref)
    assert h.runtime.num_slots == st["num_slots"] == L * E
    assert st["requested_slots"] > L * E
    mem = st["memory"]
    assert mem["pool_bytes"] == (L * E + E + 1) * eb          # slots + STREAM entries + zero entry
    assert mem["store_bytes"] == L * E * eb                   # the experts' own weights, moved
    assert mem["peak_bytes"] == mem["pool_peak_bytes"] + mem["store_peak_bytes"]
    assert mem["peak_bytes"] <= 2 * size, (mem, size)          # a small multiple of the model
    warn = [d for d in h.diagnostics if d.code == "MPL503"]
    assert warn and f"capped at {L * E} slots" in warn[0].message


def test_a_size_below_one_expert_is_a_located_refusal(tiny):
    _model, _L, _E, eb, _size, ref = tiny
    model = build_model("tiny-mixtral")          # its own: a wrong attach must not leak
    assert eb > 1100
    with pytest.raises(AttachError, match="MPL507: capacity .* is smaller than one expert") as e:
        attach(mpl.loads("policy p { cache { capacity = 0.001MiB } }"), model)   # 1048 bytes
    assert e.value.args and not isinstance(e.value, (MemoryError, OverflowError))
    assert torch.equal(gen(model), ref)          # the model is untouched


def test_auto_attach_allocates_every_expert_at_most(tiny):
    model, L, E, eb, size, ref = tiny
    h = mpl.auto_attach(model, memory="10GiB", device="cpu")
    try:
        assert torch.equal(gen(model), ref)
        st = h.get_stats()
    finally:
        h.detach()
    assert "rule 2" in h.reason and f"capped at the model's {L * E} experts" in h.reason
    assert h.runtime.num_slots == L * E
    assert st["memory"]["peak_bytes"] <= 2 * size


def test_mplc_run_with_an_enormous_size(tmp_path):
    p = tmp_path / "huge.moe"
    p.write_text("policy huge { cache { capacity = 999999999999999999 GiB } }\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "run", str(p), "--model", "tiny-mixtral",
                          "--prompt", "hi", "--max-new-tokens", "2", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    import json
    rep = json.loads(out.stdout)
    assert rep["stats"]["mechanism"]["pool_slots"] == 24
