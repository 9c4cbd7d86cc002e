"""ctypes access to a built ckir runtime, driven by the kernel registry.

``RuntimeLib(path)`` loads a shared library and exposes ``call(name, *args)``
(the public kernel ``ckir_<name>``) and ``ref(name, *args)`` (its scalar twin
``ckir_ref_<name>``).  Arguments follow the registry order: NumPy arrays for
buffer operands (dtype and contiguity are checked), Python numbers for params.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from ckir import quant
from ckir.reference.kernels import (  # noqa: F401 (the tests' oracles)
    quantize_x,
    rope_inv_freq,
    rope_oracle,
)
from ckir.registry import KernelSpec, load_registry
from ckir.runtime_build import build_library, runtime_dir
from ckir.vocab import DTYPE_TABLE

#: NumPy dtype of a kernel operand of each ckir dtype: the C type the kernel reads
#: (bf16 / f16 bits are uint16_t, block formats bytes)
_C_TO_NP = {
    "float": np.float32,
    "uint16_t": np.uint16,
    "int32_t": np.int32,
    "int64_t": np.int64,
    "uint8_t": np.uint8,
}
NP_DTYPES = {d.name: _C_TO_NP[d.c_type] for d in DTYPE_TABLE}
ISAS = ("scalar", "avx2", "native")


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def isa_supported(isa: str) -> bool:
    """Whether this CPU can run code built for ``isa``."""
    if isa == "avx2":
        return {"avx2", "fma"} <= cpu_flags()
    return True


KERNEL_TABLE = runtime_dir() / "include" / "ckir_kernels.def"
TABLE_SECTIONS = ("CKIR_KERNELS_F32", "CKIR_KERNELS_QUANT", "CKIR_KERNELS_FUSED")
_ENTRY = re.compile(r"CKIR_TABLE_ENTRY\s+(\w+)\s*\(([^()]*)\)")


def norm_params(params: str) -> str:
    """A C parameter list with its white space normalised (`const float *x, int64_t n`)."""
    params = re.sub(r"\s+", " ", params.strip())
    return re.sub(r"\s*\*\s*", " *", params).replace(" ,", ",")


def kernel_table(sections: tuple[str, ...] = TABLE_SECTIONS) -> dict[str, str]:
    """The entries of runtime/include/ckir_kernels.def as the C preprocessor expands them:
    kernel name (without ``ckir_``) -> normalised parameter list."""
    src = "".join(f"#define {s} 1\n" for s in sections)
    src += "#define CKIR_KERNEL(name, params) CKIR_TABLE_ENTRY name params\n"
    src += f'#include "{KERNEL_TABLE.name}"\n'
    cmd = [os.environ.get("CC", "cc"), "-E", "-P", "-I", str(KERNEL_TABLE.parent), "-x", "c", "-"]
    out = subprocess.run(cmd, input=src, capture_output=True, text=True, check=True).stdout
    table: dict[str, str] = {}
    for name, params in _ENTRY.findall(out):
        assert name not in table, f"{name} is listed twice in {KERNEL_TABLE.name}"
        table[name] = norm_params(params)
    return table


class RuntimeLib:
    def __init__(self, path: Path, registry: Mapping[str, KernelSpec] | None = None):
        self.path = Path(path)
        self.dll = ctypes.CDLL(str(self.path))
        self.registry = registry if registry is not None else load_registry()
        self.dll.ckir_set_num_threads.argtypes = [ctypes.c_int]
        self.dll.ckir_set_num_threads.restype = None
        self.dll.ckir_get_num_threads.restype = ctypes.c_int
        self.dll.ckir_runtime_isa.restype = ctypes.c_char_p
        if hasattr(self.dll, "ckir_set_amx"):  # benchmarks load builds older than AMX
            self.dll.ckir_set_amx.argtypes = [ctypes.c_int]
            self.dll.ckir_set_amx.restype = ctypes.c_int
            self.dll.ckir_runtime_amx.restype = ctypes.c_int
            self.dll.ckir_runtime_amx_calls.restype = ctypes.c_long
        self._fns: dict[str, ctypes._CFuncPtr] = {}
        self._fp32_x = False

    @property
    def isa(self) -> str:
        return self.dll.ckir_runtime_isa().decode()

    @property
    def bf16_dot(self) -> bool:
        """Whether gemm_bf16 with M > 32 and an even K rounds x to bf16 (vdpbf16ps)."""
        return runtime_bf16_dot(self.dll)

    @property
    def qp_int8(self) -> bool:
        """Whether gemm_q8_0p / gemm_q4_1p compute each row as gemv_<p> does (int8 x):
        a runtime with the int8 GEMM, not switched to fp32 x (:meth:`qp_fp32_x`)."""
        fn = getattr(self.dll, "ckir_runtime_qp_int8_gemm", None)
        return fn is not None and bool(fn()) and not self._fp32_x

    def qp_fp32_x(self, on: bool) -> None:
        """ckir_runtime_qp_fp32_x: this thread's q8_0p / q4_1p GEMMs on fp32 x (on)."""
        self.dll.ckir_runtime_qp_fp32_x(int(on))
        self._fp32_x = on

    def set_amx(self, mode: int) -> int:
        """ckir_set_amx: the process-wide AMX mode (AMX_OFF / AMX_ON / AMX_EMULATE);
        returns the mode in effect."""
        return int(self.dll.ckir_set_amx(mode))

    @property
    def amx(self) -> int:
        """ckir_runtime_amx: the AMX mode in effect."""
        return int(self.dll.ckir_runtime_amx())

    @property
    def amx_calls(self) -> int:
        """ckir_runtime_amx_calls: AMX GEMM calls (thread shares) run so far."""
        return int(self.dll.ckir_runtime_amx_calls())

    def set_num_threads(self, n: int) -> None:
        self.dll.ckir_set_num_threads(n)

    def get_num_threads(self) -> int:
        return self.dll.ckir_get_num_threads()

    @contextlib.contextmanager
    def num_threads(self, n: int) -> Iterator[None]:
        """The kernels run with ``n`` OpenMP threads inside the block (set back after)."""
        before = self.get_num_threads()
        self.set_num_threads(n)
        try:
            yield
        finally:
            self.set_num_threads(before)

    def _fn(self, c_name: str, spec: KernelSpec):
        if c_name not in self._fns:
            fn = getattr(self.dll, c_name)
            fn.restype = None
            ctypes_of = {"i64": ctypes.c_int64, "f32": ctypes.c_float, "f32s": ctypes.c_void_p}
            fn.argtypes = [ctypes.c_void_p] * len(spec.operands) + [
                ctypes_of[p.type] for p in spec.params
            ]
            self._fns[c_name] = fn
        return self._fns[c_name]

    def _invoke(self, c_name: str, spec: KernelSpec, args: tuple) -> None:
        nb, npar = len(spec.operands), len(spec.params)
        if len(args) != nb + npar:
            raise TypeError(f"{spec.name} takes {nb} buffers + {npar} params, got {len(args)}")
        cargs: list = []
        for op, arr in zip(spec.operands, args[:nb], strict=True):
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{spec.name}: operand {op.name} must be a numpy array")
            if arr.dtype != NP_DTYPES[op.dtype] or not arr.flags.c_contiguous:
                raise TypeError(f"{spec.name}: operand {op.name} must be contiguous {op.dtype}")
            if op.access != "read" and not arr.flags.writeable:
                raise TypeError(f"{spec.name}: operand {op.name} must be writeable")
            cargs.append(arr.ctypes.data)
        tables = []  # f32s tables: alive until the call returns
        for p, v in zip(spec.params, args[nb:], strict=True):
            if p.type == "f32s":
                tables.append(np.ascontiguousarray(v, dtype=np.float32))
                cargs.append(tables[-1].ctypes.data)
            else:
                cargs.append(int(v) if p.type == "i64" else float(v))
        self._fn(c_name, spec)(*cargs)

    def call(self, name: str, *args) -> None:
        spec = self.registry[name]
        self._invoke(spec.c_name, spec, args)

    def ref(self, name: str, *args) -> None:
        spec = self.registry[name]
        self._invoke(spec.c_name.replace("ckir_", "ckir_ref_", 1), spec, args)


def build_runtime(isa: str, out_dir: Path) -> RuntimeLib:
    path = build_library(Path(out_dir) / f"libckir_{isa}.so", isa=isa)
    return RuntimeLib(path)


def rand(rng: np.random.Generator, *shape: int, scale: float = 1.0, loc: float = 0.0) -> np.ndarray:
    """float32 normal samples of ``shape`` (mean ``loc``, standard deviation ``scale``)."""
    return (rng.standard_normal(shape) * scale + loc).astype(np.float32)


# ------------------------------------------------- helpers of the kernel test files


def close(actual, expected, rtol=1e-5, atol=1e-5):
    """assert_allclose of a kernel's output (any dtype) against a float64 oracle."""
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=atol)


def both(lib, name, outputs, make_args, check):
    """Run the public kernel and its ref twin on fresh copies (``make_args()``); call
    ``check(*outputs)`` on the arguments at the indices ``outputs`` of each run."""
    results = []
    for fn in (lib.call, lib.ref):
        args = make_args()
        fn(name, *args)
        outs = [args[i] for i in outputs]
        check(*outs)
        results.append(outs)
    return results


def num_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar f at x (float64), one entry of x at a time."""
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        out[idx] = (f(xp) - f(xm)) / (2 * h)
    return out


def rope_plain(D):
    """The scaling arguments of rope_f32 / rope_bwd_f32 for plain RoPE over all D dims:
    R, factor, ramp_w, ramp_i, ramp_0, mscale."""
    return (D, 1.0, 0.0, 0.0, 0.0, 1.0)


def runtime_bf16_dot(dll: ctypes.CDLL) -> bool:
    """ckir_runtime_bf16_dot() of a loaded runtime library: whether its gemm_bf16 with
    M > 32 and an even K rounds x to bf16; False for a library older than the function
    (benchmarks load old builds)."""
    fn = getattr(dll, "ckir_runtime_bf16_dot", None)
    return fn is not None and bool(fn())


#: ckir_set_amx's modes (ckir_runtime.h)
AMX_OFF, AMX_ON, AMX_EMULATE = 0, 1, 2


def amx_cpu() -> bool:
    """Whether /proc/cpuinfo shows the AMX the runtime's tiles need (tile, bf16, int8)."""
    return {"amx_tile", "amx_bf16", "amx_int8"} <= cpu_flags()


@contextlib.contextmanager
def amx_tiles(dll: ctypes.CDLL) -> Iterator[None]:
    """A runtime library's GEMMs on AMX tiles inside the block: the hardware where
    the CPU has AMX, else emulated (the library must have the path:
    ckir_runtime_bf16_dot).  Asserts the block reached the tiles; the library's
    mode is set back afterwards."""
    dll.ckir_runtime_amx_calls.restype = ctypes.c_long
    before = dll.ckir_runtime_amx()
    mode = AMX_ON if amx_cpu() else AMX_EMULATE
    try:
        assert dll.ckir_set_amx(mode) == mode, "ckir_set_amx refused the tiles"
        calls = dll.ckir_runtime_amx_calls()
        yield
        assert dll.ckir_runtime_amx_calls() > calls, "the block did not run on the AMX tiles"
    finally:
        dll.ckir_set_amx(before)


#: rows above which gemm_bf16 may run on vdpbf16ps (CKIR_WGEMM_SMALL_M in ckir_quant.h)
WGEMM_SMALL_M = 32


def gemm_bf16_x(x: np.ndarray, bf16_dot: bool, public: bool = True) -> np.ndarray:
    """The x that gemm_bf16 (and the bf16 GEMMs built on it) multiplies, as float64.

    A public kernel of a build with ``bf16_dot`` (ckir_runtime_bf16_dot) rounds x to
    bf16, nearest even, when M > 32 and K is even; reference twins never do.
    """
    M, K = x.shape if x.ndim == 2 else (1, x.shape[0])
    if public and bf16_dot and M > WGEMM_SMALL_M and K % 2 == 0:
        return quant.from_bf16(quant.to_bf16(x)).astype(np.float64)
    return x.astype(np.float64)


# ------------------------------------- quantized-weight oracles (quant and panel tests)


def block_fields(wq: np.ndarray, dtype: str):
    """(d, m, integer weights [n, nb, 32]) of block bytes wq [n, row bytes]."""
    nbytes = quant.block_bytes(dtype)[1]
    blk = wq.reshape(wq.shape[0], -1, nbytes)

    def f16(b):
        return np.ascontiguousarray(b).view(np.float16)[..., 0].astype(np.float64)

    d = f16(blk[..., 0:2])
    if dtype == "q8_0":
        return d, np.zeros_like(d), blk[..., 2:].view(np.int8).astype(np.int64)
    if dtype in ("q5_0", "q5_1"):  # qh (bit j: element j's fifth bit), then q4's nibbles
        head = 4 if dtype == "q5_1" else 2
        qh = np.ascontiguousarray(blk[..., head : head + 4]).view("<u4").astype(np.int64)
        qs = blk[..., head + 4 :]
        q5 = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int64)
        q5 |= ((qh >> np.arange(32)) & 1) << 4
        if dtype == "q5_0":
            return d, np.zeros_like(d), q5 - 16
        return d, f16(blk[..., 2:4]), q5
    qs = blk[..., 4:] if dtype == "q4_1" else blk[..., 2:]
    nib = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int64)
    if dtype == "q4_0":
        return d, np.zeros_like(d), nib - 8
    return d, f16(blk[..., 2:4]), nib


def emulate_gemv(x, wq, dtype):
    """(y, scale of the terms, activation-rounding bound) of the integer scheme, float64."""
    a, dx = quantize_x(x)
    d, m, q = block_fields(wq, dtype)
    isum = np.einsum("nbj,bj->nb", q, a).astype(np.float64)
    dx64 = dx.astype(np.float64)
    sx = dx64 * a.sum(axis=1)  # q4_1: d_x * sum of the quantized block
    terms = isum * (d * dx64[None, :]) + m * sx[None, :]
    y = terms.sum(axis=1)
    mag = (np.abs(isum) * np.abs(d * dx) + np.abs(m) * np.abs(sx)[None, :]).sum(axis=1)
    # every weight meets the quantized x: d*q + m (q includes the -8 of q4_0)
    wpart = np.abs(d[..., None] * q + m[..., None]).sum(axis=2)  # [n, nb]
    bound = (wpart * (dx.astype(np.float64) / 2)[None, :]).sum(axis=1)
    return y, mag, bound


#: rows per panel of the runtime's panel layouts (CKIR_PANEL)
PANEL = 32
#: block panel dtype -> (its plain block format, bytes per block)
QBLOCK = {"q8_0p": ("q8_0", 34), "q4_1p": ("q4_1", 20), "q4_0p": ("q4_0", 18)}


def pack_block_panels(w: np.ndarray, dtype: str) -> np.ndarray:
    """w[N, K] (K % 32 == 0) as q8_0p, q4_1p or q4_0p bytes.  Per panel p and block b:
    q8_0p: the 32 rows' f16 d (64 bytes), then 8 quad rows of 128 bytes, byte 4 r + j
    of quad row i = q[32 p + r, 32 b + 4 i + j]; q4_1p: the 32 d (64 bytes), the 32 m
    (64 bytes), then 4 groups of 128 bytes, byte 4 r + j of group g = qs[4 g + j] of
    row 32 p + r's block; q4_0p: q4_1p without the m.  Rows >= N zero."""
    n, k = w.shape
    return pack_blocks_in_panels(quant.quantize(w, QBLOCK[dtype][0]), n, k, dtype)


def pack_blocks_in_panels(blocks: np.ndarray, n: int, k: int, dtype: str) -> np.ndarray:
    """The Q8_0 / Q4_1 / Q4_0 bytes of an [n, k] matrix as q8_0p / q4_1p / q4_0p
    (pack_block_panels)."""
    _, nbytes = QBLOCK[dtype]
    nb, p = k // 32, -(-n // PANEL)
    blk = np.zeros((p * PANEL, nb, nbytes), np.uint8)
    blk[:n] = blocks.reshape(n, nb, nbytes)
    arr = blk.reshape(p, PANEL, nb, nbytes).transpose(0, 2, 1, 3)  # [P, nb, 32 rows, bytes]
    head = 4 if dtype == "q4_1p" else 2  # the scale bytes of a block: d (and m)
    scales = [arr[..., h : h + 2].reshape(p, nb, 64) for h in range(0, head, 2)]
    groups = (nbytes - head) // 4
    quads = arr[..., head:].reshape(p, nb, PANEL, groups, 4).transpose(0, 1, 3, 2, 4)
    parts = [*scales, quads.reshape(p, nb, groups * 4 * PANEL)]
    return np.ascontiguousarray(np.concatenate(parts, axis=2)).reshape(-1)


def q6_kp_slots() -> list[int]:
    """The plane stored in each slot of a q6_kp panel block, as docs/quantization.md
    gives it: per half h and step u, ql 16h + L, ql 16h + 8 + L, qh 32 + 8h + L for L =
    4u .. 4u + 3, and after step 0 the scales 48 + 2h, 49 + 2h."""
    slots = []
    for h in (0, 1):
        for u in (0, 1):
            for lq in range(4 * u, 4 * u + 4):
                slots += [16 * h + lq, 16 * h + 8 + lq, 32 + 8 * h + lq]
            slots += [48 + 2 * h, 49 + 2 * h] if u == 0 else []
    return slots


def same_on_every_team(lib: RuntimeLib, run, teams=(2, 3, 8), repeats: int = 5) -> None:
    """``run()`` (a list of output arrays) on one thread, then ``repeats`` times on each
    team of ``teams`` threads (more than the machine's cores make the threads finish at
    different times): the one-thread outputs are finite and every team's are equal to
    them bit for bit."""
    with lib.num_threads(1):
        want = run()
    assert all(np.isfinite(a).all() for a in want)
    for team in teams:
        with lib.num_threads(team):
            for _ in range(repeats):
                for got, exp in zip(run(), want, strict=True):
                    np.testing.assert_array_equal(got, exp, err_msg=f"{team} threads")
