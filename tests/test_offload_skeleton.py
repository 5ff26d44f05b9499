"""Loading a model without its experts (``mpl.offload.from_pretrained``, ``mplc run --model
FOLDER`` with a disk tier without path): on every tiny family saved with ``save_pretrained``
the experts are never allocated (their parameters stay on the meta device), generate()
gives the model loaded whole's tokens and logits, the disk reads equal the runtime's, the
checkpoint is untouched; the process's peak memory growth stays under the skeleton, the host
tier and a stated overhead (tests/skeleton_load_acceptance.py, a process of its own); what
cannot be served this way is refused in one located line before anything large is read."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
safetensors_torch = pytest.importorskip("safetensors.torch")

import mpl  # noqa: E402
from mpl.mechanism.checkpoint import checkpoint_files  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import PRESETS, build_model, encode  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
torch.set_num_threads(1)
PROMPT = torch.tensor([encode("never loaded")])
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
        out = model.generate(PROMPT, max_new_tokens=5, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def whole(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True).eval()


def digest(folder) -> dict:
    return {f: hashlib.sha256(open(f, "rb").read()).hexdigest() for f in checkpoint_files(str(folder))}


@pytest.mark.parametrize("family", PRESETS)
def test_every_family_generates_as_the_model_loaded_whole(tmp_path, family):
    build_model(family).save_pretrained(tmp_path)
    before, listing = digest(tmp_path), sorted(os.listdir(tmp_path))
    ref = gen(whole(tmp_path))
    h = mpl.loads(POLICY).from_pretrained(str(tmp_path))
    model = h.model
    try:
        # the experts were never allocated: every expert Parameter is on the meta device
        saved = [h._saved[b.module][0] for b in h.layers]
        assert all(p.device.type == "meta" for ps in saved for p in ps.values())
        assert not any(p.device.type == "meta" for p in model.parameters())   # the skeleton is real
        seq, logits = gen(model)
        assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1])
        st = h.get_stats()
        disk = next(t for t in st["tiers"] if t["location"] == "disk")
        assert st["mechanism"]["tiers"]["disk_reads"] == disk["reads"] > 0
    finally:
        h.detach()
    # detach reads nothing back: the experts stay unloaded, so a policy holding them in host
    # memory is refused, and the disk policy attaches again
    assert all(p.device.type == "meta" for n, p in model.named_parameters() if ".experts." in n)
    with pytest.raises(AttachError, match="no memory tiers: a model loaded without its experts"):
        mpl.loads("policy c { cache { capacity = 3 } }").attach(model)
    with pytest.raises(AttachError, match="a disk tier with a path"):
        mpl.loads(POLICY.replace("tier d { location = disk }",
                                 f'tier d {{ location = disk  path = "{tmp_path}" }}')).attach(model)
    h2 = mpl.loads(POLICY).attach(model)
    assert torch.equal(gen(model)[0], ref[0])
    h2.detach()
    assert digest(tmp_path) == before and sorted(os.listdir(tmp_path)) == listing


@pytest.mark.parametrize("family,kw,save", [
    ("tiny-qwen3-moe", {"tie_word_embeddings": True}, {}),
    ("tiny-gpt-oss", {"dtype": torch.bfloat16}, {}),
    ("tiny-deepseek-v3", {}, {"max_shard_size": "50KB"}),      # the experts over several files
])
def test_tied_bf16_and_sharded_checkpoints_load_as_transformers_loads_them(tmp_path, family, kw,
                                                                          save):
    build_model(family, **kw).save_pretrained(tmp_path, **save)
    assert len(checkpoint_files(str(tmp_path))) > (1 if save else 0)
    ref_model = whole(tmp_path)
    ref = gen(ref_model)
    h = mpl.loads(POLICY).from_pretrained(str(tmp_path))
    try:
        m = h.model
        assert {n: p.dtype for n, p in m.named_parameters()} == \
            {n: p.dtype for n, p in ref_model.named_parameters() if ".experts." not in n}
        if kw.get("tie_word_embeddings"):
            assert m.lm_head.weight is m.model.embed_tokens.weight
        seq, logits = gen(m)
        assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1])
    finally:
        h.detach()


def test_acceptance_a_model_several_times_the_host_tier(tmp_path):
    """384 MiB of experts, a 64 MiB host tier: the load's and generate's peak resident
    growth stay under the skeleton + the host tier + the overhead stated below, far under
    the experts; the tokens and logits are the model loaded whole's."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]),
               MALLOC_MMAP_THRESHOLD_="131072", MALLOC_ARENA_MAX="2")
    # (large blocks from mmap, so that the reference model's memory goes back to the OS)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "skeleton_load_acceptance.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["experts_bytes"] >= 4 * r["host_cap"]
    assert r["meta_expert_params"] == r["expert_params"]        # not one expert allocated
    assert r["tokens_equal"] and r["logits_equal"]
    assert r["disk_reads"] == r["disk_tier_reads"] > 0
    assert r["host_cache_bytes"] <= r["host_cap"]
    KiB, MiB = 1024, 1 << 20
    load = (r["load_peak_kib"] - r["base_kib"]) * KiB
    run = (r["gen_peak_kib"] - r["base_kib"]) * KiB
    # stated overhead: the device slot pool (host memory on a CPU-only machine), one MoE
    # layer's experts (the probe transformers loads to find the checkpoint's layout, released
    # before the skeleton), and 48 MiB for the allocator, threads and Python objects; during
    # generate also the compute temporaries the model loaded whole took (same process)
    overhead = r["pool_bytes"] + r["layer_experts_bytes"] + 48 * MiB
    base = r["host_cap"] + r["skeleton_bytes"]
    msg = (f"load growth {load / MiB:.1f} MiB, generate growth {run / MiB:.1f} MiB; host tier "
           f"{r['host_cap'] / MiB:.0f} + skeleton {r['skeleton_bytes'] / MiB:.1f} + pool "
           f"{r['pool_bytes'] / MiB:.1f} + one layer {r['layer_experts_bytes'] / MiB:.0f} + 48; "
           f"compute {r['compute_kib'] / KiB:.1f}; experts {r['experts_bytes'] / MiB:.0f} MiB")
    assert load <= base + overhead, msg
    assert run <= base + overhead + r["compute_kib"] * KiB, msg
    assert max(load, run) < r["experts_bytes"], msg


def test_mplc_run_loads_a_folder_without_its_experts(tmp_path):
    folder = tmp_path / "m"
    build_model("tiny-qwen3-moe").save_pretrained(folder)
    ref = gen(whole(folder))
    pol = tmp_path / "p.moe"
    pol.write_text(POLICY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "mpl", "run", str(pol), "--model", str(folder),
                          "--prompt", "never loaded", "--max-new-tokens", "5", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rep = json.loads(out.stdout)
    assert rep["experts_loaded"] is False
    assert rep["tokens"] == ref[0][0, PROMPT.shape[1]:].tolist()
    # a policy holding every expert in host memory loads the model whole, as before
    pol.write_text("policy c { cache { capacity = 3 } }\n")
    out = subprocess.run([sys.executable, "-m", "mpl", "run", str(pol), "--model", str(folder),
                          "--prompt", "never loaded", "--max-new-tokens", "5", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rep = json.loads(out.stdout)
    assert rep["experts_loaded"] is True and rep["tokens"] == ref[0][0, PROMPT.shape[1]:].tolist()


def test_what_cannot_be_served_is_refused_located(tmp_path, monkeypatch):
    folder = tmp_path / "m"
    build_model("tiny-mixtral").save_pretrained(folder)

    def refused(policy_text, target=folder, match=""):
        path = tmp_path / "p.moe"
        path.write_text(policy_text)
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).from_pretrained(str(target))
        msg = str(err.value)
        assert "\n" not in msg
        return msg

    # policies that hold experts anywhere but the checkpoint's files: located at the policy
    msg = refused("policy c { cache { capacity = 3 } }\n", match="no memory tiers")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:1: ")
    msg = refused(POLICY.replace("tier d { location = disk }",
                                 f'tier d {{ location = disk  path = "{tmp_path}" }}'),
                  match="a disk tier with a path")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:5: ")
    msg = refused("policy t { hierarchy { tier g { location = gpu  capacity = 3 }\n"
                  "tier r { location = cpu } } }\n", match="tier 'r' \\(cpu\\)")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:2: ")
    # folders that are not such a checkpoint: located at the folder
    assert refused(POLICY, tmp_path / "nothing", "no config.json").startswith(str(tmp_path / "nothing"))
    empty = tmp_path / "cfg-only"
    empty.mkdir()
    (empty / "config.json").write_text((folder / "config.json").read_text())
    assert refused(POLICY, empty, "no .safetensors files").startswith(str(empty))
    # a model family without MoE layers attach can serve
    from transformers import LlamaConfig, LlamaForCausalLM
    dense = tmp_path / "dense"
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=16,
                                 num_hidden_layers=1, num_attention_heads=2)).save_pretrained(dense)
    refused(POLICY, dense, "no Mixture-of-Experts layers found")
    # a checkpoint whose later MoE layer does not make the model's experts (here: another
    # dtype for one expert's tensor): found by shape and dtype, naming layer and expert
    bad = tmp_path / "bad"
    build_model("tiny-mixtral").save_pretrained(bad)
    f = checkpoint_files(str(bad))[0]
    sd = safetensors_torch.load_file(f)
    key = next(k for k in sd if ".layers.2." in k and ".experts.5." in k)
    sd[key] = sd[key].half()
    safetensors_torch.save_file(sd, f, metadata={"format": "pt"})
    msg = refused(POLICY, bad, "expert 5 of MoE layer 2")
    assert msg.startswith(str(bad)) and "float16" in msg
    # not enough host memory for the skeleton and the host tier: refused before the load
    from mpl.mechanism import footprint
    monkeypatch.setattr(footprint, "host_available", lambda: 1000)
    msg = refused(POLICY, folder, "more host memory at its peak")
    assert "the skeleton" in msg and "host tier cache" in msg and "nothing was changed" in msg


def test_a_folder_too_large_to_load_whole_names_the_path_without_experts(tmp_path):
    from mpl.offload.loading import ModelLoadError, check_fits, loads_without_experts

    with pytest.raises(ModelLoadError) as err:
        check_fits(str(tmp_path), 10**12, None, None, 10**9)
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path}: this model needs about 1,000.0 GB of host memory loaded whole")
    assert "disk tier without path" in msg and "A model larger than host memory" in msg
    # which runs take the path: a folder of safetensors and a policy ending on the checkpoint
    build_model("tiny-olmoe").save_pretrained(tmp_path)
    assert loads_without_experts(str(tmp_path), mpl.loads(POLICY))
    assert not loads_without_experts(str(tmp_path), mpl.loads("policy c { cache { capacity = 3 } }"))
    assert not loads_without_experts("tiny-olmoe", mpl.loads(POLICY))
