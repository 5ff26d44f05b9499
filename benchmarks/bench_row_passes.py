"""What a bounded transient area costs vLLM's live offload, against one entry per expert.

vLLM's MoE kernels add each token's top-k outputs inside, so a step that streams more
experts than the transient entries keeps the engine's bits only when computed over groups
of tokens, each group's experts all in place at once (``mpl.mechanism.execute.row_groups``,
``LiveExecutor(row_passes="alone")``); passes over experts would round partial sums. This
measures, on the engine-neutral live executor (no vLLM: a stand-in kernel that computes as
vLLM's CPU kernel does, float32 sums rounded once to bfloat16), a prefill of M tokens over a
tiered policy (a small device cache over a host tier over a disk tier, and over host memory)
four ways: one entry per expert (one call per dispatch), N entries over groups of tokens
(``row_groups``: the better of two groupings), N entries over groups of tokens placed first
fit only (``first_fit_groups``, the grouping the other is measured against), and N entries
over experts; the groups of tokens both ways the executor runs them (``alone``: the kernel
on the group's tokens; ``in_place``: on every token, the other groups' experts the zero
entry). Per M: the kernel calls, the expert copies (streamed, and copied again within the
step), the disk reads (the Plan's, and the records read again), and whether the output is
the one call's bits; the host time of the two groupings on the step's rows, and of the
in-place calls' ids (looked up in the layer's table, against writing every row's). In place
runs up to 512 tokens (``IN_PLACE_MAX_TOKENS``).

    python benchmarks/bench_row_passes.py [--experts 64] [--top-k 8] [--tokens 8,64,512] [--reps 3]

The routing is uniform at random (``--zipf S`` skews it: expert i drawn with weight
1/(i+1)**S). No times: the stand-in kernel computes every (token, k) pair as a matrix-vector
product, unlike vLLM's kernel, which reads each expert's weights once per call. ``--vllm``
measures the engine itself (run it with the vLLM environment's Python): a tiny
random Qwen3-MoE with ``--experts`` experts top ``--top-k``, a prompt of M tokens prefilled
with one new token, the generate's wall time (median of ``--reps``) with ``stream_slots`` = E
and = N over the tiered policies, and whether every prompt position's log-probabilities
equal the engine's without offload.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import torch

import mpl
from mpl.mechanism.footprint import default_stream_slots
from mpl.mechanism import live
from mpl.mechanism.execute import first_fit_groups, row_groups
from mpl.mechanism.live import ALONE, IN_PLACE, LiveExecutor, silu_experts
from mpl.mechanism.shadow import policy_runtime
from mpl.mechanism.tiered import TierBuild
from mpl.trace import Dispatch, TraceHeader

#: the largest step run in place: there every call computes every token, and the stand-in
#: kernel computes each (token, k) pair on its own, so a larger step takes minutes
IN_PLACE_MAX_TOKENS = 512
LAYERS = 2


def kernel(ordinal, x, tensors, weights, ids, first, shared):
    w = {n: t.float() for n, t in tensors.items()}
    return silu_experts(x.float(), w, weights.float(), ids).to(x.dtype)


def layers(E, H, I, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"w13_weight": (torch.randn(E, 2 * I, H, generator=g) * 0.05).to(torch.bfloat16),
             "w2_weight": (torch.randn(E, H, I, generator=g) * 0.05).to(torch.bfloat16)}
            for _ in range(LAYERS)]


def steps(M, E, K, H, zipf, seed=1):
    rnd = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    weights = [1.0 / (i + 1) ** zipf for i in range(E)] if zipf else None
    out = []
    for layer in range(LAYERS):
        rows = []
        for _ in range(M):
            row: list[int] = []
            while len(row) < K:
                e = rnd.choices(range(E), weights)[0] if weights else rnd.randrange(E)
                if e not in row:
                    row.append(e)
            rows.append(row)
        w = torch.softmax(torch.randn(M, K, generator=g), dim=-1)
        x = torch.randn(M, H, generator=g).to(torch.bfloat16)
        out.append((layer, x, w, torch.tensor(rows, dtype=torch.int32),
                    Dispatch(0, layer, rows, w.tolist())))
    return out


def run(text, E, K, H, I, slots, mode, work, grouping=None) -> tuple[list, dict]:
    """The outputs and the executor's statistics; ``grouping``: a stand-in for
    ``row_groups`` in the executor (first fit only)."""
    policy = mpl.loads(text)
    header = TraceHeader("bench", LAYERS, tuple(range(LAYERS)), E, K, 3 * H * I * 2, "bench")
    _, _, rt = policy_runtime(policy, header)
    ls = layers(E, H, I)
    build = TierBuild(rt, ls, list(range(LAYERS)), ir=policy.ir)
    ex = LiveExecutor(rt, ls, "cpu", kernel=kernel, stream_slots=slots, tiers=build, readers=2,
                      row_passes=mode)
    kept = live.row_groups
    live.row_groups = grouping or kept
    try:
        outs = []
        for layer, x, w, ids, d in work:
            ex.plan(d)
            outs.append(ex.forward(layer, x, w, ids))
        ex.flush_stalls()
        return outs, ex.stats()
    finally:
        live.row_groups = kept
        ex.release()
        build.remove()


def grouping_ms(grouping, work, slots, reps=5) -> float:
    """The host time of ``grouping`` on each layer's rows (every expert streamed), median of
    ``reps``, averaged over the layers, in milliseconds."""
    per = []
    for _, _, _, ids, _ in work:
        rows = ids.tolist()
        streamed = sorted({e for r in rows for e in r})
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            grouping(rows, streamed, slots)
            times.append(time.perf_counter() - t)
        per.append(statistics.median(times))
    return 1e3 * sum(per) / len(per)


def in_place_ids_ms(work, E, slots, reps=5) -> tuple[float, float]:
    """The host time of the in-place calls' ids on each layer's rows, median of ``reps``,
    averaged over the layers, in milliseconds: (each call's ids written on the host for
    every row of the step, the group's rows looked up in the layer's table as the executor
    does). The first is a stand-in, kept here only to measure against."""
    per_rows, per_table = [], []
    for _, _, _, ids, _ in work:
        rows = ids.tolist()
        groups = row_groups(rows, sorted({e for r in rows for e in r}), slots)
        lut, zero, k = list(range(E)), E, ids.shape[1]

        def by_rows():
            for idx, _ in groups:
                member = set(idx)
                torch.tensor([v for i, r in enumerate(rows)
                              for v in (r if i in member else [zero] * k)],
                             dtype=ids.dtype).view(ids.shape)

        def by_table():
            for idx, _ in groups:
                sel = torch.tensor(idx, dtype=torch.long)
                table = torch.tensor(lut, dtype=ids.dtype)
                out = ids.new_full(ids.shape, zero)
                out.index_copy_(0, sel, table[ids.index_select(0, sel).long()])

        for fn, per in ((by_rows, per_rows), (by_table, per_table)):
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            per.append(statistics.median(times))
    return 1e3 * sum(per_rows) / len(per_rows), 1e3 * sum(per_table) / len(per_table)


def engine(a, E, K, slots) -> int:
    """The ``--vllm`` measurement (docstring above)."""
    import os
    import sys

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"   # the timer goes over collective_rpc
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(os.path.dirname(here), "tests", "vllm_suite"))
    import tiny_models
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from mpl.vllm import PolicyRunner

    with tempfile.TemporaryDirectory() as folder:
        path = tiny_models.build("qwen3-moe", os.path.join(folder, "model"), layers=LAYERS,
                                 hidden_size=a.hidden, moe_intermediate_size=a.intermediate,
                                 num_experts=E, num_experts_per_tok=K, head_dim=64,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=2048)
        runner = PolicyRunner(model=path, dtype="float32", max_model_len=2048, seed=0,
                              enable_prefix_caching=False, max_num_batched_tokens=2048)
        rnd = random.Random(3)

        def prefill(M):
            prompt = TokensPrompt(prompt_token_ids=[rnd.randrange(3, 500) for _ in range(M)])
            sp = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
            t0 = time.perf_counter()
            out = runner.llm.generate([prompt], sp, use_tqdm=False)[0]
            wall = time.perf_counter() - t0
            bits = [sorted((t, v.logprob) for t, v in pos.items())
                    for pos in out.prompt_logprobs[1:]]
            return wall, bits

        try:
            sizes = [int(t) for t in a.tokens.split(",")]
            ref = {}
            for M in sizes:
                rnd.seed(M)
                ref[M] = prefill(M)
            print(f"vLLM CPU build, Qwen3-MoE E={E} top-{K} hidden {a.hidden}, {LAYERS} layers; "
                  f"{slots} transient entries against {E}; wall time of the generate, median of {a.reps} "
                  f"(the counts over the {a.reps} generates)")
            print(f"{'tiers':5} {'M':>5} {'entries':>7} {'calls':>6} {'copies':>7} {'again':>6} "
                  f"{'disk':>6} {'reread':>6} {'ms':>8} {'x one':>6} {'bits':>5}")
            texts = {"disk": "policy d {{ hierarchy {{ tier g {{ location = gpu  capacity = {g} }}"
                             " tier r {{ location = cpu  capacity = {r} }}"
                             " tier s {{ location = disk  path = \"{f}\" }} }} }}",
                     "host": "policy h {{ hierarchy {{ tier g {{ location = gpu  capacity = {g} }}"
                             " tier r {{ location = cpu }} }} }}"}
            for name, text in texts.items():
                for M in sizes:
                    base = None
                    for s in (E, slots):
                        disk = tempfile.mkdtemp(dir=folder)
                        runner.switch(text.format(g=E // 8, r=E // 2, f=disk), offload=True,
                                      stream_slots=s)
                        times = []
                        for _ in range(a.reps):
                            rnd.seed(M)
                            wall, bits = prefill(M)
                            times.append(wall)
                        m = runner.collect()[1]["offload"]
                        t = statistics.median(times) * 1e3
                        base = base or t
                        print(f"{name:5} {M:>5} {s:>7} {m['passes']:>6} {m['stream_copies']:>7} "
                              f"{m['restream_copies']:>6} {m['tiers']['disk_reads']:>6} "
                              f"{m['tiers']['unplanned_reads']:>6} {t:>8.1f} {t / base:>6.2f} "
                              f"{'same' if bits == ref[M][1] else 'DIFF':>5}")
            runner.switch(None)
        finally:
            runner.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=256)
    ap.add_argument("--tokens", default="8,64,512")
    ap.add_argument("--slots", type=int, default=None,
                    help="transient entries (default: default_stream_slots, as HuggingFace attach)")
    ap.add_argument("--zipf", type=float, default=0.0)
    ap.add_argument("--reps", type=int, default=3, help="--vllm: generates per figure")
    ap.add_argument("--vllm", action="store_true", help="measure vLLM's engine (above)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    E, K, H, I = a.experts, a.top_k, a.hidden, a.intermediate
    slots = a.slots or default_stream_slots(E, K)
    if a.vllm:
        return engine(a, E, K, slots)
    with tempfile.TemporaryDirectory() as folder:
        texts = {
            "disk": f'''policy d {{ hierarchy {{
                tier g {{ location = gpu  capacity = {E // 8} }}
                tier r {{ location = cpu  capacity = {E // 2} }}
                tier s {{ location = disk  path = "{folder}" }} }} }}''',
            "host": f'''policy h {{ hierarchy {{
                tier g {{ location = gpu  capacity = {E // 8} }}
                tier r {{ location = cpu }} }} }}''',
        }
        print(f"E={E} top-{K} hidden {H} intermediate {I}, {slots} transient entries "
              f"(one call: {E}), {LAYERS} layers, routing "
              + (f"zipf {a.zipf}" if a.zipf else "uniform"))
        print(f"{'tiers':5} {'M':>5} {'how':8} {'calls':>6} {'copies':>7} {'again':>6} "
              f"{'disk':>6} {'reread':>6} {'bits':>5}")
        for name, text in texts.items():
            for M in (int(t) for t in a.tokens.split(",")):
                work = steps(M, E, K, H, a.zipf)
                if name == "disk":
                    print(f"{'':5} {M:>5} grouping host time per layer: row_groups "
                          f"{grouping_ms(row_groups, work, slots):.1f} ms, first fit alone "
                          f"{grouping_ms(first_fit_groups, work, slots):.1f} ms")
                    rows_ms, table_ms = in_place_ids_ms(work, E, slots)
                    print(f"{'':5} {M:>5} in-place ids host time per layer: every row "
                          f"{rows_ms:.1f} ms, the group's rows by table {table_ms:.1f} ms "
                          f"({rows_ms / table_ms:.1f}x)")
                ref = None
                ways = [("one", E, None, None), ("tokens", slots, ALONE, None),
                        ("inplace", slots, IN_PLACE, None),
                        ("firstfit", slots, ALONE, first_fit_groups),
                        ("experts", slots, None, None)]
                if M > IN_PLACE_MAX_TOKENS:     # (every call computes every token)
                    ways.pop(2)
                for how, s, mode, grouping in ways:
                    outs, m = run(text, E, K, H, I, s, mode, work, grouping)
                    ref = ref or outs
                    t = m["tiers"]
                    same = all(torch.equal(x, y) for x, y in zip(outs, ref))
                    print(f"{name:5} {M:>5} {how:8} {m['passes']:>6} {m['stream_copies']:>7} "
                          f"{m['restream_copies']:>6} {t['disk_reads']:>6} "
                          f"{t['unplanned_reads']:>6} {'same' if same else 'DIFF':>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
