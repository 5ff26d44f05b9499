"""Serving a model whose experts do not fit in host memory: the skeleton (every weight that is
not an expert's) loaded from the checkpoint's safetensors files, the experts' parameters left
on PyTorch's meta device (never allocated), and a policy whose tiers end on a disk tier
without ``path`` attached, so the experts are read from the checkpoint's files into the
bounded host tier only when the policy asks for them (SPEC §12; docs/offload.md, "A model
larger than host memory").

:func:`from_pretrained` does, in order:

1. the model is built from its ``config.json`` on the meta device (``accelerate``'s
   ``init_empty_weights``: parameters on meta, buffers real), its MoE layers discovered;
2. the estimate (:mod:`mpl.mechanism.footprint`): the skeleton, the probe below, each disk
   tier's host cache and bounce record, the device slot pool, against what the host and the
   device have now; a refusal with the numbers before any tensor is read;
3. the **probe**: the model cut after its first MoE layer (``num_hidden_layers``, and the
   per-layer lists of the config, shortened) loaded through transformers' own
   ``from_pretrained``, so its conversion (fusing, renaming, the dtype it picks) makes that
   layer's experts as a full load would. The recipes that turn checkpoint tensors into the
   model's rows are found from those values (:func:`mpl.mechanism.checkpoint.recipes`,
   every expert of that layer compared); every other MoE layer's are made the same way and
   checked by shape and dtype for every expert (:func:`~mpl.mechanism.checkpoint.recipes_like`);
4. the skeleton: each non-expert parameter and persistent buffer read from the checkpoint
   key transformers' own renaming maps to it (``rename_source_key``), as transformers' CPU
   load reads it (a view of the file's memory map: clean pages of the page cache, which the
   kernel can drop and read again, and the same alignment, so the same bits); the probe's tensors
   (embeddings, the first layers) are compared with what the file gives under that key and
   kept (not read twice); a tensor whose key no checkpoint entry maps to is a refusal (a
   weight tied to another is tied as transformers ties it);
5. the policy attached (``mpl.offload.hf.attach``), its checkpoint disk tier using the
   recipes found; the model carries ``_mpl_unloaded`` so that attach accepts its meta
   experts, and a later attach of a policy holding experts in host memory is refused.

The model's experts stay on the meta device after ``detach()`` (nothing is read back): it
runs only with a policy attached.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch

from .errors import AttachError

_LAYER = re.compile(r"\.layers\.\d+\.")


@dataclass(frozen=True)
class Unloaded:
    """What a model loaded without its experts carries (``model._mpl_unloaded``): its
    checkpoint folder, the names of its experts modules, and the recipes per decoder-layer
    id (:class:`mpl.mechanism.checkpoint.Recipe`)."""
    folder: str
    modules: tuple
    recipes: dict


def _layer_lists(cfg, n: int) -> dict:
    """The config's per-layer lists (length ``num_hidden_layers``, e.g. ``layer_types``)."""
    out = {}
    for k, v in cfg.to_dict().items():
        if isinstance(v, list) and len(v) == n and k not in ("architectures",):
            out[k] = v
    return out


def _quiet():
    """transformers' loading reports the keys a cut model does not use (not an error here)
    and draws a progress bar for a load that is not the user's."""
    from transformers.utils import logging as hf_logging

    class Quiet:
        def __enter__(self):
            self.level = hf_logging.get_verbosity()
            self.bar = hf_logging.is_progress_bar_enabled()
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()

        def __exit__(self, *exc):
            hf_logging.set_verbosity(self.level)
            if self.bar:
                hf_logging.enable_progress_bar()
            return False
    return Quiet()


def _set(model, name: str, value, param: bool) -> None:
    mod_name, _, leaf = name.rpartition(".")
    mod = model.get_submodule(mod_name) if mod_name else model
    if param:
        old = mod._parameters[leaf]
        mod._parameters[leaf] = torch.nn.Parameter(value, requires_grad=old.requires_grad)
    else:
        mod._buffers[leaf] = value


class _Reader:
    """Checkpoint tensors as transformers' own CPU load gives them: ``safe_open(...)
    .get_tensor`` (a view of the file's memory map, at the address the map puts its file
    offset; the matrix kernels' last bits depend on an operand's alignment, so a copy
    elsewhere would not compute bit-identically), cast to the model's dtype as transformers
    casts a floating checkpoint at load."""

    def __init__(self) -> None:
        self.files: dict = {}

    def __call__(self, t, dtype) -> torch.Tensor:
        from safetensors import safe_open

        f = self.files.get(t.file)
        if f is None:
            f = self.files[t.file] = safe_open(t.file, framework="pt")
        out = f.get_tensor(t.key)
        return out if out.dtype == dtype else out.to(dtype)


def _key_map(model, tensors: dict) -> dict:
    """model key -> checkpoint Tensor, for every checkpoint key transformers' renaming maps
    to a model key without a conversion (the experts' keys, fused at load, are left out)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (WeightConverter, WeightRenaming,
                                                     rename_source_key)
    except ImportError as e:
        import transformers
        raise AttachError(f"loading a model without its experts maps checkpoint keys with "
                          f"transformers' own renaming, which transformers "
                          f"{transformers.__version__} does not have ({e}): upgrade "
                          f"transformers, or load the model whole and attach") from None

    mapping = get_model_conversion_mapping(model)
    renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]
    meta_sd = model.state_dict()
    prefix = getattr(model, "base_model_prefix", None)
    out = {}
    for key in sorted(tensors):
        name, pattern = rename_source_key(key, renamings, converters, prefix, meta_sd)
        if name not in meta_sd and key in meta_sd:
            name, pattern = key, None
        if pattern is None and name in meta_sd:
            out[name] = tensors[key]
    return out


def _refuse(folder: str, msg: str) -> AttachError:
    return AttachError(f"{folder}: {msg}")


def from_pretrained(folder, policy, *, device=None, readers: int = 4, stream_slots=None,
                    experts_implementation: str | None = None, check: bool = True):
    """Load the HuggingFace MoE model saved in ``folder`` (``config.json`` and
    ``*.safetensors``, e.g. written by ``save_pretrained``) without ever allocating its
    experts, and attach ``policy`` (an ``mpl.Policy`` whose every set of tiers ends on a
    disk tier without ``path``): the experts are read from the checkpoint's files into the
    host tier as the policy asks. Returns the attach's :class:`mpl.offload.hf.Handle`
    (``handle.model`` is the model; generate with it as with any model).

    ``device``, ``readers``, ``stream_slots``, ``check``: as ``attach``;
    ``experts_implementation``: as transformers' ``from_pretrained``. Refusals
    (:class:`AttachError`, one line, located at the policy's tier or the folder), before any
    tensor is read: a policy holding experts in host memory, a folder that is not such a
    checkpoint, a model family whose experts transformers does not route through its
    experts registry, a host or device without the memory the estimate needs; after the
    probe (one MoE layer read), a checkpoint whose experts do not make the model's (another
    dtype, quantized) or whose weights transformers' renaming does not map.
    """
    from mpl.mechanism.checkpoint import checkpoint_files, read_header, recipes, recipes_like
    from mpl.mechanism.disk import DiskError, RecordLayout
    from mpl.mechanism.footprint import device_free, host_available, refusal, skeleton_load
    from mpl.mechanism.tiered import checkpoint_disk_misfit

    from .hf import _resolve_device, attach, discover, pool_stream_slots

    if not hasattr(policy, "runtime") or not hasattr(policy, "ir"):
        raise AttachError(f"from_pretrained needs an mpl Policy (mpl.load / mpl.loads), got "
                          f"{type(policy).__name__}")
    folder = os.fspath(folder)
    why = checkpoint_disk_misfit(policy.ir)
    if why:
        raise AttachError(why)
    if not os.path.isdir(folder) or not os.path.isfile(os.path.join(folder, "config.json")):
        raise _refuse(folder, "not a model folder (no config.json): give the folder "
                              "save_pretrained wrote")
    files = checkpoint_files(folder)
    if not files:
        raise _refuse(folder, "has no .safetensors files: the disk tier reads the experts from "
                              "them (a .bin checkpoint: load it whole and attach)")
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = {"experts_implementation": experts_implementation} if experts_implementation else {}
    try:
        cfg = AutoConfig.from_pretrained(folder, local_files_only=True)
    except Exception as e:  # noqa: BLE001 — transformers rejects a config in its own types
        raise _refuse(folder, f"cannot read its config.json: {' '.join(str(e).split())}") from None
    tensors = {}
    try:
        for f in files:
            tensors.update(read_header(f))
    except DiskError as e:
        raise AttachError(str(e)) from None

    # 1. the model on the meta device (at the dtype from_pretrained picks: the config's),
    #    and its MoE layers
    want = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None)
    want = getattr(torch, want, None) if isinstance(want, str) else want
    with init_empty_weights(include_buffers=False):
        shape_only = AutoModelForCausalLM.from_config(
            cfg, **kw, **({"dtype": want} if isinstance(want, torch.dtype) else {}))
    layers = discover(shape_only)          # AttachError: a family attach does not support
    first = layers[0].layer_id
    n_layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    if not n_layers:
        raise _refuse(folder, "its config has no num_hidden_layers: the loader cuts the model "
                              "after its first MoE layer to check the experts")

    # 2. the estimate, before anything is read
    E = layers[0].num_experts
    template = {n: p for n, p in layers[0].module.named_parameters(recurse=False)}
    experts_names = {b.name for b in layers}
    skeleton = sum(t.numel() * t.element_size()
                   for n, t in (*shape_only.named_parameters(), *shape_only.named_buffers())
                   if n.rpartition(".")[0] not in experts_names)
    layer_experts = sum(p.numel() * p.element_size() for p in template.values())
    dev = _resolve_device(device, shape_only)
    if dev.type == "meta":       # no device given, no CUDA: the model runs where it loads
        dev = torch.device("cpu")
    runtime = _runtime_for(policy, layers, shape_only)
    # (the experts are on the meta device here: the bounded default; attach decides again on
    # the loaded weights, with its own memory check)
    transient = pool_stream_slots(stream_slots, layers[0], dev,
                                  passes=runtime.tier_layout is not None or dev.type != "cpu")
    fp = skeleton_load(skeleton, layer_experts, runtime.tier_layout, template,
                       runtime.num_slots + transient + 1, dev)
    why = refusal(fp, f"loading {folder} without its experts", host=host_available(),
                  device=device_free(dev), device_name=str(dev))
    if why:
        raise AttachError(why)
    del shape_only

    # 3a. the probe: the model up to its first MoE layer, loaded by transformers
    cut = AutoConfig.from_pretrained(folder, local_files_only=True)
    cut.num_hidden_layers = first + 1
    for k, v in _layer_lists(cfg, n_layers).items():
        setattr(cut, k, v[:first + 1])
    try:
        with _quiet():
            probe = AutoModelForCausalLM.from_pretrained(folder, config=cut, local_files_only=True,
                                                         **kw)
    except Exception as e:  # noqa: BLE001 — transformers' own loading, reported in one line
        raise _refuse(folder, f"transformers cannot load the model's first "
                              f"{first + 1} layers: {' '.join(str(e).split())}") from None
    pl = discover(probe)
    ref_layer = pl[-1]
    if ref_layer.layer_id != first:
        raise _refuse(folder, f"the first {first + 1} layers loaded have their MoE layer at "
                              f"{ref_layer.layer_id}, not {first}")
    ref_params = {n: p.detach() for n, p in ref_layer.module.named_parameters(recurse=False)}
    dtype = next(iter(ref_params.values())).dtype

    # 3b. the recipes: found from the probe's values, every other layer's checked by shape
    try:
        ref = recipes(tensors, first, ref_params, folder)
        layout = RecordLayout(ref_params)
        known = {first: ref}
        for b in layers:
            if b.layer_id != first:
                known[b.layer_id] = recipes_like(tensors, b.layer_id, ref, layout, E, folder)
    except DiskError as e:
        raise AttachError(str(e)) from None

    # 4. the skeleton, on the meta device, then filled from the checkpoint (and the probe)
    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, **kw)
    layers = discover(model)
    experts_names = {b.name for b in layers}
    probe_sd = {n: t for n, t in probe.state_dict().items()
                if n.rpartition(".")[0] not in {b.name for b in pl}}
    probe_buffers = dict(probe.named_buffers())
    # the dtype transformers gives each weight (a module kept in float32, say): the probe's,
    # for a deeper layer's the probe's of the same name in its layers
    by_rest = {_LAYER.sub(".layers.*.", "." + n): t.dtype for n, t in probe_sd.items()}
    del ref_params, pl, ref_layer
    by_key = _key_map(model, tensors)
    read = _Reader()
    persistent = set(model.state_dict())
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    try:
        for name, t in [*model.named_parameters(remove_duplicate=False),
                        *model.named_buffers(remove_duplicate=False)]:
            is_param = isinstance(t, torch.nn.Parameter)
            if name.rpartition(".")[0] in experts_names:
                continue
            if not is_param and name not in persistent:      # a non-persistent buffer
                if name in probe_buffers:     # (as transformers' load left it)
                    _set(model, name, probe_buffers[name], False)
                continue
            src = by_key.get(name)
            if src is None:
                if name in tied:
                    continue
                raise _refuse(folder, f"no checkpoint tensor maps to the model's '{name}' "
                                      f"{tuple(t.shape)}: the model cannot be loaded without "
                                      f"its experts; load it whole and attach")
            if tuple(src.shape) != tuple(t.shape):
                raise _refuse(folder, f"the checkpoint's {src.key} is {tuple(src.shape)}, the "
                                      f"model's '{name}' {tuple(t.shape)}")
            if name in probe_sd:
                have = probe_sd[name]
                if not torch.equal(read(src, have.dtype), have):
                    raise _refuse(folder, f"the checkpoint's {src.key} is not what "
                                          f"transformers loads as '{name}': the loader cannot "
                                          f"map this family's weights; load it whole and attach")
                value = have.detach()
            else:
                value = read(src, by_rest.get(_LAYER.sub(".layers.*.", "." + name), t.dtype))
            _set(model, name, value, is_param)
    except DiskError as e:
        raise AttachError(str(e)) from None
    del probe, probe_sd
    if tied:
        model.tie_weights()
    left = [n for n, p in model.named_parameters()
            if p.device.type == "meta" and n.rpartition(".")[0] not in experts_names]
    if left:
        raise _refuse(folder, f"the model's '{left[0]}' was not loaded (no checkpoint tensor)")
    model.eval()
    model.config._name_or_path = os.path.abspath(folder)
    try:
        from transformers import GenerationConfig
        if os.path.isfile(os.path.join(folder, "generation_config.json")):
            model.generation_config = GenerationConfig.from_pretrained(folder, local_files_only=True)
    except Exception:  # noqa: BLE001 — a bad generation_config.json: the config's defaults
        pass
    model._mpl_unloaded = Unloaded(os.path.abspath(folder), tuple(sorted(experts_names)), known)
    return attach(policy, model, device=device, readers=readers, stream_slots=stream_slots,
                  check=check)


def _runtime_for(policy, layers, model):
    """The runtime attach will make (for the estimate: its tier layout and slots)."""
    E, K = layers[0].num_experts, layers[0].top_k
    params = dict(layers[0].module.named_parameters(recurse=False))
    kw = {"expert_bytes": sum(p[0].numel() * p.element_size() for p in params.values()),
          "layer_ids": tuple(b.layer_id for b in layers)}
    bits = next(iter(params.values())).element_size() * 8
    kw["stored_bits"] = bits if bits in (16, 32) else None
    try:
        return policy.runtime(len(layers), E, K, **kw)
    except (ValueError, TypeError) as e:
        raise AttachError(f"policy '{policy.name}' cannot run on this model: {e}") from None
