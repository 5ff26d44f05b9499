"""Random policy texts drawn from the schema (tests/policy_texts.py), attached live to the tiny
models of every family under every experts implementation, as a user's file is: what the
checker accepts either attaches or is refused with a located reason (``AttachError``,
``PolicyDoesNotFit``), never another error; an attached policy generates, with the unmodified
model's tokens and logits bit for bit when it computes nothing approximately and nothing on the
CPU, the mechanism's copies equal to the runtime's loads, a replay of the routing recorded in
the run makes the same decisions, and detach() gives the model back exactly. A disk tier gets a
folder of its own to write its experts to. (Not compared with the replay, by design: a `hybrid`
schedule, whose choice follows the cost model, a `stall_ms` condition, which follows time, and
an explicit `expert_size_gb`, which a replay takes and a live run measures.)"""

from __future__ import annotations

import random
import tempfile

import pytest
from hypothesis import HealthCheck, given, strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.checker import analyze  # noqa: E402
from mpl.features import features  # noqa: E402
from mpl.mechanism.preflight import PolicyDoesNotFit  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import PRESETS, build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from offload_helpers import IMPLS, generate, replayed  # noqa: E402
from property_profiles import prop  # noqa: E402
from policy_texts import Texts  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Any policy, the same bits.")])
_MODELS: dict = {}


def model_and_reference(family: str, impl: str):
    """One model per (family, implementation) for the whole run, and its own generation."""
    if (family, impl) not in _MODELS:
        model = build_model(family, experts_implementation=impl)
        _MODELS[family, impl] = (model, generate(model, PROMPT, 4))
    return _MODELS[family, impl]


@prop(15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.data_too_large])
@given(st.integers(0, 2**32 - 1), st.sampled_from(sorted(PRESETS)), st.sampled_from(IMPLS))
def test_a_policy_text_attaches_or_is_refused_located_and_keeps_its_promises(seed, family, impl):
    text = Texts(random.Random(seed)).policy()
    if any(d.is_error for d in analyze(text, None).diagnostics):
        return
    model, (ref_seq, ref_logits) = model_and_reference(family, impl)
    with tempfile.TemporaryDirectory(prefix="mpl-texts-") as folder:
        policy = mpl.loads(text.replace("location = disk", f'location = disk  path = "{folder}"'))
        try:
            h = policy.attach(model)
        except (AttachError, PolicyDoesNotFit) as e:
            assert str(e).strip()
            return
        try:
            with Recorder(model) as rec:
                seq, logits = generate(model, PROMPT, 4)
            st_ = h.get_stats()
        finally:
            h.detach()
        if not ("hybrid" in features(policy.ir).modes or "stall_ms" in text
                or "expert_size_gb" in text):
            rs = replayed(policy, rec.trace(), h.shape)
            for k in ("accesses", "loads", "evictions", "streamed", "bytes_loaded",
                      "cpu_computes", "prefetch_issued", "prefetch_useful", "tiers"):
                assert rs.get(k) == st_.get(k), (k, text)
    if not st_.get("approximate_computes") and not st_["cpu_computes"]:
        assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits), text
    assert st_["mechanism"]["copies"] == st_["loads"], text
    again = generate(model, PROMPT, 4)
    assert torch.equal(again[0], ref_seq) and torch.equal(again[1], ref_logits)
