"""The fixed requests the live-offload tests send: one prompt alone, then six concurrent
prompts of different lengths (continuous batching mixes them), greedy, MAX_TOKENS each, with
the two most probable tokens' log-probabilities at every position (the last bits of the
model's output: :func:`logprobs`)."""

from __future__ import annotations

SINGLE = [[5, 17, 33, 81, 120, 7, 64, 200, 19, 3, 44]]
CONCURRENT = [[5, 17, 33, 81, 120, 7, 64, 200, 19, 3, 44], [9, 8, 7],
              [300, 301, 302, 303, 42, 42], [11, 12], [100, 200, 300, 400, 500, 13, 14, 15, 16],
              [77]]
MAX_TOKENS = 8
LAYERS, EXPERTS = 3, 8            # tests/vllm_suite/tiny_models.py


def generate_both(runner):
    """(the single request's result, the concurrent requests' result) of ``runner``."""
    one = runner.generate(SINGLE, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=2)
    many = runner.generate(CONCURRENT, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=2)
    return one, many


def logprobs(result) -> list:
    """Per request, per position, the (token, log-probability) pairs vLLM returned: floats
    of the final logits, equal only when every layer's output is equal bit for bit."""
    return [[sorted((t, v.logprob) for t, v in pos.items()) for pos in o.outputs[0].logprobs]
            for o in result.outputs]
