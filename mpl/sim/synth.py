"""Synthetic routing traces with the shapes of published MoE models.

Each MoE layer has its own expert popularity (a Zipf law over a random ranking of its
experts, exponent ``skew`` varied per layer by ``skew_spread``). A token's k experts are drawn
one by one, without repetition, from a mixture of three sources:

* with probability ``reuse``: one of the experts this layer selected at the previous step
  (temporal locality between consecutive tokens);
* with probability ``affinity``: the partner (a fixed random map per layer pair) of one of
  the experts selected at the previous layer in the same step (cross-layer affinity);
* otherwise: the layer's popularity distribution.

Every ``phase_len`` steps (0: never) a fraction ``phase_shift`` of each layer's popularity
ranking is reshuffled (a topic change). Router weights are the normalised popularity of the
chosen experts with noise, rounded to float16 (the native format stores them exactly).
Optionally each dispatch carries speculative predictions for the next layer whose accuracy is
``pred_accuracy`` (for ``prefetch.strategy = lookahead``).

Deterministic for a seed: one ``random.Random(seed)`` drives everything. The published
statistics each preset's knobs imitate are listed in ``docs/traces.md``.
"""

from __future__ import annotations

import random
import struct
from bisect import bisect
from dataclasses import asdict, dataclass, fields, replace
from itertools import accumulate

from mpl import shapes
from mpl.trace import Dispatch, Trace, TraceHeader

#: the float type of the router weights, as mpl.traceio names it (each is rounded to float16)
WEIGHTS = "f16"


@dataclass(frozen=True)
class Knobs:
    skew: float = 1.0            # Zipf exponent of a layer's expert popularity
    skew_spread: float = 0.3     # per-layer exponent = skew * (1 + spread * u), u in [-1, 1]
    reuse: float = 0.2           # P(draw from this layer's previous-step experts)
    affinity: float = 0.2        # P(draw the partner of a previous-layer expert)
    phase_len: int = 0           # steps between popularity reshuffles (0: never)
    phase_shift: float = 0.25    # fraction of each layer's ranking reshuffled per phase
    pred_accuracy: float = 0.0   # > 0: record lookahead predictions of this accuracy
    prompt_tokens: int = 0       # > 0: step 0 is a prefill of this many tokens

    def validate(self) -> None:
        for name in ("reuse", "affinity", "phase_shift", "pred_accuracy"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        if self.reuse + self.affinity > 1.0:
            raise ValueError(f"reuse + affinity must be <= 1, got {self.reuse + self.affinity}")
        if not 0 <= self.skew < float("inf"):       # also rejects nan
            raise ValueError(f"skew must be a finite number >= 0, got {self.skew}")
        if not 0.0 <= self.skew_spread < 1.0:
            raise ValueError(f"skew_spread must be in [0, 1), got {self.skew_spread}")
        if self.phase_len < 0 or self.prompt_tokens < 0:
            raise ValueError("phase_len and prompt_tokens must be >= 0")
        if self.prompt_tokens > 65535:
            raise ValueError(f"prompt_tokens must be at most 65535 (tokens of one dispatch in a "
                             f"trace), got {self.prompt_tokens}")


KNOB_NAMES = tuple(f.name for f in fields(Knobs))

#: Knobs per preset, set to imitate published routing statistics (docs/traces.md says which).
PRESET_KNOBS: dict[str, Knobs] = {
    "mixtral-8x7b": Knobs(skew=0.35, skew_spread=0.3, reuse=0.25, affinity=0.15),
    "deepseek-v2-lite": Knobs(skew=0.5, skew_spread=0.35, reuse=0.1, affinity=0.25,
                              phase_len=512, phase_shift=0.2),
    "qwen1.5-moe-a2.7b": Knobs(skew=0.5, skew_spread=0.3, reuse=0.15, affinity=0.2,
                               phase_len=512, phase_shift=0.2),
    "olmoe-1b-7b": Knobs(skew=0.45, skew_spread=0.3, reuse=0.15, affinity=0.2,
                         phase_len=512, phase_shift=0.2),
    "qwen3-30b-a3b": Knobs(skew=0.55, skew_spread=0.3, reuse=0.15, affinity=0.2,
                           phase_len=512, phase_shift=0.2),
}


def knobs_for(preset: str, **overrides) -> Knobs:
    shape = shapes.preset(preset)
    base = PRESET_KNOBS.get(shape.name if shape else preset, Knobs())
    k = replace(base, **{n: v for n, v in overrides.items() if v is not None})
    k.validate()
    return k


def _zipf_weight(rank: int, s: float) -> float:
    """``1 / rank**s``; 0.0 where ``rank**s`` is beyond a float (a steep skew: such an expert
    is never drawn, as a weight that small would never be)."""
    try:
        return 1.0 / rank ** s
    except OverflowError:
        return 0.0


def synthesize(preset: str | shapes.ModelShape, steps: int = 512, seed: int = 0,
               knobs: Knobs | None = None, progress=None, **overrides) -> Trace:
    """A synthetic trace of ``steps`` decode steps for a preset (name or ModelShape).
    ``progress(done, steps)`` is called after each step (a progress bar)."""
    header, by_step = synthesize_steps(preset, steps, seed, knobs, **overrides)
    out: list[Dispatch] = []
    for step, dispatches in enumerate(by_step):
        out.extend(dispatches)
        if progress is not None:
            progress(step + 1, steps)
    return Trace(header, out)


def synthesize_steps(preset: str | shapes.ModelShape, steps: int = 512, seed: int = 0,
                     knobs: Knobs | None = None, **overrides):
    """``(header, steps)``: the header of :func:`synthesize`'s trace and an iterator of its
    dispatches a step at a time (a list per step, the MoE layers in order), made as they are
    read: a trace of any length is written without holding it (``mplc trace synth``).
    Router weights are :data:`WEIGHTS` values."""
    shape = preset if isinstance(preset, shapes.ModelShape) else shapes.preset(preset)
    if shape is None:
        raise ValueError(f"unknown preset '{preset}': choose one of {', '.join(shapes.PRESETS)}")
    if knobs is None:
        knobs = knobs_for(shape.name, **overrides)
    elif overrides:
        knobs = replace(knobs, **overrides)
    knobs.validate()
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    rng = random.Random(seed)
    L, E, K = shape.num_moe_layers, shape.num_experts, shape.top_k
    rand = rng.random

    # per-layer Zipf popularity over a random ranking
    exps = [knobs.skew * (1 + knobs.skew_spread * (2 * rand() - 1)) for _ in range(L)]
    zipf = [[_zipf_weight(r + 1, s) for r in range(E)] for s in exps]
    rank = [rng.sample(range(E), E) for _ in range(L)]       # rank -> expert

    def tables(layer):
        order = rank[layer]
        pop = [0.0] * E
        for r, e in enumerate(order):
            pop[e] = zipf[layer][r]
        cum = list(accumulate(pop))
        return pop, cum

    pops, cums = zip(*(tables(l) for l in range(L)))
    pops, cums = list(pops), list(cums)
    partner = [rng.sample(range(E), E) for _ in range(L)]     # expert at L-1 -> partner at L
    prev_step: list[list[int]] = [[] for _ in range(L)]
    reuse, aff = knobs.reuse, knobs.affinity
    want_pred = knobs.pred_accuracy > 0

    header = TraceHeader(model=shape.name, num_layers=shape.num_layers,
                         moe_layers=shape.moe_layers, num_experts=E, top_k=K,
                         expert_bytes=shape.expert_bytes,
                         source=f"synthetic preset={shape.name} steps={steps} seed={seed}",
                         extra={"synth": {"preset": shape.name, "steps": steps, "seed": seed,
                                          **asdict(knobs)}})
    f16row = struct.Struct(f"<{K}e")     # router weights rounded to float16, a row at a time

    def pick_token(layer: int, prev_layer: list[int]) -> list[int]:
        cum = cums[layer]
        total = cum[-1]
        chosen: list[int] = []
        ps = prev_step[layer]
        part = partner[layer]
        tries = 0
        while len(chosen) < K:
            u = rand()
            if u < reuse and ps:
                e = ps[int(rand() * len(ps))]
            elif u < reuse + aff and prev_layer:
                e = part[prev_layer[int(rand() * len(prev_layer))]]
            else:
                e = bisect(cum, rand() * total)
                if e >= E:
                    e = E - 1
            if e in chosen:
                tries += 1
                if tries > 8 * K:                 # degenerate knobs: fill uniformly
                    for x in rng.sample(range(E), E):
                        if x not in chosen:
                            chosen.append(x)
                            if len(chosen) == K:
                                break
                continue
            chosen.append(e)
        return chosen

    def generate():
        for step in range(steps):
            if knobs.phase_len and step and step % knobs.phase_len == 0:
                for layer in range(L):
                    n = max(2, int(E * knobs.phase_shift)) if E > 1 else 0
                    idx = rng.sample(range(E), min(n, E))
                    vals = [rank[layer][i] for i in idx]
                    rng.shuffle(vals)
                    for i, v in zip(idx, vals):
                        rank[layer][i] = v
                    pops[layer], cums[layer] = tables(layer)
            ntok = knobs.prompt_tokens if (step == 0 and knobs.prompt_tokens) else 1
            prev_layer: list[int] = []
            step_disp: list[Dispatch] = []
            for layer in range(L):
                rows = [pick_token(layer, prev_layer) for _ in range(ntok)]
                pop = pops[layer]
                wrows = []
                for row in rows:
                    raw = [pop[e] * (0.5 + rand()) for e in row]
                    s = sum(raw)
                    wrows.append(list(f16row.unpack(f16row.pack(*[x / s for x in raw]))))
                last = rows[-1]
                prev_step[layer] = last
                prev_layer = last
                d = Dispatch(step, layer, rows, wrows)
                step_disp.append(d)
            if want_pred:
                acc = knobs.pred_accuracy
                for layer in range(L - 1):
                    true = step_disp[layer + 1].distinct()
                    pred: list[int] = []
                    for e in true:
                        if rand() >= acc:
                            e = int(rand() * E)
                        if e not in pred:
                            pred.append(e)
                    step_disp[layer].predictions = {layer + 1: pred}
            yield step_disp

    return header, generate()
