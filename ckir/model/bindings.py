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
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np

from ckir.backend.abi import DESC_STRUCTS, fingerprint_hex
from ckir.compiler import BUILD_INFO, LIBRARY_NAME, required_files
from ckir.errors import CkirError, as_path, one_line
from ckir.integrity import restore_interrupted, verify_digests
from ckir.vocab import DTYPE_TABLE, PANEL_DTYPES

ERRORS = {
    1: "token out of range",
    2: "context overflow",
    3: "canary violated",
    4: "cannot open weights.bin",
    5: "weights.bin has a bad header or size",
    6: "weights.bin was written for another build (fingerprint)",
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


#: NumPy dtype of each buffer dtype that has one (bf16: its raw uint16 bits)
DTYPE_NUMPY = {d.name: np.dtype(d.numpy) for d in DTYPE_TABLE if d.numpy is not None}

#: ckir_open's code for a weights.bin whose build fingerprint is not the library's
ERR_FINGERPRINT = 6


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
    lib.ckir_io_count.restype = ctypes.c_int64
    lib.ckir_io_count.argtypes = []
    lib.ckir_io_desc.restype = ctypes.c_int
    lib.ckir_io_desc.argtypes = [ctypes.c_int64, ctypes.POINTER(DESC_TYPES["ckir_handle_desc"])]
    lib.ckir_fingerprint.restype = ctypes.c_uint64
    lib.ckir_fingerprint.argtypes = []
    # the steps on inputs written through the manifest (model ABI 6)
    for name, argtypes in (
        ("ckir_prefill_in_arena", [ctypes.c_void_p, ctypes.c_int64]),
        ("ckir_decode_in_arena", [ctypes.c_void_p]),
        ("ckir_backward_in_arena", [ctypes.c_void_p, ctypes.c_int64]),
    ):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes = argtypes
    copy_f32 = getattr(lib, "ckir_copy_f32", None)
    if copy_f32 is not None:
        copy_f32.restype = ctypes.c_int64
        copy_f32.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_void_p,
        ]
    return lib


@dataclass(frozen=True)
class Handle:
    """One handle of a build's I/O manifest, as ``ckir_io_desc`` describes it."""

    name: str
    #: input, param, state or output
    role: str
    #: the program it belongs to ("" for params and state)
    mode: str
    dtype: str
    #: the largest shape (what its slot holds)
    shape: tuple[int, ...]
    #: per dim: "" static, else the run-time symbol it follows (T, PT)
    dims: tuple[str, ...]
    #: 0 weights, 1 state
    arena: int
    offset: int
    bytes: int


def read_manifest(lib: ctypes.CDLL) -> dict[str, Handle]:
    """Handle name -> :class:`Handle`, in manifest order, from the library's query API."""
    out: dict[str, Handle] = {}
    info = DESC_TYPES["ckir_handle_desc"]()
    for i in range(int(lib.ckir_io_count())):
        if lib.ckir_io_desc(i, ctypes.byref(info)) != 0:
            raise CkirError(f"ckir_io_desc({i}) failed although ckir_io_count() says more")
        rank = int(info.rank)
        out[info.name.decode()] = Handle(
            name=info.name.decode(),
            role=info.role.decode(),
            mode=info.mode.decode(),
            dtype=info.dtype.decode(),
            shape=tuple(int(n) for n in info.shape[:rank]),
            dims=tuple(d.decode() for d in info.dims[:rank]),
            arena=int(info.arena),
            offset=int(info.offset),
            bytes=int(info.bytes),
        )
    return out


def weights_fingerprint(path: Path) -> int | None:
    """The build fingerprint in the header of a weights.bin, or None when unreadable."""
    try:
        with path.open("rb") as f:
            head = f.read(24)
    except OSError:
        return None
    return int.from_bytes(head[16:24], "little") if len(head) == 24 else None


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
            weights = self.build_dir / "weights.bin"
            if err.value == ERR_FINGERPRINT:
                theirs = weights_fingerprint(weights)
                raise CkirError(
                    f"{weights}: written for build fingerprint "
                    f"{fingerprint_hex(theirs or 0)}, but {LIBRARY_NAME} is build "
                    f"{fingerprint_hex(int(lib.ckir_fingerprint()))}: the library and "
                    "weights.bin come from different builds; recompile"
                )
            raise CkirError(f"{weights}: {ERRORS.get(err.value, 'error')} (code {err.value})")
        self._handle: int | None = handle
        #: the build's I/O manifest: handle name -> :class:`Handle` (``ckir_io_desc``)
        self.manifest: dict[str, Handle] = read_manifest(lib)
        from ckir.model.io_check import check_manifest  # (it imports Handle from here)

        check_manifest(self.build_dir.name, self.desc, self.manifest)

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

    def _bytes_view(self, arena: int, offset: int, nbytes: int) -> np.ndarray:
        """A view (no copy) of ``nbytes`` bytes of an arena from ``offset`` (uint8)."""
        base = ctypes.addressof(self.arena(arena).contents) + offset
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(base))

    def _bytes(self, arena: int, offset: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes of an arena from ``offset`` (uint8)."""
        return self._bytes_view(arena, offset, nbytes).copy()

    def handle(self, name: str) -> Handle:
        """The manifest's handle ``name``; CkirError naming the build when it has none."""
        found = self.manifest.get(name)
        if found is None:
            some = ", ".join(list(self.manifest)[:6])
            raise CkirError(
                f"{self.build_dir.name}: no io handle '{name}' in the manifest "
                f"({len(self.manifest)} handles: {some}{', ...' if len(self.manifest) > 6 else ''})"
            )
        return found

    def _handle_array(self, h: Handle) -> np.ndarray:
        """A view (no copy) of a handle's bytes as its NumPy dtype and shape (raw uint8
        bytes for block and panel dtypes)."""
        np_dtype = DTYPE_NUMPY.get(h.dtype)
        raw = self._bytes_view(h.arena, h.offset, h.bytes)
        if np_dtype is None or (h.dtype in PANEL_DTYPES):
            return raw
        return raw.view(np_dtype).reshape(h.shape)

    def read(self, name: str) -> np.ndarray:
        """A copy of the values of io handle ``name`` (:attr:`manifest`), in its largest
        shape: an input, param, state or output (bf16 as its raw uint16 bits, block and
        panel dtypes as raw bytes)."""
        return self._handle_array(self.handle(name)).copy()

    def write(self, name: str, values: np.ndarray) -> None:
        """Write ``values`` into io handle ``name``: same dtype; the same shape, or fewer
        rows when the leading dim follows a run-time symbol (``T``, ``PT``)."""
        h = self.handle(name)
        if h.role == "output":
            raise CkirError(f"{self.build_dir.name}: io handle '{name}' is an output (read it)")
        dst = self._handle_array(h)
        arr = np.asarray(values)
        if arr.dtype != dst.dtype:
            raise CkirError(
                f"{self.build_dir.name}: io handle '{name}' holds {h.dtype} ({dst.dtype}), "
                f"got {arr.dtype}"
            )
        rows_free = bool(h.dims) and h.dims[0] != ""
        fits = arr.shape == dst.shape or (
            rows_free and arr.shape[1:] == dst.shape[1:] and 0 < arr.shape[0] <= dst.shape[0]
        )
        if arr.ndim != dst.ndim or not fits:
            raise CkirError(
                f"{self.build_dir.name}: io handle '{name}' has shape {list(h.shape)} "
                f"(dims {list(h.dims)}), got {list(arr.shape)}"
            )
        dst[: arr.shape[0]] = arr

    def io_handle(self, name: str, dtype: str, entry: str) -> Handle | None:
        """The manifest's handle ``name`` when the library can run on inputs written
        through it (it exports ``entry``, a ``ckir_*_in_arena`` step, and
        ``ckir_copy_f32``); None for a build without them (an older ckir, or no
        manifest), whose steps copy through the convention entry points.  CkirError when
        the handle is not of ``dtype`` and rank 1 (inputs) or 1-2 (outputs)."""
        h = self.manifest.get(name)
        if h is None or not hasattr(self._lib, entry) or not hasattr(self._lib, "ckir_copy_f32"):
            return None
        if h.dtype != dtype or not 1 <= len(h.shape) <= 2:
            raise CkirError(
                f"{self.build_dir.name}: io handle '{name}' is {h.dtype} {list(h.shape)}, "
                f"expected {dtype} of rank 1 or 2; the library and its manifest disagree, "
                "recompile the build"
            )
        return h

    def put_ids(self, h: Handle, ids: np.ndarray) -> ctypes._Pointer[ctypes.c_int32]:
        """Write int32 ``ids`` (checked by the caller) into input handle ``h``; a pointer
        to them in the arena."""
        self.write(h.name, ids)
        base = ctypes.addressof(self.arena(h.arena).contents) + h.offset
        return ctypes.cast(base, ctypes.POINTER(ctypes.c_int32))

    def get_f32(self, h: Handle, rows: int, out: np.ndarray) -> int:
        """Copy the first ``rows`` rows of f32 output handle ``h`` into ``out`` (C
        contiguous, ``rows`` x the handle's row); how many are NaN or infinite."""
        n = rows * math.prod(h.shape[1:])
        if out.dtype != np.float32 or out.size != n or not out.flags.c_contiguous:
            raise CkirError(f"get_f32: {out.dtype} {list(out.shape)} for {n} floats of '{h.name}'")
        bad = int(self._lib.ckir_copy_f32(self._ptr, h.arena, h.offset, n, out.ctypes.data))
        if bad < 0:
            raise CkirError(
                f"{self.build_dir.name}: io handle '{h.name}': {rows} rows at "
                f"{h.offset} are outside its arena"
            )
        return bad

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
