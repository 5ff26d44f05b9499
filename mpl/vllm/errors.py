"""The error types of the vLLM integration, and its preflight (no vllm import here)."""

from __future__ import annotations

from mpl.mechanism import preflight


class VllmIntegrationError(RuntimeError):
    """The model, the vLLM build or the engine configuration cannot be recorded, or the
    policy does not fit the model; the message says why and what to do."""


class PolicyDoesNotFit(preflight.PolicyDoesNotFit, VllmIntegrationError):
    """The policy has errors for this model; ``.diagnostics`` holds them (located). The
    engine-neutral :class:`mpl.mechanism.preflight.PolicyDoesNotFit` (what the HuggingFace
    adapter raises too), and a :class:`VllmIntegrationError`."""


#: the checks of a policy against the model, made before an engine starts (the main
#: process: the model folder's config.json) and in each worker (the config vLLM loaded)
PREFLIGHT = preflight.Checks(error=VllmIntegrationError, does_not_fit=PolicyDoesNotFit,
                             consequence="the engine was not started")
