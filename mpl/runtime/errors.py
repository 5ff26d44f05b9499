"""The errors a runtime raises, shared by both backends (the compiled engine raises these very
classes: mpl.runtime.compiled hands them to it)."""

from __future__ import annotations


class RuntimeConfigError(ValueError):
    """The runtime cannot be built for this model shape (e.g. a budget too small), or a value
    given to ``set`` is not one of its parameter."""


class DispatchError(ValueError):
    """A dispatch the runtime cannot take (layer out of range, weights not aligned)."""
