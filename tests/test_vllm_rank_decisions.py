"""PolicyRunner.collect with live offload across tensor-parallel ranks (no engine: the
workers' answers to ``mpl_collect`` are given): ranks that made the same decisions give the
recording rank's report; ranks whose decisions differ are refused, naming them."""

from __future__ import annotations

import pytest

from mpl import traceio
from mpl.trace import Dispatch, Trace, TraceHeader
from mpl.vllm import VllmIntegrationError
from mpl.vllm.runner import PolicyRunner


class _Workers:
    def __init__(self, parts):
        self.parts = parts

    def collective_rpc(self, name, args=()):
        assert name == "mpl_collect"
        return self.parts


def _runner(digests):
    tr = Trace(TraceHeader(model="m", num_layers=1, moe_layers=(0,), num_experts=4, top_k=1,
                           extra={"batches": [[["r", 1]]]}), [Dispatch(0, 0, [[1]], None)])
    parts = []
    for rank, d in enumerate(digests):
        live = {"rank": rank, "mode": "offload", "stats": {"loads": 1},
                "offload": {"decision_digest": d, "copies": 1}}
        parts.append({"rank": rank, "digest": 7, "steps": 1, "problem": None,
                      "trace": traceio.to_bytes(tr) if rank == 0 else None, "shadow": None,
                      "live": live})
    r = object.__new__(PolicyRunner)
    r.llm, r.offload = _Workers(parts), True
    return r


def test_ranks_with_the_same_decisions_give_the_recording_ranks_report():
    trace, rep = _runner([0xABC, 0xABC]).collect()
    assert len(trace) == 1 and rep["rank"] == 0 and rep["ranks"] == 2


def test_ranks_with_different_decisions_are_refused():
    with pytest.raises(VllmIntegrationError, match=r"different offload decisions.*rank 1: 0x00000abd"):
        _runner([0xABC, 0xABD]).collect()
