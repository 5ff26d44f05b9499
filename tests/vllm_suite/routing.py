"""The reference side of the vLLM tests: the same model in transformers, fed the same
token ids (the prompt, then each token vLLM generated, one step at a time with the KV
cache), its routing recorded by mpl's own HuggingFace recorder; and the vLLM trace split
back into per-request routing by the batch mix the trace records."""

from __future__ import annotations


def hf_routing(path: str, prompt_ids: list[int], generated: list[int]):
    """Per MoE-layer ordinal, the list of (token position) -> top-k ids and weights in router
    order, for the prompt and then each generated token but the last (the last token vLLM
    returns was sampled from the final step and never went through the model)."""
    import torch
    from transformers import AutoModelForCausalLM

    from mpl.offload.recorder import Recorder

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
    model.eval()
    with Recorder(model, lookahead=0) as rec, torch.no_grad():
        out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
        past = out.past_key_values
        for t in generated[:-1]:
            out = model(input_ids=torch.tensor([[t]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
    return per_layer(rec.dispatches)


def hf_predictions(path: str, prompt_ids: list[int], generated: list[int], lookahead: int):
    """[(layer ordinal, pre-gating predictions)] of every dispatch in execution order, from
    mpl's HuggingFace recorder with ``lookahead`` on the same tokens as :func:`hf_routing`."""
    import torch
    from transformers import AutoModelForCausalLM

    from mpl.offload.recorder import Recorder

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
    model.eval()
    with Recorder(model, lookahead=lookahead) as rec, torch.no_grad():
        out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
        past = out.past_key_values
        for t in generated[:-1]:
            out = model(input_ids=torch.tensor([[t]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
    return [(d.layer, d.predictions) for d in rec.dispatches]


def per_layer(dispatches):
    """{ordinal: ([ids per token...], [weights per token...])} in execution order."""
    acc: dict[int, tuple[list, list]] = {}
    for d in dispatches:
        ids, ws = acc.setdefault(d.layer, ([], []))
        ids.extend(d.experts)
        ws.extend(d.weights if d.weights is not None else [None] * len(d.experts))
    return acc


def split_by_request(trace):
    """{request id: per_layer(...) of that request's tokens} from a vLLM trace: step s's
    dispatch rows are its requests' tokens in the batch order ``extra["batches"][s]``."""
    from mpl.trace import Dispatch

    batches = trace.header.extra["batches"]
    parts: dict[str, list] = {}
    for d in trace.dispatches:
        start = 0
        for req, n in batches[d.step]:
            rows = d.experts[start:start + n]
            ws = d.weights[start:start + n] if d.weights is not None else None
            parts.setdefault(req, []).append(Dispatch(d.step, d.layer, rows, ws))
            start += n
        assert start == d.tokens, (d.step, d.layer, start, d.tokens)
    return {r: per_layer(ds) for r, ds in parts.items()}


def assert_same_routing(vllm_side, hf_side, what: str, atol: float = 1e-4) -> int:
    """Identical ids token by token, layer by layer, in router order; weights close.
    Returns the number of (token, layer) pairs compared."""
    assert sorted(vllm_side) == sorted(hf_side), f"{what}: MoE layers differ"
    n = 0
    for layer in sorted(hf_side):
        v_ids, v_w = vllm_side[layer]
        h_ids, h_w = hf_side[layer]
        assert len(v_ids) == len(h_ids), f"{what}: layer {layer}: {len(v_ids)} tokens vs {len(h_ids)}"
        for pos, (a, b) in enumerate(zip(v_ids, h_ids)):
            assert a == b, f"{what}: layer {layer} token {pos}: vLLM chose {a}, transformers {b}"
            n += 1
        for pos, (a, b) in enumerate(zip(v_w, h_w)):
            assert a is not None and b is not None
            assert max(abs(x - y) for x, y in zip(a, b)) < atol, \
                f"{what}: layer {layer} token {pos}: weights {a} vs {b}"
    return n
