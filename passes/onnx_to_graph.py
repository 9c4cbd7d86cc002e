"""``--onnx-to-graph``: a fused ``onnx`` module → a ``graph.model``.

After the fusion passes the graph holds ``ckir``-domain nodes, residual
``Add`` nodes, the weights (``onnx.init``) and the token input.  This pass:

1. refuses the first node ckir cannot run, in one line naming the node, its
   op_type and the opset;
2. takes the header (``ckir.Embed``, ``ckir.PosEmbed``), the footer (the ops
   after the last residual ``Add``: final norm + LM head) and splits the
   rest into layers: the shortest period whose op kinds *and* wiring repeat
   (each operand the same op of the layer, the layer's input, or a weight);
3. writes one ``graph.weight`` per weight (``hf "<initializer>"``, with
   ``{i}`` where the per-layer names differ only by the layer number, else
   the names listed in ``onnx_names``), slices and transposes included, and
   the graph ops of layer 0 as the body.

Symbols: ``T`` tokens, ``V``/``E`` from the embedding table, ``L`` layers,
``H``/``KV``/``D`` from the attention, ``C`` the position table rows, ``I``
the MLP width.  The ``onnx`` ops are replaced by::

    graph.model @<file stem> arch "onnx" symbols {...} { graph.weight ... graph.header ... }
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import graph as g
from ckir.dialects import onnx as ox
from ckir.errors import CkirError

#: ckir-domain node -> graph op kind (Linear is linear or, as the footer's last op, lm_head)
KINDS = {
    "ckir.LayerNorm": "layernorm",
    "ckir.RMSNorm": "rmsnorm",
    "ckir.SwiGLU": "swiglu",
    "ckir.Rope": "rope",
    "ckir.Linear": "linear",
    "ckir.Gelu": "gelu",
    "ckir.Attention": "attention",
    "Add": "add",
}
#: the attribute of graph.weight listing per-layer initializer names without a common pattern
NAMES_ATTR = "onnx_names"


def _opset(module: ModuleOp) -> int:
    a = module.attributes.get("onnx.opset")
    return a.value.data if a is not None else 0  # type: ignore[attr-defined]


def _refuse_unsupported(module: ModuleOp) -> None:
    for op in module.ops:
        if (
            isinstance(op, ox.NodeOp)
            and op.kind not in KINDS
            and op.kind
            not in (
                "ckir.Embed",
                "ckir.PosEmbed",
            )
        ):
            raise CkirError(
                f"ONNX node '{op.label}': op_type {op.op_type.data}"
                f"{' (domain ' + op.domain.data + ')' if op.domain.data else ''} "
                f"(opset {_opset(module)}) is not supported by ckir (docs/onnx.md lists what is)"
            )


@dataclass
class _Weight:
    """One weight of the graph: its source initializer(s) and packing."""

    name: str
    shape: list[str]
    inits: list[ox.InitOp]  # one per layer (one for a model-wide weight)
    slice: tuple[int, int, int] | None = None
    transpose: bool = False
    tied_to: str | None = None


@dataclass
class _Builder:
    dims: dict[int, str] = field(default_factory=dict[int, str])
    weights: list[_Weight] = field(default_factory=list[_Weight])
    counters: dict[str, int] = field(default_factory=dict[str, int])

    def dim(self, n: int) -> str:
        return self.dims.get(n, str(n))

    def tt(self, *dims: str) -> g.TensorType:
        return g.TensorType.make(["T", *dims], "f32")

    def fresh(self, prefix: str, base: str) -> str:
        k = self.counters.get(prefix + base, 0)
        self.counters[prefix + base] = k + 1
        return f"{prefix}{base}{k}"


def _linear_weights(
    b: _Builder, node: ox.NodeOp, prefix: str, per_layer: list[ox.NodeOp]
) -> tuple[list[str], int]:
    """Declare a linear's weight (and bias): names, out size."""
    w0 = node.args[1].owner
    assert isinstance(w0, ox.InitOp)
    layout = node.attr("w_layout")
    k_in, n_out = (w0.dims[1], w0.dims[0]) if layout == "nk" else w0.dims
    sl = node.attr("slice")
    if isinstance(sl, list):
        n_out = int(sl[1]) - int(sl[0])
    name = b.fresh(prefix, "linear")
    ws = [
        _Weight(
            name,
            [b.dim(n_out), b.dim(k_in)],
            [n.args[1].owner for n in per_layer],  # type: ignore[misc]
            (0 if layout == "nk" else 1, int(sl[0]), int(sl[1])) if isinstance(sl, list) else None,
            layout == "kn",
        )
    ]
    names = [name]
    if len(node.args) == 3:
        ws.append(
            _Weight(
                name + ".bias",
                [b.dim(n_out)],
                [n.args[2].owner for n in per_layer],  # type: ignore[misc]
                (0, int(sl[0]), int(sl[1])) if isinstance(sl, list) else None,
            )
        )
        names.append(name + ".bias")
    for w in ws:
        if not all(isinstance(i, ox.InitOp) for i in w.inits):
            raise CkirError(
                f"ONNX node '{node.label}': a linear's weight or bias is not an initializer"
            )
    b.weights += ws
    return names, n_out


def _hf_pattern(names: list[str]) -> str | None:
    """``a.{i}.b`` when ``names[l]`` is ``a.<l>.b`` for every layer ``l``."""
    if len(names) == 1:
        return None
    for m in re.finditer(r"(?<![0-9])0(?![0-9])", names[0]):
        pat = names[0][: m.start()] + "{i}" + names[0][m.end() :]
        if all(pat.replace("{i}", str(i)) == n for i, n in enumerate(names)):
            return pat
    return None


def _signature(ops: list[ox.NodeOp], start: int, p: int, carry: SSAValue) -> list[tuple] | None:
    """The kinds and wiring of ``ops[start:start+p]`` relative to the layer, or None."""
    index = {
        r: (j - start, k) for j in range(start, start + p) for k, r in enumerate(ops[j].results)
    }
    sig: list[tuple] = []
    for j in range(start, start + p):
        op = ops[j]
        refs: list[object] = []
        for a in op.args:
            if a in index:
                refs.append(index[a])
            elif a == carry:
                refs.append("carry")
            elif isinstance(a.owner, ox.InitOp):
                refs.append(("w", a.owner.dims))
            else:
                return None
        sig.append((op.kind, tuple(sorted(op.attrs.data.items())), tuple(refs)))
    return sig


def _layers(ops: list[ox.NodeOp], carry: SSAValue) -> tuple[int, list[SSAValue]]:
    """(period, input of each layer) of the body ``ops``."""
    n = len(ops)
    for p in range(1, n + 1):
        if n % p:
            continue
        carries = [carry]
        ref = _signature(ops, 0, p, carry)
        ok = ref is not None
        for layer in range(1, n // p):
            if not ok:
                break
            prev = ops[layer * p - 1].results[0]
            carries.append(prev)
            ok = _signature(ops, layer * p, p, prev) == ref
        if ok:
            return p, carries
    raise CkirError("ONNX graph: the blocks between the embedding and the head do not repeat")


def convert(module: ModuleOp, model_name: str) -> g.ModelOp:
    """The graph.model of a fused onnx module (see the module docstring)."""
    _refuse_unsupported(module)
    inputs = [op for op in module.ops if isinstance(op, ox.InputOp)]
    outputs = [op for op in module.ops if isinstance(op, ox.OutputOp)]
    if len(inputs) != 1 or len(outputs) != 1 or len(outputs[0].args) != 1:
        raise CkirError("ONNX graph: ckir needs one input (token ids) and one output (logits)")
    ops = [op for op in module.ops if isinstance(op, ox.NodeOp)]
    emb = [op for op in ops if op.kind == "ckir.Embed"]
    if len(emb) != 1:
        raise CkirError("ONNX graph: no token embedding (Gather of an initializer by the input)")
    table = emb[0].args[0].owner
    assert isinstance(table, ox.InitOp)
    vocab, hidden = table.dims
    b = _Builder()
    b.dims = {hidden: "E", vocab: "V"}
    b.weights.append(_Weight("embed", ["V", "E"], [table]))
    header_ops = [emb[0]]
    x = emb[0].results[0]
    pos = [op for op in ops if op.kind == "ckir.PosEmbed"]
    symbols = {"V": vocab, "E": hidden}
    if pos:
        pt = pos[0].args[1].owner
        assert isinstance(pt, ox.InitOp)
        symbols["C"] = pt.dims[0]
        b.weights.append(_Weight("pos", ["C", "E"], [pt]))
        header_ops.append(pos[0])
        x = pos[0].results[0]
    attn = [op for op in ops if op.kind == "ckir.Attention"]
    if attn:
        h, kv, d = (int(attn[0].attr(k)) for k in ("heads", "kv_heads", "head_dim"))  # type: ignore[arg-type]
        symbols.update(H=h, KV=kv, D=d)
        b.dims.setdefault(h * d, "H*D")
        b.dims.setdefault(kv * d, "KV*D")
    rest = [op for op in ops if op not in header_ops]
    adds = [j for j, op in enumerate(rest) if op.kind == "Add"]
    if not adds:
        raise CkirError("ONNX graph: no residual Add: not a transformer decoder")
    body, footer = rest[: adds[-1] + 1], rest[adds[-1] + 1 :]
    p, carries = _layers(body, x)
    n_layers = len(body) // p
    symbols["L"] = n_layers
    for op in body[:p]:
        if op.kind == "ckir.Linear":
            w = op.args[1].owner
            assert isinstance(w, ox.InitOp)
            n = w.dims[0] if op.attr("w_layout") == "nk" else w.dims[1]
            sl = op.attr("slice")
            if isinstance(sl, list):
                n = int(sl[1]) - int(sl[0])
            if n not in b.dims and "I" not in symbols:
                symbols["I"] = n
                b.dims[n] = "I"

    model = g.ModelOp.make(model_name, "onnx", symbols)
    header = g.HeaderOp.make()
    tok = g.InputOp.make("tokens", g.TensorType.make(["T"], "i32"))
    header.block.add_op(tok)
    e_op = g.compute_op("embed", [tok.results[0]], [b.tt("E")], weights=["embed"])
    header.block.add_op(e_op)
    hx = e_op.results[0]
    if pos:
        p_op = g.compute_op("pos_embed", [hx], [b.tt("E")], weights=["pos"])
        header.block.add_op(p_op)
        hx = p_op.results[0]
    header.block.add_op(g.YieldOp.make([hx]))

    body_op = g.BodyOp.make("L", [b.tt("E")])
    values: dict[SSAValue, SSAValue] = {carries[0]: body_op.block.args[0]}
    _emit(
        b,
        body[:p],
        [body[k * p : (k + 1) * p] for k in range(n_layers)],
        body_op.block,
        values,
        "layers.{i}.",
    )
    body_op.block.add_op(g.YieldOp.make([values[body[p - 1].results[0]]]))

    footer_op = g.FooterOp.make([b.tt("E")])
    values = {body[-1].results[0]: footer_op.block.args[0]}
    out = outputs[0].args[0]
    if not footer or footer[-1].results[0] != out or footer[-1].kind != "ckir.Linear":
        raise CkirError("ONNX graph: the output is not a linear LM head after the last block")
    _emit(b, footer[:-1], [footer[:-1]], footer_op.block, values, "final.")
    head = footer[-1]
    if len(head.args) == 3:
        raise CkirError(f"ONNX node '{head.label}': an LM head with a bias is not supported")
    tied = head.attr("tied_to")
    if tied == table.tensor:
        b.weights.append(_Weight("lm_head", ["V", "E"], [], tied_to="embed"))
    else:
        w = head.args[1].owner
        assert isinstance(w, ox.InitOp)
        b.weights.append(_Weight("lm_head", ["V", "E"], [w], None, head.attr("w_layout") == "kn"))
    lm = g.compute_op("lm_head", [values[head.args[0]]], [b.tt("V")], weights=["lm_head"])
    footer_op.block.add_op(lm)
    footer_op.block.add_op(g.OutputOp.make([lm.results[0]]))

    for w in b.weights:
        model.body_block.add_op(_declare(w))
    for op in (header, body_op, footer_op):
        model.body_block.add_op(op)
    return model


def _declare(w: _Weight) -> g.WeightOp:
    if w.tied_to is not None:
        return g.WeightOp.make(w.name, w.shape, "f32", tied_to=w.tied_to)
    names = [i.tensor for i in w.inits]
    pattern = _hf_pattern(names) if len(names) > 1 else names[0]
    src_shape = [str(d) for d in w.inits[0].dims]
    sl = (w.slice[0], str(w.slice[1]), str(w.slice[2])) if w.slice is not None else None
    op = g.WeightOp.make(
        w.name,
        w.shape,
        "f32",
        hf=pattern if pattern is not None else names[0] + "#{i}",
        hf_shape=src_shape if (sl is not None or w.transpose) else None,
        slice=sl,
        transpose=w.transpose,
    )
    if pattern is None:
        op.attributes[NAMES_ATTR] = ArrayAttr(tuple(StringAttr(n) for n in names))
    return op


def _emit(
    b: _Builder,
    ops: list[ox.NodeOp],
    per_layer: list[list[ox.NodeOp]],
    block: Block,
    values: dict[SSAValue, SSAValue],
    prefix: str,
) -> None:
    for j, op in enumerate(ops):
        kind = KINDS.get(op.kind)
        layer_ops = [layer[j] for layer in per_layer]
        if kind == "rope":
            continue  # emitted with the attention that reads it (graph.rope takes q and k)
        if kind == "attention":
            q, k = (a.owner for a in op.args[:2])
            ropes = [x for x in (q, k) if isinstance(x, ox.NodeOp) and x.kind == "ckir.Rope"]
            if len(ropes) == 1:
                raise CkirError(f"ONNX node '{op.label}': rotary embedding on only one of q, k")
            if ropes:
                assert isinstance(q, ox.NodeOp) and isinstance(k, ox.NodeOp)
                if q.attr("theta") != k.attr("theta"):
                    raise CkirError(f"ONNX node '{op.label}': q and k rotate with different theta")
                qin, kin = values[q.args[0]], values[k.args[0]]
                rope = g.compute_op(
                    "rope",
                    [qin, kin],
                    [qin.type, kin.type],  # type: ignore[list-item]
                    attrs={
                        "heads": "H",
                        "kv_heads": "KV",
                        "head_dim": "D",
                        "theta": float(q.attr("theta")),  # type: ignore[arg-type]
                    },
                )
                block.add_op(rope)
                values[q.results[0]], values[k.results[0]] = rope.results
        ins = [values[a] for a in op.args if not isinstance(a.owner, ox.InitOp)]
        in_type = ins[0].type
        assert isinstance(in_type, g.TensorType)
        out_type = in_type
        attrs: dict[str, object] = {}
        weights: list[str] = []
        if kind == "linear":
            weights, n_out = _linear_weights(b, op, prefix, layer_ops)
            out_type = b.tt(b.dim(n_out))
        elif kind == "layernorm":
            name = b.fresh(prefix, "norm")
            weights = [name, name + ".bias"]
            for k, wn in enumerate(weights):
                b.weights.append(_Weight(wn, ["E"], [lo.args[k + 1].owner for lo in layer_ops]))  # type: ignore[misc]
            attrs["eps"] = float(op.attr("eps"))  # type: ignore[arg-type]
        elif kind == "gelu":
            attrs["approximate"] = op.attr("approximate")
        elif kind == "rmsnorm":
            name = b.fresh(prefix, "norm")
            weights = [name]
            b.weights.append(_Weight(name, ["E"], [lo.args[1].owner for lo in layer_ops]))  # type: ignore[misc]
            attrs["eps"] = float(op.attr("eps"))  # type: ignore[arg-type]
        elif kind == "swiglu":
            pass
        elif kind == "attention":
            attrs = {"heads": "H", "kv_heads": "KV", "head_dim": "D", "causal": True}
            for extra in ("scale_dim", "softcap"):  # the native Attention op's scale / softcap
                if op.attr(extra) is not None:
                    attrs[extra] = float(op.attr(extra))  # type: ignore[arg-type]
            hd = int(op.attr("heads")) * int(op.attr("head_dim"))  # type: ignore[arg-type]
            out_type = b.tt(b.dim(hd))
        elif kind == "add":
            pass
        else:
            raise CkirError(f"ONNX node '{op.label}': {op.kind} cannot appear here")
        new: Operation = g.compute_op(kind, ins, [out_type], weights=weights, attrs=attrs)
        block.add_op(new)
        values[op.results[0]] = new.results[0]


@dataclass(frozen=True)
class OnnxToGraphPass(ModulePass):
    """A fused onnx module → graph.model (see the module docstring)."""

    name = "onnx-to-graph"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        f = op.attributes.get("onnx.file")
        stem = f.data.rsplit(".", 1)[0] if isinstance(f, StringAttr) else "model"
        stem = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "model"
        model = convert(op, stem)
        for old in reversed(list(op.ops)):
            old.detach()
            old.erase(safe_erase=False)
        op.body.block.add_op(model)
        for key in ("onnx.opset", "onnx.file"):
            op.attributes.pop(key, None)
