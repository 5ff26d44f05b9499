"""``mplc run --model config.json`` (and ``mplc trace record``) estimate a model's memory
before building it: a model that cannot fit in the host's available memory is refused with
the numbers and what to do, not left to the out-of-memory killer."""

from __future__ import annotations

import json

import pytest

from cli_helpers import clean, mplc

pytest.importorskip("torch")
pytest.importorskip("transformers")

#: Mixtral's architecture at a size no machine holds: 64 layers of 64 experts of
#: 16384 x 65536 (about 13 trillion parameters, 26 TB in bfloat16)
HUGE = {"model_type": "mixtral", "num_hidden_layers": 64, "num_local_experts": 64,
        "num_experts_per_tok": 2, "hidden_size": 16384, "intermediate_size": 65536,
        "num_attention_heads": 128, "num_key_value_heads": 8, "vocab_size": 32000,
        "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("argv", [["run", "std/lru_basic"], ["trace", "record", "-o", "t.mpltrace"]])
def test_a_model_too_large_for_the_host_is_refused_before_it_is_built(tmp_path, argv):
    (tmp_path / "huge").mkdir()
    (tmp_path / "huge" / "config.json").write_text(json.dumps(HUGE))
    r = mplc(*argv, "--model", "huge/config.json", cwd=tmp_path, timeout=300)
    clean(r)
    assert r.returncode == 1
    err = r.stderr
    assert err.startswith(f"mplc {' '.join(argv[:2]) if argv[0] == 'trace' else 'run'}: error: "
                          "huge/config.json: this model needs about ")
    assert " GB of host memory (" in err and "B parameters in bfloat16)" in err
    assert "it was not built" in err and "tiny-mixtral" in err
    assert not (tmp_path / "t.mpltrace").exists()


def test_the_estimate_counts_what_from_config_builds(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    from mpl.offload.loading import estimate

    cfg = AutoConfig.for_model(**{**HUGE, "num_hidden_layers": 2, "num_local_experts": 4,
                                  "hidden_size": 64, "intermediate_size": 128,
                                  "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 100})
    nbytes, params, dtype = estimate(cfg, {})
    model = AutoModelForCausalLM.from_config(cfg)
    tensors = [*model.parameters(), *model.buffers()]
    assert params == sum(t.numel() for t in tensors)
    assert nbytes == sum(t.numel() * t.element_size() for t in tensors)
    assert dtype == str(tensors[0].dtype).replace("torch.", "")
