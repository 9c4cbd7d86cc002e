"""Training a loaded build: ``backward``, ``optimizer_step``, ``train_step`` and the
trained weights and their gradients, read in place from the arenas
(``ckir_describe()->train.params``)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from ckir.errors import CkirError
from ckir.model.bindings import LoadedBuild


def _check_lr(what: str, lr: float) -> None:
    """CkirError unless ``lr`` is a finite number > 0 (a bool is not a number here)."""
    if not isinstance(lr, float | int) or isinstance(lr, bool) or not np.isfinite(lr) or lr <= 0:
        raise CkirError(f"{what}: lr must be a finite number > 0, got {lr!r}")


class Training(LoadedBuild):
    """The training programs of a build compiled with ``modes`` including ``backward``."""

    @property
    def trainable(self) -> bool:
        """Whether the build has the training programs (``modes`` with ``backward``)."""
        return bool(self.desc.train.backward)

    @property
    def steps(self) -> int:
        """Optimizer steps applied so far (AdamW's bias correction counts them)."""
        return int(self._lib.ckir_train_steps(self._ptr))

    def _ids(self, what: str, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        arr = np.asarray(ids)
        if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
            raise CkirError(f"{what}: expects a non-empty 1-D sequence of int ids")
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= self.vocab_size:
            bad = lo if lo < 0 else hi
            raise CkirError(f"{what}: id {bad} is outside the vocabulary [0, {self.vocab_size})")
        return np.ascontiguousarray(arr, dtype=np.int32)

    def backward(
        self, tokens: Sequence[int] | np.ndarray, targets: Sequence[int] | np.ndarray
    ) -> float:
        """Forward over ``tokens`` from position 0, the mean cross-entropy against
        ``targets`` (same length), and the gradient of every weight (:meth:`gradients`).
        Returns the loss; CkirError when the loss is not finite."""
        if not self.trainable:
            raise CkirError(
                f"{self.build_dir.name}: not compiled for training (compile with modes "
                "including 'backward')"
            )
        tok, tgt = self._ids("backward: tokens", tokens), self._ids("backward: targets", targets)
        if tok.size != tgt.size:
            raise CkirError(
                f"backward: {tok.size} tokens but {tgt.size} targets (one target per token)"
            )
        i32p = ctypes.POINTER(ctypes.c_int32)
        loss = ctypes.c_float(0.0)
        rc = self._lib.ckir_backward(
            self._ptr,
            tok.ctypes.data_as(i32p),
            tgt.ctypes.data_as(i32p),
            tok.size,
            ctypes.byref(loss),
        )
        self._check(rc)
        return float(loss.value)

    def optimizer_step(self, lr: float) -> None:
        """One AdamW step from the gradients of the last :meth:`backward` (global-norm
        clipping as compiled); the KV cache is reset."""
        _check_lr("optimizer_step", lr)
        self._check(self._lib.ckir_optimizer_step(self._ptr, float(lr)))

    def train_step(
        self, tokens: Sequence[int] | np.ndarray, targets: Sequence[int] | np.ndarray, *, lr: float
    ) -> float:
        """:meth:`backward` then :meth:`optimizer_step`; returns the loss of the batch
        (computed before the update).  A non-finite loss raises and leaves the weights."""
        _check_lr("train_step", lr)
        loss = self.backward(tokens, targets)
        self.optimizer_step(lr)
        return loss

    def gradients(self) -> dict[str, np.ndarray]:
        """Weight name (``layers.0.attn.wq``) -> a copy of its gradient from the last
        :meth:`backward` (f32, the weight's shape)."""
        return self._param_copies(1, "grad_offset")

    def largest_weight(self) -> tuple[str, float]:
        """``(name, max |w|)`` of the trained weight with the largest magnitude, or of the
        first one holding a NaN or an infinity (one tensor at a time: never a copy of
        every weight at once)."""
        best = ("", 0.0)
        for p in self._params():
            amax = float(np.abs(self._f32(0, p.weight_offset, p.numel, (p.numel,))).max())
            name = self._param_name(p)
            if not np.isfinite(amax):
                return name, amax
            best = max(best, (name, amax), key=lambda t: t[1])
        return best

    def weights(self) -> dict[str, np.ndarray]:
        """Weight name -> a copy of its current (trained) values, for every trained weight."""
        return self._param_copies(0, "weight_offset")

    def _param_name(self, p: Any) -> str:
        """The manifest name (the weight's source name) of a trained weight's
        ckir_param_desc: the param handle at its offset in the weights arena."""
        names = getattr(self, "_param_names", None)
        if names is None:
            names = {h.offset: n for n, h in self.manifest.items() if h.role == "param"}
            self._param_names = names
        name = names.get(int(p.weight_offset))
        if name is None:
            raise CkirError(
                f"{self.build_dir.name}: trained weight {p.name.decode()} has no param handle "
                "in the manifest; recompile"
            )
        return name

    def _param_copies(self, arena: int, field: str) -> dict[str, np.ndarray]:
        """Weight name -> a copy of the f32 values at ``field`` of its ckir_param_desc in
        ``arena``: the weight (0, ``weight_offset``) or its gradient (1,
        ``grad_offset``), in the weight's shape."""
        out: dict[str, np.ndarray] = {}
        for p in self._params():
            shape = tuple(p.shape[: p.ndim])
            out[self._param_name(p)] = self._f32(arena, getattr(p, field), p.numel, shape).copy()
        return out
