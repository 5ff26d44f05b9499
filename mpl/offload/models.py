"""Tiny random-initialised MoE models, built offline from transformers configs, for tests,
``mplc run --model tiny-...`` and ``mplc demo``.

Every preset has a fixed seed, a 256-token vocabulary and no tokenizer: a prompt becomes
token ids by its UTF-8 bytes (byte ``b`` -> id ``b``), generated ids become text the same way
back (invalid UTF-8 is replaced). Output of a random model is gibberish; what matters is that
it is deterministic and identical with and without a policy.
"""

from __future__ import annotations

VOCAB = 256

_COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=32, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0,
               bos_token_id=1, eos_token_id=None, tie_word_embeddings=False)

#: preset name -> (transformers model_type, config overrides)
PRESETS: dict[str, tuple[str, dict]] = {
    "tiny-mixtral": ("mixtral", dict(num_local_experts=8, num_experts_per_tok=2)),
    "tiny-qwen2-moe": ("qwen2_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                                         shared_expert_intermediate_size=32, decoder_sparse_step=1,
                                         mlp_only_layers=[])),
    "tiny-qwen3-moe": ("qwen3_moe", dict(num_experts=8, num_experts_per_tok=4, moe_intermediate_size=16,
                                         head_dim=8, decoder_sparse_step=1, mlp_only_layers=[])),
    "tiny-olmoe": ("olmoe", dict(num_experts=8, num_experts_per_tok=2)),
    "tiny-deepseek-v2": ("deepseek_v2", dict(n_routed_experts=8, num_experts_per_tok=3, n_shared_experts=1,
                                             first_k_dense_replace=1, moe_intermediate_size=16,
                                             kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8,
                                             qk_nope_head_dim=8, v_head_dim=8, topk_method="greedy",
                                             num_key_value_heads=4)),
    "tiny-deepseek-v3": ("deepseek_v3", dict(n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                                             n_group=4, topk_group=2, first_k_dense_replace=1,
                                             moe_intermediate_size=16, kv_lora_rank=16, q_lora_rank=None,
                                             qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
                                             num_key_value_heads=4)),
    "tiny-gpt-oss": ("gpt_oss", dict(num_local_experts=8, num_experts_per_tok=2, head_dim=8,
                                     max_position_embeddings=131072,
                                     layer_types=None, sliding_window=16)),
}


def preset_names() -> tuple[str, ...]:
    return tuple(PRESETS)


#: the config keys that name a model's routed experts per layer, as transformers' MoE
#: families spell them
EXPERTS_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")


def with_experts(name: str, n: int) -> dict:
    """The :func:`build_model` override that gives preset ``name`` ``n`` routed experts per
    layer (its family's own config key)."""
    kw = PRESETS[name][1]
    return {next(k for k in EXPERTS_KEYS if k in kw): n}


def build_config(name: str, *, layers: int = 3, experts_implementation: str | None = None, **overrides):
    from transformers import AutoConfig

    if name not in PRESETS:
        raise KeyError(f"unknown model preset '{name}': known presets are {', '.join(PRESETS)}")
    model_type, kw = PRESETS[name]
    args = {**_COMMON, **kw, "num_hidden_layers": layers, **overrides}
    if model_type == "gpt_oss" and args.get("layer_types") is None:
        args["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention"
                               for i in range(layers)]
    cfg = AutoConfig.for_model(model_type, **args)
    if experts_implementation is not None:
        cfg._experts_implementation = experts_implementation
    return cfg


def build_model(name: str, *, seed: int = 0, layers: int = 3, dtype=None,
                experts_implementation: str | None = None, **overrides):
    """A tiny random-initialised model of preset ``name``, in eval mode, deterministic."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = build_config(name, layers=layers, **overrides)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        kw = {"experts_implementation": experts_implementation} if experts_implementation else {}
        model = AutoModelForCausalLM.from_config(cfg, **kw)
        # transformers' init leaves routers at zero / experts at N(0, 0.02): spread them so
        # routing is varied and every expert matters in a tiny model
        with torch.no_grad():
            for n, p in model.named_parameters():
                if p.dim() >= 2 and ("gate" in n or "router" in n or "experts" in n):
                    p.normal_(0.0, 0.3)
                elif n.endswith("bias") and ("router" in n or "experts" in n):
                    p.normal_(0.0, 0.1)
                elif n.endswith("e_score_correction_bias"):
                    p.normal_(0.0, 0.1)
    finally:
        torch.random.set_rng_state(state)
    if dtype is not None:
        model = model.to(dtype)
    model.eval()
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    return model


def encode(prompt: str) -> list[int]:
    """Prompt -> token ids by UTF-8 bytes (the tiny presets' tokenizer-free path)."""
    ids = list(prompt.encode("utf-8"))
    return ids or [1]


def decode(ids) -> str:
    return bytes(int(i) % VOCAB for i in ids).decode("utf-8", errors="replace")
