"""A policy checked against the model before the HuggingFace adapter touches it: ``attach``
and ``shadow`` run the engine-neutral preflight (``mpl.mechanism.preflight``) that the vLLM
adapter runs before an engine starts. A misfit is ``mpl.PolicyDoesNotFit`` (also the
adapter's ``AttachError`` and an ``mpl.PolicyError``) carrying the located diagnostics of
the text the policy was loaded from, the same diagnostics vLLM's preflight gives for the
same model's config.json; the model is left as it was. (``mplc run`` renders them:
tests/test_cli_run_engines.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.offload import AttachError, attach, shadow  # noqa: E402
from mpl.offload.models import build_model  # noqa: E402

MISFIT = "policy p {\n    cache {\n        capacity = 8\n        pin = [1, 12]\n    }\n}\n"


@pytest.fixture
def misfit(tmp_path):
    path = tmp_path / "p.moe"
    path.write_text(MISFIT)
    return str(path)


def _unchanged(model, params) -> bool:
    return (not hasattr(model, "_mpl_handle")
            and {n: p for n, p in model.named_parameters()} == params
            and not any(m._forward_pre_hooks for m in model.modules()))


@pytest.mark.parametrize("how", ["attach", "shadow"])
def test_a_misfit_is_located_in_the_policy_file_and_nothing_changes(misfit, how):
    model = build_model("tiny-mixtral")
    params = {n: p for n, p in model.named_parameters()}
    policy = mpl.load(misfit)
    with pytest.raises(mpl.PolicyDoesNotFit) as e:
        (attach if how == "attach" else shadow)(policy, model)
    err = e.value
    assert isinstance(err, AttachError) and isinstance(err, mpl.PolicyError)
    [d] = err.diagnostics
    assert (d.code, d.file, d.span.line, d.span.column) == ("MPL501", misfit, 4, 19)
    assert err.path == misfit and err.text == MISFIT and err.model == "mixtral"
    assert str(err).startswith(f"{misfit}:4:19: MPL501: expert 12 does not exist")
    assert str(err).endswith("(policy 'p' does not fit mixtral: 1 error; the model was not changed)")
    assert _unchanged(model, params)


def test_the_same_diagnostics_as_the_vllm_preflight_for_the_models_config(misfit, tmp_path):
    # vLLM's preflight reads the model folder's config.json before an engine starts; the HF
    # adapter reads the built model: the same rules, the same located diagnostics, one type
    from mpl.vllm.errors import PREFLIGHT

    model = build_model("tiny-mixtral")
    folder = tmp_path / "tiny"
    model.config.to_json_file(str(folder.with_suffix(".json")))
    folder.mkdir()
    folder.joinpath("config.json").write_text(folder.with_suffix(".json").read_text())
    with pytest.raises(mpl.PolicyDoesNotFit) as hf:
        attach(mpl.load(misfit), model)
    text, path, name = PREFLIGHT.policy_source(misfit)
    with pytest.raises(mpl.PolicyDoesNotFit) as vllm:
        PREFLIGHT.check_policy(text, path, name, PREFLIGHT.model_shape(str(folder)))
    where = [(d.code, d.file, d.span) for d in hf.value.diagnostics]
    assert where == [(d.code, d.file, d.span) for d in vllm.value.diagnostics]
    assert str(vllm.value).endswith("the engine was not started)")


def test_policy_text_is_located_in_that_text():
    model = build_model("tiny-olmoe")
    with pytest.raises(mpl.PolicyDoesNotFit) as e:
        attach(mpl.loads("\n\npolicy t { cache { capacity = 4 pin = [99] } }"), model)
    [d] = e.value.diagnostics
    assert (d.code, d.span.line) == ("MPL501", 3) and e.value.path is None
    assert str(e.value).startswith("<text>:3:")


def test_a_sibling_policy_that_does_not_fit_does_not_stop_the_chosen_one(tmp_path):
    path = tmp_path / "two.moe"
    path.write_text("policy big { cache { capacity = 4  pin = [40] } }\n"
                    "policy small { cache { capacity = 4 } }\n"
                    "policy child extends big { cache { capacity = 6 } }\n")
    model = build_model("tiny-mixtral")
    h = attach(mpl.load(str(path), policy="small"), model)
    h.detach()
    with pytest.raises(mpl.PolicyDoesNotFit) as e:       # inherits the misfit from its parent
        attach(mpl.load(str(path), policy="child"), model)
    assert "MPL501" in {d.code for d in e.value.diagnostics}
    assert all(d.span.line in (1, 3) for d in e.value.diagnostics)


def test_model_aware_warnings_stay_on_the_handle():
    model = build_model("tiny-qwen3-moe")                 # top-4
    for how in (attach, shadow):
        h = how(mpl.loads("policy p { cache { capacity = 2 } }"), model)
        h.detach()
        assert "MPL502" in [d.code for d in h.diagnostics]   # a capacity below top-k


def test_the_preflight_and_the_shadow_need_no_torch():
    # vLLM's preflight runs in mplc's own process, which may have no torch: the neutral
    # preflight and shadow import none (the executor and the pool do)
    code = ("import sys, mpl.mechanism.preflight as p, mpl.mechanism.shadow, mpl.vllm.errors\n"
            "p.NEUTRAL.check_policy('policy p { cache { capacity = 4 } }', None, None, None)\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
