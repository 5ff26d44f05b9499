"""Model shapes: what the model-aware checks, the synthetic traces, the cost model and
auto_attach need to know about a model, without torch.

``preset(name)`` gives the published shapes of common MoE models; ``from_config(path)`` reads
a HuggingFace ``config.json`` (no download, no transformers import).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

from mpl.fileio import ReadError, decode_text, read_capped


@dataclass(frozen=True)
class ModelShape:
    name: str
    num_layers: int                 # decoder layers
    moe_layers: tuple[int, ...]     # ids of the decoder layers that are MoE
    num_experts: int                # routed experts per MoE layer
    top_k: int
    hidden_size: int
    intermediate_size: int          # per expert (moe_intermediate_size where the model has one)
    bytes_per_param: int = 2        # fp16/bf16
    has_gate: bool = True           # gated (SwiGLU) experts: 3 matrices; else 2
    shared_experts: int = 0
    device_memory_bytes: int | None = None   # when a device is known
    kv_reserve_bytes: int | None = None      # kept for the KV cache (None: the default reserve)
    # everything but the routed experts (embeddings, attention, norms, dense and shared
    # MLPs, routers, the LM head): published totals for the presets, an estimate from a
    # config.json; None: unknown
    skeleton_params: int | None = None

    @property
    def num_moe_layers(self) -> int:
        return len(self.moe_layers)

    @property
    def expert_params(self) -> int:
        mats = 3 if self.has_gate else 2
        return mats * self.hidden_size * self.intermediate_size

    @property
    def expert_bytes(self) -> int:
        return self.expert_params * self.bytes_per_param

    @property
    def expert_flops_per_token(self) -> int:
        return 2 * self.expert_params

    @property
    def total_experts(self) -> int:
        return self.num_moe_layers * self.num_experts

    @property
    def skeleton_bytes(self) -> int:
        """The bytes of everything the device holds besides the expert slots (0: unknown)."""
        return (self.skeleton_params or 0) * self.bytes_per_param

    @property
    def kv_reserve(self) -> int:
        """The device memory kept for the KV cache and activations: the stated reserve, else
        :func:`default_kv_reserve` of the device (0 without a device)."""
        if self.kv_reserve_bytes is not None:
            return self.kv_reserve_bytes
        return default_kv_reserve(self.device_memory_bytes) if self.device_memory_bytes else 0

    @property
    def expert_memory(self) -> int | None:
        """The device memory left for expert slots: the device less the skeleton and the KV
        reserve (None without a device; may be <= 0)."""
        if not self.device_memory_bytes:
            return None
        return self.device_memory_bytes - self.skeleton_bytes - self.kv_reserve

    def with_device_memory(self, nbytes: int | None, kv_reserve: int | None = None) -> "ModelShape":
        """This shape on a device of ``nbytes`` (``kv_reserve``: the bytes kept for the KV
        cache and activations; None: :func:`default_kv_reserve`)."""
        return replace(self, device_memory_bytes=nbytes, kv_reserve_bytes=kv_reserve)


#: the default KV-cache reserve: this share of the device's memory, at least KV_RESERVE_MIN
KV_RESERVE_SHARE = 0.10
KV_RESERVE_MIN = 1 << 30


def default_kv_reserve(device_bytes: int) -> int:
    """The device memory kept for the KV cache and activations when none is stated: 10% of
    the device, at least 1 GiB (short contexts at batch 1; long contexts need more:
    ``mplc check --kv-reserve``)."""
    return max(KV_RESERVE_MIN, int(device_bytes * KV_RESERVE_SHARE))


def _shape(name, layers, first_moe, experts, top_k, hidden, inter, **kw) -> ModelShape:
    return ModelShape(name, layers, tuple(range(first_moe, layers)), experts, top_k, hidden, inter, **kw)


#: Published configurations (from each model's config.json on the HuggingFace hub).
PRESETS: Mapping[str, ModelShape] = MappingProxyType({s.name: s for s in (
    # skeleton_params: the published parameter count less the routed experts'
    _shape("mixtral-8x7b", 32, 0, 8, 2, 4096, 14336, skeleton_params=1_600_000_000),
    _shape("deepseek-v2-lite", 27, 1, 64, 6, 2048, 1408, shared_experts=2,
           skeleton_params=1_311_632_960),
    _shape("qwen1.5-moe-a2.7b", 24, 0, 60, 4, 2048, 1408, shared_experts=1,
           skeleton_params=1_840_000_000),
    _shape("olmoe-1b-7b", 16, 0, 64, 8, 2048, 1024, skeleton_params=480_000_000),
    _shape("qwen3-30b-a3b", 48, 0, 128, 8, 2048, 768, skeleton_params=1_500_000_000),
)})

PRESET_ALIASES: Mapping[str, str] = MappingProxyType({
    "mixtral": "mixtral-8x7b",
    "deepseek": "deepseek-v2-lite",
    "qwen1.5-moe": "qwen1.5-moe-a2.7b",
    "qwen2-moe": "qwen1.5-moe-a2.7b",
    "olmoe": "olmoe-1b-7b",
    "qwen3-moe": "qwen3-30b-a3b",
})


def preset_names() -> tuple[str, ...]:
    return tuple(PRESETS)


def preset(name: str) -> ModelShape | None:
    key = name.strip().lower()
    key = PRESET_ALIASES.get(key, key)
    return PRESETS.get(key)


class ShapeError(ValueError):
    """A model shape could not be determined (message says why)."""


_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "float8_e4m3fn": 1}


def _positive(value, key: str, minimum: int = 1) -> int:
    """A config integer (ShapeError naming the key when it is not a whole number >= minimum)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(f"config: {key} must be an integer, got {value!r}")
    if value < minimum:
        raise ShapeError(f"config: {key} must be >= {minimum}, got {value}")
    return value


def from_config_dict(cfg: dict, name: str = "custom") -> ModelShape:
    """Shape from a HuggingFace config dict (Mixtral, Qwen2/3-MoE, OLMoE, DeepSeek-V2/V3,
    GPT-OSS, and families that use the same keys)."""
    text_cfg = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg

    def first(*keys, default=None):
        for k in keys:
            v = text_cfg.get(k)
            if v is not None:
                return v
        return default

    layers = first("num_hidden_layers", "n_layers", "num_layers")
    experts = first("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
    top_k = first("num_experts_per_tok", "moe_k", "top_k", "num_selected_experts")
    hidden = first("hidden_size", "d_model")
    inter = first("moe_intermediate_size", "expert_intermediate_size", "intermediate_size")
    missing = [n for n, v in (("num_hidden_layers", layers), ("number of experts", experts),
                              ("hidden_size", hidden), ("intermediate_size", inter)) if v is None]
    if missing:
        raise ShapeError(f"config has no {', '.join(missing)}: is it a Mixture-of-Experts model?")
    layers = _positive(layers, "num_hidden_layers")
    experts = _positive(experts, "the number of experts")
    hidden = _positive(hidden, "hidden_size")
    inter = _positive(inter, "intermediate_size")
    top_k = _positive(top_k, "num_experts_per_tok") if top_k is not None else min(2, experts)
    if top_k > experts:
        raise ShapeError(f"config: num_experts_per_tok ({top_k}) is larger than the number of "
                         f"experts ({experts})")
    first_dense = _positive(first("first_k_dense_replace", default=0) or 0, "first_k_dense_replace", 0)
    mlp_only = first("mlp_only_layers", default=[]) or []
    if not isinstance(mlp_only, list) or not all(isinstance(x, int) for x in mlp_only):
        raise ShapeError(f"config: mlp_only_layers must be a list of layer ids, got {mlp_only!r}")
    mlp_only = set(mlp_only)
    step = _positive(first("decoder_sparse_step", default=1) or 1, "decoder_sparse_step")
    moe = tuple(i for i in range(layers)
                if i >= first_dense and i not in mlp_only and (i + 1) % step == 0)
    if not moe:
        raise ShapeError("config: no layer is a Mixture-of-Experts layer (check "
                         "first_k_dense_replace, mlp_only_layers and decoder_sparse_step)")
    dtype = str(first("torch_dtype", "dtype", default="bfloat16")).replace("torch.", "")
    shared = _positive(first("n_shared_experts", default=0) or 0, "n_shared_experts", 0)
    if not shared and first("shared_expert_intermediate_size"):
        shared = 1
    model_type = text_cfg.get("model_type") or cfg.get("model_type") or name
    skeleton = _skeleton_params(first, layers, len(moe), hidden, experts, shared, inter)
    return ModelShape(str(model_type) if name == "custom" else name, layers, moe, experts, top_k,
                      hidden, inter, _DTYPE_BYTES.get(dtype, 2), shared_experts=shared,
                      skeleton_params=skeleton)


def _skeleton_params(first, layers: int, moe: int, hidden: int, experts: int, shared: int,
                     expert_inter: int) -> int | None:
    """An estimate of the parameters besides the routed experts, from a config's keys:
    embeddings and LM head, attention (query, key, value and output projections with the
    config's heads), the dense layers' MLPs, the shared experts and the routers. None when a
    key it needs is not a plain positive number."""
    def num(*keys, default=None):
        v = first(*keys, default=default)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    vocab = num("vocab_size")
    heads = num("num_attention_heads", "n_heads")
    if vocab is None or heads is None:
        return None
    kv = num("num_key_value_heads", default=heads) or heads
    head_dim = num("head_dim", default=hidden // heads) or max(1, hidden // heads)
    tied = first("tie_word_embeddings", default=False) is True
    attention = hidden * head_dim * (2 * heads + 2 * kv)
    dense_inter = num("intermediate_size", default=expert_inter) or expert_inter
    shared_inter = num("shared_expert_intermediate_size",
                       default=(shared or 0) * expert_inter) or 0
    mlp = 3 * hidden
    return (vocab * hidden * (1 if tied else 2) + layers * attention
            + (layers - moe) * mlp * dense_inter + moe * (mlp * shared_inter + hidden * experts))


#: The most bytes a model config.json or a hardware profile may have: real ones are a few
#: KiB; the cap makes a read of an endless file (``/dev/zero``, a pipe) end.
MAX_JSON_BYTES = 4 << 20


class JSONFileError(ValueError):
    """A user-named JSON file that is not text: binary, larger than the cap, not UTF-8 (the
    message names the file as ``read_json_file``'s ``what`` does)."""


def read_json_file(path: str, what: str, kind: str, *, limit: int = MAX_JSON_BYTES):
    """The JSON value in the file ``path``, read in bounded chunks (stopped at the first NUL
    byte or past ``limit`` bytes); a leading UTF-8 byte-order mark is allowed. ``what`` names
    the file in messages, ``kind`` what it should be ("a HuggingFace config.json").
    Raises OSError when it cannot be opened or read, JSONFileError when it is not text,
    ValueError (``json``'s message) when the text is not JSON."""
    with open(path, "rb") as f:
        try:
            text = decode_text(read_capped(f, what, limit=limit, kind=kind), what, kind=kind)
        except ReadError as e:
            raise JSONFileError(str(e)) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def from_config(path: str) -> ModelShape:
    """Shape from a ``config.json`` path (or a folder holding one)."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        cfg = read_json_file(path, path, "a HuggingFace config.json")
    except FileNotFoundError:
        raise ShapeError(f"no such file: {path}") from None
    except JSONFileError as e:
        raise ShapeError(str(e)) from None
    except OSError as e:
        raise ShapeError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:        # not JSON; or open() refusing a path with a NUL character
        raise ShapeError(f"cannot read {path}: {e}") from None
    if not isinstance(cfg, dict):
        raise ShapeError(f"{path} is not a JSON object")
    return from_config_dict(cfg, name=os.path.basename(os.path.dirname(os.path.abspath(path))) or "custom")


def resolve(spec: str) -> ModelShape:
    """A preset name or a config.json path; ShapeError with the known presets otherwise."""
    s = preset(spec)
    if s is not None:
        return s
    if os.path.exists(spec):
        return from_config(spec)
    raise ShapeError(f"unknown model '{spec}': give a preset ({', '.join(PRESETS)}) "
                     f"or the path of a HuggingFace config.json")
