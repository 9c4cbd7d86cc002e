"""C for kernel IR: loop nests whose tiling, loop order, vector width and unroll follow
each op's ``#kernel.schedule``.

Every ``kernel.func`` becomes one C function::

    int mm(const float *restrict A, const float *restrict B, float *restrict out0,
           int64_t K, int64_t M, int64_t N);

inputs in order, then one output buffer per ``kernel.output`` value, then the dim
symbols in sorted order; it returns 0, or 1 when a temporary could not be
allocated.  Each compute op is a ``static`` function of its own, called with its
dims (dim expressions are C expressions over the symbols).

What each hint does in the C (``docs/kernel-ir.md`` has the full story):

- ``tile_m`` / ``tile_n`` / ``tile_k``: the step of the three tile loops (a
  matmul's rows, columns and reduction; a relu's rows and columns);
  the last tile of each dim is cut short with ``CKIR_MIN``;
- ``order``: the nesting of the three tile loops, outermost first.  A fused
  epilogue (relu, bias, activation) runs on each ``m x n`` tile right after its
  ``k`` loop when ``k`` is innermost, else in one pass after the nest;
- ``vectorize``: lanes per vector operation of the runtime's vector layer
  (``runtime/kernels/ckir_vec.h``: ``ckv_load_n`` / ``ckv_fma`` / ``ckv_store_n``,
  AVX-512, AVX2 or scalar picked by the ISA macros at compile time); 1 is plain
  scalar C; unset is the build's full width ``CKV_W``.  Columns that do not fill a
  vector go through masked loads and stores;
- ``unroll``: vector accumulators per row of a matmul's register block, which
  is ``mr x (vectorize * unroll)`` (``NR`` columns); vectors per step of a relu;
- ``mr``: rows of a matmul's register block: the micro-kernel keeps
  ``mr * unroll`` accumulators in registers over a whole ``tile_k`` step.

A matmul packs its tiles: the B tile ``[tile_k, tile_n]`` into ``NR``-column
panels as soon as its n and k tile loops are open, the A tile ``[tile_m, tile_k]``
into ``mr``-row panels as soon as its m and k loops are (both zero-padded, so the
micro-kernel never needs a mask); edge blocks run on a padded copy of C's block.

Each output element is accumulated over ``k`` in increasing order with one
fused multiply-add per step whatever the schedule, so every schedule gives the
same bits on a given build.  Hints that cannot apply are normalised with a note
(a tile larger than a dim known in the type, a ``tile_n`` narrower than one
vector, an ``mr`` larger than ``tile_m``) or refused with a
:class:`KernelCodegenError` (``vectorize`` wider than the build's vectors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from ckir.dialects import kernel as k
from ckir.dialects.dims import dim_symbols, try_evaluate_dim
from ckir.dialects.graph import TensorType
from ckir.errors import CkirError

__all__ = [
    "DEFAULTS",
    "GeneratedC",
    "KernelCodegenError",
    "Schedule",
    "default_schedule",
    "emit_module",
    "func_signature",
    "resolve_schedule",
    "supports",
]

#: the op kinds the generator has, by dtype (the fusion pass is gated on it)
SUPPORTED: dict[str, frozenset[str]] = {
    "f32": frozenset({"matmul", "matmul_relu", "linear", "relu"}),
}

#: the schedule an op gets for the fields its IR leaves unset (vectorize None: CKV_W)
DEFAULTS: dict[str, dict[str, int | str | None]] = {
    "matmul": {
        "tile_m": 96,
        "tile_n": 512,
        "tile_k": 256,
        "vectorize": None,
        "unroll": 2,
        "order": "nkm",
        "mr": 6,
    },  # fmt: skip
    "relu": {
        "tile_m": 64,
        "tile_n": 4096,
        "tile_k": 1,
        "vectorize": None,
        "unroll": 4,
        "order": "mnk",
        "mr": 1,
    },  # fmt: skip
}


def supports(kind: str, dtype: str) -> bool:
    """The generator emits ``kind`` (``matmul_relu``, ...) for tensors of ``dtype``."""
    return kind in SUPPORTED.get(dtype, frozenset())


def default_schedule(m: int, n: int, k: int, vector_width: int) -> dict[str, int | str]:
    """A matmul schedule for an ``m x k @ k x n`` product on a build with
    ``vector_width`` f32 lanes (16 AVX-512, 8 AVX2 / scalar): the starting point of a
    search, from the register file and cache sizes of common x86 cores.

    The register block takes ``mr * unroll`` accumulators plus ``unroll`` B vectors
    and a broadcast of A: 12 x 2 vectors of 32 zmm registers, 6 x 2 of 16 ymm; a
    product no wider than one vector takes 1 vector and more rows.  The packed B
    tile (``tile_k x tile_n``) is sized for L2, the packed A tile for L1/L2, and
    ``order = nkm`` packs each B tile once for every m tile.
    """
    wide = vector_width >= 16
    if n <= vector_width:
        mr, unroll = (14 if wide else 8), 1
    else:
        mr, unroll = (12 if wide else 6), 2
    return {
        "tile_m": mr * 8,
        "tile_n": 512,
        "tile_k": 512 if k <= 512 else 256,
        "unroll": unroll,
        "order": "nkm",
        "mr": mr,
    }


class KernelCodegenError(CkirError):
    """A kernel the C generator refuses (one line naming the func and op)."""


@dataclass(frozen=True)
class Schedule:
    """A schedule with every field set (after defaults and normalisation).

    ``vectorize`` None means the build's full vector width (``CKV_W``).
    """

    tile_m: int
    tile_n: int
    tile_k: int
    vectorize: int | None
    unroll: int
    order: str
    mr: int = 1

    def describe(self, fields: Sequence[str] = k.SCHEDULE_FIELDS) -> str:
        """``tile_m=32 tile_n=256 ...`` over ``fields`` (an op's applicable ones)."""
        parts = []
        for name in fields:
            value = getattr(self, name)
            parts.append(f"{name}={'CKV_W' if value is None else value}")
        return " ".join(parts)


@dataclass
class GeneratedC:
    """The generated source and the notes about normalised hints."""

    source: str
    notes: list[str] = field(default_factory=list)


def _op_ref(func: k.FuncOp, op: k.KernelComputeOp) -> str:
    hint = op.out.name_hint
    return f"kernel.func @{func.func_name}: {op.name}" + (f" %{hint}" if hint else "")


def _type(value: SSAValue) -> TensorType:
    t = value.type
    assert isinstance(t, TensorType)
    return t


def resolve_schedule(
    func: k.FuncOp,
    op: k.KernelComputeOp,
    dims: tuple[str, str, str],
    vector_width: int | None,
    notes: list[str],
    defaults: Mapping[str, int | str | None] | None = None,
) -> Schedule:
    """The op's schedule with defaults filled in and out-of-range hints normalised.

    ``dims`` are the (m, n, k) dim expressions; a tile larger than a dim that is a
    constant is cut to the dim, with a note.  ``vector_width`` is the build's
    ``CKV_W`` (None: unknown, the C checks it at compile time); a wider
    ``vectorize`` is refused.  ``defaults``: another target's values for the unset
    fields (else :data:`DEFAULTS`).
    """
    kind = "relu" if isinstance(op, k.ReluOp) else "matmul"
    base = DEFAULTS[kind] if defaults is None else defaults
    values: dict[str, int | str | None] = {**base, **op.schedule_values()}
    where = _op_ref(func, op)
    vec = values["vectorize"]
    if isinstance(vec, int) and vector_width is not None and vec > vector_width:
        raise KernelCodegenError(
            f"{where}: vectorize = {vec} needs {vec}-lane vectors but this build has "
            f"{vector_width} (use vectorize <= {vector_width} or an AVX-512 build)"
        )
    for name, dim in zip(("tile_m", "tile_n", "tile_k"), dims, strict=True):
        size = try_evaluate_dim(dim, {})
        tile = values[name]
        assert isinstance(tile, int)
        if size is not None and tile > size >= 1 and name in op.schedule_values():
            notes.append(f"{where}: {name} = {tile} exceeds the dim {size}: using {size}")
            values[name] = size
    tile_n = values["tile_n"]
    assert isinstance(tile_n, int)
    if isinstance(vec, int) and tile_n < vec and "tile_n" in op.schedule_values():
        notes.append(
            f"{where}: tile_n = {tile_n} is narrower than vectorize = {vec}: using tile_n = {vec}"
        )
        values["tile_n"] = vec
    mr, tile_m = values["mr"], values["tile_m"]
    assert isinstance(mr, int) and isinstance(tile_m, int)
    if mr > tile_m and "mr" in op.schedule_values():
        notes.append(f"{where}: mr = {mr} exceeds tile_m = {tile_m}: using mr = {tile_m}")
        values["mr"] = tile_m
    return Schedule(
        tile_m=int(values["tile_m"]),  # type: ignore[arg-type]
        tile_n=int(values["tile_n"]),  # type: ignore[arg-type]
        tile_k=int(values["tile_k"]),  # type: ignore[arg-type]
        vectorize=None if vec is None else int(vec),
        unroll=int(values["unroll"]),  # type: ignore[arg-type]
        order=str(values["order"]),
        mr=int(values["mr"]),  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- C pieces


class _Writer:
    """Lines of C with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("  " * self.depth + line if line else "")

    def open(self, line: str) -> None:
        self(line + " {")
        self.depth += 1

    def close(self, tail: str = "") -> None:
        self.depth -= 1
        self("}" + tail)


def _vec(s: Schedule) -> str:
    return "CKV_W" if s.vectorize is None else str(s.vectorize)


def _relu_rows(w: _Writer, s: Schedule, src: str, dst: str, stride: str, rows: tuple[str, str],
               cols: tuple[str, str]) -> None:  # fmt: skip
    """``dst[r, c] = max(src[r, c], 0)`` over rows [r0, r1) x cols [c0, c1)."""
    u = s.unroll
    w.open(f"for (int64_t r = {rows[0]}; r < {rows[1]}; r++)")
    w(f"const float *x = {src} + r * {stride};")
    w(f"float *y = {dst} + r * {stride};")
    w(f"int64_t j = {cols[0]};")
    if s.vectorize == 1:
        w.open(f"for (; j + {u} <= {cols[1]}; j += {u})")
        for i in range(u):
            w(f"y[j + {i}] = x[j + {i}] > 0.0f ? x[j + {i}] : 0.0f;")
        w.close()
        w(f"for (; j < {cols[1]}; j++) y[j] = x[j] > 0.0f ? x[j] : 0.0f;")
    else:
        v = _vec(s)
        w("const ckv zero = ckv_zero();")
        w.open(f"for (; j + {u} * {v} <= {cols[1]}; j += {u} * {v})")
        for i in range(u):
            at = f"j + {i} * {v}"
            w(f"ckv_store_n(y + {at}, {v}, ckv_max(ckv_load_n(x + {at}, {v}), zero));")
        w.close()
        w.open(f"for (; j < {cols[1]}; j += {v})")
        w(f"const int64_t ln = CKIR_MIN((int64_t){v}, {cols[1]} - j);")
        w("ckv_store_n(y + j, ln, ckv_max(ckv_load_n(x + j, ln), zero));")
        w.close()
    w.close()


_SCALAR_ACT = {
    "silu": "v / (1.0f + expf(-v))",
    "gelu": "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))",
}


def _epilogue(w: _Writer, s: Schedule, act: str, rows: tuple[str, str],
              cols: tuple[str, str]) -> None:  # fmt: skip
    """The activation of a matmul-like op over C[rows, cols], in place."""
    if act == "relu":
        _relu_rows(w, s, "C", "C", "N", rows, cols)
    elif act in _SCALAR_ACT:
        w.open(f"for (int64_t r = {rows[0]}; r < {rows[1]}; r++)")
        w.open(f"for (int64_t j = {cols[0]}; j < {cols[1]}; j++)")
        w("const float v = C[r * N + j];")
        w(f"C[r * N + j] = {_SCALAR_ACT[act]};")
        w.close()
        w.close()


@dataclass(frozen=True)
class _Lanes:
    """How the micro-kernel's C holds a step of columns: one float (``vectorize = 1``)
    or one ``ckv`` of ``width`` lanes of the runtime's vector layer."""

    width: str | None  # None: plain floats

    @property
    def ty(self) -> str:
        return "float" if self.width is None else "ckv"

    @property
    def fma(self) -> str:
        return "KFMA" if self.width is None else "ckv_fma"

    def off(self, i: int) -> str:
        """Offset of the i-th step of a row."""
        return str(i) if self.width is None else f"{i} * {self.width}"

    def load(self, base: str, index: str, n: str) -> str:
        return f"{base}[{index}]" if self.width is None else f"ckv_load_n({base} + {index}, {n})"

    def store(self, base: str, index: str, n: str, value: str) -> str:
        if self.width is None:
            return f"{base}[{index}] = {value};"
        return f"ckv_store_n({base} + {index}, {n}, {value});"

    def splat(self, x: str) -> str:
        return x if self.width is None else f"ckv_set1({x})"


def _nr(s: Schedule) -> str:
    """Columns of the register block (``vectorize * unroll``) as a C constant expression."""
    return str(s.unroll) if s.vectorize == 1 else f"({s.unroll} * {_vec(s)})"


def _micro_fn(w: _Writer, name: str, s: Schedule) -> None:
    """The register-blocked micro-kernel: an ``mr x NR`` block of C (row stride ``ldc``)
    += a packed A panel (``mr`` floats per k) @ a packed B panel (``NR`` floats per k).

    ``mr * unroll`` accumulators live in registers for the whole ``kc`` loop; every
    element still takes one fused multiply-add per k, in increasing k."""
    u, mr = s.unroll, s.mr
    lanes = _Lanes(None if s.vectorize == 1 else _vec(s))
    width = lanes.width or "1"
    w.open(
        f"CKIR_INLINE void {name}(int64_t kc, const float *restrict pa, "
        "const float *restrict pb, float *restrict c, int64_t ldc)"
    )
    for r in range(mr):
        for i in range(u):
            w(f"{lanes.ty} c{r}_{i} = {lanes.load('c', f'{r} * ldc + {lanes.off(i)}', width)};")
    w.open("for (int64_t k = 0; k < kc; k++)")
    for i in range(u):
        w(f"const {lanes.ty} b{i} = {lanes.load('pb', lanes.off(i), width)};")
    for r in range(mr):
        w(f"const {lanes.ty} a{r} = {lanes.splat(f'pa[{r}]')};")
        for i in range(u):
            w(f"c{r}_{i} = {lanes.fma}(a{r}, b{i}, c{r}_{i});")
    w(f"pa += {mr};")
    w(f"pb += {_nr(s)};")
    w.close()
    for r in range(mr):
        for i in range(u):
            w(lanes.store("c", f"{r} * ldc + {lanes.off(i)}", width, f"c{r}_{i}"))
    w.close()
    w("")


def _pack_b(w: _Writer) -> None:
    """B[k0:k1, n0:n1] -> pb: panels of ``nr`` columns, k-major, the last one zero-padded."""
    w("/* pack B[k0:k1, n0:n1] into panels of NR columns (k-major, zero-padded) */")
    w.open("for (int64_t q = 0; q < n1 - n0; q += NR)")
    w("const int64_t wd = CKIR_MIN(NR, n1 - n0 - q);")
    w("float *restrict dst = pb + q * (k1 - k0);")
    w.open("for (int64_t kk = 0; kk < k1 - k0; kk++)")
    w("const float *restrict src = B + (k0 + kk) * N + n0 + q;")
    w("float *restrict d = dst + kk * NR;")
    w("if (wd == NR) for (int64_t j = 0; j < NR; j++) d[j] = src[j];")
    w("else for (int64_t j = 0; j < NR; j++) d[j] = j < wd ? src[j] : 0.0f;")
    w.close()
    w.close()


def _pack_a(w: _Writer) -> None:
    """A[m0:m1, k0:k1] -> pa: panels of ``MR`` rows, k-major, the last one zero-padded."""
    w("/* pack A[m0:m1, k0:k1] into panels of MR rows (k-major, zero-padded) */")
    w.open("for (int64_t p = 0; p < m1 - m0; p += MR)")
    w("const int64_t ht = CKIR_MIN(MR, m1 - m0 - p);")
    w("float *restrict dst = pa + p * (k1 - k0);")
    w.open("for (int64_t r = 0; r < MR; r++)")
    w.open("if (r < ht)")
    w("const float *restrict src = A + (m0 + p + r) * K + k0;")
    w("for (int64_t kk = 0; kk < k1 - k0; kk++) dst[kk * MR + r] = src[kk];")
    w.close()
    w("else for (int64_t kk = 0; kk < k1 - k0; kk++) dst[kk * MR + r] = 0.0f;")
    w.close()
    w.close()


def _blocks(w: _Writer, micro: str) -> None:
    """Every MR x NR block of the tile [m0, m1) x [n0, n1): whole blocks straight on C,
    edge blocks through a zero-padded copy of C's block."""
    w.open("for (int64_t jp = n0; jp < n1; jp += NR)")
    w("const int64_t nr = CKIR_MIN(NR, n1 - jp);")
    w("const float *restrict pbp = pb + (jp - n0) * (k1 - k0);")
    w.open("for (int64_t ip = m0; ip < m1; ip += MR)")
    w("const int64_t mr = CKIR_MIN(MR, m1 - ip);")
    w("const float *restrict pap = pa + (ip - m0) * (k1 - k0);")
    w("float *restrict c = C + ip * N + jp;")
    w.open("if (mr == MR && nr == NR)")
    w(f"{micro}(k1 - k0, pap, pbp, c, N);")
    w.close()
    w.open("else")
    w("/* an edge block: its part of C in a padded MR x NR copy */")
    w("_Alignas(64) float ct[MR * NR];")
    w.open("for (int64_t r = 0; r < MR; r++)")
    w("for (int64_t j = 0; j < NR; j++) ct[r * NR + j] = r < mr && j < nr ? c[r * N + j] : 0.0f;")
    w.close()
    w(f"{micro}(k1 - k0, pap, pbp, ct, NR);")
    w.open("for (int64_t r = 0; r < mr; r++)")
    w("for (int64_t j = 0; j < nr; j++) c[r * N + j] = ct[r * NR + j];")
    w.close()
    w.close()
    w.close()
    w.close()


_LOOP = {
    "m": ("m0", "M", "tile_m", "m1"),
    "n": ("n0", "N", "tile_n", "n1"),
    "k": ("k0", "K", "tile_k", "k1"),
}


def _matmul_fn(w: _Writer, name: str, s: Schedule, bias: bool, act: str, what: str) -> None:
    """A matmul-like op: packed A and B tiles, ``mr x NR`` register blocks, an epilogue.

    B's tile is packed as soon as its n and k tile loops are open, A's as soon as its
    m and k loops are: with ``order = nkm`` a packed B tile serves every m tile."""
    b = ", const float *restrict bias" if bias else ""
    nr = _nr(s)
    micro = f"{name}_micro"
    _micro_fn(w, micro, s)
    w(f"/* {what}: {s.describe()} */")
    w.open(
        f"static int {name}(const float *restrict A, const float *restrict B{b}, "
        "float *restrict C, int64_t M, int64_t N, int64_t K)"
    )
    w(f"enum {{ MR = {s.mr}, NR = {nr} }};")
    w.open("for (int64_t i = 0; i < M; i++)")
    w(f"for (int64_t j = 0; j < N; j++) C[i * N + j] = {'bias[j]' if bias else '0.0f'};")
    w.close()
    w(f"const int64_t mc = CKIR_MIN((int64_t){s.tile_m}, M);")
    w(f"const int64_t nc = CKIR_MIN((int64_t){s.tile_n}, N);")
    w(f"const int64_t kc = CKIR_MIN((int64_t){s.tile_k}, K);")
    w("const size_t a_bytes = sizeof(float) * (size_t)(((mc + MR - 1) / MR) * MR * kc);")
    w("const size_t b_bytes = sizeof(float) * (size_t)(((nc + NR - 1) / NR) * NR * kc);")
    w("float *pa = (float *)aligned_alloc(64, (a_bytes + 63) / 64 * 64);")
    w("float *pb = (float *)aligned_alloc(64, (b_bytes + 63) / 64 * 64);")
    w.open("if (!pa || !pb)")
    w("free(pa);")
    w("free(pb);")
    w("return 1;")
    w.close()
    fused_epilogue = act != "none" and s.order[2] == "k"
    pack_b_at = max(s.order.index("n"), s.order.index("k"))
    pack_a_at = max(s.order.index("m"), s.order.index("k"))
    for level, axis in enumerate(s.order):
        var, dim, tile_field, end = _LOOP[axis]
        tile = getattr(s, tile_field)
        w.open(f"for (int64_t {var} = 0; {var} < {dim}; {var} += {tile})")
        w(f"const int64_t {end} = CKIR_MIN({var} + {tile}, {dim});")
        if level == pack_b_at:
            _pack_b(w)
        if level == pack_a_at:
            _pack_a(w)
    _blocks(w, micro)
    w.close()  # the innermost tile loop
    if fused_epilogue:
        w(f"/* the {act} epilogue of this tile: k is the innermost tile loop */")
        _epilogue(w, s, act, ("m0", "m1"), ("n0", "n1"))
    w.close()
    w.close()
    w("free(pa);")
    w("free(pb);")
    if act != "none" and not fused_epilogue:
        w(f"/* the {act} epilogue, after the nest: k is not the innermost tile loop */")
        _epilogue(w, s, act, ("0", "M"), ("0", "N"))
    w("return 0;")
    w.close()


def _relu_fn(w: _Writer, name: str, s: Schedule, what: str) -> None:
    w(f"/* {what}: {s.describe(k.ReluOp.SCHEDULE_APPLIES)} */")
    w.open(f"static void {name}(const float *restrict X, float *restrict Y, int64_t R, int64_t N)")
    w.open(f"for (int64_t r0 = 0; r0 < R; r0 += {s.tile_m})")
    w(f"const int64_t r1 = CKIR_MIN(r0 + {s.tile_m}, R);")
    w.open(f"for (int64_t c0 = 0; c0 < N; c0 += {s.tile_n})")
    w(f"const int64_t c1 = CKIR_MIN(c0 + {s.tile_n}, N);")
    _relu_rows(w, s, "X", "Y", "N", ("r0", "r1"), ("c0", "c1"))
    w.close()
    w.close()
    w.close()


# --------------------------------------------------------------------------- functions


def _c_dim(dim: str) -> str:
    return f"(int64_t)({dim})"


def _numel(t: TensorType) -> str:
    return " * ".join(_c_dim(d) for d in t.dims) if t.dims else "1"


def func_symbols(func: k.FuncOp) -> list[str]:
    """The dim symbols of a func's tensors, sorted (the generated function's last params)."""
    names: set[str] = set()
    for op in func.body_block.ops:
        for r in op.results:
            if isinstance(r.type, TensorType):
                for d in r.type.dims:
                    names.update(dim_symbols(d))
    return sorted(names)


def func_signature(func: k.FuncOp) -> tuple[list[str], int, list[str]]:
    """(input names, number of outputs, dim symbols) of the generated C function."""
    out = func.output()
    assert out is not None
    return [i.input_name.data for i in func.inputs()], len(out.values), func_symbols(func)


def _emit_func(w: _Writer, func: k.FuncOp, vector_width: int | None, notes: list[str]) -> None:
    fname = func.func_name
    inputs, n_out, symbols = func_signature(func)
    clash = set(inputs) & set(symbols)
    if clash:
        raise KernelCodegenError(
            f'kernel.func @{fname}: input "{sorted(clash)[0]}" has the name of a dim symbol'
        )
    names: dict[SSAValue, str] = {inp.result: inp.input_name.data for inp in func.inputs()}
    out_op = func.output()
    assert out_op is not None
    # results written straight into an output buffer (the first time they are returned)
    direct: dict[SSAValue, str] = {}
    for i, v in enumerate(out_op.values):
        if v not in names and v not in direct:
            direct[v] = f"out{i}"
    calls: list[tuple[str, bool]] = []  # (the call, it returns 1 when out of memory)
    temps: list[tuple[str, TensorType]] = []
    for index, op in enumerate(func.body_block.ops):
        if not isinstance(op, k.KernelComputeOp):
            continue
        if not supports(op.name.removeprefix("kernel."), _type(op.out).dtype_name):
            raise KernelCodegenError(f"{_op_ref(func, op)}: not supported by the C generator")
        sub = f"{fname}_op{index}"
        dst = direct.get(op.out)
        if dst is None:
            dst = f"t{index}"
            temps.append((dst, _type(op.out)))
        names[op.out] = dst
        what = _op_ref(func, op)
        if isinstance(op, k.ReluOp):
            t = _type(op.x)
            rows = " * ".join(_c_dim(d) for d in t.dims[:-1]) or "1"
            rows_dim = "*".join(f"({d})" for d in t.dims[:-1]) or "1"
            s = resolve_schedule(func, op, (rows_dim, t.dims[-1], "1"), vector_width, notes)
            _relu_fn(w, sub, s, what)
            calls.append((f"{sub}({names[op.x]}, {dst}, {rows}, {_c_dim(t.dims[-1])})", False))
        else:
            assert isinstance(op, k.MatmulOp | k.MatmulReluOp | k.LinearOp)
            at, bt = _type(op.a), _type(op.b)
            m, kk, n = at.dims[0], at.dims[1], bt.dims[1]
            s = resolve_schedule(func, op, (m, n, kk), vector_width, notes)
            bias = isinstance(op, k.LinearOp) and op.bias is not None
            act = op.epilogue
            _matmul_fn(w, sub, s, bias, act, what)
            args = [names[op.a], names[op.b]]
            if bias:
                assert isinstance(op, k.LinearOp) and op.bias is not None
                args.append(names[op.bias])
            dims = ", ".join(_c_dim(d) for d in (m, n, kk))
            calls.append((f"{sub}({', '.join(args)}, {dst}, {dims})", True))
        w("")
    params = [f"const float *restrict {n}" for n in inputs]
    params += [f"float *restrict out{i}" for i in range(n_out)]
    params += [f"int64_t {s}" for s in symbols]
    w(f"/* kernel.func @{fname} */")
    w.open(f"int {fname}({', '.join(params)})")
    for s in symbols:
        w(f"(void){s};")
    for name, t in temps:
        w(f"float *{name} = (float *)malloc(sizeof(float) * (size_t)({_numel(t)}));")
    if temps:
        w("if (" + " || ".join(f"!{n}" for n, _ in temps) + ") {")
        w("  " + " ".join(f"free({n});" for n, _ in temps))
        w("  return 1;")
        w("}")
    fail = " ".join([*(f"free({n});" for n, _ in temps), "return 1;"])
    for call, may_fail in calls:
        w(f"if ({call}) {{ {fail} }}" if may_fail else f"{call};")
    for i, v in enumerate(out_op.values):
        if direct.get(v) != f"out{i}":
            numel = _numel(_type(v))
            w(f"memcpy(out{i}, {names[v]}, sizeof(float) * (size_t)({numel}));")
    for name, _ in temps:
        w(f"free({name});")
    w("return 0;")
    w.close()
    w("")


_PRELUDE = """\
/* generated by ckir from kernel IR: do not edit.  The vector layer is the runtime's
 * (ckir_vec.h via ckir_internal.h): AVX-512, AVX2 or scalar, chosen by the ISA macros. */
#include <stdlib.h>

#include "ckir_internal.h"

/* one rounding per multiply-add, as ckv_fma does on this build */
#if defined(CKIR_AVX512) || defined(CKIR_AVX2)
#define KFMA(a, b, c) fmaf((a), (b), (c))
#else
#define KFMA(a, b, c) ((a) * (b) + (c))
#endif
"""


def emit_module(module: ModuleOp, vector_width: int | None = None) -> GeneratedC:
    """C source for every ``kernel.func`` of ``module``.

    ``vector_width`` is the lanes of the build the source is for (16 AVX-512,
    8 AVX2 / scalar; None: unknown, checked by ``#error`` when compiled).
    Raises KernelCodegenError for an op or hint it refuses.
    """
    funcs = [op for op in module.walk() if isinstance(op, k.FuncOp)]
    if not funcs:
        raise KernelCodegenError("no kernel.func in the module")
    notes: list[str] = []
    w = _Writer()
    for line in _PRELUDE.splitlines():
        w(line)
    widths = sorted(
        {
            int(op.schedule_values()["vectorize"])
            for f in funcs
            for op in f.body_block.ops
            if isinstance(op, k.KernelComputeOp) and "vectorize" in op.schedule_values()
        }
    )
    if widths and widths[-1] > 1:
        w(f"#if CKV_W < {widths[-1]}")
        w(f'#error "a schedule asks for vectorize = {widths[-1]}: this build has narrower vectors"')
        w("#endif")
    w("")
    for func in funcs:
        _emit_func(w, func, vector_width, notes)
    for i, note in enumerate(notes):
        w.lines.insert(2 + i, f"/* note: {note} */")
    return GeneratedC("\n".join(w.lines).rstrip() + "\n", notes)
