"""The exceptions the offload layer raises for things the user can fix, and its preflight."""

from __future__ import annotations

from mpl.diagnostics import PolicyError
from mpl.mechanism import preflight


class AttachError(PolicyError, ValueError):
    """A model or a policy that cannot be attached (message says why and what to do).

    A :class:`mpl.PolicyError` (``.diagnostics`` holds the model-aware diagnostics when the
    policy does not fit the model, else it is empty) and a ``ValueError``. Raised before
    anything on the model changes, or after rolling back, so a failed ``attach`` leaves the
    model as it was.
    """


class PolicyDoesNotFit(preflight.PolicyDoesNotFit, AttachError):
    """The policy has errors for this model (``.diagnostics``, located in the text the
    policy was loaded from): the engine-neutral
    :class:`mpl.mechanism.preflight.PolicyDoesNotFit` (what the vLLM adapter raises too) and
    an :class:`AttachError`."""


#: the checks of a policy against the model's shape, made by attach and shadow before
#: anything on the model changes
PREFLIGHT = preflight.Checks(error=AttachError, does_not_fit=PolicyDoesNotFit,
                             consequence="the model was not changed")
