"""A disk tier without ``path`` reads the experts from the checkpoint's own safetensors files
(``mpl.mechanism.checkpoint``): on a model loaded from a saved folder, every tiny family
generates exactly the unmodified model's tokens, the disk reads equal the runtime's, no
file is written and the checkpoint is untouched after detach (which restores the weights);
the recipe that turns checkpoint tensors into the model's fused rows is found from the
values, including transposed and last-dimension compositions read through the scratch
path; a model not loaded from such a folder, or changed after loading, is a clear refusal."""

from __future__ import annotations

import hashlib
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

import mpl  # noqa: E402
from mpl.mechanism.checkpoint import CheckpointStore, checkpoint_files, read_header, recipes  # noqa: E402
from mpl.mechanism.disk import DiskError, RecordLayout  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import PRESETS, build_model, encode  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("checkpoint tiers")])
POLICY = """policy t {
  hierarchy {
    tier g { location = gpu  capacity = 3 }
    tier h { location = cpu  capacity = 5 }
    tier d { location = disk }
  }
}
"""


def gen(model):
    with torch.no_grad():
        return model.generate(PROMPT, max_new_tokens=5, do_sample=False)


def saved(name, folder):
    from transformers import AutoModelForCausalLM

    build_model(name).save_pretrained(folder)
    return AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True).eval()


def digest(folder) -> dict:
    return {f: hashlib.sha256(open(f, "rb").read()).hexdigest() for f in checkpoint_files(str(folder))}


@pytest.mark.parametrize("family", PRESETS)
def test_every_family_reads_its_checkpoint_bit_identically(tmp_path, family):
    model = saved(family, tmp_path)
    before = digest(tmp_path)
    listing = sorted(os.listdir(tmp_path))
    ref = gen(model)
    policy = mpl.loads(POLICY)
    h = policy.attach(model)
    try:
        assert torch.equal(gen(model), ref)
        st = h.get_stats()
        tiers = st["mechanism"]["tiers"]
        rows = {r["location"]: r for r in st["tiers"]}
        assert tiers["disk_reads"] == rows["disk"]["reads"] > 0
        assert sorted(os.listdir(tmp_path)) == listing          # nothing written there
    finally:
        h.detach()
    assert torch.equal(gen(model), ref)                         # the weights are back
    assert digest(tmp_path) == before and sorted(os.listdir(tmp_path)) == listing


def test_a_model_built_from_a_config_is_refused_located():
    model = build_model("tiny-mixtral")
    with pytest.raises(AttachError) as err:
        mpl.loads(POLICY).attach(model)
    msg = str(err.value)
    assert msg.startswith("<text>:") and "has no path" in msg and ".safetensors" in msg
    assert all(m._parameters for m in model.modules() if type(m).__name__.endswith("Experts"))


def test_weights_changed_after_loading_are_refused(tmp_path):
    model = saved("tiny-qwen2-moe", tmp_path)
    experts = [m for m in model.modules() if type(m).__name__.endswith("Experts")][0]
    with torch.no_grad():
        experts.down_proj[3].mul_(2)
    with pytest.raises(AttachError) as err:
        mpl.loads(POLICY).attach(model)
    assert "expert 3" in str(err.value) and "give the disk tier a path" in str(err.value)


def test_transposed_and_last_dimension_compositions_read_through_scratch(tmp_path):
    """A checkpoint storing each expert's w1, w3 as [I, H] and w2 as [H, I] for a model
    holding ``gate_up [E, H, 2I]`` (w1 and w3 transposed, joined on the last dimension) and
    ``down [E, I, H]`` (w2 transposed): the recipes are found and every record read equals
    the model's rows."""
    E, H, I = 4, 6, 5
    g = torch.Generator().manual_seed(3)
    w1, w3, w2 = (torch.randn(E, I, H, generator=g), torch.randn(E, I, H, generator=g),
                  torch.randn(E, H, I, generator=g))
    tensors = {}
    for e in range(E):
        for n, w in (("w1", w1), ("w3", w3), ("w2", w2)):
            tensors[f"model.layers.2.mlp.experts.{e}.{n}.weight"] = w[e].contiguous()
    tensors["model.layers.2.mlp.gate.weight"] = torch.randn(E, H, generator=g)
    safetensors_torch.save_file(tensors, str(tmp_path / "model.safetensors"))
    params = {"gate_up": torch.cat([w1.transpose(1, 2), w3.transpose(1, 2)], dim=2).contiguous(),
              "down": w2.transpose(1, 2).contiguous()}
    head = read_header(str(tmp_path / "model.safetensors"))
    rs = {r.name: r for r in recipes(head, 2, params, str(tmp_path))}
    assert [p.t for p in rs["gate_up"].parts] == [True, True] and rs["gate_up"].dim == -1
    assert not rs["gate_up"].direct and not rs["down"].direct
    layout = RecordLayout(params)
    store = CheckpointStore(str(tmp_path), layout, [(0, 2)], E)
    store.write({0: params})
    store.open()
    try:
        back = store.read_layer(0, params)
        for n in params:
            assert torch.equal(back[n], params[n]), n
    finally:
        store.remove()
    assert (tmp_path / "model.safetensors").exists()


def test_a_parameter_no_composition_makes_is_named(tmp_path):
    E = 3
    tensors = {f"layers.0.experts.{e}.w.weight": torch.ones(4, 4) * e for e in range(E)}
    safetensors_torch.save_file(tensors, str(tmp_path / "m.safetensors"))
    head = read_header(str(tmp_path / "m.safetensors"))
    with pytest.raises(DiskError) as err:
        recipes(head, 0, {"gate_up": torch.zeros(E, 8, 3)}, "folder")
    assert "'gate_up'" in str(err.value) and "w.weight" in str(err.value)


def test_a_file_that_is_not_safetensors_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\xff" * 16)
    with pytest.raises(DiskError, match="not a safetensors file"):
        read_header(str(p))
    p.write_bytes(b"abc")
    with pytest.raises(DiskError, match="no header"):
        read_header(str(p))
