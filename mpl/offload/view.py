"""A stand-in ``self`` for an experts module: the module's own attributes, except a few
replaced ones (the weight tensors, ``num_experts``). transformers' experts functions take
the module as ``self`` and read ``self.gate_up_proj`` etc.; handing them a view lets them
compute from the slot pool (or the host store) without touching the module."""

from __future__ import annotations


class ExpertsView:
    __slots__ = ("_module", "_over")

    def __init__(self, module, overrides: dict) -> None:
        self._module = module
        self._over = overrides

    def __getattr__(self, name):
        over = self._over
        if name in over:
            return over[name]
        return getattr(self._module, name)
