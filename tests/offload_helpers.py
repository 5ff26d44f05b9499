"""Shared by the offload tests: a policy from a body, a greedy generate with its logits (and
one recorded and replayed), teacher-forced logits, the experts implementations, a tier's
statistics row, a replay's statistics and their agreement with a live run's."""

from __future__ import annotations

import torch

import mpl


#: transformers' experts implementations every live path is tested under
IMPLS = ("eager", "batched_mm", "grouped_mm")


def row(stats, tier: str) -> dict:
    """The ``tiers`` row of the tier named ``tier`` in a runtime's or a handle's statistics."""
    return next(r for r in stats["tiers"] if r["tier"] == tier)


def replayed(policy, trace, shape) -> dict:
    """The statistics of a replay of ``trace`` (the model's ``shape``, or None)."""
    rep = policy.replay(trace, belady=False, model=shape)
    return rep.stats if isinstance(getattr(rep, "stats", None), dict) else rep.to_dict()["stats"]


def run_recorded(model, policy, prompt: torch.Tensor, n: int = 6):
    """Attach ``policy``, generate ``n`` tokens while recording the routing, detach: the
    (sequences, logits), the handle's statistics and a replay's of the recorded trace."""
    from mpl.offload.recorder import Recorder

    h = policy.attach(model)
    with Recorder(model) as rec:
        out = generate(model, prompt, n)
    st = h.get_stats()
    h.detach()
    return out, st, replayed(policy, rec.trace(), h.shape)


def assert_replay_agrees(st: dict, rs: dict) -> None:
    """A live run's statistics ``st`` against a replay's ``rs`` of its trace: the same
    per-tier rows and the same cache counts."""
    assert rs["tiers"] == st["tiers"]
    for k in ("accesses", "loads", "evictions", "streamed", "bytes_loaded"):
        assert rs[k] == st[k], k


def assert_a_disagreement_is_caught(model, policy, area, run) -> None:
    """Attach ``policy``, ``run(model, 2)``, then make every slot of ``area(handle)`` (a
    device area of the tiers) hold a key the runtime never put there: the next ``run``
    raises LiveError naming the disagreement, and the handle detaches."""
    import pytest

    from mpl.mechanism.execute import LiveError

    h = policy.attach(model)
    try:
        run(model, 2)
        a = area(h)
        for j, k in enumerate(a.content):
            if k is not None:
                a.put(j, (99, j))           # the slots no longer hold what the runtime thinks
        with pytest.raises(LiveError, match="disagree"):
            run(model, 6)
    finally:
        h.detach()


def policy(body: str):
    return mpl.loads(f"version 1\npolicy p {{\n {body}\n}}\n")


def generate(model, prompt: torch.Tensor, n: int = 5):
    """(sequences, stacked logits) of a greedy generate of ``n`` new tokens."""
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def teacher_forced_logits(model, seq: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=seq).logits


def fake_ir(values: dict):
    """A real PolicyIR with ``values`` set, for a fake policy that brings its own runtime
    (attach reads what the policy can reach from its IR: ``mpl.features``)."""
    import dataclasses
    base = mpl.loads("policy fake { cache { capacity = 1 } }").ir
    return dataclasses.replace(base, values={**base.values, **values})
