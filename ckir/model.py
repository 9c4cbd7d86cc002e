"""Python API over a build folder: load the shared library, run prefill and decode.

    model = ckir.compile("tiny-llama/", "build/tiny", max_context=128)
    logits = model.prefill([1, 2, 3])      # ndarray [3, V]
    nxt = model.decode(int(logits[-1].argmax()))   # ndarray [V]
    model.reset()

Several models (or several instances of one) can live in one process: each
instance has its own state arena and maps weights.bin privately.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ckir.compiler import BUILD_INFO, LIBRARY_NAME, CompileOptions, compile_model, required_files
from ckir.errors import CkirError
from ckir.vocab import LOWERED_MODES

ERRORS = {
    1: "token out of range",
    2: "context overflow",
    3: "canary violated",
    4: "cannot open weights.bin",
    5: "weights.bin has a bad header or size",
    6: "weights.bin was written for another layout",
    7: "out of memory",
    8: "mode not compiled",
}


class _SlotDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("arena", ctypes.c_int),
        ("offset", ctypes.c_int64),
        ("size", ctypes.c_int64),
        ("canary", ctypes.c_int64),
    ]


class _ModeDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("run", ctypes.c_void_p),
        ("tokens_offset", ctypes.c_int64),
        ("tokens_rows", ctypes.c_int64),
        ("logits_offset", ctypes.c_int64),
        ("token_bound", ctypes.c_int64),
    ]


class _ModelDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("layout_hash", ctypes.c_uint64),
        ("weights_bytes", ctypes.c_int64),
        ("state_bytes", ctypes.c_int64),
        ("max_context", ctypes.c_int64),
        ("vocab", ctypes.c_int64),
        ("align", ctypes.c_int64),
        ("slots", ctypes.POINTER(_SlotDesc)),
        ("n_slots", ctypes.c_int64),
        # one per lowered mode, in vocabulary order (as the emitter writes them)
        *[(mode, _ModeDesc) for mode in LOWERED_MODES],
    ]


class CompiledModel:
    """A loaded build: ``prefill``, ``decode``, ``reset``; logits as NumPy arrays."""

    def __init__(self, build_dir: str | Path) -> None:
        self.build_dir = Path(build_dir)
        missing = [f for f in required_files() if not (self.build_dir / f).exists()]
        if missing:
            raise CkirError(f"{self.build_dir}: not a complete ckir build (missing {missing[0]})")
        self.info = json.loads((self.build_dir / BUILD_INFO).read_text())
        lib = ctypes.CDLL(str((self.build_dir / LIBRARY_NAME).resolve()))
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
        lib.ckir_position.restype = ctypes.c_int64
        lib.ckir_position.argtypes = [ctypes.c_void_p]
        lib.ckir_reset.argtypes = [ctypes.c_void_p]
        lib.ckir_error.restype = ctypes.c_char_p
        lib.ckir_error.argtypes = [ctypes.c_void_p]
        lib.ckir_check_canaries.argtypes = [ctypes.c_void_p]
        lib.ckir_describe.restype = ctypes.POINTER(_ModelDesc)
        lib.ckir_arena.restype = ctypes.POINTER(ctypes.c_uint8)
        lib.ckir_arena.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.desc = lib.ckir_describe().contents
        err = ctypes.c_int(0)
        handle = lib.ckir_open(str(self.build_dir / "weights.bin").encode(), ctypes.byref(err))
        if not handle:
            raise CkirError(
                f"{self.build_dir / 'weights.bin'}: {ERRORS.get(err.value, 'error')} "
                f"(code {err.value})"
            )
        self._handle: int | None = handle

    # -- properties -------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return int(self.desc.vocab)

    @property
    def max_context(self) -> int:
        return int(self.desc.max_context)

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
            raise CkirError(f"{self.build_dir.name}: {msg}")

    def _logits(self) -> np.ndarray:
        rows = int(self._lib.ckir_logits_rows(self._ptr))
        ptr = self._lib.ckir_logits(self._ptr)
        return np.ctypeslib.as_array(ptr, shape=(rows, self.vocab_size)).copy()

    def prefill(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """Run ``tokens`` (appended after the cached ones); logits for every position [T, V]."""
        arr = np.ascontiguousarray(np.asarray(tokens, dtype=np.int64))
        if arr.ndim != 1 or arr.size == 0:
            raise CkirError("prefill: expects a non-empty 1-D sequence of token ids")
        self._check_tokens(arr)
        arr32 = arr.astype(np.int32)
        ptr = arr32.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        self._check(self._lib.ckir_prefill(self._ptr, ptr, len(arr32)))
        return self._logits()

    def decode(self, token: int) -> np.ndarray:
        """Run one token at the next position (uses the KV cache); logits [V]."""
        self._check_tokens(np.asarray([token], dtype=np.int64))
        self._check(self._lib.ckir_decode(self._ptr, int(token)))
        return self._logits()[0]

    def _check_tokens(self, arr: np.ndarray) -> None:
        bad = arr[(arr < 0) | (arr >= self.vocab_size)]
        if bad.size:
            raise CkirError(
                f"token id {int(bad[0])} is outside the vocabulary [0, {self.vocab_size})"
            )

    def reset(self) -> None:
        """Forget the KV cache: the next call starts at position 0."""
        self._lib.ckir_reset(self._ptr)

    def check_canaries(self) -> str | None:
        """Name of the first slot whose canary was overwritten, or None."""
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
    modes: Sequence[str] = LOWERED_MODES,
    max_context: int | None = None,
    debug: bool = False,
    template: str | None = None,
    strategy: str | None = None,
    dtype: str | None = None,
    fuse: bool = True,
    quiet: bool = True,
) -> CompiledModel:
    """Compile a HF checkpoint folder (or GGUF file) into ``out_dir`` and load it."""
    options = CompileOptions(
        modes=tuple(modes),
        max_context=max_context,
        debug=debug,
        template=template,
        strategy=strategy,
        dtype=dtype,
        fuse=fuse,
    )
    compile_model(model_dir, out_dir, options, quiet=quiet)
    return CompiledModel(out_dir)
