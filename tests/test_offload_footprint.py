"""The memory an attach takes, estimated before anything is allocated
(``mpl.mechanism.footprint``): a host or device that cannot hold it is a refusal with the
numbers before the model changes (not a MemoryError half-way or the out-of-memory killer),
the estimate is exact at the boundary (one byte less is refused, the figure itself is not),
and it is never below what the attach then allocates."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
import mpl.mechanism.footprint as footprint  # noqa: E402
from mpl.mechanism.device import ALIGN  # noqa: E402
from mpl.mechanism.footprint import DEVICE, HOST, Footprint, refusal  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.hf import discover  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("How much memory?")])
POLICY = "policy p { cache { capacity = 5 } }\n"


def gen(model):
    with torch.no_grad():
        return model.generate(PROMPT, max_new_tokens=3, do_sample=False)


def expert_figures(model):
    layers = discover(model)
    total = sum(p.numel() * p.element_size() + ALIGN
                for b in layers for p in b.module._parameters.values())
    released = sum(p.numel() * p.element_size() for b in layers for p in b.module._parameters.values())
    entry = sum(p[0].numel() * p.element_size() for p in layers[0].module._parameters.values())
    return layers, total, released, entry


def test_peak_follows_allocation_order():
    fp = Footprint()
    fp.add("arena", HOST, 100)
    fp.add("released", HOST, -80)
    fp.add("pool", HOST, 50)
    fp.add("pool", DEVICE, 7)
    assert fp.peak(HOST) == 100 and fp.steady(HOST) == 70
    assert fp.peak(DEVICE) == 7
    fp.add("nothing", HOST, 0)
    assert len(fp.parts) == 4          # a zero-byte part is not listed


def test_refusal_names_the_numbers_and_what_to_change():
    fp = Footprint()
    fp.add("host store", HOST, 3 * 2**30)
    msg = refusal(fp, "attaching policy 'p'", host=2**30, device=None)
    assert "3.0 GiB more host memory" in msg and "1.0 GiB available" in msg
    assert "host store +3.0 GiB" in msg and "disk tier" in msg
    assert refusal(fp, "x", host=None, device=None) is None       # unknown: not checked
    assert refusal(fp, "x", host=3 * 2**30, device=0) is None       # exactly enough
    dev = Footprint()
    dev.add("device slot pool", DEVICE, 2**20)
    msg = refusal(dev, "attaching", host=None, device=1000, device_name="cuda:0")
    assert "1.0 MiB on cuda:0" in msg and "1000 B free" in msg


def test_host_available_is_a_positive_figure_here():
    have = footprint.host_available()
    assert have is None or have > 0


def test_a_host_without_room_is_refused_before_the_model_changes(monkeypatch):
    model = build_model("tiny-mixtral")
    before = gen(model)
    layers, total, released, entry = expert_figures(model)
    runtime_slots = 5
    pool = (runtime_slots + layers[0].num_experts + 1) * (entry + ALIGN)
    # CPU: the arena while the model's copies live, then they go and the pool comes
    peak = max(total, total - released + pool)
    policy = mpl.loads(POLICY)
    monkeypatch.setattr(footprint, "host_available", lambda: peak - 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    msg = str(err.value)
    assert "more host memory at its peak" in msg and "nothing was changed" in msg
    assert "\n" not in msg
    # nothing moved: the experts are on their modules and the output is the model's
    assert all(b.module._parameters for b in discover(model))
    assert torch.equal(gen(model), before)

    monkeypatch.setattr(footprint, "host_available", lambda: peak)
    handle = policy.attach(model)
    try:
        mem = handle.get_stats()["memory"]
        # the estimate is never below what the attach allocated
        assert mem["store_bytes"] <= total and mem["pool_bytes"] <= pool
        assert torch.equal(gen(model), before)
    finally:
        handle.detach()


def test_a_disk_tier_counts_its_host_cache_not_the_experts(monkeypatch, tmp_path):
    model = build_model("tiny-mixtral")
    _layers, total, _released, _entry = expert_figures(model)
    policy = mpl.loads(f"""policy t {{
  hierarchy {{
    tier g {{ location = gpu  capacity = 2 }}
    tier h {{ location = cpu  capacity = 3 }}
    tier d {{ location = disk  path = "{tmp_path}" }}
  }}
}}
""")
    seen = {}

    def tiny_host():
        seen["asked"] = True
        return 1
    monkeypatch.setattr(footprint, "host_available", tiny_host)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    msg = str(err.value)
    assert seen and "host tier cache" in msg and "host store" not in msg
    assert list(tmp_path.iterdir()) == []            # refused before any file was written
    # the host tier's records, the bounce record and the pool: less than every expert (a
    # host that could not hold the model's experts twice, as an untiered attach needs)
    monkeypatch.setattr(footprint, "host_available", lambda: total)
    handle = policy.attach(model)
    handle.detach()


def test_the_live_executors_estimate_covers_what_it_allocates():
    """The vLLM adapter checks ``footprint.live_executor`` before building the executor:
    its host store and slot pool are never above the estimate, which counts the engine's
    copies released after."""
    from mpl.mechanism.live import LiveExecutor, silu_experts

    g = torch.Generator().manual_seed(0)
    layers = [{"w13_weight": torch.randn(8, 16, 16, generator=g),
               "w2_weight": torch.randn(8, 16, 8, generator=g)} for _ in range(3)]
    rt = mpl.loads("policy p { cache { capacity = 5 } }").runtime(3, 8, 2)
    fp = footprint.live_executor(layers, rt.num_slots, 8, torch.device("cpu"))
    ex = LiveExecutor(rt, layers, "cpu", stream_slots=8,
                      kernel=lambda o, x, t, w, i, f, s: silu_experts(x, t, w, i))
    store = ex.store.arena_bytes
    pool = ex.pool.nbytes
    experts = sum(t.numel() * t.element_size() for layer in layers for t in layer.values())
    assert store <= fp.parts[0].nbytes and pool <= fp.parts[1].nbytes
    assert fp.peak(HOST) == fp.parts[0].nbytes + fp.parts[1].nbytes
    assert fp.steady(HOST) == fp.peak(HOST) - experts
    assert refusal(fp, "live offload", host=fp.peak(HOST) - 1, device=None) is not None


def test_a_low_precision_tier_counts_its_device_area(monkeypatch):
    model = build_model("tiny-mixtral")
    policy = mpl.loads("""policy w {
  hierarchy {
    tier hot  { location = gpu  capacity = 4 }
    tier warm { location = gpu  dtype = int8  capacity = 12 }
    on demote(hot -> warm) { mechanism = in_place_requant }
  }
}
""")
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    msg = str(err.value)
    assert "int8 tier 'warm' area +" in msg and "int8 staging record" in msg
    area = int(msg.split("int8 tier 'warm' area +")[1].split(" KiB")[0].replace(",", "")
               .split(".")[0])
    monkeypatch.setattr(footprint, "host_available", lambda: 2**40)
    handle = policy.attach(model)
    try:
        got = handle.get_stats()["memory"]["lowprec_bytes"]
        assert 0 < got <= (area + 1) * 1024      # the estimate (KiB, rounded) covers the area
    finally:
        handle.detach()


def test_a_host_tier_far_above_the_model_holds_every_expert_once(tmp_path):
    """A host tier written as a size far above the model (std/larger_than_ram's 40 GiB on a
    tiny model) allocates one record per key of its layers, as the runtime numbers them,
    and its estimate says so (it would otherwise exceed any machine)."""
    from mpl.mechanism.disk import RecordLayout

    model = build_model("tiny-mixtral")
    layers = discover(model)
    keys = len(layers) * layers[0].num_experts
    stride = RecordLayout({n: p.data for n, p in layers[0].module._parameters.items()}).stride
    policy = mpl.loads(f"""policy big {{
  hierarchy {{
    tier g {{ location = gpu  capacity = 2 }}
    tier h {{ location = cpu  capacity = 40GiB }}
    tier d {{ location = disk  path = "{tmp_path}" }}
  }}
}}
""")
    handle = policy.attach(model)
    try:
        assert handle.get_stats()["memory"]["store_bytes"] <= (keys + 2) * stride + 3 * 4096
    finally:
        handle.detach()


@pytest.mark.parametrize("dtype", ["int8", "int4"])
@pytest.mark.parametrize("shapes", [
    {"gate_up_proj": (4, 2 * 96, 64), "down_proj": (4, 64, 96)},       # fused gate/up
    {"w1": (3, 40, 72), "w2": (3, 72, 40), "w3": (3, 40, 72)},          # cols not a group multiple
])
def test_the_record_size_from_shapes_alone_is_the_layouts(dtype, shapes):
    """The tuner sizes a low-precision tier's device area without torch
    (footprint.quant_record_bytes, from the matrices' shapes); it is the record that
    QuantLayout lays out on the real tensors."""
    from mpl.mechanism.lowprec import QuantLayout

    template = {n: torch.zeros(s, dtype=torch.bfloat16) for n, s in shapes.items()}
    want = QuantLayout(template, dtype).stride
    got = footprint.quant_record_bytes([s[1:] for s in shapes.values()], dtype)
    assert got == want
