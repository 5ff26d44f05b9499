"""Bad arguments to the public API: each raises a clear exception of a documented type
(PolicyError, TraceFormatError, HardwareError, ShapeError, RuntimeConfigError, DispatchError,
or a TypeError naming the argument) — never an IndexError / KeyError / struct.error from deep
inside — and a rejected dispatch changes no runtime state."""

from __future__ import annotations

import json
import random

import pytest

import mpl
from mpl import shapes
from mpl.runtime import DispatchError, RuntimeConfigError
from mpl import traceio
from mpl.timemodel import hardware
from mpl.sim import synth
from mpl.traceio import TraceFormatError

LFU = "policy lfu16 {\n  cache { capacity = 16  eviction = lfu }\n}\n"


@pytest.fixture(scope="module")
def small_trace():
    tr = synth.synthesize("olmoe", steps=3, seed=5, pred_accuracy=0.5)
    return tr, traceio.to_bytes(tr)


# ------------------------------------------------------------------ native traces
def test_every_truncation_is_a_located_error_or_a_prefix(small_trace):
    tr, data = small_trace
    for cut in range(len(data)):
        try:
            got = traceio.from_bytes(data[:cut])
        except TraceFormatError as e:
            assert str(e).startswith("<bytes>: ")
        else:          # a cut at a record boundary is a shorter, valid trace
            assert got.dispatches == tr.dispatches[:len(got)]


def test_flipped_bytes_never_escape_as_other_errors(small_trace):
    _, data = small_trace
    rnd = random.Random(0)
    for _ in range(400):
        b = bytearray(data)
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        try:
            traceio.from_bytes(bytes(b))
        except TraceFormatError:
            pass


def test_native_predictions_out_of_range_are_rejected(small_trace):
    tr, _ = small_trace
    h = tr.header
    d = traceio.Dispatch(0, 0, [[1, 2] + [3] * (h.top_k - 2)], None, {1: [h.num_experts - 1]})
    ok = traceio.Trace(h, [d])
    data = traceio.to_bytes(ok)
    assert traceio.from_bytes(data).dispatches[0].predictions == {1: [h.num_experts - 1]}
    # the prediction's expert id is the last byte of the record (before the end marker):
    # the record check names it before the checksum would
    end = len(data) - traceio._END.size
    bad = data[:end - 1] + bytes([h.num_experts]) + data[end:]
    with pytest.raises(TraceFormatError, match="prediction"):
        traceio.from_bytes(bad)


# ------------------------------------------------------------------ JSONL traces
HEAD = json.dumps({"model": "x", "num_experts": 8, "top_k": 2, "moe_layers": [0, 1]})


@pytest.mark.parametrize("lines,message", [
    ([HEAD, '{"t": 0, "l": 0, "e": [1, 2], "s": [Infinity, 0.5]}'], ":2: not JSON (Infinity"),
    ([HEAD, '{"t": 0, "l": 0, "e": [1, 2], "s": [1e999, 0.5]}'], ":2: weights must be finite"),
    ([HEAD, '{"t": 0, "l": 0, "e": [1, 2], "p": {"1": [8]}}'], ":2: predicted expert id 8"),
    ([HEAD, '{"t": 0, "l": 0, "e": [1, 2], "p": {"1": [true]}}'], ":2: bad predictions"),
    ([HEAD, '{"t": 0, "l": 0, "e": [1, 2, 3]}'], ":2: 3 experts per token, more than"),
    ([HEAD, '{"t": 0, "l": 0, "e": [[1, 2], [3]]}'], ":2: the tokens of a dispatch select"),
    ([HEAD, '{"t": true, "l": 0, "e": [1]}'], ":2: 't' and 'l' must be"),
    ([HEAD, '{"t": 4294967296, "l": 0, "e": [1]}'], ":2: step 't' = 4294967296 is too large"),
    ([HEAD, "[" * 20000 + "]" * 20000], ":2: not JSON (nested too deeply)"),
    ([json.dumps({"model": "x", "num_experts": 8.5})], ":1: header field 'num_experts' must be an integer"),
    ([json.dumps({"model": "x", "num_experts": 8, "moe_layers": [0, -3]})], "moe_layers must be non-negative"),
    ([json.dumps({"model": "x", "num_experts": 8, "moe_layers": {"a": 1}})], "'moe_layers' must be a list"),
])
def test_jsonl_problems_are_located(tmp_path, lines, message):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as e:
        traceio.load(str(p))
    assert str(e.value).startswith(str(p)) and message in str(e.value)


def test_jsonl_binary_is_located(tmp_path):
    p = tmp_path / "bin.jsonl"
    p.write_bytes(HEAD.encode() + b"\n\xff\xfe\x80\n")
    with pytest.raises(TraceFormatError, match=r"bin\.jsonl:2: not UTF-8"):
        traceio.load(str(p))


def test_trace_paths_of_the_wrong_type():
    with pytest.raises(TypeError, match="a trace path must be a str"):
        traceio.load(None)
    with pytest.raises(TypeError, match="trace must be a Trace or a path"):
        mpl.sim.replay(LFU, 5)


def test_save_is_atomic(tmp_path, small_trace):
    tr, _ = small_trace
    bad = traceio.Trace(tr.header, list(tr.dispatches) + [traceio.Dispatch(9, 0, [[1]], None, None)])
    bad.dispatches[-1].layer = tr.header.num_moe_layers          # out of range: fails last
    for name in ("x.mpltrace", "x.jsonl"):
        with pytest.raises(ValueError, match="layer 16 outside"):
            traceio.save(bad, str(tmp_path / name))
        assert not (tmp_path / name).exists()
    (tmp_path / "x.jsonl").write_text("keep me\n")
    with pytest.raises(ValueError):
        traceio.save(bad, str(tmp_path / "x.jsonl"))
    assert (tmp_path / "x.jsonl").read_text() == "keep me\n"
    assert not list(tmp_path.glob(".mpl-*.tmp"))


# ------------------------------------------------------------------ policies, hardware, shapes
def test_load_and_check_with_wrong_argument_types(tmp_path):
    with pytest.raises(TypeError, match=r"load\(\) expects a file path"):
        mpl.load(None)
    with pytest.raises(TypeError, match=r"loads\(\) expects the policy text"):
        mpl.loads(b"policy x {}")
    with pytest.raises(TypeError, match=r"check\(\) expects a file path"):
        mpl.check(None)
    with pytest.raises(mpl.PolicyError, match="cannot read"):
        mpl.load(tmp_path)                       # a directory
    (tmp_path / "bin.moe").write_bytes(b"\xc0\xff\x00")
    with pytest.raises(mpl.PolicyError, match="cannot read"):
        mpl.load(tmp_path / "bin.moe")
    assert mpl.check(str(tmp_path))[0].code == "MPL100"


def test_replay_with_wrong_argument_types(small_trace):
    tr, _ = small_trace
    with pytest.raises(TypeError, match="policy must be an mpl Policy"):
        mpl.sim.replay(5, tr)
    with pytest.raises(hardware.HardwareError, match="hardware must be a profile name"):
        mpl.sim.replay(LFU, tr, hardware=5)
    with pytest.raises(mpl.sim.PolicyLoadError, match="capacity"):
        mpl.sim.replay(LFU, tr, capacity=-1)


@pytest.mark.parametrize("cfg,message", [
    ({"num_hidden_layers": "x", "num_local_experts": 8, "hidden_size": 8, "intermediate_size": 8},
     "num_hidden_layers must be an integer"),
    ({"num_hidden_layers": 2, "num_local_experts": 0, "hidden_size": 8, "intermediate_size": 8},
     "number of experts must be >= 1"),
    ({"num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 9, "hidden_size": 8,
      "intermediate_size": 8}, "larger than the number of experts"),
    ({"num_hidden_layers": 2, "num_local_experts": 4, "hidden_size": 8, "intermediate_size": 8,
      "first_k_dense_replace": 5}, "no layer is a Mixture-of-Experts layer"),
    ({"num_hidden_layers": 2, "num_local_experts": 4, "hidden_size": 8, "intermediate_size": 8,
      "mlp_only_layers": "0"}, "mlp_only_layers must be a list"),
])
def test_bad_model_configs(cfg, message):
    with pytest.raises(shapes.ShapeError, match=message):
        shapes.from_config_dict(cfg)


# ------------------------------------------------------------------ runtime and dispatch
@pytest.mark.parametrize("args,kw,message", [
    ((0, 8, 2), {}, "num_layers must be >= 1"),
    (("2", 8, 2), {}, "num_layers must be an integer"),
    ((2, 8.5, 2), {}, "num_experts must be an integer"),
    ((2, 8, None), {}, "top_k must be an integer"),
    ((2, 8, 9), {}, "top_k .9. is larger than num_experts .8."),
    ((2, 8, 2), {"expert_bytes": -1}, "expert_bytes must be a positive"),
    ((2, 8, 2), {"expert_bytes": "big"}, "expert_bytes must be a number"),
    ((2, 10**9, 2), {}, "num_experts must be at most 65536"),
    ((10**6, 8, 2), {}, "num_layers must be at most 65536"),
    ((2, 8, 2), {"cost": "x"}, "cost must be an mpl.runtime CostModel"),
])
def test_runtime_with_bad_shapes(args, kw, message):
    with pytest.raises(RuntimeConfigError, match=message):
        mpl.loads(LFU).runtime(*args, **kw)


def test_runtime_pin_beyond_the_experts():
    pol = mpl.loads("policy p {\n  cache { capacity = 8  pin = [200] }\n}\n")
    with pytest.raises(RuntimeConfigError, match="cache.pin lists expert 200"):
        pol.runtime(2, 8, 2)


def test_runtime_without_a_required_parameter():
    """The runtime refuses parameters without the schema's required ones (cache.capacity),
    with its own error, not a KeyError or TypeError from deep inside."""
    from mpl import schema
    from mpl.runtime.core import layout
    mod = mpl.loads(LFU).module
    assert schema.REQUIRED_KEYS == ("cache.capacity",)
    for params in ({k: v for k, v in mod.PARAMS.items() if k != "cache.capacity"},
                   {**mod.PARAMS, "cache.capacity": None}):
        with pytest.raises(RuntimeConfigError, match="cache.capacity is required"):
            layout(params, mod.FEATURES, 2, 8, 2)


BAD_DISPATCHES = [
    ((5, [1]), {}, "layer 5 is out of range"),
    ((-1, [1]), {}, "layer -1 is out of range"),
    (("0", [1]), {}, "layer must be an integer"),
    ((None, [1]), {}, "layer must be an integer"),
    ((0.0, [1]), {}, "layer must be an integer"),
    ((True, [1]), {}, "layer must be an integer"),
    ((0, [1, 8]), {}, "expert id 8 is out of range"),
    ((0, [-1]), {}, "expert id -1 is out of range"),
    ((0, [1.5]), {}, "expert ids must be integers"),
    ((0, [3, 4.0]), {}, "expert ids must be integers, got 4.0"),    # == 4, but not an id
    ((0, [True, 2]), {}, "expert ids must be integers, got True"),  # a mask is not a list of ids
    ((0, [[1, 2]]), {}, "expert ids must be integers"),
    ((0, [1, 2], [float("nan"), 0.5]), {}, "router weights must be finite numbers, got nan"),
    ((0, [1, 2], [0.5, float("-inf")]), {}, "router weights must be finite numbers, got -inf"),
    ((0, [1, 2], ("0.5", "0.5")), {}, "router weights must be finite numbers, got '0.5'"),
    ((0, [1, 2], ["a", 0.5]), {}, "router weights must be finite numbers, got 'a'"),
    ((0, ["a"]), {}, "expert ids must be integers"),
    ((0, [None]), {}, "expert ids must be integers"),
    ((0, 3), {}, "experts must be a list"),
    ((0, None), {}, "experts must be a list"),
    ((0, "12"), {}, "experts must be a list"),
    ((0, [1, 2], [0.5]), {}, "1 router weights for 2 experts"),
    ((0, [1, 2], 5), {}, "weights must be a list"),
    ((0, [1, 2], ("a", "b")), {}, "router weights must be finite numbers"),
    ((0, [1, 2]), {"tokens": 0}, "tokens must be >= 1"),
    ((0, [1, 2]), {"tokens": 1.5}, "tokens must be an integer"),
    ((0, [1, 2]), {"tokens": True}, "tokens must be an integer"),
    ((0, [1, 2]), {"step": True}, "step must be a non-negative integer"),
    ((0, [1, 2]), {"predictions": {1: [4.0]}}, "predictions for layer 1: expert ids must be integers"),
    ((0, [1, 2]), {"predictions": {1: [True]}}, "predictions for layer 1: expert ids must be integers"),
    ((0, [1, 2]), {"step": -1}, "step must be a non-negative integer"),
    ((0, [1, 2]), {"step": "x"}, "step must be a non-negative integer"),
    ((0, [1, 2]), {"predictions": [1]}, "predictions must be a dict"),
    ((0, [1, 2]), {"predictions": {7: [1]}}, "predictions name layer 7"),
    ((0, [1, 2]), {"predictions": {1: [9]}}, "predictions for layer 1: expert id 9"),
    ((0, [1, 2]), {"predictions": {1: 4}}, "predictions for layer 1 must be a list"),
]


@pytest.mark.parametrize("policy", ["std/balanced", "std/lookahead_prefetch", "std/hybrid",
                                    "std/epcb_entropy", "std/adaptive", "std/segmented"])
def test_bad_dispatches_raise_before_any_state_change(policy):
    rt = mpl.load(policy).runtime(4, 8, 2)
    rt.dispatch(0, [1, 2], [0.6, 0.4])
    before = (rt.stats(), dict(rt.resident()), rt.step)
    for args, kw, message in BAD_DISPATCHES:
        with pytest.raises(DispatchError, match=message):
            rt.dispatch(*args, **kw)
        assert (rt.stats(), dict(rt.resident()), rt.step) == before, (args, kw)
    with pytest.raises(DispatchError, match="a stall must be a finite number"):
        rt.add_stall(float("nan"))
    with pytest.raises(DispatchError, match="a stall must be a finite number"):
        rt.add_stall(-5)
    assert (rt.stats(), dict(rt.resident()), rt.step) == before
    # usable values of other integer types are accepted, as Python ints
    plan = rt.dispatch(1, (3, 4), (0.5, 0.5))
    assert plan.experts == [3, 4]
    assert rt.dispatch(2, [], tokens=0).experts == []
    plan = rt.dispatch(3, [Index(5), 6], [1, 0], tokens=Index(2), step=Index(7))   # numpy-like
    assert plan.experts == [5, 6] and all(type(e) is int for e in plan.experts)
    assert rt.step == 7 and type(rt.step) is int
    assert all(type(e) is int for _, e in rt.resident())


class Index:
    """An integer type that is not int (as numpy's are): it has __index__ only."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def test_score_rule_rejects_non_numeric_weights():
    rt = mpl.load("std/score_ema").runtime(4, 8, 2)
    rt.dispatch(0, [1, 2], [0.5, 0.5])
    before = rt.stats()
    with pytest.raises(DispatchError, match="router weights must be finite numbers"):
        rt.dispatch(1, [1, 2], ["a", "b"])
    assert rt.stats() == before


@pytest.mark.parametrize("profile,message", [
    ({"base": "h100", "cpu": ["desktop"]}, "unknown cpu"),
    ({"base": "h100", "hbm_gbps": float("nan")}, "'hbm_gbps' must be a positive"),
    ({"base": "h100", "hbm_gbps": float("inf")}, "'hbm_gbps' must be a positive"),
    ({"base": "h100", "link_efficiency": 2}, "link_efficiency must be in"),
    ({"base": "tpu"}, "unknown base profile"),
    ({}, "missing field"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_hardware_profiles(profile, message):
    with pytest.raises(hardware.HardwareError, match=message):
        if isinstance(profile, dict):
            hardware.resolve(profile)
        else:
            hardware._from_dict(profile, "x.json")


def test_check_model_argument():
    from mpl.checker import analyze
    assert not analyze(LFU, model="olmoe").errors
    with pytest.raises(shapes.ShapeError, match="unknown model 'nope'"):
        analyze(LFU, model="nope")
    with pytest.raises(TypeError, match="model must be a mpl.shapes.ModelShape"):
        analyze(LFU, model=5)


@pytest.mark.parametrize("spec,message", [
    ("missing.txt", "no such file: 'missing.txt'"),
    ("nodir/policy", "no such file"),
    ("policy {", "expected a policy name"),
])
def test_replay_policy_spec_errors(small_trace, spec, message):
    tr, _ = small_trace
    with pytest.raises(mpl.sim.PolicyLoadError, match=message):
        mpl.sim.replay(spec, tr)


@pytest.mark.skipif(not __import__("os").path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_files_are_errors_not_hangs():
    """Every reader of policy text is bounded: the API, the checker (and its imports) and
    the language server's file reads refuse /dev/zero at once."""
    from lsp.workspace import Store
    from mpl.checker import analyze

    with pytest.raises(mpl.PolicyError, match="binary file"):
        mpl.load("/dev/zero")
    assert [d.code for d in mpl.check("/dev/zero")] == ["MPL100"]
    an = analyze('import "/dev/zero"\npolicy p { cache { capacity = 4 } }\n', "/tmp/x.moe")
    assert "MPL100" in [d.code for d in an.diagnostics]
    assert Store().read_file("/dev/zero") is None


def test_a_path_with_a_nul_character_is_a_read_error():
    assert [d.code for d in mpl.check("a\x00b.moe")] == ["MPL100"]
    with pytest.raises(mpl.PolicyError, match="not a usable file path"):
        mpl.load("a\x00b.moe")
