"""The arguments of ``dispatch()`` / ``hits()``: checked and converted, one implementation for
both backends.

A dispatch tests its arguments cheaply first (the generated module's ``dispatch``; the
compiled engine's ``conv_fast`` in mpl/runtime/c/engine.c) and comes here only when a test
fails or an argument has an unusual type (a numpy integer layer, a tuple of ids, int
weights). What is usable is converted; the rest raises DispatchError, before the runtime's
lock is taken and before any state changes. What a conversion runs (``__index__``,
``__float__``, an iterator) runs here, on copies: it cannot change what the decisions read.

The checks run in this order, and the first failure is the one reported: layer, the experts'
container, each id's type, the ids' range, weights, tokens, step, predictions.
"""

from __future__ import annotations

import operator

from mpl.runtime.errors import DispatchError

#: the runtime's counters' limits (both backends): steps a caller gives or the runtime counts
#: stay within 2^62, token counts within 2^53 (exact as floats: the hybrid schedule compares
#: them with a float limit); beyond, a DispatchError
STEP_MAX = 1 << 62
TOKENS_MAX = 1 << 53


def layer(value, num_layers: int) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        i = operator.index(value)
    except TypeError:
        raise DispatchError(f"layer must be an integer, got {value!r}") from None
    if not 0 <= i < num_layers:
        raise DispatchError(f"layer {i!r} is out of range: this runtime has MoE layers "
                            f"0..{num_layers - 1}")
    return i


def id_list(experts) -> list:
    """The experts' container as a list of its own."""
    if isinstance(experts, (str, bytes, bytearray, dict)) or experts is None:
        raise DispatchError(f"experts must be a list of expert ids, got {experts!r}")
    try:
        return list(experts)
    except TypeError:
        raise DispatchError(f"experts must be a list of expert ids, got {experts!r}") from None


def ids(experts) -> list:
    """The ids as Python ints: a numpy integer (an array's elements) is converted; a bool, a
    float (even 4.0), or anything else that is not an integer is refused, although Python
    would let it stand for an int in a set or dict."""
    out = []
    for e in tuple(experts):     # (a copy: an __index__ below cannot change what is read)
        if type(e) is not int:
            if isinstance(e, (bool, float)):
                raise DispatchError(f"expert ids must be integers, got {e!r}")
            try:
                e = operator.index(e)
            except TypeError:
                raise DispatchError(f"expert ids must be integers, got {e!r}") from None
        out.append(e)
    return out


def bad_experts(experts, num_experts: int) -> None:
    """DispatchError for the first id that is not an int, else the first out of range."""
    top = num_experts - 1
    for e in experts:
        if type(e) is not int:   # predictions: ids are not converted
            raise DispatchError(f"expert ids must be integers, got {e!r}")
        if not 0 <= e <= top:
            raise DispatchError(f"expert id {e} is out of range: the model has "
                                f"{num_experts} experts per layer (ids 0..{top})")


def weights(values, n: int) -> list:
    if isinstance(values, (str, bytes, bytearray, dict)):
        raise DispatchError(f"weights must be a list of numbers, got {values!r}")
    try:
        out = list(values)
    except TypeError:
        raise DispatchError(f"weights must be a list of numbers (or None), got {values!r}") from None
    if len(out) != n:
        raise DispatchError(f"{len(out)} router weights for {n} experts: give one weight per expert")
    vals = []
    for x in out:
        try:
            if isinstance(x, (str, bytes)):
                raise TypeError
            f = float(x)                     # numpy floats and ints too
        except (TypeError, ValueError, OverflowError):
            raise DispatchError(f"router weights must be finite numbers, got {x!r}") from None
        if f * 0.0 != 0.0:                   # a NaN or an infinity
            raise DispatchError(f"router weights must be finite numbers, got {x!r}")
        vals.append(f)
    return vals


def tokens(value, n: int) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        t = operator.index(value)      # a numpy integer is converted
    except TypeError:
        raise DispatchError(f"tokens must be an integer >= 1, got {value!r}") from None
    if t > TOKENS_MAX:
        raise DispatchError(f"tokens must be at most 2**53, got {t}")
    if t == 0 and n == 0:      # an empty batch routes nothing
        return t
    if t < 1:
        raise DispatchError(f"tokens must be >= 1, got {t}")
    return t


def step(value) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        s = operator.index(value)        # a numpy integer is converted
    except TypeError:
        s = -1
    if s < 0:
        raise DispatchError(f"step must be a non-negative integer (or None), got {value!r}")
    if s > STEP_MAX:
        raise DispatchError(f"step must be at most 2**62, got {s}")
    return s


def predictions(value, num_layers: int, num_experts: int) -> dict:
    """The predictions as a dict of lists of their own (what the dispatch reads later cannot
    be changed by anyone), or DispatchError. Layers and ids are not converted: they must be
    ints."""
    if not isinstance(value, dict):
        raise DispatchError(f"predictions must be a dict of layer -> expert ids, got "
                            f"{type(value).__name__}")
    out = {}
    for at, got in list(value.items()):
        if type(at) is not int or not 0 <= at < num_layers:
            raise DispatchError(f"predictions name layer {at!r}: this runtime has MoE "
                                f"layers 0..{num_layers - 1}")
        if isinstance(got, (str, bytes, bytearray, dict)):
            raise DispatchError(f"predictions for layer {at} must be a list of expert ids")
        try:
            got = list(got)
        except TypeError:
            raise DispatchError(f"predictions for layer {at} must be a list of expert "
                                f"ids, got {got!r}") from None
        if not all(type(e) is int and 0 <= e < num_experts for e in got):
            try:
                bad_experts(got, num_experts)
            except DispatchError as e:
                raise DispatchError(f"predictions for layer {at}: {e}") from None
        out[at] = got
    return out


def normalize(num_layers: int, num_experts: int, layer_, experts, weights_=None, tokens_=1,
              step_=None, predictions_=None) -> tuple:
    """A whole call's arguments, checked in order and converted: ``(layer, experts, weights or
    None, tokens, step or None, predictions or None)``, every container a new one of exact
    types (the compiled engine's slow path: it reads the result without running any more
    Python code)."""
    if type(layer_) is not int or not 0 <= layer_ < num_layers:
        layer_ = layer(layer_, num_layers)
    experts = id_list(experts)
    for e in experts:
        if type(e) is not int:
            experts = ids(experts)
            break
    if experts and (min(experts) < 0 or max(experts) >= num_experts):
        bad_experts(experts, num_experts)
    n = len(experts)
    if weights_ is not None:
        if type(weights_) is list and len(weights_) == n:
            for x in weights_:
                if type(x) is not float or x - x != 0.0:
                    weights_ = weights(weights_, n)
                    break
            else:
                weights_ = weights_.copy()
        else:
            weights_ = weights(weights_, n)
    if type(tokens_) is not int or not 1 <= tokens_ <= TOKENS_MAX:
        tokens_ = tokens(tokens_, n)
    if step_ is not None and (type(step_) is not int or not 0 <= step_ <= STEP_MAX):
        step_ = step(step_)
    predictions_ = predictions(predictions_, num_layers, num_experts) if predictions_ else None
    return layer_, experts, weights_, tokens_, step_, predictions_
