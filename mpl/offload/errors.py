"""The one exception the offload layer raises for things the user can fix."""

from __future__ import annotations

from mpl.api import PolicyError


class AttachError(PolicyError, ValueError):
    """A model or a policy that cannot be attached (message says why and what to do).

    A :class:`mpl.PolicyError` (``.diagnostics`` holds the model-aware diagnostics when the
    policy does not fit the model, else it is empty) and a ``ValueError``. Raised before
    anything on the model changes, or after rolling back, so a failed ``attach`` leaves the
    model as it was.
    """
