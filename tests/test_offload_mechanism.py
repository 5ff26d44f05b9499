"""The mechanism beyond bit-identity: CPU placements, refusals, stalls, pool memory, trace
recording, replay equivalence, lookahead pre-gating, auto_attach."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
api = pytest.importorskip("mpl.api")

import mpl  # noqa: E402
from mpl.offload.auto import choose, parse_memory  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.hf import attach, discover  # noqa: E402
from mpl.mechanism.lookahead import Lookahead  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder, record  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("Where do the experts live?")])


def gen(model, n=5):
    with torch.no_grad():
        out = model.generate(PROMPT, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def pol(body: str):
    return mpl.loads("version 1\npolicy p {\n" + body + "\n}\n")


@pytest.fixture(scope="module")
def olmoe():
    return build_model("tiny-olmoe", experts_implementation="batched_mm")


# ---------------------------------------------------------------------------- CPU placements
@pytest.mark.parametrize("impl", ["eager", "grouped_mm"])
def test_cpu_fallback_tokens_identical_and_cpu_computes(impl):
    model = build_model("tiny-qwen2-moe", experts_implementation=impl)
    ref_seq, ref_logits = gen(model)
    h = attach(pol("cache { capacity = 3 }\nschedule { mode = cpu_fallback }"), model)
    seq, logits = gen(model)
    st = h.get_stats()
    h.detach()
    assert torch.equal(seq, ref_seq)
    assert torch.allclose(logits, ref_logits, atol=1e-4, rtol=1e-4)
    m = st["mechanism"]
    assert m["cpu_computes"] > 0 and m["cpu_computes"] == st["cpu_computes"]
    assert m["background_copies"] == st["background_loads"] > 0
    assert m["copies"] == st["loads"]


def test_hybrid_sends_expensive_transfers_to_cpu():
    model = build_model("tiny-gpt-oss", experts_implementation="batched_mm")
    ref_seq, ref_logits = gen(model)
    # every transfer is estimated above a 1 ns threshold: the hybrid schedule computes misses on the CPU
    h = attach(pol("cache { capacity = 4 }\nschedule { mode = hybrid\n offload_threshold_ms = 0.000001 }"), model)
    seq, logits = gen(model)
    st = h.get_stats()
    h.detach()
    assert torch.equal(seq, ref_seq)
    assert torch.allclose(logits, ref_logits, atol=1e-4, rtol=1e-4)
    assert st["mechanism"]["cpu_computes"] == st["cpu_computes"] > 0
    assert h.runtime.cost.link_gbps > 0 and h.runtime.cost.cpu_gflops > 0   # calibrated


# ---------------------------------------------------------------------------- memory, stalls
def test_pool_is_fixed_and_sized_from_runtime(olmoe):
    h = attach(pol("cache { capacity = 5 }"), olmoe)
    E = h.layers[0].num_experts
    assert h.pool.size == h.runtime.num_slots + E + 1       # slots, one transient per expert, zero
    entry = h.pool.entry_bytes
    assert entry == h.shape.expert_bytes
    assert h.pool.nbytes == h.pool.size * entry
    ptrs = h.pool.data_ptrs()
    sizes = []
    for _ in range(3):
        gen(olmoe, n=3)
        sizes.append(h.pool.nbytes)
    st = h.get_stats()
    h.detach()
    assert sizes == [h.pool.size * entry] * 3
    assert st["mechanism"]["bytes_copied"] == (st["loads"] + st["streamed"]) * entry
    assert st["mechanism"]["stall_ms"] > 0                     # synchronous demand copies, measured
    assert st["stall_ms"] == pytest.approx(st["mechanism"]["stall_ms"])
    assert ptrs


def test_store_holds_the_weights_and_detach_restores_values():
    model = build_model("tiny-mixtral")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    h = attach(pol("cache { capacity = 2 }"), model)
    b = h.layers[0]
    assert not list(b.module.parameters(recurse=False))
    assert torch.equal(b.host["gate_up_proj"], before[b.name + ".gate_up_proj"])
    with h:      # context manager detaches
        gen(model, n=2)
    assert not h.attached
    h.detach()   # idempotent
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


# ---------------------------------------------------------------------------- refusals
def test_refuses_accelerate_hooks_unless_asked(olmoe):
    from accelerate.hooks import ModelHook, add_hook_to_module
    model = build_model("tiny-olmoe")
    add_hook_to_module(model.model.layers[0], ModelHook())
    with pytest.raises(AttachError, match="accelerate hooks"):
        attach(pol("cache { capacity = 4 }"), model)
    assert hasattr(model.model.layers[0], "_hf_hook")          # untouched
    h = attach(pol("cache { capacity = 4 }"), model, remove_hooks=True)
    assert not hasattr(model.model.layers[0], "_hf_hook")
    h.detach()


def test_refusals_are_clear():
    import types

    model = build_model("tiny-gpt-oss")
    # use_kernels alone (transformers >= 5.25 sets it at from_pretrained when the kernels
    # library is installed) replaces nothing where no kernel is registered: attachable
    model._use_kernels = True
    attach(pol("cache { capacity = 4 }"), model).detach()
    # a hub kernel that replaced the MoE block's forward (as kernelize does: the instance's
    # forward and its _kernel_repo) reads the expert weights itself: refused, named
    block = model.model.layers[1].mlp
    block.forward = types.MethodType(type(block).forward, block)
    block.__dict__["_kernel_repo"] = "kernels-community/megablocks"
    with pytest.raises(AttachError, match=r"'model.layers.1.mlp' runs a hub kernel "
                                          r"\(kernels-community/megablocks\).*use_kernels=False"):
        attach(pol("cache { capacity = 4 }"), model)
    del block.__dict__["_kernel_repo"], block.__dict__["forward"]
    model._use_kernels = False
    h = attach(pol("cache { capacity = 4 }"), model)
    with pytest.raises(AttachError, match="already attached"):
        attach(pol("cache { capacity = 4 }"), model)
    h.detach()
    with pytest.raises(AttachError, match="offload_device"):
        attach(pol("cache { capacity = 4 }"), model, offload_device="cuda")
    with pytest.raises(AttachError, match="device"):
        attach(pol("cache { capacity = 4 }"), model, device="tpu:7")
    if not torch.cuda.is_available():
        with pytest.raises(AttachError, match="CUDA is not available"):
            attach(pol("cache { capacity = 4 }"), model, device="cuda:3")
    with pytest.raises(AttachError, match="torch.nn.Module"):
        attach(pol("cache { capacity = 4 }"), object())
    with pytest.raises(AttachError, match="does not fit") as err:
        attach(pol("cache { capacity = 4\n pin = [99] }"), model)
    assert isinstance(err.value, mpl.PolicyError)
    assert [d.code for d in err.value.diagnostics] == ["MPL501"]
    assert not hasattr(model, "_mpl_handle")


def test_a_low_precision_top_tier_is_refused_saying_that_replay_runs_it(tmp_path):
    # an int8 / int4 gpu tier runs live under the top tier (tests/test_offload_lowprec.py);
    # as the top tier it does not yet: refused, located at that tier, before anything on
    # the model changes
    path = tmp_path / "tiers.moe"
    path.write_text("policy u {\n  hierarchy {\n"
                    "    tier hot { location = gpu  dtype = int4  capacity = 4 }\n"
                    "    tier ram { location = cpu }\n  }\n}\n")
    model = build_model("tiny-olmoe")
    before = {n: p.data.clone() for n, p in model.named_parameters()}
    with pytest.raises(AttachError) as err:
        mpl.load(str(path)).attach(model)
    msg = str(err.value)
    assert msg.startswith(f"{path}:3: tier 'hot' of policy 'u' holds experts at int4")
    assert "as the top tier" in msg and "replay" in msg and "\n" not in msg
    assert not hasattr(model, "_mpl_handle")
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_refuses_a_dense_model():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    with pytest.raises(AttachError, match="no Mixture-of-Experts"):
        attach(pol("cache { capacity = 4 }"), LlamaForCausalLM(cfg))


def test_discovery_reads_the_model():
    layers = discover(build_model("tiny-deepseek-v2"))
    assert [b.layer_id for b in layers] == [1, 2]             # layer 0 is dense
    assert all(b.router is not None and b.top_k == 3 for b in layers)
    g = discover(build_model("tiny-gpt-oss"))
    assert g[0].module.is_transposed and g[0].module.has_bias
    assert type(g[0].router).__name__ == "GptOssTopKRouter"


# ---------------------------------------------------------------------------- lookahead
def test_lookahead_predicts_with_the_next_router(olmoe):
    layers = discover(olmoe)
    look = Lookahead([b.router for b in layers], 2)
    hidden = torch.randn(3, olmoe.config.hidden_size)
    preds = look.predict(0, hidden)
    assert set(preds) == {1, 2}
    _, _, idx = layers[1].router(hidden)
    assert set(preds[1]) == set(idx.reshape(-1).tolist())
    assert look.predict(len(layers) - 1, hidden) is None


def test_lookahead_feeds_predictions_to_runtime(olmoe):
    policy = pol("cache { capacity = 8 }\nprefetch { strategy = lookahead\n budget = 2 }")
    seen = []

    class Spy:
        """The runtime, its dispatch() and hits() calls recorded."""

        def __init__(self, rt):
            self._rt = rt

        def __getattr__(self, name):
            return getattr(self._rt, name)

        def dispatch(self, layer, experts, weights=None, tokens=1, **kw):
            seen.append((layer, kw.get("predictions")))
            return self._rt.dispatch(layer, experts, weights, tokens, **kw)

        def hits(self, layer, experts, weights=None, tokens=1, **kw):
            seen.append((layer, kw.get("predictions")))
            return self._rt.hits(layer, experts, weights, tokens, **kw)

    make = policy.runtime
    policy.runtime = lambda *a, **kw: Spy(make(*a, **kw))
    h = attach(policy, olmoe)
    gen(olmoe, n=2)
    st = h.get_stats()
    h.detach()
    assert any(p for layer, p in seen if layer == 0)
    assert all(p is None for layer, p in seen if layer == len(h.layers) - 1)
    assert st["prefetch_issued"] > 0


def test_no_pregating_without_lookahead(olmoe):
    h = attach(pol("cache { capacity = 8 }\nprefetch { strategy = history\n budget = 2 }"), olmoe)
    gen(olmoe, n=2)
    assert h.engine.lookahead is None and h.get_stats()["mechanism"]["lookahead_calls"] == 0
    h.detach()


# ---------------------------------------------------------------------------- recording
@pytest.mark.parametrize("body", [
    "cache { capacity = 5\n eviction = lfu }\nprefetch { strategy = history\n budget = 2 }",
    "cache { capacity = 6\n eviction = score }\nprefetch { strategy = lookahead\n budget = 2\n lookahead = 2 }",
    # the loads in decreasing weight order: the live engine hands the runtime the weights
    "cache { capacity = 6\n eviction = s3fifo }\nschedule { priority_routing = true }",
])
def test_record_matches_live_routing_and_replays(olmoe, body):
    distance = 2 if "lookahead = 2" in body else 1
    trace = record(olmoe, PROMPT, max_new_tokens=4, lookahead=distance)
    L = len(discover(olmoe))
    assert trace.header.num_experts == 8 and trace.header.top_k == 2
    assert trace.header.moe_layers == (0, 1, 2)
    assert trace.num_steps == 4 and len(trace) == 4 * L
    first = trace.dispatches[0]
    assert first.tokens == PROMPT.shape[1] and all(len(r) == 2 for r in first.experts)
    assert first.weights is not None and first.predictions and 1 in first.predictions
    assert (2 in first.predictions) == (distance == 2)
    assert trace.dispatches[L - 1].predictions is None
    # the same routing seen through an attached policy, and the replay gives the live numbers
    policy = pol(body)
    h = attach(policy, olmoe)
    with Recorder(olmoe) as rec:
        with torch.no_grad():
            olmoe.generate(PROMPT, max_new_tokens=4, do_sample=False)
    live = h.get_stats()
    h.detach()
    t2 = rec.trace()
    assert [(d.step, d.layer, d.experts, d.predictions) for d in t2] == \
        [(d.step, d.layer, d.experts, d.predictions) for d in trace]
    sim = pytest.importorskip("mpl.sim")
    if not hasattr(sim, "replay"):
        pytest.skip("mpl.sim.replay not available")
    rep = sim.replay(policy, t2, belady=False)
    stats = rep.stats if isinstance(getattr(rep, "stats", None), dict) else rep.to_dict()
    for k in ("accesses", "loads", "evictions", "prefetch_issued", "prefetch_useful"):
        assert stats[k] == live[k], k
    # the same decisions: live copies on the CPU are synchronous (no late prefetch), the
    # replay's simulated link may still carry a resident key when its layer runs
    assert live["late_prefetches"] == 0
    assert stats["hits"] + stats["late_prefetches"] == live["hits"]


def test_record_refuses_dense_model():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    with pytest.raises(AttachError):
        record(LlamaForCausalLM(cfg), [1, 2, 3])


# ---------------------------------------------------------------------------- auto_attach
def test_parse_memory():
    assert parse_memory("12GiB") == 12 * 2 ** 30
    assert parse_memory("1.5 MB") == 1_500_000
    assert parse_memory(4096) == 4096
    for bad in ("12 parsecs", "-3GB", "lots", 0):
        with pytest.raises(AttachError):
            parse_memory(bad)


def test_auto_rules_and_bit_identity():
    model = build_model("tiny-mixtral")
    layers = discover(model)
    eb = sum(p[0].numel() * p.element_size() for p in layers[0].module.parameters(recurse=False))
    skel = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if ".experts." not in n)
    dev = torch.device("cpu")

    def mem_for(slots):
        return int((skel + (8 + 1) * eb + slots * eb + eb // 2) / 0.9) + 1

    texts = {}
    for slots, rule in ((24, "rule 2"), (12, "rule 3"), (3, "rule 4")):
        text, reason = choose(model, mem_for(slots), dev)
        assert rule in reason, reason
        mpl.loads("version 1\n" + text)        # a checked policy
        texts[rule] = text
    assert "per_layer" in texts["rule 3"] and "lookahead" in texts["rule 3"]
    assert "capacity = 3" in texts["rule 4"]
    with pytest.raises(AttachError, match="not enough memory"):
        choose(model, skel, dev)
    ref_seq, ref_logits = gen(model)
    h = mpl.auto_attach(model, memory=mem_for(12), device="cpu")
    assert "rule 3" in h.reason and h.policy_text.startswith("version 1")
    mpl.loads(h.policy_text)
    seq, logits = gen(model)
    h.detach()
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)


def test_auto_reserves_the_transient_entries_attach_allocates():
    """64 experts a layer: the default transient area is TRANSIENT_MIN entries, not one per
    expert, and the rule counts what attach then allocates (the memory it gives is just
    enough for the slots it names); an explicit stream_slots is counted as given."""
    from mpl.mechanism.footprint import TRANSIENT_MIN

    model = build_model("tiny-mixtral", num_local_experts=64)
    layers = discover(model)
    eb = sum(p[0].numel() * p.element_size() for p in layers[0].module.parameters(recurse=False))
    skel = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
               if ".experts." not in n)
    dev = torch.device("cpu")

    def slots_of(reason):
        return int(reason.split(" expert slots")[0].rsplit("-> ", 1)[1])

    mem = int((skel + (TRANSIENT_MIN + 1) * eb + 20 * eb + eb // 2) / 0.9) + 1
    _, reason = choose(model, mem, dev)
    assert slots_of(reason) == 20
    _, reason = choose(model, mem, dev, stream_slots=TRANSIENT_MIN + 4)
    assert slots_of(reason) == 16
    h = mpl.auto_attach(model, memory=mem, device="cpu")
    try:
        assert h.pool.size == h.runtime.num_slots + TRANSIENT_MIN + 1 <= 20 + TRANSIENT_MIN + 1
    finally:
        h.detach()


def test_grouped_mm_bit_identical_with_two_threads():
    """CPU grouped_mm with several threads depends on where rows sit: the engine stages the
    dispatch's experts in expert-id order so the result is still bit-identical."""
    model = build_model("tiny-mixtral", experts_implementation="grouped_mm")
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ref_seq, ref_logits = gen(model, n=4)
        h = attach(pol("cache { capacity = 4 }"), model)
        seq, logits = gen(model, n=4)
        st = h.get_stats()["mechanism"]
        h.detach()
    finally:
        torch.set_num_threads(old)
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    assert st["staging_copies"] > 0


def test_failed_attach_rolls_back():
    model = build_model("tiny-qwen3-moe")
    names = [n for n, _ in model.named_parameters()]
    ref_seq, ref_logits = gen(model, n=3)
    with pytest.raises(RuntimeError):
        attach(pol("cache { capacity = 4 }"), model, stream_slots=-100)   # the pool cannot be built
    assert [n for n, _ in model.named_parameters()] == names
    assert not hasattr(model, "_mpl_handle")
    assert all("forward" not in vars(m) for m in model.modules())
    seq, logits = gen(model, n=3)
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)


def test_follows_the_mode_in_force_at_call_time():
    """generate() may switch the experts implementation between prefill and decode; the
    engine reads config._experts_implementation on every call, also while attached."""
    model = build_model("tiny-olmoe", experts_implementation="grouped_mm")
    h = attach(pol("cache { capacity = 3 }"), model)
    gen(model, n=2)
    for mode in ("batched_mm", "eager"):
        model.set_experts_implementation(mode)             # switched while attached
        ref = build_model("tiny-olmoe", experts_implementation=mode)
        ref_seq, ref_logits = gen(ref, n=3)
        before = dict(h.get_stats()["mechanism"]["modes"])
        seq, logits = gen(model, n=3)
        assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits), mode
        after = h.get_stats()["mechanism"]["modes"]
        assert after.get(mode, 0) - before.get(mode, 0) == 3 * len(h.layers)
    h.detach()


@pytest.mark.parametrize("impl", ["grouped_mm", "batched_mm"])
def test_decode_takes_the_lean_path(impl):
    """An ids-only policy whose pool is smaller than the model (so no home placement): every
    decode dispatch is served by the lean path (after the prefill's loads), bit-identical,
    one read per dispatch, and the slot ids go through one held tensor on the CPU."""
    model = build_model("tiny-mixtral", experts_implementation=impl)
    ref = gen(model, n=4)
    h = attach(pol("cache { capacity = 20 }"), model)
    try:
        out = gen(model, n=4)
        st = h.get_stats()["mechanism"]
        held = dict(h.engine.staging._held)
    finally:
        h.detach()
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    layers = len(discover(model))
    assert not st["home_placement"] and st["home_dispatches"] == 0
    assert st["lean_dispatches"] == st["dispatches"] - layers     # all but the prefill
    assert st["host_syncs"] == st["dispatches"]
    assert [tuple(shape) for shape, _ in held] == [(1, 2)]          # [tokens, top-k] of a decode step


def test_lean_upload_is_fresh_while_autograd_records():
    from mpl.mechanism.device import SyncOps
    from mpl.mechanism.staging import Staging
    st = Staging(SyncOps(torch.device("cpu")))
    like = torch.zeros(1, 2, dtype=torch.long)
    with torch.no_grad():
        a = st.upload_like([3, 4], like)
        b = st.upload_like([5, 6], like)
    assert a is b and b.tolist() == [[5, 6]]                      # one held tensor, rewritten
    with torch.enable_grad():
        c = st.upload_like([7, 8], like)
        d = st.upload_like([9, 1], like)
    assert c is not d and c.tolist() == [[7, 8]] and d.tolist() == [[9, 1]]


def test_public_names_and_model_loading(tmp_path):
    """mpl.record / Policy.attach are the public spellings; the CLI loader takes a saved
    model folder (weights) or a bare config.json (random init), offline."""
    from mpl.offload.loading import ByteTokenizer, ModelLoadError, load_model
    model = build_model("tiny-olmoe")
    ref_seq, ref_logits = gen(model, n=3)
    model.save_pretrained(tmp_path / "m")
    loaded, tok = load_model(str(tmp_path / "m"))
    assert isinstance(tok, ByteTokenizer)              # no tokenizer files: bytes
    h = pol("cache { capacity = 4 }").attach(loaded)
    seq, logits = gen(loaded, n=3)
    h.detach()
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    fresh, _ = load_model(str(tmp_path / "m" / "config.json"))   # config only: random init
    assert type(fresh).__name__ == type(model).__name__
    trace = mpl.record(fresh, [5, 6, 7], max_new_tokens=2)
    assert trace.num_steps == 2
    with pytest.raises(ModelLoadError, match="unknown model"):
        load_model("tiny-nothing")


def test_auto_attach_defaults_to_free_memory():
    model = build_model("tiny-olmoe")
    h = mpl.auto_attach(model, device="cpu")     # available host memory: everything fits
    assert "rule 2" in h.reason and "GiB given" in h.reason
    assert h.runtime.num_slots >= 3 * 8
    h.detach()
