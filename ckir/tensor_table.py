"""The tensor table: role, logical layout and qbits of every tensor of a graph model.

One place computes it for every frontend (HF, GGUF, ONNX): :func:`annotate_model`
(the ``--annotate-tensors`` pass, run by :func:`ckir.frontend.import_model` and
``ckir import``) writes a builtin dictionary attribute on each tensor's defining op,
so the table is part of the IR text and round-trips with it:

```mlir
graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32 hf "..."
    attributes {tensor = {role = "weight", layout = "[N, K]", qbits = 32 : i64}}
%tokens = graph.input "tokens"
    {tensor = {role = "io", layout = "[T]", qbits = 32 : i64}} : !graph.tensor<[T], i32>
%q = graph.linear %h
    {tensor = {role = "activation", layout = "[T, H, D]", qbits = 32 : i64}, ...} : ...
%a = graph.attention %q, %k, %v heads H kv_heads KV head_dim D
    {kv = {role = "kv", layout = "[PT, KV, D]", qbits = 32 : i64}, tensor = {...}, causal}
```

- ``tensor`` on a ``graph.weight`` (in its ``attributes {...}``), a ``graph.input`` and a
  compute op (one dictionary per result; an array of them for ops with several results,
  such as ``graph.rope``); ``kv`` on a ``graph.attention``: the KV cache its k and v go
  to (ckir's own cache, ``[context, kv_heads, head_dim]`` per layer).
- ``role``: ``weight``, ``embedding`` (the tables of ``embed`` / ``pos_embed``),
  ``activation``, ``kv`` or ``io`` (graph inputs and what ``graph.output`` returns).
- ``layout``: the logical axes. Matrices of linear / lm_head ops are ``[N, K]`` (out,
  in), embedding tables ``[V, E]`` (positional ones ``[C, E]``), other weights their
  declared dims; activations their dims with a heads axis split out where a rope or an
  attention reads them (``[T, H*D]`` -> ``[T, H, D]``).
- ``qbits``: the bits per value: 32 for f32 (and f32 panels), 16 for bf16, 8 for q8_0,
  4 for q4_0 / q4_1 / q4_k, 5 for q5_k, 6 for q6_k.  A per-layer weight whose layers
  differ (a GGUF file's ``layer_dtypes``) also has ``layer_qbits`` (one entry per layer).
  ``--annotate-quant`` (passes/annotate_quant.py) finalises them from a QConfig; a value
  no kernel serves keeps the bits that are used and records the ``requested`` ones.

:func:`tensor_table` reads the rows back (``ckir inspect --tensors``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from ckir.dialects import graph as g
from ckir.dialects.dims import try_evaluate_dim
from ckir.vocab import PANEL_VALUES

#: attribute of a tensor's defining op holding its table entry (an array for several results)
TENSOR_ATTR = "tensor"
#: attribute of a graph.attention holding the entry of the KV cache it writes and reads
KV_ATTR = "kv"
ROLES = ("weight", "embedding", "activation", "kv", "io")
#: bits per value of each plain dtype
_PLAIN_QBITS: Mapping[str, int] = {
    "f32": 32,
    "bf16": 16,
    "f16": 16,
    "i32": 32,
    "i64": 64,
    "q8_0": 8,
    "q4_0": 4,
    "q4_1": 4,
    "q4_k": 4,
    "q5_k": 5,
    "q6_k": 6,
    "q5_0": 5,
    "q5_1": 5,
}
#: bits per value of each dtype (a panel dtype: those of the values it stores)
QBITS: Mapping[str, int] = {
    **_PLAIN_QBITS,
    **{p: _PLAIN_QBITS[v] for p, v in PANEL_VALUES.items()},
}
#: ops whose first weight is a matrix [N, K]
MATRIX_KINDS = ("linear", "lm_head")
#: ops whose first weight is an embedding table
TABLE_KINDS = {"embed": "[V, E]", "pos_embed": "[C, E]"}
#: name of the KV-cache rows (per layer): ``layers.{i}.kv``
KV_NAME = "kv"


@dataclass(frozen=True)
class TensorRow:
    """One row of the table: a tensor, where it is defined and its metadata."""

    name: str
    role: str
    layout: str
    shape: str
    dtype: str
    qbits: int
    #: the op defining it (``graph.weight``, ``graph.input``, ``graph.linear``, ...)
    op: str
    #: per-layer qbits where a weight's layers differ
    layer_qbits: tuple[int, ...] | None = None
    #: the qbits a QConfig asked for where no kernel serves them (``qbits`` is what is used)
    requested: int | None = None


# ----------------------------------------------------------------------- helpers


def entry(role: str, layout: str, qbits: int, **extra: int | Sequence[int]) -> DictionaryAttr:
    """The attribute of one table entry."""
    data: dict[str, Attribute] = {
        "role": StringAttr(role),
        "layout": StringAttr(layout),
        "qbits": IntegerAttr(qbits, 64),
    }
    for key, value in extra.items():
        if isinstance(value, int):
            data[key] = IntegerAttr(value, 64)
        else:
            data[key] = ArrayAttr([IntegerAttr(v, 64) for v in value])
    return DictionaryAttr(data)


def read_entry(attr: Attribute) -> dict[str, object]:
    """A table entry attribute as plain Python values."""
    if not isinstance(attr, DictionaryAttr):
        raise ValueError(f"a tensor table entry is a dictionary, got {attr}")
    out: dict[str, object] = {}
    for key, value in attr.data.items():
        if isinstance(value, StringAttr):
            out[key] = value.data
        elif isinstance(value, IntegerAttr):
            out[key] = value.value.data
        elif isinstance(value, ArrayAttr):
            out[key] = tuple(v.value.data for v in value.data if isinstance(v, IntegerAttr))
        else:
            raise ValueError(f"tensor table entry: {key} = {value} is not a string or integer")
    return out


def models(module: ModuleOp) -> list[g.ModelOp]:
    """The graph models of a module."""
    return [op for op in module.ops if isinstance(op, g.ModelOp)]


def section_prefix(op: Operation) -> str:
    """``header``, ``layers.{i}`` or ``footer``: the section an op sits in."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, (g.HeaderOp, g.BodyOp, g.FooterOp)):
        parent = parent.parent_op()
    if isinstance(parent, g.BodyOp):
        return "layers.{i}"
    if isinstance(parent, g.FooterOp):
        return "footer"
    return "header"


def _weight_uses(model: g.ModelOp) -> dict[str, set[tuple[str, int]]]:
    """Weight name -> the (op kind, weight index) that read it."""
    uses: dict[str, set[tuple[str, int]]] = {}
    for op in model.walk():
        if isinstance(op, g.ComputeOp):
            for idx, name in enumerate(op.weight_names):
                uses.setdefault(name, set()).add((op.kind, idx))
    return uses


def weight_role_layout(decl: g.WeightOp, uses: set[tuple[str, int]]) -> tuple[str, str]:
    """Role and logical layout of a weight from the ops that read it."""
    for kind, layout in TABLE_KINDS.items():
        if (kind, 0) in uses:
            return "embedding", layout
    if len(decl.shape_dims) == 2 and any((k, 0) in uses for k in MATRIX_KINDS):
        return "weight", "[N, K]"
    return "weight", "[" + ", ".join(decl.shape_dims) + "]"


def weight_qbits(decl: g.WeightOp) -> tuple[int, tuple[int, ...] | None]:
    """qbits of a weight's stored dtype, and per layer where the layers differ."""
    per = decl.layer_dtypes
    layer_bits = tuple(QBITS[d] for d in per) if per and decl.dtype_name in per else None
    if layer_bits is not None and len(set(layer_bits)) == 1:
        layer_bits = None
    return QBITS[decl.dtype_name], layer_bits


def _head_splits(model: g.ModelOp) -> dict[SSAValue, tuple[str, str]]:
    """Values a rope or an attention reads or writes per head -> (heads, head_dim) dims."""
    out: dict[SSAValue, tuple[str, str]] = {}
    for op in model.walk():
        if not isinstance(op, g.ComputeOp) or op.kind not in ("rope", "attention"):
            continue
        heads = op.properties["heads"]
        kv_heads = op.properties["kv_heads"]
        head_dim = op.properties["head_dim"]
        assert isinstance(heads, g.DimAttr) and isinstance(kv_heads, g.DimAttr)
        assert isinstance(head_dim, g.DimAttr)
        h, kv, d = heads.text, kv_heads.text, head_dim.text
        if op.kind == "rope":
            pairs = [(op.operands[0], h), (op.operands[1], kv)]
            pairs += [(op.results[0], h), (op.results[1], kv)]
        else:
            pairs = [(op.operands[0], h), (op.operands[1], kv), (op.operands[2], kv)]
            pairs.append((op.results[0], h))
        for value, n in pairs:
            out.setdefault(value, (n, d))
    return out


def activation_layout(
    dims: Sequence[str], split: tuple[str, str] | None, symbols: Mapping[str, int]
) -> str:
    """An activation's logical axes: its dims, the last one split into (heads, head_dim)
    where it is read per head and equals their product."""
    axes = list(dims)
    if split is not None and axes:
        heads, head_dim = split
        last = axes[-1]
        product = f"{heads}*{head_dim}"
        hv, dv, lv = (try_evaluate_dim(x, symbols) for x in (heads, head_dim, last))
        if last == product or (None not in (hv, dv, lv) and hv * dv == lv):  # type: ignore[operator]
            axes[-1:] = [heads, head_dim]
    return "[" + ", ".join(axes) + "]"


#: weight dtypes whose linear kernels read int8 activations (the Q8_0 / Q4 GEMVs quantize
#: x; the block panels' prefill GEMMs do too unless int8 prefill is switched off)
INT8_X_FORMATS = frozenset({"q8_0", "q4_0", "q4_1", "q8_0p", "q4_0p", "q4_1p"})


def linear_weights(value: SSAValue) -> list[g.WeightOp] | None:
    """The (tie-resolved) weights of the linear layers that multiply ``value``, or None
    when something else reads it too (or nothing does)."""
    model = None
    out: list[g.WeightOp] = []
    for use in value.uses:
        op = use.operation
        if not (isinstance(op, g.ComputeOp) and op.kind in MATRIX_KINDS and use.index == 0):
            return None
        model = model or op.parent_op()
        while model is not None and not isinstance(model, g.ModelOp):
            model = model.parent_op()
        assert isinstance(model, g.ModelOp)
        weights = model.weights()
        decl = weights[op.weight_names[0]]
        while decl.tied_to_name is not None:
            decl = weights[decl.tied_to_name]
        out.append(decl)
    return out or None


def used_activation_bits(value: SSAValue, layer: int | None) -> int:
    """The bits a kernel holds ``value`` in: 8 where only linear layers with Q8_0 / Q4
    weights read it (they quantize it to int8), else its dtype's."""
    decls = linear_weights(value)
    if decls and all(d.layer_dtype(layer) in INT8_X_FORMATS for d in decls):
        return 8
    t = value.type
    assert isinstance(t, g.TensorType)
    return QBITS[t.dtype_name]


def _layer_list(model: g.ModelOp, op: Operation) -> list[int | None]:
    if section_prefix(op) != "layers.{i}":
        return [None]
    _, body, _ = model.sections()
    assert body is not None
    n = try_evaluate_dim(body.repeat.text, model.symbol_values())
    return list(range(n)) if n else [None]


def activation_bits(
    model: g.ModelOp, op: Operation, value: SSAValue
) -> tuple[int, tuple[int, ...] | None]:
    """:func:`used_activation_bits` of a value of ``op``, and per layer where they differ."""
    per = [used_activation_bits(value, layer) for layer in _layer_list(model, op)]
    return per[0], (tuple(per) if len(set(per)) > 1 else None)


def _returned(model: g.ModelOp) -> set[SSAValue]:
    return {v for op in model.walk() if isinstance(op, g.OutputOp) for v in op.operands}


# ------------------------------------------------------------------ annotation


def annotate_model(model: g.ModelOp, *, overwrite: bool = False) -> int:
    """Write the ``tensor`` / ``kv`` attributes on every tensor of ``model``; returns how
    many ops got one.  Existing entries are kept unless ``overwrite`` (so running it
    after ``--annotate-quant`` keeps the finalised qbits)."""
    symbols = model.symbol_values()
    uses = _weight_uses(model)
    weights = model.weights()
    splits = _head_splits(model)
    returned = _returned(model)
    count = 0

    def tied_uses(name: str) -> set[tuple[str, int]]:
        found = set(uses.get(name, set()))
        for other, decl in weights.items():
            if decl.tied_to_name == name:
                found |= uses.get(other, set())
        return found

    for name, decl in weights.items():
        if TENSOR_ATTR in decl.attributes and not overwrite:
            continue
        role, layout = weight_role_layout(decl, uses.get(name, set()) or tied_uses(name))
        bits, layer_bits = weight_qbits(decl)
        extra = {"layer_qbits": layer_bits} if layer_bits else {}
        decl.attributes[TENSOR_ATTR] = entry(role, layout, bits, **extra)
        count += 1
    for op in model.walk():
        if isinstance(op, g.InputOp):
            if TENSOR_ATTR in op.attributes and not overwrite:
                continue
            t = op.results[0].type
            assert isinstance(t, g.TensorType)
            op.attributes[TENSOR_ATTR] = entry(
                "io", activation_layout(t.dims, None, symbols), QBITS[t.dtype_name]
            )
            count += 1
        elif isinstance(op, g.ComputeOp):
            if op.kind == "attention" and (KV_ATTR not in op.attributes or overwrite):
                kt = op.operands[1].type
                assert isinstance(kt, g.TensorType)
                kv_heads, head_dim = splits[op.operands[1]]
                op.attributes[KV_ATTR] = entry(
                    "kv", f"[PT, {kv_heads}, {head_dim}]", QBITS[kt.dtype_name]
                )
            if TENSOR_ATTR in op.attributes and not overwrite:
                continue
            entries = []
            for r in op.results:
                t = r.type
                assert isinstance(t, g.TensorType)
                role = "io" if r in returned else "activation"
                layout = activation_layout(t.dims, splits.get(r), symbols)
                bits, layer_bits = activation_bits(model, op, r)
                extra = {"layer_qbits": layer_bits} if layer_bits else {}
                entries.append(entry(role, layout, bits, **extra))
            op.attributes[TENSOR_ATTR] = entries[0] if len(entries) == 1 else ArrayAttr(entries)
            count += 1
    return count


def annotate_module(module: ModuleOp, *, overwrite: bool = False) -> int:
    """:func:`annotate_model` on every graph model of ``module``."""
    return sum(annotate_model(m, overwrite=overwrite) for m in models(module))


def is_annotated(model: g.ModelOp) -> bool:
    """Whether every weight of ``model`` carries a table entry (``--annotate-tensors`` ran)."""
    return all(TENSOR_ATTR in d.attributes for d in model.weights().values())


def sync_weight_qbits(model: g.ModelOp) -> None:
    """Set every weight's qbits (and ``layer_qbits``) to its declared dtype's, keeping a
    ``requested`` entry: what a build stores after its weights were converted."""
    for decl in model.weights().values():
        old = decl.attributes.get(TENSOR_ATTR)
        if old is None:
            continue
        info = read_entry(old)
        bits, layer_bits = weight_qbits(decl)
        extra: dict[str, int | Sequence[int]] = {}
        if layer_bits:
            extra["layer_qbits"] = layer_bits
        requested = info.get("requested")
        if isinstance(requested, int) and requested != bits:
            extra["requested"] = requested
        decl.attributes[TENSOR_ATTR] = entry(str(info["role"]), str(info["layout"]), bits, **extra)


# ---------------------------------------------------------------------- reading


def _entries(attr: Attribute | None, n: int, where: str) -> list[dict[str, object]]:
    if attr is None:
        raise ValueError(f"{where}: no tensor table entry (run --annotate-tensors)")
    items = list(attr.data) if isinstance(attr, ArrayAttr) else [attr]
    if len(items) != n:
        raise ValueError(f"{where}: {len(items)} tensor table entries for {n} results")
    out = [read_entry(a) for a in items]
    for e in out:
        for key in ("role", "layout", "qbits"):
            if key not in e:
                raise ValueError(f"{where}: tensor table entry without {key}")
        if e["role"] not in ROLES:
            raise ValueError(
                f"{where}: unknown role {e['role']!r} (expected one of {', '.join(ROLES)})"
            )
    return out


def _row(name: str, info: Mapping[str, object], shape: str, dtype: str, op: str) -> TensorRow:
    layer_bits = info.get("layer_qbits")
    requested = info.get("requested")
    qbits = info["qbits"]
    assert isinstance(qbits, int)
    return TensorRow(
        name=name,
        role=str(info["role"]),
        layout=str(info["layout"]),
        shape=shape,
        dtype=dtype,
        qbits=qbits,
        op=op,
        layer_qbits=tuple(layer_bits) if isinstance(layer_bits, tuple) else None,
        requested=requested if isinstance(requested, int) else None,
    )


def value_name(op: Operation, index: int, counter: dict[str, int]) -> str:
    """The table name of result ``index`` of a compute op: ``<section>.<ssa name>``
    (``layers.{i}.q``), or ``<section>.<kind><n>`` for an unnamed value."""
    prefix = section_prefix(op)
    hint = op.results[index].name_hint
    if hint is None:
        kind = op.name.removeprefix("graph.")
        n = counter.get(f"{prefix}.{kind}", 0)
        counter[f"{prefix}.{kind}"] = n + 1
        hint = f"{kind}{n}"
    return f"{prefix}.{hint}"


def walk_rows(model: g.ModelOp) -> Iterator[TensorRow]:
    """Every row of ``model``'s table: weights in declaration order, then the inputs,
    results and KV caches in program order.  ``ValueError`` for a missing or malformed
    entry."""
    for name, decl in model.weights().items():
        where = f"graph.weight @{name}"
        (info,) = _entries(decl.attributes.get(TENSOR_ATTR), 1, where)
        shape = "[" + ", ".join(decl.shape_dims) + "]"
        yield _row(name, info, shape, decl.dtype_name, "graph.weight")
    counter: dict[str, int] = {}
    for op in model.walk():
        if isinstance(op, g.InputOp):
            t = op.results[0].type
            assert isinstance(t, g.TensorType)
            where = f"graph.input {op.input_name.data!r}"
            (info,) = _entries(op.attributes.get(TENSOR_ATTR), 1, where)
            yield _row(
                op.input_name.data, info, "[" + ", ".join(t.dims) + "]", t.dtype_name, op.name
            )
        elif isinstance(op, g.ComputeOp):
            names = [value_name(op, i, counter) for i in range(len(op.results))]
            infos = _entries(
                op.attributes.get(TENSOR_ATTR), len(op.results), f"{op.name} {names[0]}"
            )
            for r, name, info in zip(op.results, names, infos, strict=True):
                t = r.type
                assert isinstance(t, g.TensorType)
                yield _row(name, info, "[" + ", ".join(t.dims) + "]", t.dtype_name, op.name)
            if op.kind == "attention":
                (info,) = _entries(op.attributes.get(KV_ATTR), 1, f"{op.name} {names[0]} (kv)")
                kt = op.operands[1].type
                assert isinstance(kt, g.TensorType)
                dtype = _dtype_of_bits(int(info["qbits"]), kt.dtype_name)  # type: ignore[arg-type]
                name = f"{section_prefix(op)}.{KV_NAME}"
                yield _row(name, info, "[PT, " + kt.dims[-1] + "]", dtype, op.name)


def _dtype_of_bits(bits: int, plain: str) -> str:
    return plain if QBITS.get(plain) == bits else ("q8_0" if bits == 8 else f"{bits}-bit")


def tensor_table(module: ModuleOp) -> list[TensorRow]:
    """The rows of every graph model of ``module`` (annotated first where it is not:
    a module written before the table existed)."""
    rows: list[TensorRow] = []
    for model in models(module):
        if not is_annotated(model):
            annotate_model(model)
        rows.extend(walk_rows(model))
    return rows


def format_table(rows: Sequence[TensorRow]) -> str:
    """The rows as an aligned text table (``ckir inspect --tensors``)."""
    head = ("name", "role", "layout", "shape", "dtype", "qbits", "op")
    body = []
    for r in rows:
        bits = str(r.qbits)
        if r.layer_qbits:
            bits += " (layers " + ",".join(map(str, r.layer_qbits)) + ")"
        if r.requested is not None:
            bits += f" (asked {r.requested}: no kernel)"
        body.append((r.name, r.role, r.layout, r.shape, r.dtype, bits, r.op))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [head, *body]
    ]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.role] = counts.get(r.role, 0) + 1
    lines.append(
        f"{len(rows)} tensors: " + ", ".join(f"{counts[k]} {k}" for k in ROLES if k in counts)
    )
    return "\n".join(lines) + "\n"


def table_json(rows: Sequence[TensorRow]) -> str:
    """The rows as JSON (``ckir inspect --tensors --json FILE``): ``{"tensors": [...]}``,
    one object per row with the :class:`TensorRow` fields (null where absent)."""
    items = []
    for r in rows:
        d = asdict(r)
        d["layer_qbits"] = list(r.layer_qbits) if r.layer_qbits else None
        items.append(d)
    return json.dumps({"tensors": items}, indent=2) + "\n"
