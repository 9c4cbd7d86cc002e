"""Inference on a loaded build: ``prefill``, ``decode``, ``reset`` and the logits.

Tokens are written into the state arena, and logits read from it, through the I/O
manifest's handles (``prefill.tokens``, ``prefill.logits``, ``decode.tokens``,
``decode.logits``: docs/manifest.md); the step runs on them in place
(``ckir_<mode>_in_arena``).  Builds without those entry points (an older ckir) run
through the convention entry points (``ckir_prefill``, ``ckir_copy_logits``).  Logits
are checked for NaN / Inf before they are handed out, and a dropped [T, V]
logits array is reused by the next call (:meth:`Inference._logits_array`).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ckir.errors import CkirError, is_int
from ckir.model import layers
from ckir.model.bindings import LoadedBuild
from ckir.model.layers import LayerStep

#: logits arrays of at least this many bytes are reused between calls once their caller
#: has dropped them (Inference._logits_array); CPython's reference counts say when
REUSE_MIN_BYTES = 1 << 20
PAGE_BYTES = 4096


class _Holder:
    spare: object = None


def _alone_refs() -> int:
    """sys.getrefcount of an object held by one attribute and read into a local, as
    Inference._logits_array reads its spare: what nothing else holding it looks like
    on this interpreter (the count of the call's own argument differs between
    versions)."""
    holder = _Holder()
    holder.spare = object()
    spare = holder.spare
    return sys.getrefcount(spare)


#: reuse only where reference counts are exact (CPython)
REUSE = sys.implementation.name == "cpython"
ALONE_REFS = _alone_refs()


class Inference(LoadedBuild):
    """Prefill, decode and reset of a loaded build; logits as NumPy arrays."""

    def __init__(self, build_dir: str | Path) -> None:
        super().__init__(build_dir)
        self._copy_logits = getattr(self._lib, "ckir_copy_logits", None)
        #: the logits array returned last, reused once its caller has let go of it
        self._spare: np.ndarray | None = None
        self._set_int8 = getattr(self._lib, "ckir_set_int8_prefill", None)  # builds since 11-26
        self._int8_chosen = True

    @property
    def logits_rows(self) -> str:
        """Which rows ``prefill`` returns: ``"all"`` ([T, V], one per token) or ``"last"``
        ([1, V], the last token's: a build compiled with ``logits="last"``)."""
        mode = self.desc.prefill
        if mode.run and mode.logits_rows < mode.tokens_rows:
            return "last"
        return "all"

    @property
    def int8_prefill(self) -> bool:
        """Whether this model's q8_0p / q4_1p / q4_0p prefill GEMMs quantize x per block of 32
        (q4_k / q5_k / q6_k: per super-block of 256, Q8_K) and compute every row exactly
        as the decode GEMVs do: the default where the
        runtime has that GEMM (every AVX2 or AVX-512 runtime: ``int8_prefill_dot``),
        about twice the speed of fp32 x.  Otherwise (a scalar runtime, or set to False)
        they multiply fp32 x by the dequantized weights: logits within ~1e-5 of the
        reference instead of a few percent of the largest logit (docs/quantization.md).
        Settable; True on a runtime without the int8 GEMM stays False.  Builds from
        before 2026-11-25 lack the query: False; from before 11-26 the switch."""
        return self._int8_chosen and bool(self.int8_prefill_dot)

    @int8_prefill.setter
    def int8_prefill(self, on: bool) -> None:
        if self._set_int8 is None:
            if not on and self.int8_prefill:
                raise CkirError(
                    f"{self.build_dir.name}: this build predates the int8 prefill switch; "
                    "recompile it to run prefill on fp32 x"
                )
            return
        self._set_int8(self._ptr, int(bool(on)))
        self._int8_chosen = bool(on)

    @property
    def int8_prefill_dot(self) -> str:
        """The instruction of :attr:`int8_prefill`'s dot products: "vpdpbusd" (VNNI),
        "vpmaddubsw + vpmaddwd" (AVX2, AVX-512 without VNNI), or "" (fp32 x)."""
        fn = getattr(self._lib, "ckir_runtime_qp_int8_gemm", None)
        kind = int(fn()) if fn is not None else 0
        return {0: "", 1: "vpdpbusd"}.get(kind, "vpmaddubsw + vpmaddwd")

    @property
    def position(self) -> int:
        """Tokens already in the KV cache."""
        return int(self._lib.ckir_position(self._ptr))

    def _logits(self, what: str, n: int) -> np.ndarray:
        """The logits of the last call (``what``: prefill or decode, of ``n`` tokens), read
        through the manifest's ``<what>.logits`` handle; a CkirError when any is NaN or
        Inf (corrupt weights or a broken build: never handed out as if it were an
        answer)."""
        h = self.io_handle(f"{what}.logits", "f32", f"ckir_{what}_in_arena")
        if h is not None:  # n rows where the rows follow T, else the handle's (logits=last)
            rows = n if h.dims[0] else h.shape[0]
            out = self._logits_array(rows, h.shape[-1])
            bad = self.get_f32(h, rows, out)
        elif self._copy_logits is not None:  # a build without the manifest's steps
            out = self._logits_array(int(self._lib.ckir_logits_rows(self._ptr)))
            bad = int(self._copy_logits(self._ptr, out.ctypes.data))  # copy + count NaN/Inf
        else:  # a build from before ckir_copy_logits
            rows = int(self._lib.ckir_logits_rows(self._ptr))
            out = self._logits_array(rows)
            ptr = self._lib.ckir_logits(self._ptr)
            out[...] = np.ctypeslib.as_array(ptr, shape=(rows, self.vocab_size))
            bad = out.size - int(np.count_nonzero(np.isfinite(out)))
        if bad:
            raise CkirError(
                f"{self.build_dir.name}: {what} produced {bad} non-finite logits (NaN/Inf) at "
                f"position {self.position}: the weights or the build are corrupt"
            )
        return out

    def _tokens_in(self, mode: str, tokens: np.ndarray) -> ctypes._Pointer[ctypes.c_int32] | None:
        """Write checked int32 ``tokens`` into the arena through the manifest's
        ``<mode>.tokens`` handle: a pointer to them there, or None for a build without
        the manifest's steps (its entry points copy them).  Tokens beyond the handle's
        rows are left out: the step refuses them, naming the bound."""
        h = self.io_handle(f"{mode}.tokens", "i32", f"ckir_{mode}_in_arena")
        if h is None:
            return None
        return self.put_ids(h, tokens[: h.shape[0]])

    def _logits_array(self, rows: int, cols: int | None = None) -> np.ndarray:
        """A [rows, V] float32 array for the logits of a call.

        The array returned last time, when nothing outside refers to it any more (no
        name, no view): its pages are in place.  A fresh [T, V] array's pages fault in
        during the copy, and two threads faulting in one fresh huge-page mapping took
        80-95 ms for Qwen2-0.5B's 78 MB of prefill logits (a 340 ms bf16 prefill) in a
        process that also ran ``ckir bench``'s probes; into reused pages the copy took
        2.5 ms.  A new array (the caller kept the last one, or the shape changed) has
        its pages touched here by one thread first (11-17 ms).  Arrays under
        REUSE_MIN_BYTES (decode's rows) are always new and untouched, and leave the
        spare alone: a prefill after decode steps reuses it.  So a model may hold one
        dropped [T, V] array, at most the size of its arena's logits slot."""
        spare, shape = self._spare, (rows, self.vocab_size if cols is None else cols)
        if spare is not None and spare.shape == shape and sys.getrefcount(spare) == ALONE_REFS:
            return spare
        del spare
        out = np.empty(shape, np.float32)
        if out.nbytes >= REUSE_MIN_BYTES:  # (a small array leaves the spare in place)
            out.reshape(-1)[:: PAGE_BYTES // 4] = 0.0  # one write per page: one thread
            if REUSE:
                self._spare = out
        return out

    def prefill(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """Run ``tokens`` (appended after the cached ones); logits [T, V] for every position,
        or [1, V] for the last one in a build compiled with ``logits="last"``
        (:attr:`logits_rows`).  The array is yours for as long as you refer to it (or
        to a view of it); once you drop it, the model may copy a later call's logits
        into it instead of faulting in a new one (:meth:`_logits_array`)."""
        arr32 = self._token_array(tokens, "prefill")
        if self._tokens_in("prefill", arr32) is not None:  # written through the manifest
            self._check(self._lib.ckir_prefill_in_arena(self._ptr, len(arr32)))
        else:
            ptr = arr32.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            self._check(self._lib.ckir_prefill(self._ptr, ptr, len(arr32)))
        return self._logits("prefill", len(arr32))

    def _token_array(self, tokens: Sequence[int] | np.ndarray, what: str) -> np.ndarray:
        """``tokens`` checked (a non-empty 1-D sequence of ids in the vocabulary) as int32."""
        if isinstance(tokens, (str, bytes)):
            kind = type(tokens).__name__
            raise TypeError(f"{what}: tokens must be a sequence of ints, got {kind}")
        arr = np.asarray(tokens)
        if arr.ndim != 1 or arr.size == 0:
            raise CkirError(f"{what}: expects a non-empty 1-D sequence of token ids")
        if arr.dtype == object and all(is_int(t) for t in arr):
            self._check_token(max((int(t) for t in arr), key=abs))  # a huge int: out of range
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{what}: tokens must be ints, got {arr.dtype} values")
        self._check_token(int(arr.min()))
        self._check_token(int(arr.max()))
        return np.ascontiguousarray(arr, dtype=np.int32)

    def decode(self, token: int) -> np.ndarray:
        """Run one token at the next position (uses the KV cache); logits [V]."""
        if not is_int(token):
            raise TypeError(f"decode: token must be an int, got {type(token).__name__}")
        self._check_token(int(token))
        if self._tokens_in("decode", np.array([token], dtype=np.int32)) is not None:
            self._check(self._lib.ckir_decode_in_arena(self._ptr))
        else:
            self._check(self._lib.ckir_decode(self._ptr, int(token)))
        return self._logits("decode", 1)[0]

    @property
    def n_layers(self) -> int:
        """Layers of the steady phase (the template's repeated body)."""
        return int(self.desc.n_layers)

    def prefill_layers(self, tokens: Sequence[int] | np.ndarray) -> LayerStep:
        """A prefill of ``tokens`` run one layer at a time (:mod:`ckir.model.layers`):
        the prologue has run; ``run_layer()`` each layer, then ``finish()``."""
        return self._layer_step("prefill", self._token_array(tokens, "prefill_layers"))

    def decode_layers(self, token: int) -> LayerStep:
        """One decode step of ``token`` run one layer at a time (as :meth:`prefill_layers`;
        ``finish()`` returns [V])."""
        if not is_int(token):
            raise TypeError(f"decode_layers: token must be an int, got {type(token).__name__}")
        self._check_token(int(token))
        return self._layer_step("decode", np.array([int(token)], dtype=np.int32))

    def _layer_step(self, mode: str, tokens: np.ndarray) -> LayerStep:
        if not layers.bind(self._lib, mode):
            raise CkirError(
                f"{self.build_dir.name}: this build has no phase entry points (compiled by an "
                "older ckir): compile it again"
            )
        in_arena = self._tokens_in(mode, tokens)  # the prologue finds them in place
        return LayerStep(self, mode, tokens, self._check, self._logits, in_arena)

    def _check_token(self, token: int) -> None:
        if not 0 <= token < self.vocab_size:
            raise CkirError(f"token id {token} is outside the vocabulary [0, {self.vocab_size})")

    def reset(self) -> None:
        """Forget the KV cache: the next call starts at position 0."""
        self._lib.ckir_reset(self._ptr)
