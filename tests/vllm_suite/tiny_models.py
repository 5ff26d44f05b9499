"""Tiny random-initialised MoE models saved as local HuggingFace folders (config, float32
safetensors, a tokenizer trained offline with ``tokenizers``) for the vLLM tests. Nothing
is downloaded."""

from __future__ import annotations

import os

VOCAB = 512

_COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_attention_heads=2,
               num_key_value_heads=1, head_dim=32, max_position_embeddings=512, pad_token_id=0,
               bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
               torch_dtype="float32")

#: name -> (transformers model_type, config overrides)
SHAPES: dict[str, tuple[str, dict]] = {
    "qwen3-moe": ("qwen3_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                    decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)),
    "mixtral": ("mixtral", dict(num_local_experts=8, num_experts_per_tok=2)),
    "qwen3-dense": ("qwen3", dict()),
}

_CORPUS = ["the quick brown fox jumps over the lazy dog", "hello world", "mixture of experts",
           "a policy decides which experts stay cached", "routing traces record every layer"]


def _tokenizer(path: str) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 20, trainer)
    from tokenizers import decoders
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>")
    fast.save_pretrained(path)


def build(name: str, path: str, *, layers: int = 3, seed: int = 0, **overrides):
    """Build the tiny model ``name`` into folder ``path`` (once); returns ``path``.
    ``overrides``: config fields to change (the benchmarks' larger shapes)."""
    if os.path.isfile(os.path.join(path, "config.json")):
        return path
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, kw = SHAPES[name]
    cfg = AutoConfig.for_model(model_type, **{**_COMMON, **kw, **overrides, "num_hidden_layers": layers})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():   # spread routers and experts so routing varies in a tiny model
        for n, p in model.named_parameters():
            if p.dim() >= 2 and ("gate" in n or "router" in n or "experts" in n):
                p.normal_(0.0, 0.3)
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    _tokenizer(path)
    return path
