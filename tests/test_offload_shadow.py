"""A policy in shadow mode beside a HuggingFace model (``mpl.offload.shadow`` /
``Policy.shadow``): the model generates exactly what it generates alone, and the policy's
statistics (the runtime's, with stalls simulated on a hardware profile) equal a replay of
the trace recorded in the same run, in memory and through a saved ``.mpltrace`` — the
promise the vLLM shadow keeps, from the same engine-neutral shadow
(``mpl.mechanism.shadow``). Tiny random-initialised models built from transformers
configs. (``mplc run --shadow``: tests/test_cli_run_engines.py.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl import traceio  # noqa: E402
from mpl.offload import AttachError, ShadowHandle, shadow  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("Shadow mode: what would the policy have done?")])
HW = "a100-80gb"


def gen(model, n=6):
    with torch.no_grad():
        out = model.generate(PROMPT, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


@pytest.fixture(scope="module")
def qwen3():
    model = build_model("tiny-qwen3-moe", experts_implementation="batched_mm")
    return model, gen(model)


@pytest.mark.parametrize("spec", ["std/generous", "std/balanced", "std/lookahead_prefetch",
                                  "std/hybrid", "std/adaptive",
                                  "policy s { cache { capacity = 10  eviction = score } }"])
def test_the_model_is_unchanged_and_the_stats_equal_a_replay_of_its_trace(qwen3, spec, tmp_path):
    model, (ref_seq, ref_logits) = qwen3
    policy = mpl.load(spec) if spec.startswith("std/") else mpl.loads(spec)
    h = policy.shadow(model, hardware=HW)
    assert isinstance(h, ShadowHandle)
    seq, logits = gen(model)
    h.detach()
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    rep = h.report()
    assert rep["mode"] == "shadow" and rep["engine"] == "hf" and rep["policy"] == policy.name
    assert rep["stats"] == h.get_stats() and rep["stats"]["accesses"] > 0
    trace = h.trace()
    assert rep["dispatches"] == len(trace) and trace.num_steps == 6
    r = mpl.replay(policy, trace, hardware=HW, belady=False)
    assert (rep["stats"], rep["sim"], rep["costs"]) == (r.stats, r.sim, r.costs)
    # the same through the file a user keeps and replays later
    traceio.save(trace, str(tmp_path / "t.mpltrace"))
    r2 = mpl.replay(policy, str(tmp_path / "t.mpltrace"), hardware=HW, belady=False)
    assert (rep["stats"], rep["sim"]) == (r2.stats, r2.sim)


def test_a_pre_gating_policy_sees_the_predictions_its_replay_sees(qwen3):
    model, _ = qwen3
    policy = mpl.load("std/lookahead_prefetch")
    with shadow(policy, model, hardware=HW) as h:
        gen(model, n=3)
    trace = h.trace()
    assert any(d.predictions for d in trace)              # recorded at the policy's distance
    assert h.get_stats()["prefetch_issued"] > 0
    assert h.get_stats() == mpl.replay(policy, trace, hardware=HW, belady=False).stats


def test_detach_stops_the_shadow_and_keeps_its_numbers(qwen3):
    model, _ = qwen3
    h = shadow(mpl.load("std/generous"), model)
    gen(model, n=2)
    h.detach()
    before = h.get_stats()
    gen(model, n=2)
    assert h.get_stats() == before and not h.attached
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_without_record_no_trace_is_kept():
    model = build_model("tiny-mixtral")
    h = shadow(mpl.load("std/generous"), model, record=False)
    gen(model, n=2)
    h.detach()
    assert h.get_stats()["accesses"] > 0 and h.recorder.dispatches == []
    with pytest.raises(AttachError, match="keeps no trace"):
        h.trace()


def test_beside_a_policy_attached_live():
    # two policies on one run: one live (it moves the experts), one in shadow; the shadow's
    # numbers are still a replay of the routing
    model = build_model("tiny-olmoe")
    live = mpl.load("std/balanced").attach(model)
    h = shadow(mpl.load("std/generous"), model, hardware=HW)
    gen(model, n=3)
    h.detach()
    live.detach()
    assert h.get_stats() == mpl.replay(mpl.load("std/generous"), h.trace(), hardware=HW,
                                       belady=False).stats


def test_refusals_are_clear_and_change_nothing():
    from transformers import LlamaConfig, LlamaForCausalLM

    model = build_model("tiny-mixtral")
    policy = mpl.load("std/generous")
    with pytest.raises(AttachError, match="unknown hardware|hardware"):
        shadow(policy, model, hardware="no-such-gpu")
    with pytest.raises(AttachError, match="torch.nn.Module"):
        shadow(policy, object())
    with pytest.raises(AttachError, match="needs an mpl Policy"):
        shadow("std/generous", model)
    with pytest.raises(AttachError, match="lookahead must be"):
        shadow(policy, model, lookahead=-1)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    with pytest.raises(AttachError, match="no Mixture-of-Experts"):
        shadow(policy, LlamaForCausalLM(cfg))
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_a_report_read_from_another_thread_is_consistent():
    # a server polls the statistics while the model generates: each report is taken between
    # two dispatches (the runtime and the timeline read together), never in the middle
    import threading
    import time

    model = build_model("tiny-mixtral")
    policy = mpl.load("std/balanced")
    h = shadow(policy, model, hardware=HW)
    reports, done = [], threading.Event()

    def poll():
        while not done.is_set():
            reports.append(h.report())
            time.sleep(0.0005)   # a poller, not a spin that starves the generating thread

    t = threading.Thread(target=poll)
    t.start()
    try:
        gen(model, n=8)
    finally:
        done.set()
        t.join()
        h.detach()
    trace = h.trace()
    distinct = [len(d.distinct()) for d in trace]
    assert len(reports) > 1
    for n, rep in {rep["dispatches"]: rep for rep in reports}.items():
        assert rep["stats"]["accesses"] == sum(distinct[:n])
        assert rep["sim"] == mpl.replay(policy, type(trace)(trace.header, trace.dispatches[:n]),
                                        hardware=HW, belady=False).sim
