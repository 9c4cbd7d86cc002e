"""A step run one layer at a time, over the phase entry points of the generated C
(docs/runtime.md, "Running one layer at a time").

    step = model.prefill_layers([1, 2, 3])   # the checks of prefill, then the prologue
    for i in range(model.n_layers):
        h = step.run_layer()                 # layer i; its hidden state [T, E], a copy
    logits = step.finish()                   # the epilogue: what prefill returns

``model.decode_layers(token)`` is the same for one decode step (``finish`` returns
[V]).  A step may stop early: drop it, and the next step (or ``reset``) starts
over; the position moves on only when ``finish`` runs.  Layers must run in order,
and the C refuses anything else with a message naming the phase that is next.

A training step (a build compiled with ``backward``) runs its phases the same way,
the forward ones and then the gradients' in reverse:

    step = model.backward_layers(tokens, targets)   # the checks, then the prologue
    for i in range(model.n_layers):
        step.run_layer()                             # layer i
    loss = step.epilogue()                           # final norm, lm_head, the loss
    step.grad_epilogue()
    for i in reversed(range(model.n_layers)):
        step.run_grad_layer()                        # layer i's gradients
    loss = step.finish()                             # the embedding's: what backward returns
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ckir.errors import CkirError

i32p = ctypes.POINTER(ctypes.c_int32)


def bind(lib: Any, mode: str) -> bool:
    """Declare the phase entry points of ``mode``; False for a build without them."""
    names = [f"ckir_{mode}_{p}" for p in ("prologue", "layer", "epilogue", "hidden")]
    if not all(hasattr(lib, n) for n in [*names, "ckir_hidden_size"]):
        return False
    prologue, layer, epilogue, hidden = (getattr(lib, n) for n in names)
    prologue.argtypes = [ctypes.c_void_p, i32p, ctypes.c_int64]
    layer.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    epilogue.argtypes = [ctypes.c_void_p]
    hidden.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    hidden.restype = ctypes.POINTER(ctypes.c_float)
    lib.ckir_hidden_size.restype = ctypes.c_int64
    lib.ckir_hidden_size.argtypes = []
    return True


#: the training step's phase entry points: (name, argtypes)
_BACKWARD_PHASES: dict[str, list[Any]] = {
    "prologue": [ctypes.c_void_p, i32p, i32p, ctypes.c_int64],
    "layer": [ctypes.c_void_p, ctypes.c_int64],
    "epilogue": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)],
    "grad_epilogue": [ctypes.c_void_p],
    "grad_layer": [ctypes.c_void_p, ctypes.c_int64],
    "grad_prologue": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)],
}


def bind_backward(lib: Any) -> bool:
    """Declare the training step's phase entry points; False for a build without them."""
    fns = [getattr(lib, f"ckir_backward_{p}", None) for p in _BACKWARD_PHASES]
    if any(fn is None for fn in fns):
        return False
    for fn, argtypes in zip(fns, _BACKWARD_PHASES.values(), strict=True):
        fn.argtypes = argtypes
    return True


class LayerStep:
    """One prefill or decode step in progress (made by ``prefill_layers`` /
    ``decode_layers``); its prologue has run."""

    def __init__(
        self,
        model: Any,
        mode: str,
        tokens: np.ndarray,
        check: Callable[[int], None],
        logits: Callable[[str, int], np.ndarray],
        in_arena: Any = None,
    ) -> None:
        """``in_arena``: a pointer to ``tokens`` already written into the arena (through
        the manifest's handle), which the prologue then finds in place."""
        self._model, self._mode, self._check, self._logits = model, mode, check, logits
        self._lib = model._lib
        self.n_layers = int(model.n_layers)
        self.width = int(self._lib.ckir_hidden_size())
        self.next_layer = 0
        self._done = False
        self.rows = int(tokens.size)
        ptr = tokens.ctypes.data_as(i32p) if in_arena is None else in_arena
        self._check(getattr(self._lib, f"ckir_{mode}_prologue")(model._ptr, ptr, self.rows))

    def run_layer(self) -> np.ndarray:
        """Run the next layer; its hidden state (the residual stream it hands on,
        [T, E] float32, a copy)."""
        if self._done:
            raise CkirError(f"{self._mode}_layers: the step has finished")
        if self.next_layer >= self.n_layers:
            raise CkirError(
                f"{self._mode}_layers: all {self.n_layers} layers have run; call finish()"
            )
        i = self.next_layer
        self._check(getattr(self._lib, f"ckir_{self._mode}_layer")(self._model._ptr, i))
        self.next_layer += 1
        return self.hidden(i)

    def hidden(self, layer: int) -> np.ndarray:
        """The hidden state layer ``layer`` handed on, while the next phase has not
        overwritten it ([T, E] float32, a copy)."""
        ptr = getattr(self._lib, f"ckir_{self._mode}_hidden")(self._model._ptr, layer)
        if not ptr:
            raise CkirError(f"{self._mode}_layers: layer {layer} has no hidden state here")
        size = self.rows * self.width
        return np.ctypeslib.as_array(ptr, shape=(size,)).reshape(self.rows, self.width).copy()

    def finish(self) -> np.ndarray:
        """Run the epilogue (after every layer): the logits the whole step returns."""
        if self._done:
            raise CkirError(f"{self._mode}_layers: the step has finished")
        self._check(getattr(self._lib, f"ckir_{self._mode}_epilogue")(self._model._ptr))
        self._done = True
        out = self._logits(self._mode, self.rows)
        return out if self._mode == "prefill" else out[0]


class BackwardStep:
    """One training step in progress (made by ``backward_layers``); its prologue has
    run.  Its phases in order: :meth:`run_layer` per layer, :meth:`epilogue`,
    :meth:`grad_epilogue`, :meth:`run_grad_layer` per layer (the last first),
    :meth:`finish`; then the gradients are what ``backward`` leaves."""

    def __init__(
        self,
        model: Any,
        tokens: ctypes.c_void_p | int,
        targets: ctypes.c_void_p | int,
        rows: int,
        check: Callable[[int], None],
    ) -> None:
        self._model, self._check = model, check
        self._lib = model._lib
        self.rows = rows
        self.n_layers = int(model.n_layers)
        #: the next forward layer to run, then (after the grad epilogue) the next
        #: layer whose gradients run
        self.next_layer = 0
        self.next_grad_layer = self.n_layers - 1
        self._loss = ctypes.c_float(0.0)
        self._done = False
        self._check(self._lib.ckir_backward_prologue(model._ptr, tokens, targets, rows))

    def _call(self, phase: str, *args: Any) -> None:
        if self._done:
            raise CkirError("backward_layers: the step has finished")
        self._check(getattr(self._lib, f"ckir_backward_{phase}")(self._model._ptr, *args))

    def run_layer(self) -> None:
        """Run the next forward layer (0 first)."""
        if self.next_layer >= self.n_layers:
            raise CkirError(
                f"backward_layers: all {self.n_layers} layers have run; call epilogue()"
            )
        self._call("layer", self.next_layer)
        self.next_layer += 1

    def epilogue(self) -> float:
        """Run the forward epilogue (after every layer): the loss of the step."""
        self._call("epilogue", ctypes.byref(self._loss))
        return float(self._loss.value)

    def grad_epilogue(self) -> None:
        """Run the epilogue's gradients (lm_head, final norm)."""
        self._call("grad_epilogue")

    def run_grad_layer(self) -> None:
        """Run the gradients of the next layer (the last layer first)."""
        if self.next_grad_layer < 0:
            raise CkirError("backward_layers: every layer's gradients have run; call finish()")
        self._call("grad_layer", self.next_grad_layer)
        self.next_grad_layer -= 1

    def finish(self) -> float:
        """Run the prologue's gradients (the embedding's), ending the step: the loss, as
        ``backward`` returns it; the gradients are readable (``gradients()``)."""
        self._call("grad_prologue", ctypes.byref(self._loss))
        self._done = True
        return float(self._loss.value)
