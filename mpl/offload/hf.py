"""HuggingFace adapter: find the MoE layers of a transformers model, move its experts to the
host store and a device slot pool, route every experts call through the engine, and put
everything back on ``detach()``.

Discovery reads the model itself. transformers 5.x decorates the experts class of every
common MoE family with ``use_experts_implementation``, which sets flags on the instance
(``has_gate``, ``has_bias``, ``is_transposed``, ``is_concatenated``, ...); every such module
holds fused ``[E, ...]`` parameters and is called as ``experts(hidden, top_k_index,
top_k_weights)``. Its parent is the sparse MoE block; the block's router is the sibling
module with a ``top_k`` (``gate`` in most families, ``router`` in GPT-OSS). No per-family
table is needed.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict

import torch

from mpl.features import features
from mpl.shapes import ModelShape

from .cpu import CpuExperts
from .engine import Engine, LayerBinding, rows_keep_their_bits
from .errors import PREFLIGHT, AttachError
from mpl.mechanism.lookahead import Lookahead
from .memory import MemoryMeter
from mpl.mechanism.footprint import default_stream_slots
from mpl.mechanism.pool import SlotPool
from mpl.mechanism.store import HostStore
from mpl.mechanism.tiered import part_split

_FLAGS = ("has_gate", "has_bias", "is_transposed", "is_concatenated")
_LAYER_ID = re.compile(r"\.(\d+)(?=\.)")


# ---------------------------------------------------------------------------- discovery
def _is_experts(module: torch.nn.Module) -> bool:
    d = vars(module)
    return all(f in d for f in _FLAGS) and hasattr(type(module).forward, "__wrapped__")


def _router_of(block: torch.nn.Module, experts: torch.nn.Module):
    for name, child in block.named_children():
        if child is experts:
            continue
        if isinstance(getattr(child, "top_k", None), int) and "shared" not in name:
            return child
    for name in ("gate", "router"):
        child = getattr(block, name, None)
        if isinstance(child, torch.nn.Module) and not isinstance(child, torch.nn.Linear):
            return child
    return None


def _text_config(model):
    cfg = getattr(model, "config", None)
    if cfg is None:
        return None
    get = getattr(cfg, "get_text_config", None)
    return get() if callable(get) else cfg


def discover(model: torch.nn.Module) -> list[LayerBinding]:
    """The MoE layers of ``model``, in decoder-layer order. AttachError if none."""
    found = []
    for name, mod in model.named_modules():
        if _is_experts(mod):
            found.append((name, mod))
    if not found:
        kinds = sorted({type(m).__name__ for n, m in model.named_modules() if "expert" in n.lower()})
        hint = f" (found {', '.join(kinds[:4])}, which transformers does not route through its " \
               f"experts-implementation registry)" if kinds else ""
        raise AttachError(
            f"no Mixture-of-Experts layers found in {type(model).__name__}{hint}: attach supports "
            "models whose experts class uses transformers' use_experts_implementation "
            "(Mixtral, Qwen2/3-MoE, OLMoE, DeepSeek-V2/V3, GPT-OSS and most other MoE families); "
            "DBRX, JetMoE, Llama4, Switch/NLLB-MoE are not supported")
    cfg = _text_config(model)
    layers: list[LayerBinding] = []
    ref = None
    for i, (name, mod) in enumerate(found):
        params = OrderedDict(mod.named_parameters(recurse=False))
        if not params:
            raise AttachError(f"experts module {name} holds no parameters (already offloaded?)")
        E = next(iter(params.values())).shape[0]
        sig = tuple((n, tuple(p.shape), p.dtype) for n, p in params.items())
        if any(p.shape[0] != E for p in params.values()):
            raise AttachError(f"experts module {name}: parameters do not all have the experts on dim 0")
        if ref is None:
            ref = sig
        elif sig != ref:
            raise AttachError(f"experts module {name} differs in shape from {found[0][0]}: "
                              "attach needs every MoE layer to have the same expert shape")
        parent = name.rsplit(".", 1)[0] if "." in name else ""
        block = model.get_submodule(parent) if parent else model
        router = _router_of(block, mod)
        top_k = getattr(router, "top_k", None) or getattr(block, "top_k", None) \
            or getattr(cfg, "num_experts_per_tok", None)
        if not isinstance(top_k, int) or top_k < 1:
            raise AttachError(f"cannot tell the top-k of {name}: set config.num_experts_per_tok")
        ids = _LAYER_ID.findall("." + name + ".")
        layer_id = int(ids[-1]) if ids else i
        orig = type(mod).forward.__wrapped__
        layers.append(LayerBinding(i, layer_id, name, mod, block, router, int(E), int(top_k), orig))
    layers.sort(key=lambda b: b.layer_id)
    for i, b in enumerate(layers):
        b.ordinal = i
    return layers


def model_shape(model, layers: list[LayerBinding]) -> ModelShape:
    """The ModelShape of an HF model (for model-aware checks, auto_attach and traces)."""
    cfg = _text_config(model)
    b = layers[0]
    params = dict(b.module.named_parameters(recurse=False)) or b.host
    expert_params = sum(t[0].numel() for t in params.values())
    t0 = next(iter(params.values()))
    hidden = int(getattr(cfg, "hidden_size", 0) or 0)
    mats = 3 if b.module.has_gate else 2
    inter = expert_params // (mats * hidden) if hidden else 0
    n_layers = int(getattr(cfg, "num_hidden_layers", 0) or (layers[-1].layer_id + 1))
    shared = sum(1 for b in layers[:1] for n, _ in b.block.named_children() if "shared" in n and "gate" not in n)
    return ModelShape(getattr(cfg, "model_type", type(model).__name__), n_layers,
                      tuple(x.layer_id for x in layers), b.num_experts, b.top_k, hidden, inter,
                      t0.element_size(), bool(b.module.has_gate), shared)


# ---------------------------------------------------------------------------- refusals
def _hooked(model) -> list[str]:
    return [n or type(model).__name__ for n, m in model.named_modules() if hasattr(m, "_hf_hook")]


def _hub_kernel_on_experts(model) -> tuple[str, str | None] | None:
    """(module name, kernel repository) of the first experts module, or module holding one
    (the MoE block), whose forward a hub kernel replaced (the ``kernels`` library's
    ``kernelize``, which transformers runs at ``from_pretrained`` by default when that
    library is installed: it sets the instance's ``forward`` and records ``_kernel_repo``,
    which it removes again when it falls back to the original forward); None
    when every such forward is the model's own. ``use_kernels`` alone says nothing: on a
    device without a registered kernel (the CPU, an offline machine) nothing is replaced."""
    for name, mod in model.named_modules():
        d = vars(mod)
        if "_kernel_repo" not in d:
            continue
        if _is_experts(mod) or any(_is_experts(m) for m in mod.modules()):
            repo = d.get("_kernel_repo")
            return name or type(mod).__name__, (str(getattr(repo, "repo_id", repo))
                                                if repo is not None else None)
    return None


def _check_model(model, remove_hooks: bool) -> None:
    """Every refusal about the model itself; changes nothing (hooks are removed later, once
    every other check has passed)."""
    if not isinstance(model, torch.nn.Module):
        raise AttachError(f"attach needs a torch.nn.Module (a HuggingFace model), got {type(model).__name__}")
    if getattr(model, "_mpl_handle", None) is not None:
        raise AttachError("a policy is already attached to this model: call handle.detach() first")
    hooked = _hooked(model)
    if hooked and not remove_hooks:
        raise AttachError(
            f"the model carries accelerate hooks ({len(hooked)} modules, e.g. '{hooked[0]}'), as "
            "loading with device_map=... installs; they move weights on every call and would "
            "fight the policy. Load the model without device_map (or on the CPU), or pass "
            "remove_hooks=True to attach to remove them first")
    gpus = _gpus_of(model)
    if len(gpus) > 1:
        raise AttachError(
            f"the model is spread over {len(gpus)} GPUs ({', '.join(map(str, sorted(gpus, key=str)))}, "
            "e.g. by device_map=\"auto\"): attach runs the skeleton and the slot pool on one GPU. "
            "Load the model on one device (or on the CPU) and attach it there")
    kernel = _hub_kernel_on_experts(model)
    if kernel is not None:
        name, repo = kernel
        raise AttachError(
            f"the model's '{name}' runs a hub kernel{f' ({repo})' if repo else ''} "
            "(use_kernels), which replaces its forward and reads the expert weights directly: "
            "load the model with use_kernels=False (or USE_HUB_KERNELS=0) to attach a policy")
    unloaded = _unloaded_experts(model)
    for n, p in model.named_parameters():
        if p.device.type == "meta" and not (unloaded and ".".join(n.split(".")[:-1]) in unloaded):
            raise AttachError(f"parameter {n} is on the meta device (not loaded): load the weights first")


def _unloaded_experts(model) -> set:
    """The names of the experts modules whose parameters were never loaded (a model loaded
    by ``mpl.offload.skeleton.from_pretrained``: the disk tier serves them from the
    checkpoint); empty for any other model."""
    info = getattr(model, "_mpl_unloaded", None)
    return set(info.modules) if info is not None else set()


def _gpus_of(model) -> set:
    """The accelerator devices the model's weights (or its ``hf_device_map``) sit on."""
    devs = {p.device for p in model.parameters() if p.device.type not in ("cpu", "meta")}
    dmap = getattr(model, "hf_device_map", None)
    if isinstance(dmap, dict):
        for d in dmap.values():
            if isinstance(d, int) or (isinstance(d, str) and d.isdigit()):
                devs.add(torch.device("cuda", int(d)))
            elif isinstance(d, (str, torch.device)) and str(d) not in ("cpu", "disk", "meta"):
                try:
                    dev = torch.device(d)
                except (RuntimeError, TypeError):
                    continue
                devs.add(torch.device(dev.type, dev.index if dev.index is not None else 0))
    return devs


def _replay_only_eviction(policy) -> str | None:
    from mpl.schema import PARAMS
    p = PARAMS["cache.eviction"]
    names = str(policy.ir.get(p.key) or "").split("|")
    for n in names:
        ev = p.enum_value(n)
        if ev is not None and ev.replay_only:
            return n
    return None


# ---------------------------------------------------------------------------- the handle
class Handle:
    """What ``attach`` returns: the live runtime, the stats, and ``detach()``."""

    def __init__(self, policy, model, runtime, engine, layers, pool, store, saved, placement,
                 shape, diagnostics=()) -> None:
        self.policy = policy
        self.model = model
        self.runtime = runtime
        self.engine = engine
        self.layers = layers
        self.pool = pool
        self.store = store
        self.shape = shape
        self.diagnostics = list(diagnostics)
        self._saved = saved            # experts module -> (OrderedDict of its params, devices)
        self._placement = placement    # (module, kind, name) -> original device
        self.attached = True
        self._tiers = None             # memory tiers: (TierExecutor, DiskStores, reload)
        self.policy_text: str | None = None
        self.reason: str | None = None
        self.memory = MemoryMeter(pool, store)     # stats()["memory"]: pool/store bytes, peaks

    # ------------------------------------------------------------------ info
    @property
    def moe_layers(self) -> tuple[int, ...]:
        return tuple(b.layer_id for b in self.layers)

    def get_stats(self) -> dict:
        """The runtime's stats (SPEC §5), hits counted on arrival (``late_prefetches``: the
        prefetched keys whose copy had not landed when compute needed them), plus
        ``mechanism``: what the engine actually did."""
        if self.attached:
            self.engine.flush_stalls()
        from mpl.runtime.arrival import arrived

        # hits on arrival: a prefetch still in flight when compute waited is late (CUDA)
        stats = arrived(self.runtime.stats(), self.pool.late, self.pool.late_layers)
        stats["mechanism"] = self.engine.stats()
        stats["memory"] = self.memory.stats()
        return stats

    stats = get_stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False

    def __repr__(self) -> str:
        state = "attached" if self.attached else "detached"
        return (f"<mpl Handle {state}: policy {getattr(self.policy, 'name', '?')}, "
                f"{len(self.layers)} MoE layers x {self.layers[0].num_experts} experts, "
                f"{self.pool.num_slots} slots on {self.pool.device}>")

    # ------------------------------------------------------------------ detach
    def detach(self) -> None:
        """Put the model back exactly as it was: parameters (the same Parameter objects, on
        their original devices), the experts' forward, and the skeleton's placement."""
        if not self.attached:
            return
        self.engine.flush_stalls()
        if self.pool.cuda:
            self.pool.synchronize()
        if self._tiers is not None:     # the experts on disk read back into their Parameters
            executor, _disks, reload = self._tiers
            executor.release()
            reload()
        _restore(self.layers, self._saved, self._placement)
        try:
            del self.model._mpl_handle
        except AttributeError:
            pass
        self.engine.release()          # no reference to a pool tensor is left anywhere
        self.store.release()
        if self._tiers is not None:     # the files written at attach are removed
            for d in self._tiers[1]:
                d.remove()
        self.attached = False


def _engine_forward(engine, b):
    """The experts module's forward while attached (``Engine.layer_forward``: the engine,
    outside any torch.compile graph)."""
    return engine.layer_forward(b)


def _restore(layers, saved, placement) -> None:
    """Undo attach: forwards, expert parameters (same objects, order, devices), placement."""
    for b in layers:
        b.module.__dict__.pop("forward", None)
        if b.module not in saved:
            continue
        params, devices = saved[b.module]
        for n, p in params.items():
            if p.device != devices[n]:
                p.data = p.data.to(devices[n])
        b.module._parameters = OrderedDict(params)
    for (mod, kind, name), dev in placement.items():
        table = mod._parameters if kind == "p" else mod._buffers
        t = table.get(name)
        if t is not None and t.device != dev:
            if kind == "p":
                t.data = t.data.to(dev)
            else:
                table[name] = t.to(dev)


# ---------------------------------------------------------------------------- attach
def _model_device(model) -> torch.device | None:
    """The accelerator the model's weights sit on (the first one), or None."""
    gpus = _gpus_of(model)
    return min(gpus, key=str) if gpus else None


def _resolve_device(device, model) -> torch.device:
    """Where the skeleton and the pool go: ``device``, or the GPU the model is on, or the
    current CUDA device when the model is on the CPU and CUDA is available, else the CPU."""
    on = _model_device(model) if isinstance(model, torch.nn.Module) else None
    if device is None:
        if on is not None:
            return on
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        first = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
        return first.device if first is not None else torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise AttachError(f"bad device {device!r}: {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise AttachError(f"device {device!r} asked for, but CUDA is not available on this machine")
        if dev.index is None:
            dev = on if on is not None and on.type == "cuda" else torch.device("cuda", torch.cuda.current_device())
    elif dev.type not in ("cpu",):
        raise AttachError(f"device {device!r} is not supported: use 'cuda', 'cuda:N' or 'cpu'")
    return dev


def _move_skeleton(model, dev, placement: dict) -> None:
    """Record where every parameter and buffer left on the model is (``placement``: what
    detach restores) and move the model to ``dev`` when any is elsewhere."""
    for mod in model.modules():
        for n, p in mod._parameters.items():
            if p is not None:
                placement[(mod, "p", n)] = p.device
        for n, t in mod._buffers.items():
            if t is not None:
                placement[(mod, "b", n)] = t.device
    if any(d != dev for d in placement.values()):
        model.to(dev)


def _does_not_fit_memory(policy, model, runtime, layers, dev, stream_slots: int,
                         tiered: bool) -> str | None:
    """The memory this attach takes (``mpl.mechanism.footprint``), in the order it
    allocates and releases, against what the host and the device have now: why it cannot
    fit, with the numbers, or None. Untiered: the host store's arena (every expert, the
    model's copies still alive), the model's copies released, the skeleton moved, the slot
    pool. Tiered: each disk tier's host cache and bounce record, the arena of the layers
    held in host memory, the slot pool, then the model's copies released (the layers on
    disk keep none)."""
    from mpl.mechanism.device import ALIGN
    from mpl.mechanism.footprint import DEVICE, HOST, Footprint, device_free, device_parts, host_available
    from mpl.mechanism.footprint import place_of as place, refusal

    experts = {id(b.module) for b in layers}
    # (a model loaded without its experts holds none: nothing to copy, nothing released)
    own = [(b.ordinal, sum(p.numel() * p.element_size() for p in b.module._parameters.values()
                           if p.device.type != "meta"),
            len(b.module._parameters), next(iter(b.module._parameters.values())).device)
           for b in layers]
    entry = sum(p[0].numel() * p.element_size() for p in layers[0].module._parameters.values())
    skeleton: dict = {}
    for mod in model.modules():
        if id(mod) in experts:
            continue
        for t in (*mod._parameters.values(), *mod._buffers.values()):
            if t is not None and t.device != dev:
                skeleton[place(t.device)] = skeleton.get(place(t.device), 0) + t.numel() * t.element_size()
    moved = sum(skeleton.values())
    fp = Footprint()
    if not tiered:
        fp.add("host store", HOST, sum(n + k * ALIGN for _o, n, k, _d in own))
    else:
        from mpl.mechanism.footprint import tier_device, tier_host

        on_disk = tier_host(fp, runtime.tier_layout,
                            {n: p.data for n, p in layers[0].module._parameters.items()})
        fp.add("host store", HOST, sum(n + k * ALIGN for o, n, k, _d in own if o not in on_disk))
        tier_device(fp, runtime.tier_layout,
                    {n: p.data for n, p in layers[0].module._parameters.items()},
                    where=place(dev), num_slots=runtime.num_slots, stream_slots=stream_slots,
                    align=ALIGN,
                    transposed=bool(getattr(layers[0].module, "is_transposed", False)))
    for where in (HOST, DEVICE):
        fp.add("the model's expert weights released", where,
               -sum(n for _o, n, _k, d in own if place(d) == where))
    for where, n in skeleton.items():
        fp.add("the skeleton moved away", where, -n)
    fp.add("the skeleton moved here", place(dev), moved)
    if not tiered:
        device_parts(fp, place(dev), entry=entry + ALIGN, num_slots=runtime.num_slots,
                     stream_slots=stream_slots)
    return refusal(fp, f"attaching policy '{policy.name}' to this model",
                   host=host_available(), device=device_free(dev), device_name=str(dev))


def preflight(policy, shape: ModelShape) -> list:
    """The policy checked against this model's shape before anything on the model changes
    (``mpl.mechanism.preflight``, as the vLLM adapter checks it before an engine starts):
    errors (a pinned expert that does not exist, a capacity below one expert, ...) raise
    :class:`mpl.offload.errors.PolicyDoesNotFit` with the located diagnostics; the
    model-aware warnings (capacity below top-k, a cache holding every expert) are returned,
    for the handle. A policy object with no text to check (a stand-in bringing its own
    runtime) is not checked."""
    if getattr(policy, "checked_text", None) is None and not callable(getattr(policy, "text", None)):
        return []
    return PREFLIGHT.check(policy, shape)


def pool_stream_slots(stream_slots, layer: LayerBinding, device=None, *,
                      passes: bool = True) -> int:
    """The transient entries of the slot pool: ``stream_slots`` when given, else the
    default for the model's layers (``mpl.mechanism.footprint.default_stream_slots``), or
    one entry per expert where a dispatch beyond the default would run in ``passes`` (not
    the CPU's host window) and the experts kernel of the model's mode does not keep a row's
    bits wherever the row lies in its group (:func:`mpl.offload.engine.rows_keep_their_bits`:
    such passes could change the output, and the default never costs the model's bits)."""
    if stream_slots is not None:
        return stream_slots
    n = default_stream_slots(layer.num_experts, layer.top_k)
    mode = getattr(getattr(layer.module, "config", None), "_experts_implementation", None)
    if n >= layer.num_experts or not passes or mode in (None, "eager"):
        return n
    # generate() switches grouped_mm to batched_mm for decoding off the CPU
    off_cpu = device is not None and torch.device(device).type != "cpu"
    modes = (mode, "batched_mm") if mode == "grouped_mm" and off_cpu else (mode,)
    try:
        keeps = rows_keep_their_bits(layer, modes)
    except (KeyError, ValueError):      # a mode this transformers does not register
        keeps = True
    return n if keeps else layer.num_experts


def attach(policy, model, device=None, offload_device="cpu", *, remove_hooks: bool = False,
           stream_slots: int | None = None, cost=None, check: bool = True, ops=None,
           readers: int = 4) -> Handle:
    """Attach ``policy`` (an ``mpl.Policy``) to a HuggingFace MoE ``model``.

    ``device``: where the skeleton and the slot pool live (default: CUDA if available, else
    where the model is). ``offload_device``: where the expert weights live (the CPU).
    ``remove_hooks``: remove accelerate hooks instead of refusing the model. ``cost``: a
    ``mpl.runtime.cost.CostModel`` for hybrid schedules (default: calibrated here).
    ``ops``: the device operations (``mpl.mechanism.device``; default: CUDA's for a CUDA
    device, synchronous ones otherwise; tests pass a CUDA-semantics double).
    ``stream_slots``: the pool's transient entries for STREAM placements (default:
    ``mpl.mechanism.footprint.default_stream_slots``, a few per routed expert; a dispatch that
    streams more experts is computed in passes, bit-identical to one call, or on the CPU
    from the host store's own tensors in one call).
    ``check``: check the policy against the model's shape first (:func:`preflight`).
    ``readers``: reader threads of a disk tier (0: every read in the calling thread, none
    overlapping compute); docs/offload.md, "Memory tiers live".

    Every refusal happens before anything on the model changes: an :class:`AttachError`,
    and for a policy that does not fit the model its :class:`PolicyDoesNotFit` (located
    diagnostics; also :class:`mpl.PolicyDoesNotFit`, as the vLLM adapter raises).
    """
    if str(offload_device) != "cpu":
        raise AttachError(f"offload_device={offload_device!r}: only 'cpu' (host memory) is supported")
    if not hasattr(policy, "runtime") or not hasattr(policy, "ir"):
        raise AttachError(f"attach needs an mpl Policy (mpl.load / mpl.loads), got {type(policy).__name__}")
    bad = _replay_only_eviction(policy)
    if bad:
        raise AttachError(f"policy '{policy.name}' uses eviction = {bad}, which needs the future "
                          "and exists for trace replay only: pick another eviction to attach")
    from mpl.mechanism.preflight import not_live_yet
    why = not_live_yet(policy.ir, "huggingface")
    if why:
        raise AttachError(why)
    if isinstance(readers, bool) or not isinstance(readers, int) or not 0 <= readers <= 64:
        raise AttachError(f"readers must be an integer from 0 to 64 (disk reader threads), got "
                          f"{readers!r}")
    _check_model(model, remove_hooks)
    dev = _resolve_device(device, model)
    layers = discover(model)
    shape = model_shape(model, layers)
    if dev.type == "cuda":
        shape = shape.with_device_memory(torch.cuda.get_device_properties(dev).total_memory)
    diags = preflight(policy, shape) if check else []

    E, K = layers[0].num_experts, layers[0].top_k
    expert_bytes = sum(p[0].numel() * p.element_size() for p in layers[0].module.parameters(recurse=False))
    feats = features(policy.ir)   # what the policy can reach, adapt rules included
    if cost is None and "hybrid" in feats.modes:
        from .calibrate import calibrate
        cost = calibrate(layers[0], dev)
    kw = {"expert_bytes": expert_bytes}
    if policy.ir.layer_pins:       # per-layer pins name decoder-layer ids: the model's MoE layers'
        kw["layer_ids"] = tuple(shape.moe_layers)
    if cost is not None:
        kw["cost"] = cost
    tiered = bool(getattr(policy.ir, "tiered", False))
    if _unloaded_experts(model):    # only the checkpoint's files can serve its experts
        from mpl.mechanism.tiered import checkpoint_disk_misfit
        why = checkpoint_disk_misfit(policy.ir)
        if why:
            raise AttachError(why)
    if tiered:
        # as a replay of this model's trace sizes them (mpl.timemodel.hardware.tier_arguments)
        bits = shape.bytes_per_param * 8
        kw["layer_ids"] = tuple(b.layer_id for b in layers)
        kw["stored_bits"] = bits if bits in (16, 32) else None
        _check_tier_dtypes(policy.ir, layers[0])
    try:
        runtime = policy.runtime(len(layers), E, K, **kw)
    except (ValueError, TypeError) as e:
        raise AttachError(f"policy '{policy.name}' cannot run on this model: {e}") from None
    # on the CPU without memory tiers a dispatch beyond the area is the host window's
    stream_slots = pool_stream_slots(stream_slots, layers[0], dev,
                                     passes=tiered or dev.type != "cpu")
    why = _does_not_fit_memory(policy, model, runtime, layers, dev, stream_slots, tiered)
    if why:
        raise AttachError(why)
    if remove_hooks and _hooked(model):          # the first change, after every refusal
        from accelerate.hooks import remove_hook_from_module
        remove_hook_from_module(model, recurse=True)
        if hasattr(model, "hf_device_map"):
            del model.hf_device_map

    # ---- from here on the model changes; everything is recorded for detach() (and for
    #      rolling back if something fails half-way, e.g. the pool does not fit the device)
    if ops is None:
        from mpl.mechanism.device import ops_for
        ops = ops_for(dev)
    if tiered:
        return _attach_tiered(policy, model, runtime, layers, shape, diags, dev, ops, feats,
                              stream_slots, readers)
    store = HostStore(ops)
    saved: dict = {}
    placement: dict = {}
    try:
        hosts = store.build([{n: p.data for n, p in b.module._parameters.items()} for b in layers])
        for b, host in zip(layers, hosts):
            params = OrderedDict(b.module._parameters)
            devices = {n: p.device for n, p in params.items()}
            saved[b.module] = (params, devices)
            for n, p in params.items():
                p.data = host[n]                 # the Parameter object now holds the host copy
            b.host = host
            b.module._parameters = OrderedDict()     # no expert parameter left on the model
        _move_skeleton(model, dev, placement)
        for b in layers:
            b.cpu = CpuExperts(b.module, b.host)
        pool = SlotPool(store.layers[0], runtime.num_slots, stream_slots, dev, ops)
        look = None
        if feats.lookahead_strategy or feats.learned:   # learned reads the pre-gate predictions
            look = Lookahead([b.router for b in layers], feats.affinity_depth)
        cpu_capable = "cpu_fallback" in feats.modes or "hybrid" in feats.modes
        # (a replay of the recorded trace has the weights too)
        engine = Engine(runtime, layers, pool, lookahead=look,
                        need_weights=feats.reads_weights, cpu_capable=cpu_capable)
        for b in layers:
            b.module.forward = _engine_forward(engine, b)
    except Exception as e:
        _restore(layers, saved, placement)
        store.release()
        if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError, OverflowError)):
            raise AttachError(f"the slot pool ({runtime.num_slots} slots + {stream_slots} "
                              f"transient) does not fit on {dev}: lower the policy's capacity") from None
        raise
    handle = Handle(policy, model, runtime, engine, layers, pool, store, saved, placement, shape, diags)
    model._mpl_handle = handle
    return handle


# ---------------------------------------------------------------------------- memory tiers


def _check_tier_dtypes(ir, binding) -> None:
    """A tier naming a floating-point precision other than the model's would hold converted
    copies (not the checkpoint's bytes): refused, located (live tiers run at the
    checkpoint's precision, and at int8 / int4 for a low-precision gpu tier, which
    ``not_live_yet`` has placed)."""
    from mpl.mechanism.tiered import tier_dtype_misfit

    why = tier_dtype_misfit(ir, next(iter(binding.module.parameters(recurse=False))).dtype)
    if why:
        raise AttachError(why)


class TieredHost:
    """The host memory of a tiered attach (what ``Handle.store`` and the memory meter read):
    the host store of the layers whose last tier is host memory, the host caches over the
    disk tiers, the bounce record."""

    def __init__(self, store: HostStore, executor) -> None:
        self.store = store
        self.executor = executor

    @property
    def layers(self):
        return self.store.layers

    @property
    def arena_bytes(self) -> int:
        ex = self.executor
        caches = {id(lv.cache): lv.cache for lv in ex.levels if lv.cache is not None}
        n = self.store.arena_bytes + sum(c.arena_bytes for c in caches.values())
        return n + (ex.bounce.arena_bytes if ex.bounce is not None else 0)

    @property
    def nbytes(self) -> int:
        return self.arena_bytes

    def release(self) -> None:
        self.store.release()


def _checkpoint_folder(model) -> str | None:
    """The folder the model was loaded from, when it holds ``.safetensors`` files."""
    from mpl.mechanism.checkpoint import checkpoint_files

    folder = getattr(model, "name_or_path", None) or getattr(model.config, "_name_or_path", None)
    if not folder or not os.path.isdir(folder) or not checkpoint_files(folder):
        return None
    return folder


def _attach_tiered(policy, model, runtime, layers, shape, diags, dev, ops, feats, stream_slots,
                   readers) -> Handle:
    """attach for a policy with memory tiers (``mpl.mechanism.preflight.not_live_yet`` has let it through):
    every set of tiers is the device cache (the runtime's slot pool) over host memory
    holding every expert (the host store, as without tiers), or over a host cache and a disk
    tier whose files are written here first, or over a low-precision gpu tier
    (``mpl.mechanism.tiered.TierBuild``, shared with vLLM's live offload). The Plans' tier
    steps are carried out by ``mpl.mechanism.tiered.TierExecutor``. Nothing on the model
    changes until every file is written; a failure after that puts the model back (its
    experts read back from the files) and removes the files."""
    from mpl.mechanism.disk import DiskError
    from mpl.mechanism.tiered import TierBuild

    template = {n: p.data for n, p in layers[0].module._parameters.items()}
    try:
        build = TierBuild(runtime, [{n: p.data for n, p in b.module._parameters.items()}
                                    for b in layers], [b.layer_id for b in layers], ir=policy.ir,
                          checkpoint=_checkpoint_folder(model),
                          known=getattr(getattr(model, "_mpl_unloaded", None), "recipes", None))
    except DiskError as e:
        raise AttachError(str(e)) from None
    unloaded = [layers[o].name for o in build.in_ram if layers[o].name in _unloaded_experts(model)]
    if unloaded:
        build.remove()
        raise AttachError(
            f"policy '{policy.name}' holds MoE layer {unloaded[0]} in host memory, but this "
            "model's experts were never loaded (mpl.offload.from_pretrained): every MoE layer's "
            "tiers must end on a disk tier without path")
    store = HostStore(ops)
    saved: dict = {}
    placement: dict = {}
    on_disk = [layers[o] for o in build.on_disk]
    executor = None

    def reload() -> None:
        """The experts of the layers on disk back into their Parameters (read from the
        files), before ``_restore`` puts the Parameters back on the modules."""
        for b in on_disk:
            if b.module not in saved:
                continue
            params, _devices = saved[b.module]
            if all(p.numel() for p in params.values()):
                continue          # never released (or never loaded: left on the meta device)
            data = build.read_layer(b.ordinal, params)
            for n, p in params.items():
                p.data = data[n]

    try:
        build.open(ops)
        in_ram = [layers[o] for o in build.in_ram]
        hosts_ram = store.build([{n: p.data for n, p in b.module._parameters.items()} for b in in_ram])
        hosts: list = [{} for _ in layers]
        for b, host in zip(in_ram, hosts_ram):
            hosts[b.ordinal] = host
        split = part_split(runtime.tier_layout)
        if split > 1:       # the device cache holds parts: the pool computes, the parts stay
            pool = SlotPool(template, 0, stream_slots, dev, ops, transient_only=True)
        else:
            pool = SlotPool(template, runtime.num_slots, stream_slots, dev, ops)
        transposed = bool(getattr(layers[0].module, "is_transposed", False))
        # (with a split the executor holds the part pool, the Loads' target)
        executor = build.executor(pool, hosts, readers, transposed=transposed)
        for b in layers:
            params = OrderedDict(b.module._parameters)
            devices = {n: p.device for n, p in params.items()}
            saved[b.module] = (params, devices)
            host = hosts[b.ordinal]
            for n, p in params.items():
                # the host store's copy, or nothing: the disk holds the experts now
                # (a Parameter never loaded stays on the meta device: detach reads nothing back)
                if host:
                    p.data = host[n]
                elif p.device.type != "meta":
                    p.data = torch.empty((0,), dtype=p.dtype)
            b.host = host
            b.module._parameters = OrderedDict()
        del template
        _move_skeleton(model, dev, placement)
        for b in layers:
            # (a layer on disk: computed from the record its host tier holds)
            b.cpu = CpuExperts(b.module, b.host) if b.host else CpuExperts(
                b.module, None, rows=lambda e, o=b.ordinal: executor.cpu_rows(o, e))
        look = None
        if feats.lookahead_strategy or feats.learned:
            look = Lookahead([b.router for b in layers], feats.affinity_depth)
        cpu_capable = "cpu_fallback" in feats.modes or "hybrid" in feats.modes
        engine = Engine(runtime, layers, pool, lookahead=look,
                        need_weights=feats.reads_weights, cpu_capable=cpu_capable,
                        tiers=executor)
        for b in layers:
            b.module.forward = _engine_forward(engine, b)
    except Exception as e:
        if executor is not None:
            executor.release()
        build.release()
        reload()
        _restore(layers, saved, placement)
        store.release()
        build.remove()
        if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError, OverflowError)):
            raise AttachError(f"the slot pool ({runtime.num_slots} slots + {stream_slots} "
                              f"transient) or the host cache does not fit: lower the policy's "
                              f"capacities") from None
        raise
    handle = Handle(policy, model, runtime, engine, layers, pool, TieredHost(store, executor),
                    saved, placement, shape, diags)
    if executor.areas or executor.fulls or executor.parts is not None:
        # the gpu tiers' device areas count as device memory, the part slots as the pool's
        handle.memory = MemoryMeter(pool, handle.store, lowprec=executor.areas,
                                    parts=executor.parts, gpu_tiers=executor.fulls)
    handle._tiers = (executor, build.disks, reload)
    model._mpl_handle = handle
    return handle
