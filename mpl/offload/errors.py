"""The one exception the offload layer raises for things the user can fix."""

from __future__ import annotations


class AttachError(ValueError):
    """A model or a policy that cannot be attached (message says why and what to do).

    Raised before anything on the model changes, so a failed ``attach`` leaves the model
    untouched.
    """
