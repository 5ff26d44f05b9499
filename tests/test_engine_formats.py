"""Engine-native routing outputs into mpl traces (``mplc trace convert --from FORMAT``) and
``mplc trace merge``. The input files are written in the exact layouts the engines produce:
vLLM's ``routed_experts`` (``np.save`` bytes, base64 in its OpenAI responses — vLLM's own
``numpy2base64``), SGLang's ``meta_info.routed_experts`` (base64 of raw int32) and its
expert-distribution recorder dumps (``torch.save`` of the documented dicts)."""

from __future__ import annotations

import base64
import io
import json
import random

import pytest

from cli_helpers import clean, mplc
from mpl import traceio
from mpl.sim import synth
from mpl.engine_formats import EngineFormatError, rows_from_counts

np = pytest.importorskip("numpy")

# a Qwen3-MoE shape whose layer 0 is dense: the arrays cover every decoder layer by id
CONFIG = {"model_type": "qwen3_moe", "num_hidden_layers": 3, "num_experts": 8,
          "num_experts_per_tok": 2, "hidden_size": 64, "moe_intermediate_size": 32,
          "intermediate_size": 64, "mlp_only_layers": [0], "torch_dtype": "float32"}
LAYERS, K, E = 3, 2, 8
MOE = (1, 2)


@pytest.fixture
def cfg(tmp_path):
    d = tmp_path / "tinyq"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    return str(d / "config.json")


def routed(tokens: int, seed: int, dtype="uint8"):
    """[tokens, layers, top_k] distinct ids per row; the dense layer's rows stay 0 (as the
    engines leave them)."""
    rng = random.Random(seed)
    a = np.zeros((tokens, LAYERS, K), dtype=dtype)
    for t in range(tokens):
        for layer in MOE:
            a[t, layer] = rng.sample(range(E), K)
    return a


def numpy2base64(a) -> str:          # what vllm.utils.serial_utils.numpy2base64 does
    with io.BytesIO() as b:
        np.save(b, a, allow_pickle=False)
        return base64.b64encode(b.getvalue()).decode("ascii")


def convert(tmp_path, src: str, fmt: str, cfg: str, *extra):
    """``mplc trace convert`` of tmp_path/src into a native trace; the trace."""
    out = tmp_path / (src + ".mpltrace")
    r = mplc("trace", "convert", tmp_path / src, out, "--from", fmt, "--model", cfg, *extra,
             cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    return traceio.load(str(out))


def expect_steps(trace, a, prompt: int, step0: int = 0):
    """The dispatches for one request: a prefill step of ``prompt`` tokens, then one per token."""
    spans = [(0, prompt)] + [(t, t + 1) for t in range(prompt, len(a))]
    got = [d for d in trace.dispatches if step0 <= d.step < step0 + len(spans)]
    assert len(got) == len(spans) * len(MOE)
    for d in got:
        lo, hi = spans[d.step - step0]
        assert d.experts == [a[t, MOE[d.layer]].tolist() for t in range(lo, hi)]
        assert d.weights is None


def test_vllm_npy(tmp_path, cfg):
    a = routed(9, 1)
    np.save(tmp_path / "r.npy", a)
    r = mplc("trace", "convert", tmp_path / "r.npy", tmp_path / "r.mpltrace", "--from", "vllm-npy",
             "--model", cfg, "--prompt-tokens", "4", "--json", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    t = traceio.load(str(tmp_path / "r.mpltrace"))
    assert t.header.moe_layers == MOE and t.header.num_layers == 3 and t.header.num_experts == E
    expect_steps(t, a, 4)
    assert json.loads(r.stdout)["steps"] == 1 + 9 - 4


def test_vllm_npy_fortran_order_and_int32(tmp_path, cfg):
    a = routed(5, 2, dtype="int32")
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    expect_steps(convert(tmp_path, "f.npy", "vllm-npy", cfg, "--prompt-tokens", "2"), a, 2)


def test_vllm_response_two_choices(tmp_path, cfg):
    a, b = routed(7, 3), routed(4, 4, dtype="uint16")
    resp = {"id": "cmpl-9", "object": "text_completion", "model": "tinyq",
            "choices": [{"index": 0, "text": "x", "prompt_token_ids": [5, 6, 7],
                         "token_ids": [1, 2, 3, 4, 5], "routed_experts": numpy2base64(a)},
                        {"index": 1, "text": "y", "prompt_token_ids": [8, 9],
                         "token_ids": [1, 2, 3], "routed_experts": numpy2base64(b)}]}
    (tmp_path / "resp.json").write_text(json.dumps(resp))
    t = convert(tmp_path, "resp.json", "vllm-response", cfg)
    expect_steps(t, a, 3)
    expect_steps(t, b, 2, step0=1 + 7 - 3)
    assert t.header.extra["batches"][0] == [["cmpl-9/0", 3]]


def test_sglang_response_list(tmp_path, cfg):
    a, b = routed(6, 5), routed(3, 6)
    docs = [{"text": "x", "meta_info": {"id": "r1", "prompt_tokens": 4, "completion_tokens": 3,
                                        "routed_experts": base64.b64encode(a.astype("<i4").tobytes()).decode()}},
            {"text": "y", "meta_info": {"id": "r2", "prompt_tokens": 1, "completion_tokens": 3,
                                        "routed_experts": base64.b64encode(b.astype("<i4").tobytes()).decode()}}]
    (tmp_path / "sg.json").write_text(json.dumps(docs))
    t = convert(tmp_path, "sg.json", "sglang-response", cfg)
    expect_steps(t, a, 4)
    expect_steps(t, b, 1, step0=1 + 6 - 4)
    assert t.header.extra["engine"] == "sglang"


def test_sglang_distribution_per_token_maps_physical_ids(tmp_path, cfg):
    torch = pytest.importorskip("torch")
    rng = random.Random(7)
    # 10 physical experts: 0..7 plus replicas of logical 3 and 5
    p2l = torch.tensor([list(range(8)) + [3, 5]] * LAYERS)
    records, want = [], []
    for fp, lens in enumerate(([3, 2], [1, 1])):
        n = sum(lens)
        ids = torch.full((LAYERS, n, 8), -1, dtype=torch.int32)
        logical = {}
        for layer in MOE:
            for t in range(n):
                phys = rng.sample(range(10), K)
                while len({int(p2l[layer][p]) for p in phys}) < K:
                    phys = rng.sample(range(10), K)
                ids[layer, t, :K] = torch.tensor(phys)
                logical[(layer, t)] = [int(p2l[layer][p]) for p in phys]
        want.append((n, logical))
        records.append({"forward_pass_id": fp, "rank": 0, "gatherer_key": "primary",
                        "input_ids": list(range(n)), "positions": list(range(n)),
                        "extend_seq_lens": lens, "forward_mode": 1, "topk_ids_of_layer": ids,
                        "misc_objects": [], "global_physical_count": torch.zeros(LAYERS, 10)})
    torch.save({"records": records, "last_physical_to_logical_map": p2l}, tmp_path / "d.pt")
    t = convert(tmp_path, "d.pt", "sglang-distribution", cfg)
    assert t.num_steps == 2 and t.header.extra["batches"][0] == [["0.0", 3], ["0.1", 2]]
    for d in t.dispatches:
        n, logical = want[d.step]
        assert d.experts == [logical[(MOE[d.layer], i)] for i in range(n)]


def test_sglang_distribution_stat_counts(tmp_path, cfg):
    torch = pytest.importorskip("torch")
    count = torch.zeros(3, LAYERS, E, dtype=torch.int32)   # the last buffer slot unused
    count[0, 1] = torch.tensor([3, 1, 0, 2, 0, 0, 0, 0])
    count[0, 2] = torch.tensor([0, 0, 3, 0, 0, 3, 0, 0])
    count[1, 1] = torch.tensor([1, 1, 0, 0, 0, 0, 0, 0])
    count[1, 2] = torch.tensor([0, 0, 0, 0, 1, 0, 0, 1])
    torch.save({"rank": 0, "logical_count": count, "average_utilization_rate_over_window": None},
               tmp_path / "s.pt")
    t = convert(tmp_path, "s.pt", "sglang-distribution", cfg)
    assert t.num_steps == 2 and "counts only" in t.header.source
    for d in t.dispatches:
        c = count[d.step, MOE[d.layer]].tolist()
        got = [0] * E
        for row in d.experts:
            assert len(set(row)) == K
            for e in row:
                got[e] += 1
        assert got == c


def test_rows_from_counts_refuses_impossible_counts():
    assert rows_from_counts([2, 2, 0, 0], 2, "x") == [[0, 1], [0, 1]]
    with pytest.raises(EngineFormatError, match="not top-2 routing"):
        rows_from_counts([3, 1, 0, 0], 2, "x")      # expert 0 in 3 of 2 tokens
    with pytest.raises(EngineFormatError):
        rows_from_counts([1, 0, 0, 0], 2, "x")      # not whole tokens


@pytest.mark.parametrize("case, needle", [
    ("bad-id", "token 1, layer 2: expert id 9 outside 0..7 (tinyq has 8 experts)"),
    ("layers", "the array has 4 layers, the model (tinyq) has 3 decoder layers"),
    ("no-model", "needs --model"),
    ("not-npy", "not a .npy array"),
    ("float", "must be an integer array"),
])
def test_bad_engine_inputs_are_located(tmp_path, cfg, case, needle):
    a = routed(3, 8)
    if case == "bad-id":
        a[1, 2, 1] = 9
    if case == "layers":
        a = np.zeros((3, 4, K), dtype="uint8")
    if case == "float":
        a = a.astype("float32")
    if case == "not-npy":
        (tmp_path / "r.npy").write_bytes(b"hello")
    else:
        np.save(tmp_path / "r.npy", a)
    extra = [] if case == "no-model" else ["--model", cfg]
    r = mplc("trace", "convert", tmp_path / "r.npy", tmp_path / "o.mpltrace", "--from", "vllm-npy",
             *extra, cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and needle in r.stderr, r.stderr
    assert not (tmp_path / "o.mpltrace").exists()


def test_merge_data_parallel_traces(tmp_path):
    a = synth.synthesize("olmoe", steps=4, seed=1)
    b = synth.synthesize("olmoe", steps=3, seed=2)
    traceio.save(a, str(tmp_path / "dp0.mpltrace"))
    traceio.save(b, str(tmp_path / "dp1.mpltrace"))
    r = mplc("trace", "merge", tmp_path / "dp0.mpltrace", tmp_path / "dp1.mpltrace", "-o",
             tmp_path / "all.mpltrace", "--json", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    m = traceio.load(str(tmp_path / "all.mpltrace"))
    assert m.num_steps == a.num_steps + b.num_steps
    assert [d.experts for d in m.dispatches] == [d.experts for d in a.dispatches + b.dispatches]
    assert [d.step for d in m.dispatches] == [d.step for d in a.dispatches] + \
        [d.step + a.num_steps for d in b.dispatches]
    assert [x["steps"] for x in m.header.extra["merged_from"]] == [4, 3]


def test_merge_refuses_different_models(tmp_path):
    traceio.save(synth.synthesize("olmoe", steps=2, seed=1), str(tmp_path / "a.mpltrace"))
    traceio.save(synth.synthesize("mixtral-8x7b", steps=2, seed=1), str(tmp_path / "b.mpltrace"))
    r = mplc("trace", "merge", tmp_path / "a.mpltrace", tmp_path / "b.mpltrace", "-o",
             tmp_path / "m.mpltrace", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "a different model shape" in r.stderr
