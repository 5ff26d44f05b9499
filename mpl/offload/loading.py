"""Load a model for the CLI: a tiny preset (built offline), a local HuggingFace model folder
(weights + tokenizer), or a ``config.json`` (random-initialised from it, no weights needed).
Never downloads anything."""

from __future__ import annotations

import os

from mpl.mechanism.footprint import host_available as available_memory

from . import models


class ModelLoadError(ValueError):
    """The model spec cannot be loaded (message says why)."""


class ByteTokenizer:
    """The presets' tokenizer-free path: UTF-8 bytes in, bytes out (ids mod 256)."""
    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return models.encode(text)

    def decode(self, ids) -> str:
        return models.decode(ids)


class HFTokenizer:
    def __init__(self, tok) -> None:
        self.tok = tok
        self.name = type(tok).__name__

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text)["input_ids"]) or [0]

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB"


def estimate(cfg, kw: dict) -> tuple[int, int, str]:
    """(bytes, parameters, dtype name) of the model ``AutoModelForCausalLM.from_config(cfg)``
    would build: the model is built on the meta device (no memory, no initialisation) and
    its parameters and buffers counted."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(cfg, **kw)
    n = nbytes = 0
    dtype = None
    for t in (*meta.parameters(), *meta.buffers()):
        n += t.numel()
        nbytes += t.numel() * t.element_size()
        dtype = dtype or t.dtype
    del meta
    return nbytes, n, str(dtype).replace("torch.", "") if dtype is not None else "?"


def check_fits(spec: str, nbytes: int, params: int | None, dtype: str | None,
               available: int | None) -> None:
    """ModelLoadError, with the numbers and what to do, when a model of ``nbytes`` cannot
    fit in the ``available`` host memory (the whole model is built or loaded on the host
    first; the policy then moves the skeleton to the device). Nothing when unknown."""
    if available is None or nbytes <= available:
        return
    what = (f"{params / 1e9:.2f} B parameters in {dtype}" if params is not None
            else "its weight files")
    if params is None and os.path.isdir(spec):
        raise ModelLoadError(
            f"{spec}: this model needs about {_gb(nbytes)} of host memory loaded whole ({what}), "
            f"more than the {_gb(available)} available; it was not loaded. A policy whose tiers "
            f"end on a disk tier without path serves it without loading its experts (the "
            f"checkpoint's .safetensors files; docs/offload.md, \"A model larger than host "
            f"memory\"); or use a machine with more memory")
    raise ModelLoadError(
        f"{spec}: this model needs about {_gb(nbytes)} of host memory ({what}), more than the "
        f"{_gb(available)} available; it was not built. Use a tiny preset ("
        f"{', '.join(models.PRESETS)}: the same architectures, random weights), a config.json "
        f"with fewer layers or experts, or a machine with more memory")


def load_model(spec: str, *, experts_implementation: str | None = None, seed: int = 0):
    """(model, tokenizer) for ``spec``; ModelLoadError with the known presets otherwise.
    A model that cannot fit in the host's available memory is refused before it is built
    (:func:`check_fits`), not left to the out-of-memory killer."""
    if spec in models.PRESETS:
        model = models.build_model(spec, seed=seed, experts_implementation=experts_implementation)
        return model, ByteTokenizer()
    if not os.path.exists(spec):
        raise ModelLoadError(f"unknown model '{spec}': give a preset ({', '.join(models.PRESETS)}), "
                             f"a local HuggingFace model folder, or a config.json")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = {"experts_implementation": experts_implementation} if experts_implementation else {}
    folder = spec if os.path.isdir(spec) else os.path.dirname(os.path.abspath(spec))
    has_weights = os.path.isdir(spec) and any(
        f.endswith((".safetensors", ".bin")) for f in os.listdir(spec))
    try:
        if has_weights:
            weights = sum(os.path.getsize(os.path.join(spec, f)) for f in os.listdir(spec)
                          if f.endswith((".safetensors", ".bin")))
            check_fits(spec, weights, None, None, available_memory())
            model = AutoModelForCausalLM.from_pretrained(spec, local_files_only=True, **kw)
        else:
            cfg_path = spec if os.path.isfile(spec) else os.path.join(spec, "config.json")
            from mpl.shapes import read_json_file

            cfg_dict = read_json_file(cfg_path, cfg_path, "a HuggingFace config.json")
            if not isinstance(cfg_dict, dict):
                raise ModelLoadError(f"{cfg_path} is not a JSON object: is it a HuggingFace config.json?")
            cfg = AutoConfig.for_model(**cfg_dict) if "model_type" in cfg_dict else None
            if cfg is None:
                raise ModelLoadError(f"{cfg_path} has no model_type: is it a HuggingFace config.json?")
            nbytes, params, dtype = estimate(cfg, kw)
            check_fits(spec, nbytes, params, dtype, available_memory())
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(cfg, **kw)
    except ModelLoadError:
        raise
    except Exception as e:   # noqa: BLE001 — transformers validating a user's config/weights
        # raises its own error types (e.g. huggingface_hub's StrictDataclassClassValidationError,
        # not a ValueError): whatever it rejects is this spec's problem, reported in one line.
        msg = " ".join(str(e).split()) or type(e).__name__
        raise ModelLoadError(f"cannot load a model from {spec}: {msg}") from None
    model.eval()
    return model, tokenizer_for(folder)


def tokenizer_for(folder: str):
    """The tokenizer of a model folder when it has tokenizer files, else bytes as tokens."""
    tok_files = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
    if os.path.isdir(folder) and any(os.path.isfile(os.path.join(folder, f)) for f in tok_files):
        try:
            from transformers import AutoTokenizer
            return HFTokenizer(AutoTokenizer.from_pretrained(folder, local_files_only=True))
        except Exception:            # no tokenizer files: fall back to bytes (documented)
            pass
    return ByteTokenizer()


def loads_without_experts(spec: str, policy) -> bool:
    """Whether ``mplc run --model spec`` loads the model without its experts
    (``mpl.offload.skeleton``): ``spec`` is a model folder with ``.safetensors`` files and
    every set of the policy's tiers ends on a disk tier without ``path`` (the checkpoint's
    files serve the experts; the memory estimate is then the skeleton and the host tier,
    not the weight files)."""
    from mpl.mechanism.checkpoint import checkpoint_files

    if spec in models.PRESETS or not os.path.isdir(spec) or not checkpoint_files(spec):
        return False
    from mpl.mechanism.tiered import checkpoint_disk_misfit
    return checkpoint_disk_misfit(policy.ir) is None
