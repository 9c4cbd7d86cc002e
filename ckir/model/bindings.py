"""Bindings of a generated model: its shared library, description and handle.

:func:`load_library` loads a build's ``libmodel.so`` (its digest checked first, then
the CPU's instruction sets against the library's) and declares the argument types of
the entry points of ``runtime/include/ckir_model.h``.  The description that
``ckir_describe()`` returns is read through ctypes structures built from
:data:`ckir.backend.abi.DESC_STRUCTS`, the table a test checks against the header
(tests/test_abi.py): nothing here spells a field of a C struct.

:class:`LoadedBuild` holds one opened model (its own state arena, weights.bin
mapped privately) and what inference, training and export all read: the
description, the slots, the arenas, the error check.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
from pathlib import Path
from typing import Any, Self

import numpy as np

from ckir.backend.abi import DESC_STRUCTS
from ckir.compiler import BUILD_INFO, LIBRARY_NAME, required_files
from ckir.errors import CkirError, as_path, one_line
from ckir.integrity import restore_interrupted, verify_digests

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


#: struct name -> its ctypes structure
DESC_TYPES = desc_structures()


def load_library(build_dir: Path, info: dict[str, Any]) -> ctypes.CDLL:
    """The library of a build, its entry points declared; CkirError when it is damaged,
    does not load, or was compiled for instructions this CPU lacks."""
    # a truncated library would crash dlopen's reader with SIGBUS: check it first (cheap)
    files = info.get("files")
    if isinstance(files, dict) and LIBRARY_NAME in files:
        problem = verify_digests(build_dir, {LIBRARY_NAME: files[LIBRARY_NAME]})
        if problem is not None:
            raise CkirError(f"{build_dir}: damaged build ({problem}); recompile it")
    try:
        lib = ctypes.CDLL(str((build_dir / LIBRARY_NAME).resolve()))
    except OSError as err:
        raise CkirError(f"{build_dir / LIBRARY_NAME}: cannot load: {one_line(err)}") from None
    missing = isa_missing(lib)
    if missing:
        raise CkirError(
            f"{build_dir / LIBRARY_NAME}: compiled (isa {info.get('isa', '?')}) "
            f"for instructions this CPU lacks: {', '.join(missing)}; recompile it on this "
            "machine, or compile it with --isa avx2 (or scalar) to run it on other CPUs"
        )
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
    copy_logits = getattr(lib, "ckir_copy_logits", None)
    if copy_logits is not None:
        copy_logits.restype = ctypes.c_int64
        copy_logits.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    set_int8 = getattr(lib, "ckir_set_int8_prefill", None)  # builds since 11-26
    if set_int8 is not None:
        set_int8.argtypes = [ctypes.c_void_p, ctypes.c_int]
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
    return lib


class LoadedBuild:
    """An opened build: its ``build.json`` (:attr:`info`), library, description
    (:attr:`desc`) and model handle, with what inference, training and export share."""

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
        self._lib = lib = load_library(self.build_dir, self.info)
        #: the ckir_model_desc of the build (:data:`DESC_TYPES`)
        self.desc: Any = lib.ckir_describe().contents
        err = ctypes.c_int(0)
        handle = lib.ckir_open(str(self.build_dir / "weights.bin").encode(), ctypes.byref(err))
        if not handle:
            raise CkirError(
                f"{self.build_dir / 'weights.bin'}: {ERRORS.get(err.value, 'error')} "
                f"(code {err.value})"
            )
        self._handle: int | None = handle

    @property
    def vocab_size(self) -> int:
        """Token ids are below this (the logits' columns)."""
        # a training-only build (modes=("backward",)) has no logits output: its token
        # bound is the training programs' (the embedding rows)
        return int(self.desc.vocab or self.desc.train.token_bound)

    @property
    def max_context(self) -> int:
        """Positions the KV cache holds."""
        return int(self.desc.max_context)

    @property
    def _ptr(self) -> int:
        if self._handle is None:
            raise CkirError("the model is closed")
        return self._handle

    def _check(self, rc: int) -> None:
        """Raise the model's last error when an entry point returned ``rc`` != 0."""
        if rc != 0:
            msg = self._lib.ckir_error(self._ptr).decode() or ERRORS.get(rc, "error")
            kind = NonFiniteError if rc == 9 else CkirError
            raise kind(f"{self.build_dir.name}: {msg}")

    def _params(self) -> list[Any]:
        """The trained weights' ckir_param_desc structures (none unless trainable)."""
        train = self.desc.train
        return [train.params[i] for i in range(train.n_params)]

    def _f32(self, arena: int, offset: int, numel: int, shape: tuple[int, ...]) -> np.ndarray:
        """A view (no copy) of ``numel`` f32 values of an arena from ``offset``."""
        base = ctypes.addressof(self.arena(arena).contents) + offset
        buf = (ctypes.c_float * numel).from_address(base)
        return np.ctypeslib.as_array(buf).reshape(shape)

    def _bytes(self, arena: int, offset: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes of an arena from ``offset`` (uint8)."""
        base = ctypes.addressof(self.arena(arena).contents) + offset
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(base)).copy()

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
        """Free the model's arenas; later calls raise CkirError."""
        if self._handle is not None:
            self._lib.ckir_close(self._handle)
            self._handle = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
