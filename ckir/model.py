"""Python API over a build folder: load the shared library, run prefill and decode.

    model = ckir.compile("tiny-llama/", "build/tiny", max_context=128)
    logits = model.prefill([1, 2, 3])      # ndarray [3, V]
    nxt = model.decode(int(logits[-1].argmax()))   # ndarray [V]
    model.reset()
    model.save_pretrained("out/tiny-hf")   # config.json + model.safetensors (+ tokenizer)

Several models (or several instances of one) can live in one process: each
instance has its own state arena and maps weights.bin privately.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ckir.backend.abi import DESC_STRUCTS
from ckir.compiler import (
    BUILD_INFO,
    HF_CONFIG,
    HF_EXTRA_FILES,
    LIBRARY_NAME,
    PANEL_WEIGHTS_KEY,
    CompileOptions,
    compile_model,
    required_files,
)
from ckir.errors import CkirError, as_path, is_int, one_line
from ckir.integrity import restore_interrupted, verify_digests
from ckir.vocab import INFERENCE_MODES, PANEL_DTYPES, PANEL_VALUES, storage_bytes

#: the dtypes whose values weight_arrays / save_pretrained give back exactly (as fp32);
#: a panel dtype of theirs is unpacked (f32p, bf16p), one of a block format is not (q8_0p,
#: q4_1p)
_SAVED_VALUES = ("f32", "bf16")

ERRORS = {
    1: "token out of range",
    2: "context overflow",
    3: "canary violated",
    4: "cannot open weights.bin",
    5: "weights.bin has a bad header or size",
    6: "weights.bin was written for another layout",
    7: "out of memory",
    8: "mode not compiled",
    9: "non-finite loss or gradient",
    10: "bad argument",
    11: "compiled for instructions this CPU lacks",
}


def isa_missing(lib: ctypes.CDLL) -> list[str]:
    """The instruction-set extensions ``lib`` was compiled for that this CPU lacks
    (/proc/cpuinfo names; ``ckir_isa_missing``, which runs on any CPU of the
    architecture).  Builds from before the check have none to report."""
    fn = getattr(lib, "ckir_isa_missing", None)
    if fn is None:
        return []
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(1024)
    if fn(buf, len(buf)) == 0:
        return []
    return buf.value.decode().split()


class NonFiniteError(CkirError):
    """Training produced a NaN or infinite loss or gradient norm; the weights were left
    as they were before the failing step."""


#: ctypes of the C scalar types of :data:`ckir.backend.abi.DESC_STRUCTS`
_C_SCALARS: dict[str, type] = {
    "int": ctypes.c_int,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "const char *": ctypes.c_char_p,
    "ckir_mode_fn": ctypes.c_void_p,
}


def desc_structures() -> dict[str, type[ctypes.Structure]]:
    """The ctypes structures of the model description (``ckir_describe()``), one per
    struct of :data:`ckir.backend.abi.DESC_STRUCTS`, built from that table."""
    built: dict[str, type[ctypes.Structure]] = {}
    for struct, fields in DESC_STRUCTS.items():
        spec: list[tuple[str, type]] = []
        for f in fields:
            if f.ctype in _C_SCALARS:
                ctype = _C_SCALARS[f.ctype]
            elif f.ctype.startswith("const ") and f.ctype.endswith(" *"):
                ctype = ctypes.POINTER(built[f.ctype.removeprefix("const ").removesuffix(" *")])
            else:
                ctype = built[f.ctype]
            spec.append((f.name, ctype * f.length if f.length else ctype))
        built[struct] = type(struct, (ctypes.Structure,), {"_fields_": spec})
    return built


DESC_TYPES = desc_structures()


#: logits arrays of at least this many bytes are reused between calls once their caller
#: has dropped them (CompiledModel._logits_array); CPython's reference counts say when
REUSE_MIN_BYTES = 1 << 20
PAGE_BYTES = 4096


class _Holder:
    spare: object = None


def _alone_refs() -> int:
    """sys.getrefcount of an object held by one attribute and read into a local, as
    CompiledModel._logits_array reads its spare: what nothing else holding it looks like
    on this interpreter (the count of the call's own argument differs between
    versions)."""
    holder = _Holder()
    holder.spare = object()
    spare = holder.spare
    return sys.getrefcount(spare)


#: reuse only where reference counts are exact (CPython)
REUSE = sys.implementation.name == "cpython"
ALONE_REFS = _alone_refs()


class CompiledModel:
    """A loaded build: ``prefill``, ``decode``, ``reset``; logits as NumPy arrays."""

    def __init__(self, build_dir: str | Path) -> None:
        self.build_dir = as_path(build_dir, "build_dir")
        restore_interrupted(self.build_dir)  # a build whose replacement was killed
        missing = [f for f in required_files() if not (self.build_dir / f).exists()]
        if missing:
            raise CkirError(f"{self.build_dir}: not a complete ckir build (missing {missing[0]})")
        try:
            self.info = json.loads((self.build_dir / BUILD_INFO).read_text())
        except (OSError, ValueError) as err:
            raise CkirError(f"{self.build_dir / BUILD_INFO}: unreadable: {one_line(err)}") from None
        if not isinstance(self.info, dict):
            raise CkirError(f"{self.build_dir / BUILD_INFO}: not a JSON object")
        # a truncated library would crash dlopen's reader with SIGBUS: check it first (cheap)
        files = self.info.get("files")
        if isinstance(files, dict) and LIBRARY_NAME in files:
            problem = verify_digests(self.build_dir, {LIBRARY_NAME: files[LIBRARY_NAME]})
            if problem is not None:
                raise CkirError(f"{self.build_dir}: damaged build ({problem}); recompile it")
        try:
            lib = ctypes.CDLL(str((self.build_dir / LIBRARY_NAME).resolve()))
        except OSError as err:
            raise CkirError(
                f"{self.build_dir / LIBRARY_NAME}: cannot load: {one_line(err)}"
            ) from None
        missing = isa_missing(lib)
        if missing:
            raise CkirError(
                f"{self.build_dir / LIBRARY_NAME}: compiled (isa {self.info.get('isa', '?')}) "
                f"for instructions this CPU lacks: {', '.join(missing)}; recompile it on this "
                "machine, or compile it with --isa avx2 (or scalar) to run it on other CPUs"
            )
        self._lib = lib
        lib.ckir_open.restype = ctypes.c_void_p
        lib.ckir_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        lib.ckir_close.argtypes = [ctypes.c_void_p]
        i32p = ctypes.POINTER(ctypes.c_int32)
        lib.ckir_prefill.argtypes = [ctypes.c_void_p, i32p, ctypes.c_int64]
        lib.ckir_decode.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.ckir_logits.restype = ctypes.POINTER(ctypes.c_float)
        lib.ckir_logits.argtypes = [ctypes.c_void_p]
        lib.ckir_logits_rows.restype = ctypes.c_int64
        lib.ckir_logits_rows.argtypes = [ctypes.c_void_p]
        self._copy_logits = getattr(lib, "ckir_copy_logits", None)
        if self._copy_logits is not None:
            self._copy_logits.restype = ctypes.c_int64
            self._copy_logits.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.ckir_position.restype = ctypes.c_int64
        lib.ckir_position.argtypes = [ctypes.c_void_p]
        lib.ckir_reset.argtypes = [ctypes.c_void_p]
        lib.ckir_error.restype = ctypes.c_char_p
        lib.ckir_error.argtypes = [ctypes.c_void_p]
        lib.ckir_check_canaries.argtypes = [ctypes.c_void_p]
        lib.ckir_describe.restype = ctypes.POINTER(DESC_TYPES["ckir_model_desc"])
        lib.ckir_arena.restype = ctypes.POINTER(ctypes.c_uint8)
        lib.ckir_arena.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.ckir_backward.argtypes = [
            ctypes.c_void_p,
            i32p,
            i32p,
            ctypes.c_int64,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.ckir_optimizer_step.argtypes = [ctypes.c_void_p, ctypes.c_float]
        lib.ckir_train_steps.restype = ctypes.c_int64
        lib.ckir_train_steps.argtypes = [ctypes.c_void_p]
        self.desc = lib.ckir_describe().contents
        err = ctypes.c_int(0)
        handle = lib.ckir_open(str(self.build_dir / "weights.bin").encode(), ctypes.byref(err))
        if not handle:
            raise CkirError(
                f"{self.build_dir / 'weights.bin'}: {ERRORS.get(err.value, 'error')} "
                f"(code {err.value})"
            )
        self._handle: int | None = handle
        #: the logits array returned last, reused once its caller has let go of it
        self._spare: np.ndarray | None = None
        self._set_int8 = getattr(lib, "ckir_set_int8_prefill", None)  # builds since 11-26
        if self._set_int8 is not None:
            self._set_int8.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self._int8_chosen = True

    # -- properties -------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        # a training-only build (modes=("backward",)) has no logits output: its token
        # bound is the training programs' (the embedding rows)
        return int(self.desc.vocab or self.desc.train.token_bound)

    @property
    def max_context(self) -> int:
        return int(self.desc.max_context)

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
        and compute every row exactly as the decode GEMVs do: the default where the
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

    @property
    def _ptr(self) -> int:
        if self._handle is None:
            raise CkirError("the model is closed")
        return self._handle

    # -- running ----------------------------------------------------------------------
    def _check(self, rc: int) -> None:
        if rc != 0:
            msg = self._lib.ckir_error(self._ptr).decode() or ERRORS.get(rc, "error")
            kind = NonFiniteError if rc == 9 else CkirError
            raise kind(f"{self.build_dir.name}: {msg}")

    def _logits(self, what: str) -> np.ndarray:
        """The logits of the last call; a CkirError when any is NaN or Inf (corrupt weights
        or a broken build: never handed out as if it were an answer)."""
        rows = int(self._lib.ckir_logits_rows(self._ptr))
        out = self._logits_array(rows)
        if self._copy_logits is not None:  # one threaded pass: copy + count NaN/Inf
            bad = int(self._copy_logits(self._ptr, out.ctypes.data))
        else:  # a build from before ckir_copy_logits
            ptr = self._lib.ckir_logits(self._ptr)
            out[...] = np.ctypeslib.as_array(ptr, shape=(rows, self.vocab_size))
            bad = out.size - int(np.count_nonzero(np.isfinite(out)))
        if bad:
            raise CkirError(
                f"{self.build_dir.name}: {what} produced {bad} non-finite logits (NaN/Inf) at "
                f"position {self.position}: the weights or the build are corrupt"
            )
        return out

    def _logits_array(self, rows: int) -> np.ndarray:
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
        spare, shape = self._spare, (rows, self.vocab_size)
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
        if isinstance(tokens, (str, bytes)):
            kind = type(tokens).__name__
            raise TypeError(f"prefill: tokens must be a sequence of ints, got {kind}")
        arr = np.asarray(tokens)
        if arr.ndim != 1 or arr.size == 0:
            raise CkirError("prefill: expects a non-empty 1-D sequence of token ids")
        if arr.dtype == object and all(is_int(t) for t in arr):
            self._check_token(max((int(t) for t in arr), key=abs))  # a huge int: out of range
        if arr.dtype.kind not in "iu":
            raise TypeError(f"prefill: tokens must be ints, got {arr.dtype} values")
        self._check_token(int(arr.min()))
        self._check_token(int(arr.max()))
        arr32 = np.ascontiguousarray(arr, dtype=np.int32)
        ptr = arr32.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        self._check(self._lib.ckir_prefill(self._ptr, ptr, len(arr32)))
        return self._logits("prefill")

    def decode(self, token: int) -> np.ndarray:
        """Run one token at the next position (uses the KV cache); logits [V]."""
        if not is_int(token):
            raise TypeError(f"decode: token must be an int, got {type(token).__name__}")
        self._check_token(int(token))
        self._check(self._lib.ckir_decode(self._ptr, int(token)))
        return self._logits("decode")[0]

    # -- training ---------------------------------------------------------------------
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
        if (
            not isinstance(lr, float | int)
            or isinstance(lr, bool)
            or not np.isfinite(lr)
            or lr <= 0
        ):
            raise CkirError(f"optimizer_step: lr must be a finite number > 0, got {lr!r}")
        self._check(self._lib.ckir_optimizer_step(self._ptr, float(lr)))

    def train_step(
        self, tokens: Sequence[int] | np.ndarray, targets: Sequence[int] | np.ndarray, *, lr: float
    ) -> float:
        """:meth:`backward` then :meth:`optimizer_step`; returns the loss of the batch
        (computed before the update).  A non-finite loss raises and leaves the weights."""
        if (
            not isinstance(lr, float | int)
            or isinstance(lr, bool)
            or not np.isfinite(lr)
            or lr <= 0
        ):
            raise CkirError(f"train_step: lr must be a finite number > 0, got {lr!r}")
        loss = self.backward(tokens, targets)
        self.optimizer_step(lr)
        return loss

    def _params(self) -> list[Any]:  # ckir_param_desc structures
        train = self.desc.train
        return [train.params[i] for i in range(train.n_params)]

    def _f32(self, arena: int, offset: int, numel: int, shape: tuple[int, ...]) -> np.ndarray:
        base = ctypes.addressof(self.arena(arena).contents) + offset
        buf = (ctypes.c_float * numel).from_address(base)
        return np.ctypeslib.as_array(buf).reshape(shape)

    def gradients(self) -> dict[str, np.ndarray]:
        """Weight name (``layers.0.attn.wq``) -> a copy of its gradient from the last
        :meth:`backward` (f32, the weight's shape)."""
        out: dict[str, np.ndarray] = {}
        for p in self._params():
            shape = tuple(p.shape[: p.ndim])
            out[p.name.decode().removeprefix("w.")] = self._f32(
                1, p.grad_offset, p.numel, shape
            ).copy()
        return out

    def largest_weight(self) -> tuple[str, float]:
        """``(name, max |w|)`` of the trained weight with the largest magnitude, or of the
        first one holding a NaN or an infinity (read in place: no copy of the weights)."""
        best = ("", 0.0)
        for p in self._params():
            amax = float(np.abs(self._f32(0, p.weight_offset, p.numel, (p.numel,))).max())
            name = p.name.decode().removeprefix("w.")
            if not np.isfinite(amax):
                return name, amax
            best = max(best, (name, amax), key=lambda t: t[1])
        return best

    def weights(self) -> dict[str, np.ndarray]:
        """Weight name -> a copy of its current (trained) values, for every trained weight."""
        out: dict[str, np.ndarray] = {}
        for p in self._params():
            shape = tuple(p.shape[: p.ndim])
            out[p.name.decode().removeprefix("w.")] = self._f32(
                0, p.weight_offset, p.numel, shape
            ).copy()
        return out

    # -- saving -----------------------------------------------------------------------
    def panel_weights(self) -> dict[str, str]:
        """graph.weight name (``layers.{i}.mlp.down``) -> the panel dtype it is stored in
        (f32p, bf16p, q8_0p, q4_1p, q4_0p), from ``build.json`` (a build made before bf16p lists
        its f32p weights under ``f32p_weights``).  CkirError if the entry is malformed."""
        packed = self.info.get(PANEL_WEIGHTS_KEY)
        if packed is None:
            old = self.info.get("f32p_weights") or []
            names = isinstance(old, list) and all(isinstance(n, str) for n in old)
            packed = dict.fromkeys(old, "f32p") if names else None
        if not isinstance(packed, dict) or not all(
            isinstance(k, str) and v in PANEL_DTYPES for k, v in packed.items()
        ):
            raise CkirError(
                f"{self.build_dir / BUILD_INFO}: {PANEL_WEIGHTS_KEY} must map weight names "
                f"to panel dtypes ({', '.join(PANEL_DTYPES)})"
            )
        return dict(packed)

    def _bytes(self, arena: int, offset: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes of an arena from ``offset`` (uint8)."""
        base = ctypes.addressof(self.arena(arena).contents) + offset
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(base)).copy()

    def weight_arrays(self) -> dict[str, np.ndarray]:
        """Weight instance name (``layers.0.attn.wq``) -> a copy of its current values
        (f32, ckir's shape), for every stored weight (tied copies share their target's
        values and are not listed).  f32 weights are copied, bf16 ones widened exactly,
        f32p / bf16p panels unpacked (a bf16p weight gives its bf16 values).  CkirError
        naming the dtype for a weight stored in a block format (q8_0, its panels q8_0p,
        q4_1p, ...)."""
        from ckir import quant
        from ckir.backend.hf_export import load_graph_model
        from ckir.backend.weights import weight_instances
        from ckir.dialects.dims import evaluate_dim

        model = load_graph_model(self.build_dir / "graph.mlir")
        symbols = model.symbol_values()
        slots = self.slots()
        converted = self.info.get("dtype")
        packed = self.panel_weights()
        out: dict[str, np.ndarray] = {}
        for name, (decl, _) in weight_instances(model).items():
            if decl.tied_to_name is not None:
                continue
            slot = slots.get(f"w.{name}")
            if slot is None:
                raise CkirError(f"{self.build_dir.name}: no weights slot for weight '{name}'")
            arena, offset, size, _canary = slot
            shape = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
            numel = int(np.prod(shape)) if shape else 1
            # graph.mlir declares the checkpoint's dtypes: --dtype and the panels come after
            dtype = packed.get(decl.weight_name)
            if dtype is None:
                if size == 4 * numel:  # f32, or a matrix --dtype left as it was
                    dtype = "f32"
                elif converted not in (None, "f32"):
                    dtype = converted
                else:  # the checkpoint's own (a bf16 HF folder, a GGUF block format)
                    dtype = decl.dtype_name
            if arena == 0 and PANEL_VALUES.get(dtype) in _SAVED_VALUES and len(shape) == 2:
                try:
                    nbytes = storage_bytes(dtype, shape)
                except ValueError:  # a K the panel dtype cannot hold: build.json is wrong
                    nbytes = -1
                if size == nbytes:
                    raw = self._bytes(0, offset, nbytes)
                    out[name] = quant.unpack_panels(raw, shape, dtype)
                    continue
            elif arena == 0 and dtype == "f32" and size == 4 * numel:
                out[name] = self._f32(0, offset, numel, shape).copy()
                continue
            elif arena == 0 and dtype == "bf16" and size == 2 * numel:
                raw = self._bytes(0, offset, size)
                out[name] = quant.from_bf16(raw.view("<u2")).reshape(shape)
                continue
            raise CkirError(
                f"{self.build_dir.name}: weight '{name}' is stored as {dtype}; only f32 "
                "and bf16 builds can be saved (compile with dtype='f32')"
            )
        return out

    def save_pretrained(self, out_dir: str | Path, *, tokenizer: object | None = None) -> Path:
        """Write the current weights as a HuggingFace folder: ``config.json``,
        ``model.safetensors`` and the source's tokenizer files the build kept.

        Works for any f32 build (trained or not) and any bf16 build (f32p / bf16p
        panels unpacked; bf16 weights are written as their exact fp32 values, like
        every tensor of the folder); CkirError naming the dtype for quantized builds.
        ``tokenizer`` (a :class:`ckir.tokenizer.Tokenizer`) adds ``tokenizer.json`` +
        ``tokenizer_config.json`` when the build has none (a GGUF source).  The folder
        is written whole or not at all (a temporary folder beside it, renamed);
        ``out_dir`` must be new, empty or an earlier saved folder (it holds
        ``.ckir-pretrained``).  Returns the folder's resolved path.
        """
        from ckir.backend import hf_export

        out = as_path(out_dir, "out_dir")
        hf_export.check_pretrained_dir(out, self.build_dir, "save_pretrained")
        config_path = self.build_dir / HF_CONFIG
        try:
            config_bytes = config_path.read_bytes()
            config = json.loads(config_bytes)
        except FileNotFoundError:
            raise CkirError(
                f"{self.build_dir}: no {HF_CONFIG} (built by an older ckir); recompile to save it"
            ) from None
        except (OSError, ValueError) as err:
            raise CkirError(f"{config_path}: unreadable: {one_line(err)}") from None
        if not isinstance(config, dict):
            raise CkirError(f"{config_path}: not a JSON object")
        arrays = self.weight_arrays()
        model = hf_export.load_graph_model(self.build_dir / "graph.mlir")
        unnamed = [
            d for d in model.weights().values() if d.hf_name is None and d.tied_to_name is None
        ]
        hf_names = hf_export.template_hf_names(model, config) if unnamed else None
        state = hf_export.to_hf_state_dict(model, arrays, hf_names)
        files = {HF_CONFIG: config_bytes}
        for name in HF_EXTRA_FILES:
            if (self.build_dir / name).is_file():
                files[name] = (self.build_dir / name).read_bytes()
        if tokenizer is not None and "tokenizer.json" not in files:
            files.update(hf_export.tokenizer_files(tokenizer))
        return hf_export.write_hf_folder(out, state, files, self.build_dir)

    def _check_token(self, token: int) -> None:
        if not 0 <= token < self.vocab_size:
            raise CkirError(f"token id {token} is outside the vocabulary [0, {self.vocab_size})")

    def reset(self) -> None:
        """Forget the KV cache: the next call starts at position 0."""
        self._lib.ckir_reset(self._ptr)

    def check_canaries(self) -> str | None:
        """Name of the first slot whose canary was overwritten, or None.

        Only for bump-layout builds (``debug=True`` or ``strategy="bump"``): under
        the default liveness layout, buffers legitimately reuse each other's canary
        bytes, so a healthy run would look like a violation."""
        if self.info.get("strategy") == "liveness":
            raise CkirError(
                f"{self.build_dir.name}: check_canaries() needs a bump-layout build "
                "(compile with debug=True or strategy='bump'); under liveness, buffers "
                "reuse each other's canary bytes"
            )
        index = self._lib.ckir_check_canaries(self._ptr)
        if index < 0:
            return None
        return self.desc.slots[index].name.decode()

    def slots(self) -> dict[str, tuple[int, int, int, int]]:
        """Slot name -> (arena, offset, size, canary offset or -1)."""
        out: dict[str, tuple[int, int, int, int]] = {}
        for i in range(self.desc.n_slots):
            s = self.desc.slots[i]
            out[s.name.decode()] = (s.arena, s.offset, s.size, s.canary)
        return out

    def arena(self, index: int) -> ctypes._Pointer[ctypes.c_uint8]:
        """Raw pointer to an arena (0 weights, 1 state); for debugging tools and tests."""
        return self._lib.ckir_arena(self._ptr, index)

    def close(self) -> None:
        if self._handle is not None:
            self._lib.ckir_close(self._handle)
            self._handle = None

    def __enter__(self) -> CompiledModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def load(build_dir: str | Path) -> CompiledModel:
    """Load a build folder written by ``ckir compile``."""
    return CompiledModel(build_dir)


def compile(  # noqa: A001 - the public name is ckir.compile
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    modes: Sequence[str] = INFERENCE_MODES,
    max_context: int | None = None,
    debug: bool = False,
    template: str | None = None,
    strategy: str | None = None,
    dtype: str | None = None,
    fuse: bool = True,
    logits: str = "all",
    panels: bool | None = None,
    quiet: bool = True,
) -> CompiledModel:
    """Compile a HF checkpoint folder (or GGUF file) into ``out_dir`` and load it.

    ``logits="last"`` builds a prefill that returns the last prompt row only ([1, V]).
    ``panels`` stores the f32 / bf16 / q8_0 / q4_1 / q4_0 matrices of an inference build
    as f32p / bf16p / q8_0p / q4_1p / q4_0p (GEMM panels;
    :attr:`ckir.compiler.CompileOptions.panels`, None: the default, on).
    """
    model_dir, out_dir = as_path(model_dir, "model_dir"), as_path(out_dir, "out_dir")
    if isinstance(modes, (str, bytes)):
        raise TypeError(f"compile: modes must be a sequence like ('prefill',), not {modes!r}")
    options = CompileOptions(
        modes=tuple(modes),
        max_context=max_context,
        debug=debug,
        template=template,
        strategy=strategy,
        dtype=dtype,
        fuse=fuse,
        logits=logits,
        panels=panels,
    )
    compile_model(model_dir, out_dir, options, quiet=quiet)
    return CompiledModel(out_dir)
