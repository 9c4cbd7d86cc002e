"""``--onnx-fuse-attention``: the causal attention subgraph → ``ckir.Attention``.

Matched from each ``Softmax`` (last axis)::

    q4 = Transpose[0,2,1,3](Reshape(q, [1, -1, H, D]))
    k4 = Transpose[0,2,3,1](Reshape(k, [1, -1, KV, D]))      (or [0,2,1,3] then [0,1,3,2])
    v4 = Transpose[0,2,1,3](Reshape(v, [1, -1, KV, D]))
    (GQA: k and v views repeated by Reshape(Expand(Unsqueeze(view, 2), [1, KV, H/KV, T, D]),
     [1, H, -1, D]), the Expand target a constant or a ckir.Shape)
    s  = MatMul(q4, k4) · scale                              (Mul or Div; or √scale on q4 and k4)
    p  = Softmax(s + mask)                     (mask: ckir.CausalMask; or Where(mask, s, -inf))
    o  = Reshape(Transpose[0,2,1,3](MatMul(p, v4)), [.., H·D])   (Reshape optional)
  becomes
    o  = "onnx.node"(%q, %k, %v) <{op_type = "Attention", domain = "ckir",
                                   attrs = {heads = H, kv_heads = KV, head_dim = D}}>

The scale must be 1/√D (applied once, or split as √scale on both sides).

The native ``Attention`` op (opset 23) becomes the same node::

    o = Attention(q4, k4, v4[, mask]) {is_causal, scale, softcap, q_num_heads, kv_num_heads}
    (q4, k4, v4: head views as above, GQA's repeat_kv included, then o's heads merged;
     or 3-D token-major q, k, v with q_num_heads / kv_num_heads)
  becomes
    o  = "onnx.node"(%q, %k, %v) <{op_type = "Attention", domain = "ckir",
           attrs = {heads = H, kv_heads = KV, head_dim = D[, scale_dim = S][, softcap = C]}}>

when it is causal (``is_causal = 1``, or a ``ckir.CausalMask`` as ``attn_mask``) and reads
no past KV cache; a ``scale`` other than 1/√D becomes ``scale_dim = 1/scale²`` (the
graph's ``q·k / √scale_dim``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Match,
    Miss,
    Record,
    const,
    fuse_each,
    init,
    is_close,
    need,
    node_of,
    remove_dead,
    scalar,
)


def _scaled(v: SSAValue) -> tuple[SSAValue, float]:
    """Peel ``Mul(·, c)`` / ``Div(·, c)`` off ``v``: (inner value, scale)."""
    p = v.owner
    if isinstance(p, ox.NodeOp) and p.kind in ("Mul", "Div"):
        for a, b in ((0, 1), (1, 0)):
            c = scalar(p.args[b])
            if c is not None and (p.kind == "Mul" or b == 1):
                inner, k = _scaled(p.args[a])
                return inner, k * (c if p.kind == "Mul" else 1.0 / c)
    return v, 1.0


def _perm(n: ox.NodeOp) -> list[int]:
    return [int(x) for x in n.attr("perm", [])]  # type: ignore[union-attr]


def _heads(v: SSAValue) -> tuple[SSAValue, int, int]:
    """``Reshape(x, [1, -1, N, D])`` -> (x, N, D)."""
    r = node_of(v, "Reshape")
    shape = const(r.args[1])
    need(shape is not None, "head reshape shape is not constant")
    assert shape is not None
    s = [int(d) for d in shape.ravel()]
    need(len(s) == 4 and s[0] == 1 and s[1] in (-1, 0) and s[2] > 0 and s[3] > 0, f"head shape {s}")
    return r.args[0], s[2], s[3]


def _view(v: SSAValue) -> tuple[SSAValue, int, int, float]:
    """A ``[1, N, T, D]`` head view: (token-major value, N, D, scale folded on the way).

    ``Transpose[0,2,1,3](Reshape(x, [1, -1, N, D]))``, or GQA's repeat_kv of one:
    ``Reshape(Expand(Unsqueeze(view, 2)), [1, H, -1, D])`` (then N is the kv heads)."""
    v, k = _scaled(v)
    p = v.owner
    if isinstance(p, ox.NodeOp) and p.kind == "Reshape":
        shape = const(p.args[1])
        need(shape is not None and shape.size == 4, "head view shape is not constant")
        exp = node_of(p.args[0], "Expand")
        uns = node_of(exp.args[0], "Unsqueeze")
        axes = const(uns.args[1]) if len(uns.args) > 1 else None
        need(axes is not None and [int(a) for a in axes.ravel()] == [2], "repeat_kv axis is not 2")
        x, n, d, k2 = _view(uns.args[0])
        assert shape is not None
        h = int(shape.ravel()[1])
        need(h % n == 0 and int(shape.ravel()[3]) == d, f"repeat_kv to [1, {h}, -1, {d}]")
        _repeats(exp.args[1], n, h // n, d)
        return x, n, d, k * k2
    t = node_of(v, "Transpose")
    need(_perm(t) == [0, 2, 1, 3], f"transpose perm {_perm(t)} is not [0, 2, 1, 3]")
    inner, k2 = _scaled(t.args[0])
    x, n, d = _heads(inner)
    return x, n, d, k * k2


def _repeats(target: SSAValue, kv: int, rep: int, d: int) -> None:
    """repeat_kv's ``Expand`` target is ``[1, KV, H/KV, T, D]`` (T as -1 (``ckir.Shape``), 1
    or any length when a constant)."""
    dims = const(target)
    p = target.owner
    if dims is None and isinstance(p, ox.NodeOp) and p.kind == "ckir.Shape":
        dims = np.array(p.attr("dims"), dtype=np.int64)
    need(dims is not None, "repeat_kv's Expand target is not a known shape")
    assert dims is not None
    s = [int(v) for v in dims.ravel()]
    need(
        len(s) == 5 and s[0] == 1 and s[1] == kv and s[2] == rep and s[4] == d,
        f"repeat_kv expands to {s}, not [1, {kv}, {rep}, T, {d}]",
    )


def _key(v: SSAValue) -> tuple[SSAValue, int, int, float]:
    """Kᵀ: ``Transpose[0,2,3,1](Reshape(k, [1, -1, KV, D]))`` or ``Transpose[0,1,3,2](view)``."""
    v, k = _scaled(v)
    t = node_of(v, "Transpose")
    if _perm(t) == [0, 2, 3, 1]:
        inner, k2 = _scaled(t.args[0])
        x, n, d = _heads(inner)
        return x, n, d, k * k2
    need(_perm(t) == [0, 1, 3, 2], f"K transpose perm {_perm(t)}")
    x, n, d, k2 = _view(t.args[0])
    return x, n, d, k * k2


def match_attention(sm: ox.NodeOp) -> tuple[list[SSAValue], dict[str, object], ox.NodeOp]:
    """(q, k, v), attributes, and the node whose result the fused op replaces."""
    need(sm.attr("axis", -1) in (-1, 3), "softmax is not over the last axis")
    pre = sm.args[0].owner
    need(isinstance(pre, ox.NodeOp), "no mask before the softmax")
    assert isinstance(pre, ox.NodeOp)
    if pre.kind == "Add":
        idx = next(
            (
                i
                for i in (0, 1)
                if isinstance(pre.args[i].owner, ox.NodeOp)
                and pre.args[i].owner.kind == "ckir.CausalMask"
            ),  # type: ignore[union-attr]
            None,
        )
        need(idx is not None, "the added mask is not causal (ckir.CausalMask)")
        assert idx is not None
        scores = pre.args[1 - idx]
    elif pre.kind == "Where":
        m = node_of(pre.args[0], "ckir.CausalMask")
        need(bool(m.attr("boolean", 0)), "Where's condition is not a boolean causal mask")
        fill = scalar(pre.args[2])
        need(fill is not None and fill <= -1e4, "Where's fill is not -inf")
        scores = pre.args[1]
    else:
        raise Miss(f"expected a causal mask (Add or Where) before the softmax, found {pre.kind}")
    scores, scale = _scaled(scores)
    mm = node_of(scores, "MatMul")
    q, h, d, sq = _view(mm.args[0])
    k, kv, dk, sk = _key(mm.args[1])
    need(d == dk, "q and k head dims differ")
    need(
        is_close(scale * sq * sk, 1 / math.sqrt(d)),
        f"scale {scale * sq * sk:.6g} is not 1/sqrt({d})",
    )
    users = [u.operation for u in sm.results[0].uses]
    need(len(users) == 1 and isinstance(users[0], ox.NodeOp), "softmax has other users")
    pv = users[0]
    assert isinstance(pv, ox.NodeOp)
    need(pv.kind == "MatMul" and pv.args[0] == sm.results[0], "softmax is not multiplied by V")
    v, kv2, dv, sv = _view(pv.args[1])
    need(sv == 1.0, "V is scaled")
    need(kv2 == kv and dv == d, "v heads differ from k heads")
    need(h % kv == 0, f"{h} heads is not a multiple of {kv} kv heads")
    return [q, k, v], {"heads": h, "kv_heads": kv, "head_dim": d}, _merged(pv, h, d)


def _merged(o: ox.NodeOp, h: int, d: int) -> ox.NodeOp:
    """The node after ``o`` (``[1, H, T, D]``) that merges the heads:
    ``Transpose[0,2,1,3]``, then an optional ``Reshape`` to ``[.., H·D]``."""
    outs = [u.operation for u in o.results[0].uses]
    need(len(outs) == 1 and isinstance(outs[0], ox.NodeOp), "attention output has other users")
    tr = outs[0]
    assert isinstance(tr, ox.NodeOp)
    need(tr.kind == "Transpose" and _perm(tr) == [0, 2, 1, 3], "output is not transposed back")
    last = tr
    outs = [u.operation for u in tr.results[0].uses]
    if len(outs) == 1 and isinstance(outs[0], ox.NodeOp) and outs[0].kind == "Reshape":
        shape = const(outs[0].args[1])
        need(shape is not None and int(shape.ravel()[-1]) == h * d, "head merge is not [.., H*D]")
        last = outs[0]
    return last


def _width(v: SSAValue) -> int | None:
    """The last dim of a token-major value a ``ckir.Linear`` (through ``ckir.Rope``) writes."""
    p = v.owner
    while isinstance(p, ox.NodeOp) and p.kind == "ckir.Rope":
        p = p.args[0].owner
    if not (isinstance(p, ox.NodeOp) and p.kind == "ckir.Linear"):
        return None
    sl = p.attr("slice")
    if isinstance(sl, list) and len(sl) == 2:
        return int(sl[1]) - int(sl[0])
    w = init(p.args[1])
    if w is None:
        return None
    return w.dims[1] if p.attr("w_layout", "kn") == "kn" else w.dims[0]


#: inputs of the native Attention op (opset 23), by position
_NATIVE_INPUTS = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")


def match_native(att: ox.NodeOp) -> tuple[list[SSAValue], dict[str, object], ox.NodeOp]:
    """The native ``Attention`` op (opset 23) of a causal decoder: (q, k, v), attributes,
    and the node whose result the fused op replaces."""
    absent = {int(a.value.data) for a in att.absent.data} if att.absent else set()
    pos = [i for i in range(len(att.args) + len(absent)) if i not in absent]
    arg = dict(zip(pos, att.args, strict=True))
    for i in (4, 5, 6):
        need(i not in arg, f"{_NATIVE_INPUTS[i]} input (ckir keeps its own KV cache)")
    need(att.attr("qk_matmul_output_mode", 0) == 0, "qk_matmul_output_mode is not 0")
    for r in att.results[1:]:
        need(not list(r.uses), "present_key / present_value / qk_matmul_output are read")
    for w in ("left_window_size", "right_window_size"):
        need(int(att.attr(w, -1)) == -1, f"{w}: sliding windows are not matched")  # type: ignore[arg-type]
    causal = bool(att.attr("is_causal", 0))
    if 3 in arg:
        # a causal mask (boolean or additive) as attn_mask: the same as is_causal
        node_of(arg[3], "ckir.CausalMask")
    else:
        need(causal, "is_causal = 0 and no mask: not a causal decoder's attention")
    q, k, v = arg[0], arg[1], arg[2]
    four = isinstance(q.owner, ox.NodeOp) and q.owner.kind in ("Transpose", "Reshape", "Mul", "Div")
    if four:
        q, h, d, sq = _view(q)
        k, kv, dk, sk = _view(k)
        v, kv2, dv, sv = _view(v)
        need(sv == 1.0, "V is scaled")
        need(d == dk == dv and kv == kv2, "q, k and v head shapes differ")
        last = _merged(att, h, d)
    else:
        h = int(att.attr("q_num_heads", 0))  # type: ignore[arg-type]
        kv = int(att.attr("kv_num_heads", 0))  # type: ignore[arg-type]
        need(h > 0 and kv > 0, "3-D inputs without q_num_heads / kv_num_heads")
        width = _width(q)
        need(width is not None, "the width of Q is unknown (not a ckir.Linear)")
        assert width is not None
        need(width % h == 0, f"Q width {width} is not a multiple of {h} heads")
        d, sq, sk, last = width // h, 1.0, 1.0, att
    need(h % kv == 0, f"{h} heads is not a multiple of {kv} kv heads")
    scale = att.attr("scale")
    total = (float(scale) if scale else 1.0 / math.sqrt(d)) * sq * sk  # type: ignore[arg-type]
    attrs: dict[str, object] = {"heads": h, "kv_heads": kv, "head_dim": d}
    if not is_close(total, 1 / math.sqrt(d)):
        attrs["scale_dim"] = 1.0 / (total * total)
    cap = float(att.attr("softcap", 0.0))  # type: ignore[arg-type]
    if cap > 0:
        attrs["softcap"] = cap
    return [q, k, v], attrs, last


@dataclass(frozen=True)
class OnnxFuseAttentionPass(ModulePass):
    """The causal attention subgraph → ckir.Attention (see the module docstring)."""

    name = "onnx-fuse-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("attention")

        def match(sm: ox.NodeOp) -> Match:
            ins, attrs, last = match_attention(sm)
            return "Attention", ins, last, attrs

        def native(att: ox.NodeOp) -> Match:
            ins, attrs, last = match_native(att)
            return "Attention", ins, last, attrs

        fuse_each(op, "Softmax", rec, match)
        fuse_each(op, "Attention", rec, native)
        remove_dead(op)
        rec.save(op)
