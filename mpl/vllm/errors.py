"""The one error type of the vLLM integration (no vllm import here)."""

from __future__ import annotations


class VllmIntegrationError(RuntimeError):
    """The model, the vLLM build or the engine configuration cannot be recorded, or the
    policy does not fit the model; the message says why and what to do."""
