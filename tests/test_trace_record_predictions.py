"""``mplc trace record`` keeps the pre-gating predictions a lookahead (or learned) policy
uses live, so a replay of the trace can judge them: ``--lookahead N`` records them N layers
ahead, ``--policy`` records the run of an attached policy at its distance; a replay of that
trace gives the live statistics (the learned predictor gets the same predictions and router
weights live and in replay)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import mpl  # noqa: E402
from mpl import traceio  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from cli_helpers import clean, mplc  # noqa: E402

LEARNED = """policy p {
    cache { capacity = 3 }
    per_layer { min_capacity = 1 }
    prefetch { strategy = learned budget = 2 confidence = 0.2 lookahead = 2 }
}
"""


def _layers_ahead(trace):
    L = trace.header.num_moe_layers
    out = set()
    for d in trace.dispatches:
        for t in (d.predictions or {}):
            out.add((t - d.layer) % L)
    return out


@pytest.mark.parametrize("n,ahead", [(2, {1, 2}), (0, set())])
def test_cli_lookahead_sets_the_recorded_distance(tmp_path, n, ahead):
    r = mplc("trace", "record", "--model", "tiny-olmoe", "--max-new-tokens", "3",
             "--lookahead", str(n), "-o", "t.mpltrace", "--json", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dispatches"] > 0
    assert _layers_ahead(traceio.load(str(tmp_path / "t.mpltrace"))) == ahead


def test_cli_policy_records_at_its_distance(tmp_path):
    (tmp_path / "p.moe").write_text(LEARNED)
    r = mplc("trace", "record", "--model", "tiny-olmoe", "--max-new-tokens", "3",
             "--policy", "p.moe", "-o", "t.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert _layers_ahead(traceio.load(str(tmp_path / "t.mpltrace"))) == {1, 2}
    r = mplc("trace", "record", "--model", "tiny-olmoe", "--lookahead", "-1", "-o", "u.mpltrace",
             cwd=tmp_path)
    assert r.returncode == 2 and "--lookahead" in r.stderr
    r = mplc("trace", "record", "--model", "tiny-olmoe", "--policy", "missing.moe",
             "-o", "u.mpltrace", cwd=tmp_path)
    assert r.returncode == 1 and "missing.moe" in r.stderr


def test_a_learned_policy_replays_its_recorded_run():
    model = build_model("tiny-olmoe", experts_implementation="batched_mm")
    policy = mpl.loads(LEARNED)
    h = policy.attach(model)
    assert h.engine.lookahead is not None and h.engine.need_weights
    with Recorder(model) as rec, torch.no_grad():
        model.generate(torch.tensor([encode("Where do the experts live?")]), max_new_tokens=6,
                       do_sample=False)
    live = h.get_stats()
    h.detach()
    trace = rec.trace()
    assert _layers_ahead(trace) == {1, 2}
    from mpl.sim import replay
    stats = replay(policy, trace, belady=False).stats
    for k in ("accesses", "loads", "evictions", "prefetch_issued", "prefetch_useful"):
        assert stats[k] == live[k], k
    # the same decisions: live copies on the CPU are synchronous (no late prefetch), the
    # replay's simulated link may still carry a resident key when its layer runs
    assert live["late_prefetches"] == 0
    assert stats["hits"] + stats["late_prefetches"] == live["hits"]
    assert live["prefetch_issued"] > 0
