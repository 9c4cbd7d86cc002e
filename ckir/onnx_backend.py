"""An ``onnx.backend`` for ckir: ONNX models of single nodes run on ckir's C kernels.

:class:`CkirBackend` is an :class:`onnx.backend.base.Backend`, so onnx's own
backend node tests (``onnx.backend.test.BackendTest``) run through it
(tests/test_onnx_backend_nodes.py).  A model is imported with ckir's ONNX
frontend into the ``onnx`` dialect (:func:`ckir.frontend.onnx.module_of_model`);
each ``onnx.node`` is then mapped to the runtime kernels of its ckir op, named
by the kernel registry (``runtime/registry*.yaml``), and run through ctypes on
a shared library of the C runtime (built once, cached by
:mod:`ckir.runtime_build`)::

    MatMul             -> matmul_f32 (once per broadcast batch)
    Gemm               -> matmul_f32, mul_scalar_f32 (alpha, beta), add_f32 (C)
    Add / Mul / Relu   -> add_f32 / mul_f32 / relu_f32 (operands broadcast first)
    Softmax            -> softmax_f32 (the axis moved last)
    LayerNormalization -> layernorm_f32 over the dims from ``axis``
    RMSNormalization   -> rmsnorm_f32 over the dims from ``axis``
    Gelu               -> gelu_tanh_f32 (approximate "tanh"), gelu_erf_f32 ("none")
    RotaryEmbedding    -> embed_f32 (cos/sin rows of position_ids), mul_f32, add_f32,
                          mul_scalar_f32 on the rotated halves
    Attention          -> attention_ext_f32 (causal: one call per batch and head group
                          of rows; not causal: one call per query row over every key)

The backend moves data (transposes, broadcasts, slices, concatenation of a
past KV cache) with NumPy; every arithmetic result comes from a ckir kernel,
except LayerNormalization's optional ``Mean`` / ``InvStdDev`` outputs, which
no kernel writes (NumPy computes them, float32).

A model ckir cannot run is refused by :meth:`CkirBackend.prepare` with
:class:`Unsupported`, one line naming the node, its op_type and what is not
supported (``supports_model`` answers the same question as a bool).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from ckir.dialects import onnx as ox
from ckir.errors import CkirError

__all__ = ["CkirBackend", "CkirRep", "Unsupported", "SUPPORTED_OPS", "prepare", "run_model"]


class Unsupported(CkirError):
    """A node ckir's backend cannot run (the message says which node and why)."""


# ----------------------------------------------------------------------------- kernels

_C_TYPES = {"f32": np.float32, "i32": np.int32}


class Kernels:
    """The C runtime as a shared library; :meth:`call` runs one registry kernel."""

    def __init__(self, path: Path) -> None:
        from ckir.registry import load_registry

        self.dll = ctypes.CDLL(str(path))
        self.registry = load_registry()
        self.calls: dict[str, int] = {}

    def call(self, name: str, *buffers: np.ndarray, **params: float) -> None:
        """``ckir_<name>(buffers..., params...)``: buffers in the registry's operand order
        (contiguous, of the operand's dtype), params by name."""
        spec = self.registry[name]
        fn = getattr(self.dll, spec.c_name)
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * len(spec.operands) + [
            ctypes.c_int64 if p.type == "i64" else ctypes.c_float for p in spec.params
        ]
        args: list[object] = []
        for op, arr in zip(spec.operands, buffers, strict=True):
            want = _C_TYPES[op.dtype]
            if arr.dtype != want or not arr.flags.c_contiguous:
                raise TypeError(f"{name}: operand {op.name} must be contiguous {op.dtype}")
            args.append(arr.ctypes.data)
        for p in spec.params:
            v = params[p.name]
            args.append(int(v) if p.type == "i64" else float(v))
        fn(*args)
        self.calls[name] = self.calls.get(name, 0) + 1


_KERNELS: Kernels | None = None


def kernels() -> Kernels:
    """The runtime library of this machine's ISA (built into ckir's cache on first use)."""
    global _KERNELS
    if _KERNELS is None:
        from ckir.runtime_build import build_library, cache_dir, runtime_fingerprint

        path = cache_dir() / f"onnx-backend-{runtime_fingerprint()[:16]}" / "libckir.so"
        if not path.is_file():
            build_library(path)
        _KERNELS = Kernels(path)
    return _KERNELS


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _binary(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a (+|*) b`` with NumPy broadcasting, on ``add_f32`` / ``mul_f32``."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    x, y = _f32(np.broadcast_to(a, shape)), _f32(np.broadcast_to(b, shape))
    out = np.empty(shape, np.float32)
    if out.size:
        kernels().call(f"{kind}_f32", x, y, out, n=out.size)
    return out


def _scaled(a: np.ndarray, s: float) -> np.ndarray:
    out = _f32(a).copy()
    if out.size:
        kernels().call("mul_scalar_f32", out, out, n=out.size, s=s)
    return out


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX / NumPy ``matmul`` (1-D operands promoted, batch dims broadcast), one
    ``matmul_f32`` call per batch entry."""
    a1, b1 = a.ndim == 1, b.ndim == 1
    a = a[None, :] if a1 else a
    b = b[:, None] if b1 else b
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: inner dims {k} and {k2} differ")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = _f32(np.broadcast_to(a, (*batch, m, k))).reshape(-1, m, k)
    bb = _f32(np.broadcast_to(b, (*batch, k, n))).reshape(-1, k, n)
    out = np.zeros((ab.shape[0], m, n), np.float32)
    if m and n and k:
        for i in range(ab.shape[0]):
            kernels().call("matmul_f32", ab[i], bb[i], out[i], M=m, N=n, K=k)
    y = out.reshape(*batch, m, n)
    if a1:
        y = y[..., 0, :]
    if b1:
        y = y[..., 0]
    return y


# ----------------------------------------------------------------------------- ops

Run = Callable[[list[np.ndarray | None]], list[np.ndarray | None]]


def _axis(node: ox.NodeOp, rank: int, default: int) -> int:
    a = int(node.attr("axis", default))  # type: ignore[arg-type]
    return a + rank if a < 0 else a


def _gemm(node: ox.NodeOp, args: list[np.ndarray | None]) -> list[np.ndarray | None]:
    a, b, c = args[0], args[1], args[2] if len(args) > 2 else None
    assert a is not None and b is not None
    if node.attr("transA", 0):
        a = a.T
    if node.attr("transB", 0):
        b = b.T
    y = _matmul(a, b)
    alpha = float(node.attr("alpha", 1.0))  # type: ignore[arg-type]
    if alpha != 1.0:
        y = _scaled(y, alpha)
    if c is not None:
        beta = float(node.attr("beta", 1.0))  # type: ignore[arg-type]
        y = _binary("add", y, _scaled(c, beta) if beta != 1.0 else c)
    return [y]


def _softmax(node: ox.NodeOp, args: list[np.ndarray | None]) -> list[np.ndarray | None]:
    x = args[0]
    assert x is not None
    axis = _axis(node, x.ndim, -1)
    xt = _f32(np.moveaxis(x, axis, -1))
    out = np.empty_like(xt)
    if out.size:
        cols = xt.shape[-1]
        kernels().call("softmax_f32", xt, out, rows=out.size // cols, cols=cols)
    return [np.moveaxis(out, -1, axis)]


def _norm(kind: str) -> Callable[[ox.NodeOp, list[np.ndarray | None]], list[np.ndarray | None]]:
    def run(node: ox.NodeOp, args: list[np.ndarray | None]) -> list[np.ndarray | None]:
        x, w = args[0], args[1]
        assert x is not None and w is not None
        axis = _axis(node, x.ndim, -1)
        eps = float(node.attr("epsilon", 1e-5))  # type: ignore[arg-type]
        inner = x.shape[axis:]
        e = int(np.prod(inner))
        t = x.size // e if e else 0
        xf = _f32(x).reshape(t, e)
        gamma = _f32(np.broadcast_to(w, inner)).reshape(e)
        out = np.empty_like(xf)
        if kind == "layernorm":
            b = args[2] if len(args) > 2 else None
            beta = (
                _f32(np.broadcast_to(b, inner)).reshape(e)
                if b is not None
                else np.zeros(e, np.float32)
            )
            if out.size:
                kernels().call("layernorm_f32", xf, gamma, beta, out, T=t, E=e, eps=eps)
            stat = (*x.shape[:axis], *([1] * len(inner)))
            mean = xf.mean(axis=1, dtype=np.float64)
            inv = 1.0 / np.sqrt(((xf - mean[:, None]) ** 2).mean(axis=1) + eps)
            return [
                out.reshape(x.shape),
                mean.astype(np.float32).reshape(stat),
                inv.astype(np.float32).reshape(stat),
            ]
        if out.size:
            kernels().call("rmsnorm_f32", xf, gamma, out, T=t, E=e, eps=eps)
        return [out.reshape(x.shape)]

    return run


def _unary(name: str) -> Callable[[ox.NodeOp, list[np.ndarray | None]], list[np.ndarray | None]]:
    def run(node: ox.NodeOp, args: list[np.ndarray | None]) -> list[np.ndarray | None]:
        x = _f32(args[0])
        out = np.empty_like(x)
        if out.size:
            kernels().call(name, x, out, n=out.size)
        return [out]

    return run


def _gather_rows(table: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    """``table[ids]`` on ``embed_f32`` (ids range-checked here, as the kernel asks)."""
    table = _f32(table)
    rows, e = table.shape
    flat = ids.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= rows):
        raise Unsupported(f"{what}: position id out of range 0..{rows - 1}")
    out = np.empty((flat.size, e), np.float32)
    if out.size:
        kernels().call("embed_f32", flat.astype(np.int32), table, out, T=flat.size, E=e)
    return out.reshape(*ids.shape, e)


def _rope(node: ox.NodeOp, args: list[np.ndarray | None]) -> list[np.ndarray | None]:
    x, cos, sin = args[0], args[1], args[2]
    pos = args[3] if len(args) > 3 else None
    assert x is not None and cos is not None and sin is not None
    shape = x.shape
    if x.ndim == 4:  # [B, H, S, D] -> [B, S, H, D]
        x4 = np.transpose(x, (0, 2, 1, 3))
    else:
        h = int(node.attr("num_heads", 0))  # type: ignore[arg-type]
        x4 = x.reshape(shape[0], shape[1], h, shape[2] // h)
    d = x4.shape[3]
    r = int(node.attr("rotary_embedding_dim", 0)) or d  # type: ignore[arg-type]
    if pos is not None:
        cos = _gather_rows(cos, pos, node.label)
        sin = _gather_rows(sin, pos, node.label)
    if cos.shape[-1] != r // 2 or sin.shape[-1] != r // 2:
        raise Unsupported(f"{node.label}: cos/sin caches are not [.., {r // 2}]")
    c, s = cos[:, :, None, :], sin[:, :, None, :]
    rot = x4[..., :r]
    if node.attr("interleaved", 0):
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : r // 2], rot[..., r // 2 :]
    real = _binary("add", _binary("mul", x1, c), _scaled(_binary("mul", x2, s), -1.0))
    imag = _binary("add", _binary("mul", x1, s), _binary("mul", x2, c))
    out = np.array(x4, dtype=np.float32)
    if node.attr("interleaved", 0):
        out[..., 0:r:2], out[..., 1:r:2] = real, imag
    else:
        out[..., : r // 2], out[..., r // 2 : r] = real, imag
    if x.ndim == 4:
        return [np.transpose(out, (0, 2, 1, 3))]
    return [out.reshape(shape)]


def _heads(a: np.ndarray, n: int) -> np.ndarray:
    """``[B, N, S, D]`` of a 4-D input, or of a 3-D ``[B, S, N*D]`` one."""
    if a.ndim == 4:
        return a
    b, s, nd = a.shape
    return a.reshape(b, s, n, nd // n).transpose(0, 2, 1, 3)


def _needs_bias_kernel(node: ox.NodeOp, given: Sequence[bool], n_outputs: int) -> bool:
    """Whether an Attention node runs on ``attention_bias_f32``: it has an attn_mask or
    nonpad_kv_seqlen (``given``: which inputs are present), a window, or asks for
    qk_matmul_output (V heads of another size go there too: :func:`_attention`)."""
    given = [*given, *[False] * 7]
    win = [int(node.attr(w, -1)) for w in ("left_window_size", "right_window_size")]  # type: ignore[arg-type]
    return given[3] or given[6] or n_outputs > 3 or win != [-1, -1]


def _attention_masked(
    node: ox.NodeOp, q4: np.ndarray, k4: np.ndarray, v4: np.ndarray, args: list[np.ndarray | None]
) -> tuple[np.ndarray, np.ndarray]:
    """``attention_bias_f32`` once per batch entry: (Y as [B, T, H*Dv], qk_matmul_output
    as [B, H, T, S]).  The mask is padded to S keys (False / -inf), a boolean one turned
    into 0 / -inf, and broadcast to [H, T, S]; the causal and window masks are the
    kernel's, aligned after the past (or at nonpad_kv_seqlen - T)."""
    mask = args[3] if len(args) > 3 else None
    nonpad = args[6] if len(args) > 6 else None
    b, h, t, d = q4.shape
    kv, s, dv = k4.shape[1], k4.shape[2], v4.shape[3]
    past = args[4].shape[2] if len(args) > 4 and args[4] is not None else 0
    if mask is not None and mask.shape[-1] < s:
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, s - mask.shape[-1])]
        mask = np.pad(mask, pad, constant_values=False if mask.dtype == np.bool_ else -np.inf)
    if mask is not None and mask.dtype == np.bool_:
        mask = np.where(mask, np.float32(0), np.float32(-np.inf))
    bias = np.broadcast_to(
        np.zeros((), np.float32) if mask is None else mask.astype(np.float32), (b, h, t, s)
    )
    scale = node.attr("scale")
    prm: dict[str, float] = {
        "H": h,
        "KV": kv,
        "D": d,
        "Dv": dv,
        "scale": float(scale) if scale is not None else 1.0 / math.sqrt(d),  # type: ignore[arg-type]
        "softcap": float(node.attr("softcap", 0.0)),  # type: ignore[arg-type]
        "causal": int(bool(node.attr("is_causal", 0))),
        "left": int(node.attr("left_window_size", -1)),  # type: ignore[arg-type]
        "right": int(node.attr("right_window_size", -1)),  # type: ignore[arg-type]
        "mode": int(node.attr("qk_matmul_output_mode", 0)),  # type: ignore[arg-type]
    }
    y = np.zeros((b, t, h * dv), np.float32)
    qk = np.zeros((b, h, t, s), np.float32)
    for i in range(b):
        n = int(nonpad[i]) if nonpad is not None else s  # keys past nonpad_kv_seqlen: padding
        p = n - t if nonpad is not None else past
        if n <= 0:
            continue  # no key: every row fully masked, Y = 0
        qt = _f32(q4[i].transpose(1, 0, 2).reshape(t, h * d))
        kc = _f32(k4[i, :, :n].transpose(1, 0, 2).reshape(n, kv * d))
        vc = _f32(v4[i, :, :n].transpose(1, 0, 2).reshape(n, kv * dv))
        scores = np.empty((h, t, n), np.float32)
        kernels().call(
            "attention_bias_f32",
            qt,
            kc,
            vc,
            _f32(bias[i, :, :, :n]),
            y[i],
            scores,
            T=t,
            S=n,
            P=p,
            **prm,
        )
        qk[i, :, :, :n] = scores
    return y, qk


def _attention(node: ox.NodeOp, args: list[np.ndarray | None]) -> list[np.ndarray | None]:
    q, k, v = args[0], args[1], args[2]
    assert q is not None and k is not None and v is not None
    past_k = args[4] if len(args) > 4 else None
    past_v = args[5] if len(args) > 5 else None
    hq = int(node.attr("q_num_heads", 0))  # type: ignore[arg-type]
    hkv = int(node.attr("kv_num_heads", 0))  # type: ignore[arg-type]
    q4, k4, v4 = _heads(q, hq), _heads(k, hkv), _heads(v, hkv)
    if past_k is not None and past_v is not None:
        k4 = np.concatenate([past_k, k4], axis=2)
        v4 = np.concatenate([past_v, v4], axis=2)
    given = [a is not None for a in args]
    if _needs_bias_kernel(node, given, len(node.results)) or v4.shape[3] != q4.shape[3]:
        if q4.shape[1] % k4.shape[1]:
            raise Unsupported(
                f"{node.label}: {q4.shape[1]} query heads is not a multiple of {k4.shape[1]}"
            )
        y, qk = _attention_masked(node, q4, k4, v4, args)
        b, t = y.shape[:2]
        h, dv = q4.shape[1], v4.shape[3]
        out = y.reshape(b, t, h, dv).transpose(0, 2, 1, 3) if q.ndim == 4 else y
        return [out, k4, v4, qk]
    b, h, t, d = q4.shape
    kv, s = k4.shape[1], k4.shape[2]
    if h % kv:
        raise Unsupported(f"{node.label}: {h} query heads is not a multiple of {kv} kv heads")
    scale = node.attr("scale")
    sc = float(scale) if scale is not None else 1.0 / math.sqrt(d)  # type: ignore[arg-type]
    cap = float(node.attr("softcap", 0.0))  # type: ignore[arg-type]
    causal = bool(node.attr("is_causal", 0))
    p = s - t if past_k is not None else 0  # ONNX aligns the causal mask after the past
    if causal and p + t > s:
        raise Unsupported(f"{node.label}: causal rows beyond the {s} keys")
    y = np.empty((b, t, h * d), np.float32)
    for i in range(b):
        qt = _f32(q4[i].transpose(1, 0, 2).reshape(t, h * d))
        kc = _f32(k4[i].transpose(1, 0, 2).reshape(s, kv * d))
        vc = _f32(v4[i].transpose(1, 0, 2).reshape(s, kv * d))
        prm: dict[str, float] = {"H": h, "KV": kv, "D": d, "scale": sc, "softcap": cap, "window": 0}
        if causal:  # row j sees keys 0 .. p + j: the kernel's own causal rows
            kernels().call("attention_ext_f32", qt, kc, vc, y[i], T=t, P=p, **prm)
        else:  # every row sees all s keys: one decode-shaped call (P = s - 1) per row
            for j in range(t):
                kernels().call("attention_ext_f32", qt[j], kc, vc, y[i, j], T=1, P=s - 1, **prm)
    out = y.reshape(b, t, h, d).transpose(0, 2, 1, 3) if q.ndim == 4 else y
    return [out, k4, v4]  # present_key / present_value are 4-D either way


#: op_type -> how it runs
SUPPORTED_OPS: dict[
    str, Callable[[ox.NodeOp, list[np.ndarray | None]], list[np.ndarray | None]]
] = {
    "MatMul": lambda n, a: [_matmul(a[0], a[1])],  # type: ignore[arg-type]
    "Gemm": _gemm,
    "Add": lambda n, a: [_binary("add", a[0], a[1])],  # type: ignore[arg-type]
    "Mul": lambda n, a: [_binary("mul", a[0], a[1])],  # type: ignore[arg-type]
    "Relu": _unary("relu_f32"),
    "Gelu": lambda n, a: _unary(
        "gelu_tanh_f32" if n.attr("approximate", "none") == "tanh" else "gelu_erf_f32"
    )(n, a),
    "Softmax": _softmax,
    "LayerNormalization": _norm("layernorm"),
    "RMSNormalization": _norm("rmsnorm"),
    "RotaryEmbedding": _rope,
    "Attention": _attention,
}


# ----------------------------------------------------------------------------- checks


def _shape(v: SSAValue) -> tuple[int, ...] | None:
    """The static shape of a graph input or initializer, else None."""
    p = v.owner
    if isinstance(p, (ox.InputOp, ox.InitOp, ox.ConstOp)):
        dims = [s.data for s in p.shape.data]
        if all(d.isdigit() for d in dims):
            return tuple(int(d) for d in dims)
    return None


def _refuse(node: ox.NodeOp, opset: int, why: str) -> Unsupported:
    return Unsupported(f"ONNX node '{node.label}': {node.kind} (opset {opset}): {why}")


def _check_attention(node: ox.NodeOp, opset: int, n_outputs: int, absent: set[int]) -> None:
    n_in = len(node.args) + len(absent)
    given = [i < n_in and i not in absent for i in range(7)]
    if given[6] and n_outputs > 3:
        raise _refuse(node, opset, "nonpad_kv_seqlen with qk_matmul_output is not supported")
    q, k, v = (_shape(x) for x in node.args[:3])
    if q is None or k is None or v is None:
        raise _refuse(node, opset, "Q, K and V need static shapes")
    hq = int(node.attr("q_num_heads", 0))  # type: ignore[arg-type]
    hkv = int(node.attr("kv_num_heads", 0))  # type: ignore[arg-type]
    dq, dk, dv = (
        (q[3], k[3], v[3])
        if len(q) == 4
        else (q[2] // max(hq, 1), k[2] // max(hkv, 1), v[2] // max(hkv, 1))
    )
    if dq != dk:
        raise _refuse(node, opset, f"head sizes Q {dq}, K {dk}: q.k needs one head size")
    if dq > 256 and dq == dv and not _needs_bias_kernel(node, given, n_outputs):
        raise _refuse(node, opset, f"head size {dq} > 256")


def check_node(node: ox.NodeOp, opset: int, n_outputs: int, elems: Mapping[SSAValue, str]) -> None:
    """Raise :class:`Unsupported` unless ckir's backend runs ``node`` (``elems``: the
    element type of each graph input)."""
    kind = node.kind
    if kind not in SUPPORTED_OPS:
        raise _refuse(node, opset, "op_type not supported by ckir's backend")
    absent = {int(a.value.data) for a in node.absent.data} if node.absent else set()
    if kind == "Attention":
        _check_attention(node, opset, n_outputs, absent)
    types = {elems.get(v, "float") for i, v in enumerate(node.args)}
    if kind == "RotaryEmbedding" and len(node.args) > 3:
        types = {elems.get(v, "float") for v in node.args[:3]}
    if kind == "Attention":  # the mask may be bool or float16, nonpad_kv_seqlen int64
        present = [i for i in range(len(node.args) + len(absent)) if i not in absent]
        data = {present[i]: v for i, v in enumerate(node.args)}
        types = {elems.get(v, "float") for i, v in data.items() if i in (0, 1, 2, 4, 5)}
    if types != {"float"}:
        raise _refuse(
            node, opset, f"element type {'/'.join(sorted(types))}: ckir's kernels are float32"
        )
    if kind == "Gelu" and node.attr("approximate", "none") not in ("none", "tanh"):
        raise _refuse(node, opset, f"approximate = {node.attr('approximate')!r}")
    if kind in ("LayerNormalization", "RMSNormalization") and node.attr("stash_type", 1) != 1:
        raise _refuse(node, opset, "stash_type other than float32")


# ----------------------------------------------------------------------------- backend


class CkirRep(BackendRep):
    """A prepared model: its ``onnx`` dialect module, run node by node on ckir kernels."""

    def __init__(
        self, module: ModuleOp, opset: int, initializers: Mapping[str, np.ndarray]
    ) -> None:
        self.module = module
        self.opset = opset
        self.initializers = dict(initializers)
        self.inputs = [op for op in module.ops if isinstance(op, ox.InputOp)]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Outputs of the graph for ``inputs`` (a list in graph-input order, or a dict)."""
        if isinstance(inputs, Mapping):
            feeds = [inputs[op.tensor] for op in self.inputs]
        else:
            feeds = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if len(feeds) != len(self.inputs):
            raise CkirError(f"the model takes {len(self.inputs)} inputs, got {len(feeds)}")
        env: dict[SSAValue, np.ndarray] = {}
        outputs: tuple[Any, ...] = ()
        for op in self.module.ops:
            if isinstance(op, ox.InputOp):
                env[op.result] = np.asarray(feeds[self.inputs.index(op)])
            elif isinstance(op, ox.InitOp):
                env[op.result] = self.initializers[op.tensor]
            elif isinstance(op, ox.ConstOp):
                env[op.result] = np.array(op.values).reshape(op.dims)
            elif isinstance(op, ox.NodeOp):
                args: list[np.ndarray | None] = [env[v] for v in op.args]
                for i in sorted(int(a.value.data) for a in op.absent.data) if op.absent else ():
                    args.insert(i, None)
                results = SUPPORTED_OPS[op.kind](op, args)
                for r, val in zip(op.results, results, strict=False):
                    if val is not None:
                        env[r] = val
            elif isinstance(op, ox.OutputOp):
                outputs = tuple(env[v] for v in op.args)
        return outputs


def _graph_outputs(model: Any) -> dict[str, int]:
    """node name -> number of outputs it writes (trailing empty names dropped)."""
    counts = {}
    for n in model.graph.node:
        outs = list(n.output)
        while outs and not outs[-1]:
            outs.pop()
        counts[n.name or n.op_type] = len(outs)
    return counts


def prepare(model: Any) -> CkirRep:
    """Import ``model`` (a ``ModelProto``) and check every node runs (else
    :class:`Unsupported`)."""
    from onnx import TensorProto, numpy_helper

    from ckir.frontend.onnx import module_of_model, opset_of

    name = Path(model.graph.name or "model.onnx")
    opset = opset_of(model)
    module = module_of_model(model, name)
    n_out = _graph_outputs(model)
    types = {
        t.name: TensorProto.DataType.Name(t.type.tensor_type.elem_type).lower()
        for t in [*model.graph.input]
    }
    types.update(
        {t.name: TensorProto.DataType.Name(t.data_type).lower() for t in model.graph.initializer}
    )
    elems = {
        op.result: types.get(op.tensor, "?")
        for op in module.ops
        if isinstance(op, (ox.InputOp, ox.InitOp, ox.ConstOp))
    }
    for op in module.ops:
        if isinstance(op, ox.NodeOp):
            check_node(op, opset, n_out.get(op.label, len(op.results)), elems)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return CkirRep(module, opset, inits)


def run_model(model: Any, inputs: Sequence[np.ndarray]) -> tuple[Any, ...]:
    """``prepare(model).run(inputs)``."""
    return prepare(model).run(list(inputs))


class CkirBackend(Backend):
    """onnx's backend interface over :func:`prepare` (CPU only)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_model(model)

    @classmethod
    def supports_model(cls, model: Any) -> bool:
        """Whether :meth:`prepare` accepts ``model``."""
        try:
            prepare(model)
        except CkirError:
            return False
        return True

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> CkirRep:
        super().prepare(model, device, **kwargs)
        return prepare(model)

    @classmethod
    def run_model(
        cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"
