"""``--onnx-fuse-linear``: MatMul / Gemm (+ bias Add, + Split) → ``ckir.Linear``.

* ``Gemm(x, W[, b])`` (alpha = beta = 1, no transA) and ``MatMul(x, W)``
  followed by ``Add(·, b)`` (its only user) with ``W`` a 2-D initializer (or a
  ``Transpose`` of one) and ``b`` a 1-D one → ``ckir.Linear(x, W[, b])`` with ``w_layout = "kn"`` (W
  stored ``[in, out]``) or ``"nk"`` (``transB``, PyTorch's layout);
* a ``Split`` of the last axis of a linear's output (its only user) becomes
  one linear per part, each with ``slice = [start, stop]`` of the out axis
  (a fused q/k/v projection);
* a bias-free linear whose ``W`` is the embedding table (the loader's
  ``same_as``) carries ``tied_to = <table>``: the tied LM head::

    %y = "onnx.node"(%x, %w) <{op_type = "MatMul", ...}>
    %z = "onnx.node"(%y, %b) <{op_type = "Add", ...}>
  becomes
    %z = "onnx.node"(%x, %w, %b) <{op_type = "Linear", domain = "ckir",
                                   attrs = {w_layout = "kn"}, ...}>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Miss,
    Record,
    const,
    fused,
    init,
    need,
    nodes,
    remove_dead,
    replace,
)


def _weight(v: SSAValue) -> tuple[ox.InitOp, bool]:
    """The weight initializer, and whether it is read through a ``Transpose[1, 0]``."""
    p = v.owner
    flipped = False
    if isinstance(p, ox.NodeOp) and p.kind == "Transpose" and p.attr("perm") in (None, [1, 0]):
        v, flipped = p.args[0], True
    w = init(v)
    need(w is not None, "the weight is not an initializer")
    assert w is not None
    need(len(w.dims) == 2, "the weight is not 2-D")
    return w, flipped


def _bias(v: SSAValue, n: int) -> bool:
    b = init(v)
    if b is not None:
        return b.dims == (n,)
    c = const(v)
    return c is not None and c.shape == (n,)


def _tables(module: ModuleOp) -> dict[str, str]:
    out = {}
    for n in nodes(module, "ckir.Embed"):
        t = init(n.args[0])
        if t is not None:
            out[t.tensor] = t.tensor
    return out


@dataclass(frozen=True)
class OnnxFuseLinearPass(ModulePass):
    """MatMul/Gemm + bias (+ Split) → ckir.Linear (see the module docstring)."""

    name = "onnx-fuse-linear"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec, split_rec, tied = Record("linear"), Record("split-linear"), Record("tied-lm-head")
        tables = _tables(op)
        for n in nodes(op):
            if n.kind not in ("MatMul", "Gemm"):
                continue
            try:
                w, flipped = _weight(n.args[1])
                trans_b = n.kind == "Gemm" and bool(n.attr("transB", 0))
                layout = "nk" if trans_b != flipped else "kn"
                ins = [n.args[0], w.result]
                out = n
                nout = w.dims[0] if layout == "nk" else w.dims[1]
                if n.kind == "Gemm":
                    need(n.attr("transA", 0) == 0, "transA is set")
                    need(n.attr("alpha", 1.0) == 1.0 and n.attr("beta", 1.0) == 1.0, "alpha/beta")
                    if len(n.args) == 3:
                        need(_bias(n.args[2], nout), "C is not a 1-D bias of the out size")
                        ins.append(n.args[2])
                else:
                    users = list(n.results[0].uses)
                    if len(users) == 1:
                        add = users[0].operation
                        if isinstance(add, ox.NodeOp) and add.kind == "Add":
                            other = add.args[1 - users[0].index]
                            if _bias(other, nout):
                                ins.append(other)
                                out = add
            except Miss as m:
                rec.miss(n, str(m))
                continue
            attrs: dict[str, object] = {"w_layout": layout}
            if len(ins) == 2 and w.same_as is not None and w.same_as.data in tables:
                transposed = bool(w.transposed.value.data) if w.transposed else False
                if transposed == (layout == "kn"):
                    attrs["tied_to"] = w.same_as.data
                    tied.matched += 1
            if len(ins) == 2 and w.tensor in tables and layout == "nk":
                attrs["tied_to"] = w.tensor
                tied.matched += 1
            new = fused("Linear", ins, n, attrs)
            replace(out, [new], [new.results[0]])
            rec.matched += 1
        remove_dead(op)
        for n in nodes(op, "Split"):
            try:
                lin = n.args[0].owner
                need(
                    isinstance(lin, ox.NodeOp) and lin.kind == "ckir.Linear",
                    "input is not a linear",
                )
                assert isinstance(lin, ox.NodeOp)
                need(len(list(lin.results[0].uses)) == 1, "the linear has other users")
                need(n.attr("axis", 0) in (-1, 1, 2), "not a split of the last axis")
                w = init(lin.args[1])
                assert w is not None
                nout = w.dims[0] if lin.attr("w_layout") == "nk" else w.dims[1]
                parts = len(n.results)
                if len(n.args) > 1:
                    sizes_arr = const(n.args[1])
                    need(sizes_arr is not None, "split sizes are not constant")
                    assert sizes_arr is not None
                    sizes = [int(s) for s in sizes_arr.ravel()]
                else:
                    need(nout % parts == 0, "out size not divisible by the number of outputs")
                    sizes = [nout // parts] * parts
                need(sum(sizes) == nout, "split sizes do not add up to the out size")
            except Miss as m:
                split_rec.miss(n, str(m))
                continue
            news, start = [], 0
            for size in sizes:
                attrs = {"w_layout": lin.attr("w_layout"), "slice": [start, start + size]}
                news.append(fused("Linear", list(lin.args), lin, attrs))
                start += size
            replace(n, news, [x.results[0] for x in news])
            split_rec.matched += 1
        remove_dead(op)
        for r in (rec, split_rec, tied):
            r.save(op)
