"""Train a tiny Mixtral-shaped MoE on CPython's standard-library source, byte tokens, so that
its routers learn real, skewed, input-dependent routing (every other model in the tests is
random-initialised and routes near-uniformly).

The data: the top-level ``*.py`` files of the running interpreter's standard library, sorted
by name; every 10th file (by sorted index) is held out. The files are joined with the EOS
token between them. Tokens are bytes (0..255) plus BOS/EOS/PAD. Training draws random
windows of the training stream from a seeded generator; with the same seed, the same data
and the same thread count, two runs give bit-identical weights
(``torch.use_deterministic_algorithms(True)``).

    python benchmarks/train_tiny_moe.py --out benchmarks/models/tiny-moe-stdlib
    python benchmarks/train_tiny_moe.py --steps 20 --out /tmp/x   # a quick check

It writes ``config.json`` + ``model.safetensors`` (fp16), ``meta.json`` (the run: command,
seed, data manifest, bits per byte) and ``heldout_sample.txt`` (a fixed slice of a held-out
file, on which the tests re-measure bits per byte). The README of the shipped folder is
written by hand from meta.json.

Also importable (by file path) as the loader the tests and bench_prediction.py use:
``load(path)``, ``encode(text)``, ``bits_per_byte(model, data)``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import math
import os
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, "models", "tiny-moe-stdlib")
CACHE_DIR = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                         "mpl", "tiny-moe-stdlib")

BOS, EOS, PAD = 256, 257, 258
VOCAB = 259
HELDOUT_EVERY = 10            # files with sorted index % 10 == 0 are held out
SAMPLE_BYTES = 8192           # the shipped held-out slice the tests evaluate

DEFAULTS = dict(seed=0, steps=900, batch=16, seq=256, lr=3e-3, warmup=50, threads=1,
                aux_coef=0.02)


def config(seq: int = 256):
    """The architecture: Mixtral-shaped, hidden 128, 4 layers, 8 experts, top-2."""
    from transformers import MixtralConfig
    return MixtralConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=2, max_position_embeddings=max(512, seq + 1),
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, tie_word_embeddings=False,
        output_router_logits=True, router_aux_loss_coef=DEFAULTS["aux_coef"])


def stdlib_dir() -> str:
    return sysconfig.get_paths()["stdlib"]


def corpus(root: str | None = None):
    """(train files, held-out files): lists of (name, bytes), sorted by name."""
    root = root or stdlib_dir()
    paths = sorted(glob.glob(os.path.join(root, "*.py")))
    if not paths:
        raise SystemExit(f"no *.py files in {root}")
    train, held = [], []
    for i, p in enumerate(paths):
        with open(p, "rb") as f:
            data = f.read()
        (held if i % HELDOUT_EVERY == 0 else train).append((os.path.basename(p), data))
    return train, held


def stream(files) -> list[int]:
    """The files' bytes joined by EOS, as token ids."""
    out: list[int] = []
    for _, data in files:
        out.extend(data)
        out.append(EOS)
    return out


def encode(text: str | bytes) -> list[int]:
    """Token ids of a text: its UTF-8 bytes."""
    return list(text.encode("utf-8") if isinstance(text, str) else text)


def manifest(files) -> dict:
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + data + b"\0")
    return {"files": [n for n, _ in files], "bytes": sum(len(d) for _, d in files),
            "sha256": h.hexdigest()}


def state_hash(model) -> str:
    """SHA-256 over the state dict (names, dtypes, shapes, raw bytes), in name order."""
    import torch
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _setup(seed: int, threads: int):
    import torch
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    return torch


def train(steps: int, seed: int = 0, batch: int = 16, seq: int = 256, lr: float = 3e-3,
          warmup: int = 50, threads: int = 1, files=None, log=None):
    """Train from scratch; returns (model in fp32, last training loss)."""
    torch = _setup(seed, threads)
    from transformers import MixtralForCausalLM
    if files is None:
        files = corpus()[0]
    data = torch.tensor(stream(files), dtype=torch.long)
    model = MixtralForCausalLM(config(seq))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(seed)
    span = torch.arange(seq + 1)
    loss_v = float("nan")
    t0 = time.time()
    for step in range(steps):
        frac = step / max(1, steps)
        scale = min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr * scale
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=gen)
        x = data[starts[:, None] + span]
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_v = float(out.loss.detach())
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"step {step:5d}  loss (CE + aux) {loss_v:.4f}  lr {lr * scale:.2e}  {time.time() - t0:.0f}s")
    model.eval()
    return model, loss_v


def bits_per_byte(model, data: list[int] | bytes, seq: int = 256, batch: int = 16) -> float:
    """Bits per byte of next-byte prediction over ``data``: cut into windows of seq+1 tokens
    (the last one shorter), each predicting its tokens after the first from those before."""
    import torch
    ids = list(data)
    wins = [ids[i:i + seq + 1] for i in range(0, max(1, len(ids) - 1), seq)]
    wins = [w for w in wins if len(w) > 1]
    nats, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(wins), batch):
            group = wins[i:i + batch]
            n = max(len(w) for w in group)
            x = torch.full((len(group), n), PAD, dtype=torch.long)
            for j, w in enumerate(group):
                x[j, :len(w)] = torch.tensor(w)
            mask = x != PAD
            logits = model(input_ids=x, attention_mask=mask.long()).logits.float()
            lp = torch.log_softmax(logits[:, :-1], -1)
            tgt = x[:, 1:]
            m = mask[:, 1:]
            nll = -lp.gather(-1, tgt.clamp(max=VOCAB - 1)[..., None])[..., 0]
            nats += float(nll[m].sum())
            count += int(m.sum())
    return nats / count / math.log(2)


def load(path: str = MODEL_DIR, dtype=None):
    """The saved model, in fp32 (weights are stored in fp16), eval mode, no router logits."""
    import torch
    from transformers import MixtralForCausalLM
    model = MixtralForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    model.config.output_router_logits = False
    model.eval()
    return model


def random_model(seed: int = 0):
    """The same architecture, random-initialised (the contrast to the trained one)."""
    import torch
    from transformers import MixtralForCausalLM
    torch.manual_seed(seed)
    cfg = config()
    cfg.output_router_logits = False
    return MixtralForCausalLM(cfg).eval()


def heldout_sample(held) -> bytes:
    """A fixed slice of the held-out data: the first SAMPLE_BYTES bytes of the largest
    held-out file (name order breaks ties)."""
    name, data = max(held, key=lambda f: (len(f[1]), f[0]))
    return data[:SAMPLE_BYTES]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=CACHE_DIR, help=f"output folder (default {CACHE_DIR})")
    for k, v in DEFAULTS.items():
        if k != "aux_coef":
            ap.add_argument(f"--{k}", type=type(v), default=v)
    ap.add_argument("--eval-bytes", type=int, default=0,
                    help="evaluate on this many held-out bytes (0: all)")
    a = ap.parse_args(argv)
    train_files, held = corpus()
    t0 = time.time()
    model, last = train(a.steps, a.seed, a.batch, a.seq, a.lr, a.warmup, a.threads,
                        files=train_files, log=lambda s: print(s, flush=True))
    train_s = time.time() - t0
    os.makedirs(a.out, exist_ok=True)
    model.config.output_router_logits = False
    model.half().save_pretrained(a.out, safe_serialization=True)
    sample = heldout_sample(held)
    with open(os.path.join(a.out, "heldout_sample.txt"), "wb") as f:
        f.write(sample)
    saved = load(a.out)
    held_ids = stream(held)
    if a.eval_bytes:
        held_ids = held_ids[:a.eval_bytes]
    t1 = time.time()
    bpb = bits_per_byte(saved, held_ids)
    bpb_sample = bits_per_byte(saved, sample)
    import torch
    import transformers
    meta = {
        "command": "python benchmarks/train_tiny_moe.py " + " ".join(
            sys.argv[1:] if argv is None else argv),
        "seed": a.seed, "steps": a.steps, "batch": a.batch, "seq": a.seq, "lr": a.lr,
        "warmup": a.warmup, "threads": a.threads, "aux_coef": DEFAULTS["aux_coef"],
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": sys.version.split()[0], "stdlib": stdlib_dir(),
        "train": manifest(train_files), "heldout": manifest(held),
        "parameters": sum(p.numel() for p in saved.parameters()),
        "last_train_loss_nats": last, "train_seconds": round(train_s, 1),
        "heldout_bytes_evaluated": len(held_ids),
        "heldout_bits_per_byte": round(bpb, 4),
        "sample_bits_per_byte": round(bpb_sample, 4),
        "weights_sha256": state_hash(saved.half()),
    }
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"trained {a.steps} steps in {train_s:.0f}s; held-out {len(held_ids):,} bytes: "
          f"{bpb:.4f} bits/byte (sample {bpb_sample:.4f}; eval {time.time() - t1:.0f}s) -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
