"""A stand-in ``self`` for an experts module: the module's own attributes, except a few
replaced ones (the weight tensors, ``num_experts``). transformers' experts functions take
the module as ``self`` and read ``self.gate_up_proj`` etc.; handing them a view lets them
compute from the slot pool (or the host store) without touching the module.

The replaced attributes live in the view's own ``__dict__``, so the experts function reads
them at plain attribute speed; only the others fall through to the module."""

from __future__ import annotations


class ExpertsView:
    def __init__(self, module, overrides: dict) -> None:
        self.__dict__.update(overrides)
        self.__dict__["_mpl_module"] = module

    def __getattr__(self, name):          # only for names not replaced
        return getattr(self.__dict__["_mpl_module"], name)
