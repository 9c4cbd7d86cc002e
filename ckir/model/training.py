"""Training a loaded build: ``backward``, ``optimizer_step``, ``train_step`` (one
sequence, or micro-batches whose gradients are accumulated) and the trained weights
and their gradients, read in place from the arenas through the I/O manifest's param
and ``grad.`` handles (:mod:`ckir.model.io_check`).  Tokens and targets are written,
and the loss read, through the ``backward.tokens``, ``backward.targets`` and
``backward.loss`` handles (``ckir_backward_in_arena``)."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ckir.errors import CkirError
from ckir.model import layers
from ckir.model.bindings import LoadedBuild, NonFiniteError
from ckir.model.io_check import TrainedWeight, span, trained_weights
from ckir.model.layers import BackwardStep

#: ``reduce(regions, loss_sum, count) -> (loss_sum, count)`` of :meth:`Training.train_step`
GradientReduce = Callable[[list[np.ndarray], float, int], tuple[float, int]]


def _micro_batches(tokens: Any, targets: Any) -> list[tuple[Any, Any]]:
    """``[(tokens, targets), ...]``: one pair for a 1-D sequence, else one per row of a
    2-D array or per item of a list of sequences."""

    def nested(x: Any) -> bool:
        if isinstance(x, np.ndarray):
            return x.ndim == 2
        return isinstance(x, list | tuple) and len(x) > 0 and hasattr(x[0], "__len__")

    if not nested(tokens) and not nested(targets):
        return [(tokens, targets)]
    if not (nested(tokens) and nested(targets)) or len(tokens) != len(targets):
        raise CkirError(
            "train_step: micro-batches need as many target sequences as token sequences "
            f"(got {len(tokens)} and {len(targets)})"
        )
    if len(tokens) == 0:
        raise CkirError("train_step: expects at least one micro-batch")
    return list(zip(tokens, targets, strict=True))


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

    def _train_ids(
        self, what: str, tokens: Sequence[int] | np.ndarray, targets: Sequence[int] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Tokens and targets checked (a trainable build; ids in the vocabulary; as many
        targets as tokens) as int32."""
        if not self.trainable:
            raise CkirError(
                f"{self.build_dir.name}: not compiled for training (compile with modes "
                "including 'backward')"
            )
        tok, tgt = self._ids(f"{what}: tokens", tokens), self._ids(f"{what}: targets", targets)
        if tok.size != tgt.size:
            raise CkirError(
                f"{what}: {tok.size} tokens but {tgt.size} targets (one target per token)"
            )
        return tok, tgt

    def backward(
        self, tokens: Sequence[int] | np.ndarray, targets: Sequence[int] | np.ndarray
    ) -> float:
        """Forward over ``tokens`` from position 0, the mean cross-entropy against
        ``targets`` (same length), and the gradient of every weight (:meth:`gradients`).
        Returns the loss; CkirError when the loss is not finite."""
        tok, tgt = self._train_ids("backward", tokens, targets)
        loss_h = self.io_handle("backward.loss", "f32", "ckir_backward_in_arena")
        if self._ids_in(tok, tgt) is not None and loss_h is not None:
            self._check(self._lib.ckir_backward_in_arena(self._ptr, tok.size))
            loss = np.empty(1, np.float32)
            self.get_f32(loss_h, 1, loss)  # (the runtime refused a non-finite loss)
            return float(loss[0])
        i32p = ctypes.POINTER(ctypes.c_int32)  # a build without the manifest's steps
        value = ctypes.c_float(0.0)
        rc = self._lib.ckir_backward(
            self._ptr,
            tok.ctypes.data_as(i32p),
            tgt.ctypes.data_as(i32p),
            tok.size,
            ctypes.byref(value),
        )
        self._check(rc)
        return float(value.value)

    def _ids_in(self, tok: np.ndarray, tgt: np.ndarray) -> tuple[Any, Any] | None:
        """Write checked tokens and targets into the arena through the manifest's
        ``backward.tokens`` and ``backward.targets`` handles: pointers to them there, or
        None for a build without the manifest's steps.  Ids beyond the handles' rows are
        left out: the step refuses them, naming the bound."""
        entry = "ckir_backward_in_arena"
        th = self.io_handle("backward.tokens", "i32", entry)
        gh = self.io_handle("backward.targets", "i32", entry)
        if th is None or gh is None:
            return None
        return self.put_ids(th, tok[: th.shape[0]]), self.put_ids(gh, tgt[: gh.shape[0]])

    def backward_layers(
        self, tokens: Sequence[int] | np.ndarray, targets: Sequence[int] | np.ndarray
    ) -> BackwardStep:
        """A :meth:`backward` run one phase at a time (:mod:`ckir.model.layers`): the
        prologue has run; ``run_layer()`` each layer, ``epilogue()`` (the loss),
        ``grad_epilogue()``, ``run_grad_layer()`` each layer (the last first), then
        ``finish()``."""
        tok, tgt = self._train_ids("backward_layers", tokens, targets)
        if not layers.bind_backward(self._lib):
            raise CkirError(
                f"{self.build_dir.name}: this build has no training phase entry points "
                "(compiled by an older ckir): compile it again"
            )
        i32p = ctypes.POINTER(ctypes.c_int32)
        ptrs = self._ids_in(tok, tgt)  # the prologue finds them in place
        tok_p, tgt_p = ptrs or (tok.ctypes.data_as(i32p), tgt.ctypes.data_as(i32p))
        return BackwardStep(self, tok_p, tgt_p, int(tok.size), self._check)

    def optimizer_step(self, lr: float) -> None:
        """One AdamW step from the gradients of the last :meth:`backward` (global-norm
        clipping as compiled); the KV cache is reset."""
        _check_lr("optimizer_step", lr)
        self._check(self._lib.ckir_optimizer_step(self._ptr, float(lr)))

    def train_step(
        self,
        tokens: Sequence[int] | Sequence[Sequence[int]] | np.ndarray,
        targets: Sequence[int] | Sequence[Sequence[int]] | np.ndarray,
        *,
        lr: float,
        reduce: GradientReduce | None = None,
    ) -> float:
        """One AdamW step; returns the loss of the batch (computed before the update).

        ``tokens`` / ``targets``: one sequence (:meth:`backward` then
        :meth:`optimizer_step`), or micro-batches, a list of sequences (lengths may
        differ) or a 2-D array with one per row: their gradients are accumulated
        (:meth:`accumulate`) and averaged over every target, so the update is the one
        of a single batch holding them all (the mean cross-entropy over all targets).

        ``reduce(regions, loss_sum, count) -> (loss_sum, count)``, when given, is
        called before the update with views of the gradient arena (holding this
        process's token-weighted sum, :meth:`accumulate`) and its sums; it combines
        them with other processes' in place (an all-reduce: :mod:`ckir.distributed`)
        and returns the totals.  It gets one f32 view of the state arena from the first
        gradient to the end of the last (the manifest's ``grad.`` handles); the bytes
        between gradients are restored after it.  A non-finite loss raises
        NonFiniteError and leaves the weights (with ``reduce``: on every process, after
        the reduction, so that none waits for ever)."""
        _check_lr("train_step", lr)
        batches = _micro_batches(tokens, targets)
        if len(batches) == 1 and reduce is None:
            loss = self.backward(*batches[0])
            self.optimizer_step(lr)
            return loss
        failure: NonFiniteError | None = None
        try:
            loss_sum, count = self.accumulate(batches)
        except NonFiniteError as err:
            if reduce is None:
                raise
            failure = err
            loss_sum, count = math.nan, sum(int(np.asarray(t).size) for _, t in batches)
        if reduce is not None:
            loss_sum, count = self._reduce(reduce, loss_sum, count)
        if failure is not None:
            raise failure
        if not math.isfinite(loss_sum):
            raise NonFiniteError(
                f"{self.build_dir.name}: the loss is not finite on another process at step "
                f"{self.steps + 1}; weights unchanged"
            )
        self.scale_gradients(count)
        self.optimizer_step(lr)
        return loss_sum / count

    def gradients(self) -> dict[str, np.ndarray]:
        """Weight name (``layers.0.attn.wq``) -> a copy of its gradient from the last
        :meth:`backward` (f32, the weight's shape), read through its ``grad.`` handle."""
        return {w.name: self._handle_array(w.grad).copy() for w in self.trained()}

    def largest_weight(self) -> tuple[str, float]:
        """``(name, max |w|)`` of the trained weight with the largest magnitude, or of the
        first one holding a NaN or an infinity (one tensor at a time: never a copy of
        every weight at once)."""
        best = ("", 0.0)
        for w in self.trained():
            amax = float(np.abs(self._handle_array(w.param)).max())
            if not np.isfinite(amax):
                return w.name, amax
            best = max(best, (w.name, amax), key=lambda t: t[1])
        return best

    def weights(self) -> dict[str, np.ndarray]:
        """Weight name -> a copy of its current (trained) values, for every trained weight
        (read through its param handle)."""
        return {w.name: self._handle_array(w.param).copy() for w in self.trained()}

    def trained(self) -> list[TrainedWeight]:
        """The trained weights, each with the manifest handles of its value, gradient and
        AdamW moments (checked against the runtime's description when the build was
        loaded; none unless trainable)."""
        found = getattr(self, "_trained", None)
        if found is None:
            found = trained_weights(self.build_dir.name, self.desc, self.manifest)
            self._trained = found
        return found

    def gradient_regions(self) -> list[np.ndarray]:
        """Views (no copy) of the state arena's gradients, one f32 array per trained
        weight (its ``grad.`` handle, flat).  Writing them changes what the next
        :meth:`optimizer_step` applies."""
        return [
            self._bytes_view(1, w.grad.offset, w.grad.bytes).view(np.float32)
            for w in self.trained()
        ]

    def _reduce(self, reduce: GradientReduce, loss_sum: float, count: int) -> tuple[float, int]:
        """``reduce`` over one f32 view (no copy) of the state arena from the first
        gradient to the end of the last (one collective per step, not one per weight);
        the bytes between gradients (alignment padding, canaries) are put back after."""
        arena, offset, size, gaps = span(w.grad for w in self.trained())
        raw = self._bytes_view(arena, offset, size)
        kept = [raw[o : o + n].copy() for o, n in gaps]
        try:
            return reduce([raw.view(np.float32)], loss_sum, count)
        finally:
            for (o, n), b in zip(gaps, kept, strict=True):
                raw[o : o + n] = b

    def accumulate(self, batches: Sequence[tuple[Any, Any]]) -> tuple[float, int]:
        """:meth:`backward` over each ``(tokens, targets)`` micro-batch, leaving in the
        gradient arena their token-weighted sum ``sum_i n_i * g_i`` (``n_i`` targets,
        ``g_i`` the gradient of micro-batch ``i``'s mean cross-entropy).  Returns
        ``(sum_i n_i * loss_i, sum_i n_i)``: divided by ``sum_i n_i`` they are the loss
        and gradient of the mean cross-entropy over every target of every micro-batch,
        which is what one batch holding all of them would give.  A micro-batch whose
        loss is not finite raises NonFiniteError (no weight changes)."""
        if not batches:
            raise CkirError("accumulate: expects at least one (tokens, targets) micro-batch")
        regions = self.gradient_regions()
        sums: list[np.ndarray] | None = None  # the running sum, once a second batch comes
        loss_sum, count = 0.0, 0
        for i, (tokens, targets) in enumerate(batches):
            if i == 1:  # the first batch's n * g moves out of the arena (the next overwrites it)
                sums = self._accumulator(regions)
                for acc, r in zip(sums, regions, strict=True):
                    acc[...] = r
            loss = self.backward(tokens, targets)
            n = int(np.asarray(targets).size)
            weight = np.float32(n)
            for j, r in enumerate(regions):
                r *= weight
                if sums is not None:
                    sums[j] += r
            loss_sum += n * loss
            count += n
        if sums is not None:
            for acc, r in zip(sums, regions, strict=True):
                r[...] = acc
        return loss_sum, count

    def _accumulator(self, regions: list[np.ndarray]) -> list[np.ndarray]:
        """f32 arrays shaped like ``regions``, kept for the next accumulated step (a
        second copy of the gradients, allocated once)."""
        found: list[np.ndarray] | None = getattr(self, "_sums", None)
        if found is None or [a.shape for a in found] != [r.shape for r in regions]:
            found = [np.empty_like(r) for r in regions]
            self._sums = found
        return found

    def scale_gradients(self, count: int) -> None:
        """Divide the gradient arena by ``count`` (a token-weighted sum becomes a mean)."""
        divisor = np.float32(count)
        for r in self.gradient_regions():
            r /= divisor
