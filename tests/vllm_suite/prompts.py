"""The fixed requests the live-offload tests send: one prompt alone, then six concurrent
prompts of different lengths (continuous batching mixes them), greedy, MAX_TOKENS each, with
the two most probable tokens' log-probabilities at every position (the last bits of the
model's output: :func:`logprobs`); :func:`tiered_runs` sends them through one engine with
each of a list of policies installed live."""

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


def tiered_runs(model: str, cases, tmp_path_factory):
    """One engine on ``model`` (float32, greedy): the reference with recording only, then each
    of ``cases`` (``(name, policy text with FOLDER for a disk tier's path, extra switch
    arguments)``) installed live with ``PolicyRunner.switch``, the last switched off at the
    end (its files go too). Yields ``{"reference": (one, many), name: (one, many, the tier
    files seen while installed, whether each was present, folder, policy text)}``."""
    import os

    from mpl.vllm import PolicyRunner

    runner = PolicyRunner(model=model, dtype="float32", max_model_len=256, seed=0,
                          enable_prefix_caching=False)
    try:
        out = {"reference": generate_both(runner)}
        for name, text, kw in cases:
            folder = str(tmp_path_factory.mktemp(f"experts-{name}"))
            text = text.replace("FOLDER", folder)
            runner.switch(text, offload=True, **kw)
            one, many = generate_both(runner)
            files = many.report["offload"]["tiers"]["files"]
            present = [os.path.isfile(f) for f in files]
            out[name] = (one, many, files, present, folder, text)
        runner.switch(None)
        yield out
    finally:
        runner.close()
