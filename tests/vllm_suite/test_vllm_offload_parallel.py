"""Live offload with tensor parallelism 2 on vLLM's CPU build (two CPU workers, threads
bound one core each): every rank holds its shard of each expert in its own store and pool,
its own runtime makes the decisions, and the ranks' decisions are compared (PolicyRunner
refuses a run where they differ, as it refuses differing routing). Token ids equal the same
TP=2 engine without offload."""

from __future__ import annotations

import os

import pytest

from test_vllm_offload import CONCURRENT, MAX_TOKENS, per_layer_policy, shared_policy

pytestmark = pytest.mark.needs_vllm


@pytest.fixture(scope="module")
def tp_runner(tiny):
    from mpl.vllm import PolicyRunner

    # the CPU build binds each worker's threads to a NUMA node; this machine has one
    old = os.environ.get("VLLM_CPU_OMP_THREADS_BIND")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("tensor parallelism 2 needs two cores to bind the workers to")
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "0|1"
    try:
        runner = PolicyRunner(model=tiny("qwen3-moe"), dtype="float32", max_model_len=256, seed=0,
                              enable_prefix_caching=False, tensor_parallel_size=2)
    finally:
        if old is None:
            os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
        else:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = old
    try:
        yield runner
    finally:
        runner.close()


def test_tensor_parallel_offload_same_tokens_same_decisions(tp_runner, tmp_path):
    import mpl
    from mpl import traceio

    ref = tp_runner.generate(CONCURRENT, max_tokens=MAX_TOKENS, ignore_eos=True)
    assert ref.trace.header.extra["tensor_parallel_size"] == 2
    for text in (shared_policy(6), per_layer_policy(2)):
        tp_runner.switch(text, offload=True)
        res = tp_runner.generate(CONCURRENT, max_tokens=MAX_TOKENS, ignore_eos=True)
        assert res.token_ids == ref.token_ids, text
        assert res.report["ranks"] == 2          # both ranks reported the same decision digest
        m = res.report["offload"]
        assert m["copies"] == res.stats["loads"] > 0 and m["stream_copies"] > 0
        path = tmp_path / "tp.mpltrace"
        traceio.save(res.trace, str(path))
        rep = mpl.replay(mpl.loads(text), str(path), belady=False)
        assert ({k: v for k, v in res.stats.items() if k != "stall_ms"}
                == {k: v for k, v in rep.stats.items() if k != "stall_ms"})
