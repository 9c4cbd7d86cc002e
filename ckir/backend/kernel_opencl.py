"""OpenCL C for kernel IR: the same ``kernel.func`` ops and ``#kernel.schedule`` hints as
the C target (:mod:`ckir.backend.kernel_c`), as OpenCL kernels plus a launch plan.

Every compute op becomes one ``__kernel`` (a fused matmul epilogue that cannot run in
registers adds a second, element-wise one); :class:`Launch` says how the host runs
it (:mod:`ckir.opencl_runtime` does, through pyopencl).  A matmul-like op is a tiled
local-memory matmul:

- ``tile_m`` x ``tile_n``: the output tile of one work-group.  A work-group has
  ``ceil(tile_n / (vectorize * unroll))`` x ``ceil(tile_m / mr)`` work-items; each owns
  ``mr`` rows of the tile and ``unroll`` vectors of ``vectorize`` columns in each
  (its ``mr * unroll`` accumulators, manually unrolled);
- ``tile_k``: the reduction runs in steps of ``tile_k``; each step stages
  ``A[tile_m, tile_k]`` and ``B[tile_k, tile_n]`` in ``__local`` memory (loaded
  cooperatively by the work-group, zero outside the matrices) between two barriers;
- ``vectorize``: the lanes of the accumulators (``floatN``) and of the staging
  loads and the stores (``vloadN`` / ``vstoreN`` where all N values lie inside the
  matrix, a guarded per-lane fallback at the edges); 1 is scalar code;
- ``unroll``: vector accumulators per row of a work-item (columns ``vectorize * unroll``);
- ``mr``: rows per work-item (register blocking): each B vector read from local
  memory is used for ``mr`` rows; rows past the matrix's edge or the tile's (an
  explicit ``mr`` that does not divide ``tile_m``, with a note; the local A tile is
  padded with zero rows) are computed on zeros and not stored.  An unset ``mr`` is
  the largest divisor of ``tile_m`` up to :data:`DEFAULT_MR`;
- ``order``: the tile loops, outermost first.  The m and n tile loops are the
  NDRange's work-groups: the inner of the two is dimension 0 (consecutive
  work-groups walk it).  With ``k`` innermost the kernel runs the whole
  reduction and applies the epilogue (relu, bias, activation) in registers;
  otherwise the host runs the tile loops up to ``k`` (one launch per k tile,
  and per tile of an m / n loop outside ``k``), each launch adds its k tile's
  products to C in global memory, and the activation is a separate launch
  after the nest.

A relu gives every work-group ``tile_m`` rows (one work-item each) of ``tile_n``
columns, walked ``vectorize * unroll`` columns per step.

A matmul's unset hints take :data:`MATMUL_DEFAULTS` (not the C target's).

Numbers: every output element starts at 0 (or its bias) and takes one ``fma`` per
``k`` in increasing order, whatever the schedule, so every schedule gives the same
bits (an activation other than relu may differ by an ulp between its vector and
scalar forms).  Hints are normalised exactly as for C
(:func:`ckir.backend.kernel_c.resolve_schedule`, which writes the notes);
``vectorize`` unset means :data:`DEFAULT_VECTORIZE` lanes.  A schedule the
device cannot run (too many work-items per group, too much local memory) is
refused by the runtime with a message naming the op.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from ckir.backend.kernel_c import (
    KernelCodegenError,
    Schedule,
    _op_ref,
    _type,
    _Writer,
    func_signature,
    resolve_schedule,
    supports,
)
from ckir.dialects import kernel as k
from ckir.dialects.graph import TensorType

__all__ = [
    "DEFAULT_MR",
    "DEFAULT_VECTORIZE",
    "MATMUL_DEFAULTS",
    "GeneratedOpenCL",
    "Launch",
    "OpenCLFunc",
    "emit_module",
]

#: lanes of a schedule that leaves ``vectorize`` unset (OpenCL has no build width)
DEFAULT_VECTORIZE = 8
#: the widest ``floatN`` of OpenCL C (every ``vectorize`` the verifier allows)
MAX_VECTOR = 16
#: the most rows per work-item of a schedule that leaves ``mr`` unset
DEFAULT_MR = 4
#: a matmul's unset fields (the C target's packed-GEMM defaults would give work-groups
#: of thousands of work-items); ``mr`` is then resolved by :func:`_rows_per_item`
MATMUL_DEFAULTS: dict[str, int | str | None] = {
    "tile_m": 32,
    "tile_n": 128,
    "tile_k": 128,
    "vectorize": None,
    "unroll": 2,
    "order": "mnk",
    "mr": DEFAULT_MR,
}


@dataclass(frozen=True)
class Launch:
    """How the host runs one compute op's kernel(s).

    ``args`` are the value names of the operands (inputs or temporaries), ``out``
    the result's; ``dims`` the dim expressions (m, n, k) of a matmul or
    (rows, columns, "1") of a relu, over the func's symbols.
    """

    kind: str  # "matmul" or "relu"
    kernel: str
    where: str
    args: tuple[str, ...]
    out: str
    dims: tuple[str, str, str]
    schedule: Schedule
    local: tuple[int, int]
    local_bytes: int
    #: matmul: NDRange dimension of the m and n tile loops (0 or 1)
    m_dim: int = 1
    #: matmul: the tile loops the host runs (the order's prefix up to k), outermost first
    host_loops: str = ""
    #: matmul with k not innermost and an activation: the element-wise kernel after the nest
    epilogue: str | None = None

    @property
    def work_group_size(self) -> int:
        return self.local[0] * self.local[1]


@dataclass
class OpenCLFunc:
    """One ``kernel.func``: its inputs, launches in order and returned values."""

    name: str
    inputs: list[str]
    launches: list[Launch]
    temps: dict[str, TensorType]
    outputs: list[str]
    output_types: list[TensorType]
    symbols: list[str]


@dataclass
class GeneratedOpenCL:
    """The OpenCL C program, the host's launch plan per func and the notes."""

    source: str
    funcs: list[OpenCLFunc]
    notes: list[str] = field(default_factory=list)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- helpers

_ACT = {
    "relu": "({x} > 0.0f ? {x} : 0.0f)",
    "silu": "({x} / (1.0f + exp(-{x})))",
    "gelu": "(0.5f * {x} * (1.0f + erf({x} * 0.70710678118654752f)))",
}


def _act(act: str, x: str, v: int) -> str:
    """``act`` of ``x`` (a float, or a floatV when v > 1)."""
    if act == "relu" and v > 1:
        return f"select((float{v})(0.0f), {x}, {x} > 0.0f)"
    return _ACT[act].format(x=x)


def _helpers(w: _Writer, v: int) -> None:
    """Guarded ``floatV`` load / store / staging of ``n`` valid lanes (vloadV when all are)."""
    t = f"float{v}"
    w(f"/* {v} lanes at p, of which n (may be <= 0) lie inside the matrix: vload{v} when all */")
    w.open(f"static inline {t} ckir_load{v}(__global const float *p, const long n)")
    w(f"if (n >= {v}) return vload{v}(0, p);")
    w(f"float t[{v}];")
    w(f"for (int l = 0; l < {v}; l++) t[l] = l < n ? p[l] : 0.0f;")
    w(f"return vload{v}(0, t);")
    w.close()
    w.open(f"static inline void ckir_store{v}(const {t} x, __global float *p, const long n)")
    w.open(f"if (n >= {v})")
    w(f"vstore{v}(x, 0, p);")
    w("return;")
    w.close()
    w(f"float t[{v}];")
    w(f"vstore{v}(x, 0, t);")
    w(f"for (int l = 0; l < {v} && l < n; l++) p[l] = t[l];")
    w.close()
    w.open(
        f"static inline void ckir_stage{v}(__local float *d, __global const float *p, const long n)"
    )
    w(f"vstore{v}(ckir_load{v}(p, n), 0, d);")
    w.close()
    w("")


# --------------------------------------------------------------------------- matmul


@dataclass(frozen=True)
class _Tile:
    """The numbers of one matmul kernel's work-group."""

    s: Schedule
    v: int

    @property
    def vu(self) -> int:  # columns per work-item
        return self.v * self.s.unroll

    @property
    def lx(self) -> int:  # work-items along n
        return _ceil(self.s.tile_n, self.vu)

    @property
    def ly(self) -> int:  # work-items along m
        return _ceil(self.s.tile_m, self.s.mr)

    @property
    def tmp(self) -> int:  # the local A tile's rows (padded to whole work-items)
        return self.ly * self.s.mr

    @property
    def tnp(self) -> int:  # the local B tile's row (padded to whole work-items)
        return self.lx * self.vu

    @property
    def tkp(self) -> int:  # the local A tile's row (padded to whole vectors)
        return _ceil(self.s.tile_k, self.v) * self.v


def _stage(w: _Writer, t: _Tile, dst: str, src: str, rows: tuple[str, str, str],
           cols: tuple[str, str, str], width: int, stride: str) -> None:  # fmt: skip
    """Copy ``src[rows, cols]`` into the local ``dst`` (rows of ``width`` floats).

    rows/cols: (first global index, end global index, tile extent)."""
    v = t.v
    chunks = width // v
    r0, r1, rn = rows
    c0, c1, _ = cols
    w.open(f"for (int e = lid; e < {rn} * {chunks}; e += {t.lx * t.ly})")
    w(f"const int i = e / {chunks}, j = (e % {chunks}) * {v};")
    w(f"const long gr = {r0} + i, gc = {c0} + j;")
    if v == 1:
        w(f"{dst}[i * {width} + j] = (gr < {r1} && gc < {c1}) ? {src}[gr * {stride} + gc] : 0.0f;")
    else:
        w(f"ckir_stage{v}({dst} + i * {width} + j, {src} + (gr < {r1} ? gr : 0) * {stride} + gc,")
        w(f"           gr < {r1} ? {c1} - gc : 0);")
    w.close()


def _matmul_kernel(w: _Writer, launch: Launch, bias: bool, act: str) -> None:
    s, t = launch.schedule, _Tile(launch.schedule, launch.schedule.vectorize or 1)
    v, u, mr = t.v, s.unroll, s.mr
    ty = "float" if v == 1 else f"float{v}"
    k_inner = s.order[2] == "k"
    b = ", __global const float *restrict bias" if bias else ""
    m_dim, n_dim = launch.m_dim, 1 - launch.m_dim
    accs = [[f"acc{r}_{i}" for i in range(u)] for r in range(mr)]
    w(f"/* {launch.where}: {s.describe()} */")
    w(f"/* work-groups of {t.lx} x {t.ly} work-items, each {mr} rows x {u} x {ty}; */")
    w(f"/* NDRange dim {m_dim} = m tiles, dim {n_dim} = n tiles; " + (
        "one launch: the whole K loop and the epilogue in registers */"
        if k_inner
        else f"the host runs the tile loops {'/'.join(launch.host_loops)}, one launch each */"
    ))  # fmt: skip
    w(f"__kernel __attribute__((reqd_work_group_size({t.lx}, {t.ly}, 1)))")
    w.open(
        f"void {launch.kernel}(__global const float *restrict A, __global const float *restrict B"
        f"{b}, __global float *restrict C, const long M, const long N, const long K, "
        "const long m_off, const long n_off, const long k_lo, const long k_hi)"
    )
    w(f"__local float As[{t.tmp * t.tkp}];")
    w(f"__local float Bs[{s.tile_k * t.tnp}];")
    w("const int lx = get_local_id(0), ly = get_local_id(1);")
    w(f"const int lid = ly * {t.lx} + lx;")
    w(f"const long m0 = m_off + (long)get_group_id({m_dim}) * {s.tile_m};")
    w(f"const long n0 = n_off + (long)get_group_id({n_dim}) * {s.tile_n};")
    w(f"const long m1 = min(m0 + {s.tile_m}, M), n1 = min(n0 + {s.tile_n}, N);")
    w("const long row = m0 + ly" + ("" if mr == 1 else f" * {mr}") + ";")
    w(f"const long col = n0 + (long)lx * {t.vu};")
    w(f"{ty} " + ", ".join(a for row in accs for a in row) + ";")

    def init(from_c: bool) -> None:
        for r in range(mr):
            rr = "row" if r == 0 else f"(row + {r})"
            for i in range(u):
                c, acc = f"col + {i * v}", accs[r][i]
                if not from_c and not bias:
                    w(f"{acc} = ({ty})(0.0f);")
                elif v == 1 and from_c:
                    w(f"{acc} = ({rr} < m1 && {c} < n1) ? C[{rr} * N + {c}] : 0.0f;")
                elif v == 1:
                    w(f"{acc} = {c} < n1 ? bias[{c}] : 0.0f;")
                elif from_c:
                    src = f"C + ({rr} < m1 ? {rr} : 0) * N + {c}"
                    w(f"{acc} = ckir_load{v}({src}, {rr} < m1 ? n1 - ({c}) : 0);")
                else:
                    w(f"{acc} = ckir_load{v}(bias + {c}, n1 - ({c}));")

    if k_inner:
        init(False)
    else:
        w("/* the first k tile starts from the bias / 0, the others from C */")
        w.open("if (k_lo == 0)")
        init(False)
        w.close()
        w.open("else")
        init(True)
        w.close()
    w.open(f"for (long k0 = k_lo; k0 < k_hi; k0 += {s.tile_k})")
    w(f"const long k1 = min(k0 + {s.tile_k}, k_hi);")
    w(f"/* stage A[m0:m1, k0:k1] and B[k0:k1, n0:n1] in local memory ({ty} loads) */")
    _stage(w, t, "As", "A", ("m0", "m1", str(t.tmp)), ("k0", "k1", ""), t.tkp, "K")
    _stage(w, t, "Bs", "B", ("k0", "k1", str(s.tile_k)), ("n0", "n1", ""), t.tnp, "N")
    w("barrier(CLK_LOCAL_MEM_FENCE);")
    w("const int kn = (int)(k1 - k0);")
    w("__local const float *a = As + ly" + ("" if mr == 1 else f" * {mr}") + f" * {t.tkp};")
    w(f"__local const float *b = Bs + lx * {t.vu};")
    w.open(f"for (int kk = 0; kk < kn; kk++, b += {t.tnp})")
    w(f"/* the {u} B loads of this k, each used for the {mr} row(s) */")
    loads = [f"b[{i}]" if v == 1 else f"vload{v}({i}, b)" for i in range(u)]
    w(f"const {ty} " + ", ".join(f"b{i} = {load}" for i, load in enumerate(loads)) + ";")
    for r in range(mr):
        at = "kk" if r == 0 else f"{r * t.tkp} + kk"
        w(f"const {ty} a{r} = ({ty})(a[{at}]);")
        for i in range(u):
            w(f"{accs[r][i]} = fma(a{r}, b{i}, {accs[r][i]});")
    w.close()
    w("barrier(CLK_LOCAL_MEM_FENCE);")
    w.close()
    if k_inner and act != "none":
        w(f"/* the {act} epilogue, in registers */")
        for acc in (a for row in accs for a in row):
            w(f"{acc} = {_act(act, acc, v)};")
    w("/* rows from the M edge on are not stored */")
    for r in range(mr):
        rr = "row" if r == 0 else f"(row + {r})"
        w("if (row" + ("" if r == 0 else f" + {r}") + " >= m1) return;")
        for i in range(u):
            c, acc = f"col + {i * v}", accs[r][i]
            if v == 1:
                w(f"if ({c} < n1) C[{rr} * N + {c}] = {acc};")
            else:
                w(f"if ({c} < n1) ckir_store{v}({acc}, C + {rr} * N + {c}, n1 - ({c}));")
    w.close()
    if launch.epilogue is not None:
        w(f"/* the {act} epilogue of {launch.kernel}, after the nest: k is not innermost */")
        w.open(f"__kernel void {launch.epilogue}(__global float *restrict C, const long MN)")
        w("const long i = get_global_id(0);")
        w("if (i >= MN) return;")
        w("const float x = C[i];")
        w(f"C[i] = {_act(act, 'x', 1)};")
        w.close()
    w("")


# --------------------------------------------------------------------------- relu


def _relu_kernel(w: _Writer, launch: Launch) -> None:
    s = launch.schedule
    v, u = s.vectorize or 1, s.unroll
    w(f"/* {launch.where}: {s.describe(k.ReluOp.SCHEDULE_APPLIES)} */")
    w(f"/* work-groups of {s.tile_m} rows (a work-item each) x {s.tile_n} columns, */")
    w(f"/* {u} x {'float' if v == 1 else f'float{v}'} per step */")
    w(f"__kernel __attribute__((reqd_work_group_size(1, {s.tile_m}, 1)))")
    w.open(
        f"void {launch.kernel}(__global const float *restrict X, __global float *restrict Y, "
        "const long R, const long N)"
    )
    w(f"const long r = (long)get_group_id(1) * {s.tile_m} + get_local_id(1);")
    w("if (r >= R) return;")
    w(f"const long c0 = (long)get_group_id(0) * {s.tile_n};")
    w(f"const long c1 = min(c0 + {s.tile_n}, N);")
    w("__global const float *x = X + r * N;")
    w("__global float *y = Y + r * N;")
    w("long j = c0;")
    w.open(f"for (; j + {v * u} <= c1; j += {v * u})")
    for i in range(u):
        at = f"j + {i * v}"
        if v == 1:
            w(f"{{ const float e = x[{at}]; y[{at}] = {_act('relu', 'e', 1)}; }}")
        else:
            w(f"{{ const float{v} e = vload{v}(0, x + {at}); "
              f"vstore{v}({_act('relu', 'e', v)}, 0, y + {at}); }}")  # fmt: skip
    w.close()
    w.open(f"for (; j < c1; j += {v})")
    if v == 1:
        w("const float e = x[j];")
        w(f"y[j] = {_act('relu', 'e', 1)};")
    else:
        w(f"const float{v} e = ckir_load{v}(x + j, c1 - j);")
        w(f"ckir_store{v}({_act('relu', 'e', v)}, y + j, c1 - j);")
    w.close()
    w.close()
    w("")


# --------------------------------------------------------------------------- funcs


def _schedule(func: k.FuncOp, op: k.KernelComputeOp, dims: tuple[str, str, str],
              notes: list[str]) -> Schedule:  # fmt: skip
    if isinstance(op, k.ReluOp):
        s = resolve_schedule(func, op, dims, MAX_VECTOR, notes)
    else:
        s = resolve_schedule(func, op, dims, MAX_VECTOR, notes, MATMUL_DEFAULTS)
        s = _rows_per_item(func, op, s, notes)
    if s.vectorize is None:
        s = dataclasses.replace(s, vectorize=DEFAULT_VECTORIZE)
        if s.tile_n < DEFAULT_VECTORIZE and "tile_n" in op.schedule_values():
            s = dataclasses.replace(s, tile_n=DEFAULT_VECTORIZE)
    return s


def _rows_per_item(func: k.FuncOp, op: k.KernelComputeOp, s: Schedule,
                   notes: list[str]) -> Schedule:  # fmt: skip
    """``s`` with the OpenCL target's ``mr`` (a work-item's rows).

    An unset ``mr`` becomes the largest divisor of ``tile_m`` up to DEFAULT_MR (no
    padded rows).  An explicit one that does not divide ``tile_m`` is kept, with a
    note: the work-group's last work-item computes rows past its tile on zeros and
    does not store them."""
    if "mr" not in op.schedule_values():
        mr = max(d for d in range(1, min(DEFAULT_MR, s.tile_m) + 1) if s.tile_m % d == 0)
        return dataclasses.replace(s, mr=mr)
    if s.tile_m % s.mr:
        pad = _ceil(s.tile_m, s.mr) * s.mr - s.tile_m
        notes.append(
            f"{_op_ref(func, op)}: tile_m = {s.tile_m} is not a multiple of mr = {s.mr}: "
            f"each work-group computes {pad} padded row(s) on zeros and does not store them"
        )
    return s


def _plan_func(
    func: k.FuncOp, notes: list[str]
) -> tuple[OpenCLFunc, list[tuple[Launch, bool, str]]]:
    fname = func.func_name
    inputs, _, symbols = func_signature(func)
    names: dict[SSAValue, str] = {inp.result: inp.input_name.data for inp in func.inputs()}
    launches: list[tuple[Launch, bool, str]] = []
    temps: dict[str, TensorType] = {}
    for index, op in enumerate(func.body_block.ops):
        if not isinstance(op, k.KernelComputeOp):
            continue
        if not supports(op.name.removeprefix("kernel."), _type(op.out).dtype_name):
            raise KernelCodegenError(f"{_op_ref(func, op)}: not supported by the OpenCL generator")
        kname = f"{fname}_op{index}"
        out = f"t{index}"
        while out in names.values():
            out = "_" + out
        temps[out] = _type(op.out)
        names[op.out] = out
        where = _op_ref(func, op)
        if isinstance(op, k.ReluOp):
            tx = _type(op.x)
            rows = "*".join(f"({d})" for d in tx.dims[:-1]) or "1"
            dims = (rows, tx.dims[-1], "1")
            s = _schedule(func, op, dims, notes)
            launch = Launch("relu", kname, where, (names[op.x],), out, dims, s, (1, s.tile_m), 0)
            launches.append((launch, False, "none"))
            continue
        assert isinstance(op, k.MatmulOp | k.MatmulReluOp | k.LinearOp)
        at, bt = _type(op.a), _type(op.b)
        dims = (at.dims[0], bt.dims[1], at.dims[1])
        s = _schedule(func, op, dims, notes)
        bias = isinstance(op, k.LinearOp) and op.bias is not None
        act = op.epilogue
        args = [names[op.a], names[op.b]]
        if isinstance(op, k.LinearOp) and op.bias is not None:
            args.append(names[op.bias])
        t = _Tile(s, s.vectorize or 1)
        order = s.order
        mn = [a for a in order if a != "k"]
        host = "" if order[2] == "k" else order[: order.index("k") + 1]
        launch = Launch(
            "matmul", kname, where, tuple(args), out, dims, s, (t.lx, t.ly),
            4 * (t.tmp * t.tkp + s.tile_k * t.tnp),
            m_dim=1 if mn[0] == "m" else 0, host_loops=host,
            epilogue=f"{kname}_epilogue" if host and act != "none" else None,
        )  # fmt: skip
        launches.append((launch, bias, act))
    out_op = func.output()
    assert out_op is not None
    plan = OpenCLFunc(
        fname,
        inputs,
        [la for la, _, _ in launches],
        temps,
        [names[v] for v in out_op.values],
        [_type(v) for v in out_op.values],
        symbols,
    )
    return plan, launches


_PRELUDE = """\
/* generated by ckir from kernel IR (OpenCL C): do not edit.  One __kernel per op;
 * every output element takes one fma per k in increasing order, whatever the schedule. */
"""


def emit_module(module: ModuleOp) -> GeneratedOpenCL:
    """OpenCL C and the launch plan for every ``kernel.func`` of ``module``.

    Raises KernelCodegenError for an op it does not support."""
    funcs = [op for op in module.walk() if isinstance(op, k.FuncOp)]
    if not funcs:
        raise KernelCodegenError("no kernel.func in the module")
    notes: list[str] = []
    plans = [_plan_func(f, notes) for f in funcs]
    w = _Writer()
    for line in _PRELUDE.splitlines():
        w(line)
    w("")
    widths = sorted({la.schedule.vectorize or 1 for _, ls in plans for la, _, _ in ls} - {1})
    for v in widths:
        _helpers(w, v)
    for _, launches in plans:
        for launch, bias, act in launches:
            if launch.kind == "relu":
                _relu_kernel(w, launch)
            else:
                _matmul_kernel(w, launch, bias, act)
    for i, note in enumerate(notes):
        w.lines.insert(2 + i, f"/* note: {note} */")
    return GeneratedOpenCL("\n".join(w.lines).rstrip() + "\n", [p for p, _ in plans], notes)
