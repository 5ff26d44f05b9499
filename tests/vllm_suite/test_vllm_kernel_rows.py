"""What live offload's groups of tokens rest on, checked on vLLM's CPU MoE kernel itself
(``cpu_fused_moe`` on weights prepacked for its portable vector ISA, outside any engine): it computes a token the same
whatever other tokens are in the call (groups of 1, 3, 5 and 16 of 37 tokens give every row
bit for bit, under 1, 2 and 4 threads, in float32 and bfloat16), the same with its experts
at other entries (the pool's remapped ids), while passes over experts with their outputs
summed do not give its bits (the reason live offload does not use them on vLLM); and
``mpl.mechanism.live.row_probe`` says so through the engine's own modular kernel
(test_vllm_disk_tier.py: ``row_passes == "alone"``)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_vllm

torch = pytest.importorskip("torch")

E, H, I, K, M = 16, 256, 512, 4, 37


def _kernel():
    from vllm._custom_ops import cpu_fused_moe, cpu_prepack_moe_weight

    def run(x, w13, w2, weights, ids):
        out = torch.empty_like(x)
        cpu_fused_moe(out, x, w13, w2, None, None, weights.float().contiguous(),
                      ids.int().contiguous(), "silu", "vec")
        return out
    return run, cpu_prepack_moe_weight


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def setup(request):
    run, prepack = _kernel()
    g = torch.Generator().manual_seed(0)
    dtype = request.param
    w13 = (torch.randn(E, 2 * I, H, generator=g) * 0.05).to(dtype)
    w2 = (torch.randn(E, H, I, generator=g) * 0.05).to(dtype)
    x = torch.randn(M, H, generator=g).to(dtype)
    ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(M)])
    w = torch.softmax(torch.randn(M, K, generator=g), dim=-1)
    return run, prepack(w13, "vec"), prepack(w2, "vec"), x, w, ids


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("size", [1, 3, 5, 16])
def test_a_token_is_computed_the_same_in_any_group(setup, threads, size):
    run, w13, w2, x, w, ids = setup
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        whole = run(x, w13, w2, w, ids)
        assert torch.equal(run(x, w13, w2, w, ids), whole)          # deterministic
        order = torch.randperm(M, generator=torch.Generator().manual_seed(size))
        out = torch.empty_like(whole)
        for g in order.split(size):
            out[g] = run(x[g].contiguous(), w13, w2, w[g], ids[g])
        assert torch.equal(out, whole)
    finally:
        torch.set_num_threads(before)


def test_experts_at_other_entries_give_the_same_bits(setup):
    run, w13, w2, x, w, ids = setup
    perm = torch.randperm(E, generator=torch.Generator().manual_seed(1))
    inv = torch.argsort(perm)
    moved = run(x, w13[inv].contiguous(), w2[inv].contiguous(), w, perm[ids])
    assert torch.equal(moved, run(x, w13, w2, w, ids))


def test_passes_over_experts_summed_do_not(setup):
    run, w13, w2, x, w, ids = setup
    z13 = torch.cat([w13, torch.zeros_like(w13[:1])])
    z2 = torch.cat([w2, torch.zeros_like(w2[:1])])
    total = None
    for lo in range(0, E, 4):
        inside = (ids >= lo) & (ids < lo + 4)
        part = run(x, z13, z2, w, torch.where(inside, ids, torch.full_like(ids, E)))
        total = part if total is None else total + part
    whole = run(x, w13, w2, w, ids)
    assert torch.allclose(total.float(), whole.float(), atol=1e-2)
    assert not torch.equal(total, whole)
