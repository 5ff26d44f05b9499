"""Checks of a policy against a model's shape before an engine runs it: the checker's
model-aware rules (a pinned expert the model does not have, a capacity below one expert, a
budget above the device's memory, ...) and the live-use rules (no ``belady``), so that a
policy that cannot run on the model is refused with located diagnostics before anything
starts or changes.

Engine-neutral, and no torch: the HuggingFace adapter runs the checks in ``attach`` and
``shadow`` (``mpl.offload``) before the model is touched, the vLLM adapter in the main
process before an engine starts and in each worker once the engine's config is known
(``mpl.vllm``). Each adapter holds one :class:`Checks` naming its own error types, so a
misfit is an :class:`PolicyDoesNotFit` (a :class:`mpl.PolicyError` with the located
diagnostics) whichever engine found it, and also the adapter's own error (``AttachError``,
``VllmIntegrationError``) for code that catches those.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mpl.diagnostics import PolicyError


class PreflightError(ValueError):
    """The policy or the model cannot be checked: an unreadable policy file, a config.json
    without a model's shape, a file of several policies and no name to choose one."""


class PolicyDoesNotFit(PolicyError, PreflightError):
    """The policy has errors for this model. ``diagnostics``: the errors, located (each has
    its file and span in ``text``, the policy text that was checked, from the file ``path``
    when there is one); ``model``: the name of the model's shape (None when none was known
    and only the rules that need no shape ran); ``consequence``: what the refusal spared
    ("the engine was not started"), as the message ends."""

    def __init__(self, message: str, diagnostics=(), text: str = "", path: str | None = None,
                 model: str | None = None, consequence: str = "") -> None:
        super().__init__(message, diagnostics)
        self.text = text
        self.path = path
        self.model = model
        self.consequence = consequence


@dataclass(frozen=True)
class Checks:
    """One engine's preflight: the same checks, raising that engine's error types.

    ``error``: raised for everything but a misfit (its constructor takes the message);
    ``does_not_fit``: a subclass of :class:`PolicyDoesNotFit`, raised with the diagnostics;
    ``consequence``: how the message of a misfit ends (what the refusal spared: "the engine
    was not started", "the model was not changed")."""

    error: type = PreflightError
    does_not_fit: type = PolicyDoesNotFit
    consequence: str = "nothing was started"

    def policy_source(self, policy) -> tuple[str, str | None, str | None]:
        """(text, path, name) of ``policy``: an mpl Policy (the text it was checked from,
        else its canonical text; its name), a ``.moe`` path, ``std/NAME`` or policy text
        (name None: the file's only policy, or the one the caller names)."""
        if hasattr(policy, "ir") and callable(getattr(policy, "text", None)):
            text = getattr(policy, "checked_text", None)
            if isinstance(text, str):
                return text, getattr(policy, "path", None), policy.name
            return policy.text(), None, policy.name
        if not isinstance(policy, (str, os.PathLike)):
            raise TypeError(f"policy must be an mpl Policy, a .moe path or policy text, not "
                            f"{type(policy).__name__}")
        s = os.fspath(policy)
        from mpl.stdlib_path import resolve

        path = resolve(s) if ("\n" not in s and "{" not in s) else None
        if path is not None and os.path.isfile(path):
            from mpl.checker import read_source
            text, err = read_source(path)
            if err is not None:
                raise self.error(f"cannot read {s}: {err.message}")
            return text, path, None
        if "{" not in s:
            raise self.error(f"no such policy file: {s}")
        return s, None, None

    def model_shape(self, model: str):
        """The ModelShape of a local model folder or ``config.json``; None for anything else
        (a hub name: the engine checks inside, once it has read the config)."""
        from mpl import shapes

        if not os.path.exists(model):
            return None
        try:
            return shapes.from_config(model)
        except shapes.ShapeError as e:
            raise self.error(f"{model}: {e}") from None

    def check_policy(self, text: str, path: str | None, name: str | None, shape) -> list:
        """Check policy ``name`` of ``text`` (None: the text's only policy) for live use on a
        model of ``shape`` (None: no shape known yet; the rules that need none still run).
        Raises ``does_not_fit`` with the errors: every error that would stop the text from
        loading, and the model-aware errors of the chosen policy and the policies it
        extends (a sibling's misfit does not stop it). Returns the chosen policy's
        model-aware warnings and hints (a capacity below top-k, a cache holding every
        expert, ...)."""
        from mpl.checker import LIVE, analyze

        an = analyze(text, path, model=shape, purpose=LIVE)
        names = list(an.policies)
        chosen = name if name is not None else (names[0] if len(names) == 1 else None)
        mine = _owned_by(an.policies.get(chosen)) if chosen is not None else (lambda d: True)
        errors = [d for d in an.diagnostics if d.is_error and (not _model_aware(d) or mine(d))]
        where = path or "the policy text"
        if errors:
            first = errors[0]
            n = f"{len(errors)} error{'s' if len(errors) > 1 else ''}"
            who = f"policy '{chosen}'" if chosen is not None else where
            fit = f"{who} does not fit {shape.name}: {n}" if shape is not None else f"{who}: {n}"
            raise self.does_not_fit(
                f"{first.file or path or '<text>'}:{first.span.line}:{first.span.column}: "
                f"{first.code}: {first.message} "
                f"({fit}; {self.consequence})",
                errors, text, path, shape.name if shape is not None else None, self.consequence)
        if not names:
            raise self.error(f"{where} defines no policy")
        if name is None and len(names) > 1:
            raise self.error(f"{where} defines {len(names)} policies ({', '.join(names)}): "
                             "choose one by name")
        if chosen not in an.ir:
            raise self.error(f"no policy named {chosen!r} in {where} "
                             f"(it defines: {', '.join(names)})")
        return [d for d in an.diagnostics if not d.is_error and _model_aware(d) and mine(d)]

    def check_live(self, text: str, path: str | None, name: str | None,
                   engine: str = "vllm") -> None:
        """Raise ``error`` when policy ``name`` of ``text`` cannot run live yet in ``engine``
        (:func:`not_live_yet`), before an engine starts."""
        from mpl.checker import analyze

        an = analyze(text, path)
        ir = an.ir.get(name) if name else (next(iter(an.ir.values())) if len(an.ir) == 1 else None)
        why = not_live_yet(ir, engine) if ir is not None else None
        if why:
            raise self.error(why)

    def check(self, policy, shape) -> list:
        """:meth:`check_policy` for a loaded policy (an mpl Policy): its own text, located."""
        text, path, name = self.policy_source(policy)
        return self.check_policy(text, path, name, shape)


#: the engines whose live execution :func:`not_live_yet` answers for
LIVE_ENGINES = ("huggingface", "vllm")


def not_live_yet(pir, engine: str = "huggingface") -> str | None:
    """Why a policy cannot run live yet in ``engine`` ("huggingface": ``attach``; "vllm":
    vLLM's live offload), in one located line (None: it can).

    HuggingFace attach runs, in every set of tiers (the hierarchy's, each band's), one gpu
    tier at the checkpoint's precision on the model's device (the device cache) over host
    memory holding every expert; or over a host tier with a capacity and a disk tier
    written to its ``path`` (``mpl.mechanism.disk``) or, without ``path``, read from the
    checkpoint's own safetensors files (``mpl.mechanism.checkpoint``; attach refuses a model
    that was not loaded from such a folder); or over one low-precision gpu tier
    (``int8``/``int4``, weight-only quantised copies on the device: ``mpl.mechanism.lowprec``;
    one precision, or a ``dtype_ladder`` of both, or a ladder whose first rung alone is the
    checkpoint's precision, its keys at that rung held whole in a full-precision area) over
    host memory holding every expert, or
    over a host tier with a capacity and a disk tier (its fills quantised from the host
    tier's records, its victims read from the disk into them); or over a second gpu tier at
    the checkpoint's precision (``mpl.mechanism.gpu_tier``) over host memory holding every
    expert, or over a host tier with a capacity and a disk tier (its victims copied into the
    host tier's records, its fills from them). ``granularity_split`` above 1
    (``mpl.mechanism.parts``) runs over host memory and over a host tier with a capacity and
    a disk tier (part records, each part read alone: ``mpl.mechanism.disk.part_layout``),
    with or without the second full-precision gpu tier or the low-precision one (then
    holding parts: ``mpl.mechanism.lowprec_parts``).
    Still refused, each naming the tier: a ``dtype_ladder`` with a full-precision rung
    other than its first (or with one and ``granularity_split`` above 1), a low-precision
    tier on top, anywhere but right under the top tier, on
    the host or on another device, or over tiers other than those two; a
    second gpu tier at the checkpoint's precision on another device, anywhere but right
    under the top tier, beside a low-precision tier or over tiers other than those two, a
    third gpu tier, a set of tiers without a gpu tier on top, a second host tier,
    ``granularity_split`` differing between the sets.
    Computing on the CPU (``cpu_fallback``, ``hybrid``) over a disk tier runs: the CPU
    computes an expert from the host tier's record its READ filled (with a split, from its
    parts' records put together on the host).

    vLLM's live offload (``mpl.mechanism.live.LiveExecutor`` with the same
    ``mpl.mechanism.tiered`` executor) runs the same sets of tiers: the low-precision gpu
    tier (one precision or the int8/int4 ``dtype_ladder``) right under the top tier over
    host memory or over a host tier with a capacity and a disk tier, with or without
    ``granularity_split``; the second full-precision gpu tier, ``granularity_split`` above 1,
    and computing on the CPU over a disk tier. It refuses everything above, plus a disk tier
    without ``path`` (vLLM holds the experts in its own kernel layout, not read from the
    checkpoint's files) and a ``dtype_ladder`` with a full-precision rung."""
    if not pir.tiered:
        return None
    if engine not in LIVE_ENGINES:
        raise ValueError(f"engine must be one of {', '.join(LIVE_ENGINES)}, got {engine!r}")
    where = pir.source_path or "<text>"
    line = (pir.hierarchy.source_line if pir.hierarchy is not None
            else pir.bands[0].source_line)
    replay = ("replay it on a trace of the model (mplc replay POLICY --trace T, or "
              "policy.replay(trace)) to see what its tiers do")
    sets = ([("the hierarchy", pir.hierarchy)] if pir.hierarchy is not None else []) + \
        [(f"band layers = {b.layers.first}..{b.layers.last}", b.hierarchy) for b in pir.bands]

    def at(t, h):
        return f"{where}:{t.source_line or h.source_line or line or pir.source_line}"

    splits: set = set()
    for label, h in sets:
        tiers = list(h.tiers)
        kinds = [t.location.kind for t in tiers]
        lows = []
        for i, t in enumerate(tiers):
            low = [d for d in ((t.dtype,) + tuple(t.dtype_ladder)) if d in ("int8", "int4")]
            full = [d for d in t.dtype_ladder if d not in ("int8", "int4")]
            # (HuggingFace attach runs a ladder whose first rung, and only that one, is at
            # full precision: that rung in a full-precision area, mpl.mechanism.lowprec)
            first_full = (engine == "huggingface" and len(t.dtype_ladder) > 1 and low
                          and t.dtype in (None, t.dtype_ladder[0])
                          and full == list(t.dtype_ladder[:1]))
            if first_full and h.granularity_split > 1:
                return (f"{at(t, h)}: tier '{t.name}' of policy '{pir.name}' holds experts at "
                        f"several precisions (dtype_ladder) including {full[0]} and splits "
                        f"them into parts (granularity_split), which live execution does not "
                        f"run yet (it runs a ladder of int8 and int4 of parts): {replay}")
            if len(t.dtype_ladder) > 1 and len(low) < len(t.dtype_ladder) + (t.dtype is not None) \
                    and not first_full:
                return (f"{at(t, h)}: tier '{t.name}' of policy '{pir.name}' holds experts at "
                        f"several precisions (dtype_ladder) including {full[0] if full else t.dtype}, "
                        f"which live execution does not run yet (it runs a dtype_ladder of int8 "
                        f"and int4 on a low-precision gpu tier"
                        + (", and HuggingFace attach one whose first rung alone is the "
                           "checkpoint's precision" if engine == "huggingface" else "")
                        + f"): {replay}")
            if not low:
                continue
            why = None
            if t.location.kind != "gpu":
                why = "on the host (a low-precision tier runs on the device)"
            elif i == 0:
                why = ("as the top tier (live execution keeps the top tier at the checkpoint's "
                       "precision and runs a low-precision gpu tier right under it)")
            elif i != 1 or kinds[0] != "gpu":
                why = "other than right under a gpu tier at the checkpoint's precision"
            elif t.location.index is not None:
                why = (f"on gpu:{t.location.index} (live execution keeps it on the device the "
                       f"policy is attached to; write location = gpu)")
            elif [k for k in kinds[2:] if k != "gpu"] not in (["cpu"], ["cpu", "disk"]):
                # (below it: host memory holding every expert, or a host tier over a disk
                # tier; a gpu tier there is refused on its own)
                why = "over tiers other than host memory or a host tier and a disk tier"
            if why is not None:
                return (f"{at(t, h)}: tier '{t.name}' of policy '{pir.name}' holds experts at "
                        f"{low[0]}, below the checkpoint's precision, {why}, which live "
                        f"execution does not run yet: {replay}")
            lows.append(i)
        if kinds[0] != "gpu":
            return (f"{at(tiers[0], h)}: the top tier '{tiers[0].name}' of {label} of policy "
                    f"'{pir.name}' is not on the device: live execution needs a gpu tier on top "
                    f"(the device cache); {replay}")
        extra_gpu = [i for i, k in enumerate(kinds) if k == "gpu" and i > 0 and i not in lows]
        full2 = (extra_gpu == [1] and not lows
                 and kinds.count("gpu") == 2 and tiers[1].location.index is None
                 and kinds[2:] in (["cpu"], ["cpu", "disk"]))
        if full2:          # a second gpu tier at the checkpoint's precision, over host memory
            extra_gpu = []
        if extra_gpu or kinds.count("gpu") > 2:
            t = tiers[extra_gpu[0] if extra_gpu else kinds.index("gpu", 2)]
            return (f"{at(t, h)}: tier '{t.name}' is a second gpu tier of {label} of policy "
                    f"'{pir.name}' at the checkpoint's precision, which live execution does not "
                    f"run yet {_second_gpu(engine, t, tiers, lows)}: {replay}")
        if tiers[0].location.index is not None:
            t = tiers[0]
            return (f"{at(t, h)}: tier '{t.name}' of policy '{pir.name}' names gpu:"
                    f"{t.location.index}: live execution keeps the device cache on the device "
                    f"the policy is attached to; write location = gpu")
        if kinds.count("cpu") > 1:
            t = tiers[[i for i, k in enumerate(kinds) if k == "cpu"][1]]
            return (f"{at(t, h)}: tier '{t.name}' is a second host tier of {label} of policy "
                    f"'{pir.name}', which live execution does not run yet: {replay}")
        if kinds[-1] == "disk":
            t = tiers[-1]
            if t.path is None and engine == "vllm":
                return (f"{at(t, h)}: the disk tier '{t.name}' of policy '{pir.name}' has no "
                        f"path: vLLM's live offload does not read the checkpoint's own files "
                        f"(HuggingFace attach does); give it path = \"FOLDER\" (the experts "
                        f"are written there when the policy starts)")
        splits.add(h.granularity_split)
    if len(splits) > 1:
        return (f"{where}:{line or pir.source_line}: the sets of tiers of policy '{pir.name}' "
                f"split experts into different numbers of parts (granularity_split "
                f"{', '.join(map(str, sorted(splits)))}), which live execution does not run "
                f"yet (it runs one split for every set): {replay}")
    return None


def _second_gpu(engine, t, tiers, lows) -> str:
    """What a refused second gpu tier at the checkpoint's precision lacks (in parentheses)."""
    if t.location.index is not None:
        return (f"on gpu:{t.location.index} (live execution keeps it on the device the policy "
                f"is attached to; write location = gpu)")
    if lows:
        return "beside a low-precision gpu tier"
    if tiers.index(t) != 1:
        return "other than right under the top tier"
    return ("over tiers other than host memory holding every expert or a host tier with a "
            "capacity and a disk tier (it runs one over either)")


def _model_aware(d) -> bool:
    from mpl.rules import CODES

    return getattr(CODES.get(d.code), "group", "") == "model"


def _owned_by(rp):
    """Whether a diagnostic lies in policy ``rp`` or a policy it extends (where an inherited
    value's misfit is placed); everything when the policy is unknown."""
    if rp is None:
        return lambda d: True
    spans = []
    while rp is not None:
        spans.append((rp.file, rp.node.span.offset, rp.node.span.end_offset))
        rp = rp.parent_policy
    return lambda d: any(d.file == f and a <= d.span.offset <= b for f, a, b in spans)


#: the checks with the neutral error types (for callers that are no engine adapter)
NEUTRAL = Checks()
