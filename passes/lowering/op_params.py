"""The kernel parameters of each graph op kind, read from the op in one place.

A graph op carries its shape in its tensor types, its weights' buffer types
and its attributes (``eps``, ``theta``, ``heads``, ``approximate`` …).  The
kernels that implement it take integers and floats (``T``, ``E``, ``eps``,
``n``/``rows``/``cols`` …).  :func:`op_params` turns the one into the other,
per op kind, and is what both the forward rewrite patterns
(:mod:`ckir.passes.lowering.patterns`) and the gradient rules
(:mod:`ckir.passes.lowering.gradients`) pass to kernel selection: a parameter
is read from the op here and nowhere else.

The dict holds every parameter that any kernel of the kind (forward or
backward) may take; :func:`ckir.passes.lowering.kernels.select_kernel` keeps
the ones the chosen kernel declares.  Values depend on the mode through the
context (``T`` is the run-time symbol in prefill and backward, 1 in decode;
``P`` is the run-time position with a KV cache, 0 in backward).

Adding an op kind: add a function here and an entry in :data:`PARAMS`
(an elementwise kind needs none: :func:`elementwise_params` serves it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from xdsl.ir import Attribute, Operation

from ckir.dialects import graph as g
from ckir.dialects.dims import DimAttr
from ckir.errors import CkirError
from ckir.passes.lowering.context import LoweringContext
from ckir.passes.lowering.kernels import ParamValue
from ckir.passes.lowering.rope_scaling import RopeCoefficients, rope_coefficients
from ckir.vocab import GRAPH_OPS

#: ``(ctx, op, where) -> params``; ``where`` names the op in error messages
ParamsFn = Callable[[LoweringContext, g.ComputeOp, str], dict[str, ParamValue]]


# ----------------------------------------------------------------------------- readers


def _attr(op: Operation, name: str) -> Attribute | None:
    return op.properties.get(name) or op.attributes.get(name)


def float_attr(op: Operation, name: str) -> float:
    """The float attribute ``name`` of a graph op (``eps``, ``theta``)."""
    value = getattr(_attr(op, name), "value", None)
    data = getattr(value, "data", None) if value is not None else None
    if not isinstance(data, float | int):
        raise CkirError(f"{op.name}: needs a float '{name}' attribute")
    return float(data)


def dim_attr(ctx: LoweringContext, op: Operation, name: str, where: str) -> int:
    """The dim-expression attribute ``name`` of a graph op (``heads``), evaluated."""
    attr = _attr(op, name)
    if not isinstance(attr, DimAttr):
        raise CkirError(f"{where}: needs a dim expression '{name}'")
    return ctx.dim(attr.text, where=where)


def tensor_dims(value: object) -> tuple[str, ...]:
    """The dims of a graph tensor value's type."""
    vtype = getattr(value, "type", None)
    assert isinstance(vtype, g.TensorType)
    return vtype.dims


def elementwise_dims_params(
    ctx: LoweringContext, dims: Sequence[str], where: str
) -> dict[str, ParamValue]:
    """``n`` (elements), ``rows`` and ``cols`` of a tensor with ``dims``, as a kernel sees them."""
    return {
        "n": ctx.runtime_count(dims, where=where),
        "rows": ctx.leading(dims, where=where),
        "cols": ctx.dim(dims[-1], where=where) if dims else 1,
    }


def logits_params(ctx: LoweringContext, dims: Sequence[str], where: str) -> dict[str, ParamValue]:
    """``T`` and ``V`` of a ``[T, V]`` logits tensor (cross entropy and its gradient)."""
    return {"T": ctx.leading(dims, where=where), "V": ctx.dim(dims[-1], where=where)}


# ----------------------------------------------------------------------------- per kind


def elementwise_params(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """Every elementwise kind (``OpSignature.elementwise``): n = rows x cols of the result."""
    return elementwise_dims_params(ctx, tensor_dims(op.results[0]), where)


def gelu_kind(op: g.ComputeOp) -> str:
    """The kernel kind of a graph.gelu: ``gelu`` (tanh), ``gelu_erf`` (approximate "none")."""
    return "gelu_erf" if getattr(_attr(op, "approximate"), "data", "tanh") == "none" else "gelu"


def _gelu(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """gelu: elementwise (the tanh and the erf kernels take the same n)."""
    return elementwise_params(ctx, op, where)


def _embed(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """embed: T tokens, the table is [V, E]."""
    v, e = ctx.weight_type(op, 0).shape_ints
    return {"T": ctx.runtime_tokens, "V": v, "E": e}


def _pos_embed(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """pos_embed: T rows from position P of the [C, E] table."""
    e = ctx.weight_type(op, 0).shape_ints[1]
    return {"T": ctx.runtime_tokens, "E": e, "P": ctx.position}


def _norm(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """rmsnorm / layernorm: T rows of E, and eps (rmsnorm: and its gamma ``offset``, 0 if none)."""
    dims = tensor_dims(op.results[0])
    params: dict[str, ParamValue] = {
        "T": ctx.leading(dims, where=where),
        "E": ctx.dim(dims[-1], where=where),
        "eps": float_attr(op, "eps"),
    }
    if _attr(op, "offset") is not None:
        params["offset"] = float_attr(op, "offset")
    return params


def norm_offset(op: g.ComputeOp) -> float:
    """The gamma ``offset`` of a norm op (0.0 when it has none): its kernels differ by it."""
    return float_attr(op, "offset") if _attr(op, "offset") is not None else 0.0


def _mul_scalar(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """mul_scalar: elementwise, and the factor ``s = value ** exponent``."""
    assert isinstance(op, g.MulScalarOp)
    factor = g.mul_scalar_factor(op)
    if factor is None:
        raise CkirError(f"{where}: the factor value ** exponent is not a finite number")
    return {**elementwise_params(ctx, op, where), "s": factor}


def _head_norm(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """head_rmsnorm, a row norm over heads: T*heads rows of head_dim (heads = width / head_dim),
    and its gamma ``offset`` when it has one."""
    dims = tensor_dims(op.results[0])
    d = dim_attr(ctx, op, "head_dim", where)
    heads = ctx.dim(dims[-1], where=where) // d
    params: dict[str, ParamValue] = {
        "T": ctx.runtime_count([*dims[:-1], str(heads)], where=where),
        "E": d,
        "eps": float_attr(op, "eps"),
    }
    if _attr(op, "offset") is not None:
        params["offset"] = float_attr(op, "offset")
    return params


def _linear(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """linear / lm_head: [M, K] x [N, K]^T; ``T`` is M too (for the kernels that name it so)."""
    n, k = ctx.weight_type(op, 0).shape_ints
    rows = ctx.leading(tensor_dims(op.operands[0]), where=where)
    return {"M": rows, "T": rows, "N": n, "K": k}


def _heads(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """T rows of q, the heads H and KV of head_dim D, and the first position P."""
    heads = dim_attr(ctx, op, "heads", where)
    kv_heads = dim_attr(ctx, op, "kv_heads", where)
    head_dim = dim_attr(ctx, op, "head_dim", where)
    return {
        "T": ctx.leading(tensor_dims(op.operands[0]), where=where),
        "P": ctx.position,
        "H": heads,
        "KV": kv_heads,
        "D": head_dim,
    }


def _rope(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """rope: the head layout, theta and the scaling coefficients (:mod:`.rope_scaling`);
    on the local layers of ``local_pattern``, ``local_theta`` and no scaling."""
    params = _heads(ctx, op, where)
    coeffs = rope_coefficients(op, int(params["D"]), where)
    theta = float_attr(op, "theta")
    if coeffs.ext is not None:
        original = int_attr(op, "original_context", 0)
        if ctx.max_context > original:
            raise CkirError(
                f"{where}: LongRoPE's short factors hold up to original_max_position_embeddings "
                f"= {original} tokens, but the model is compiled for {ctx.max_context} "
                f"(beyond it the long factors apply, and ckir keeps one set per build); "
                f"use --max-context {original} or less"
            )
    if _on_pattern_layer(ctx, op, int_attr(op, "local_pattern", 0), "local_pattern", where):
        theta = float_attr(op, "local_theta")
        coeffs = RopeCoefficients(coeffs.R)
    return {**params, "theta": theta, **coeffs.params()}


def _on_pattern_layer(
    ctx: LoweringContext, op: g.ComputeOp, pattern: int, attr: str, where: str
) -> bool:
    """Whether ``op``'s layer i is one that a layer pattern n selects: ``(i + 1) % n != 0``
    (False when there is no pattern, ``pattern == 0``)."""
    if not pattern:
        return False
    _, layer = ctx.scopes.get(op, ("", None))
    if layer is None:
        raise CkirError(f"{where}: {attr} needs a layer index (use it in graph.body)")
    return (layer + 1) % pattern != 0


def int_attr(op: Operation, name: str, default: int) -> int:
    """The integer attribute ``name`` of a graph op (``window``), or ``default`` when absent."""
    value = getattr(_attr(op, name), "value", None)
    data = getattr(value, "data", None)
    return data if isinstance(data, int) else default


def _attention(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """attention (and its kv_store): the head layout and the KV row width KVD; the score
    ``scale`` (``scale_dim ** -0.5``, default ``head_dim ** -0.5``), ``softcap`` (0: none)
    and this layer's ``window`` (0: every key; ``window_pattern`` n leaves it off on the
    layers i with ``(i + 1) % n == 0``)."""
    params = _heads(ctx, op, where)
    scale_dim = float_attr(op, "scale_dim") if _attr(op, "scale_dim") else float(params["D"])
    window = int_attr(op, "window", 0)
    pattern = int_attr(op, "window_pattern", 0)
    if window and pattern and not _on_pattern_layer(ctx, op, pattern, "window_pattern", where):
        window = 0
    return {
        **params,
        "KVD": int(params["KV"]) * int(params["D"]),
        "scale": scale_dim**-0.5,
        "softcap": float_attr(op, "softcap") if _attr(op, "softcap") else 0.0,
        "window": window,
    }


def attention_is_plain(op: g.ComputeOp) -> bool:
    """Whether an attention op has none of scale_dim / softcap / window: the plain kernels
    (``attention``, ``attention_bwd``) serve it; otherwise ``attention_ext``."""
    return all(_attr(op, a) is None for a in ("scale_dim", "softcap", "window"))


def _softcap(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """softcap: elementwise, and ``cap``."""
    return {**elementwise_params(ctx, op, where), "cap": float_attr(op, "cap")}


def _matmul(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """matmul: [M, K] x [K, N]."""
    a, b = tensor_dims(op.operands[0]), tensor_dims(op.operands[1])
    return {
        "M": ctx.leading(a, where=where),
        "K": ctx.dim(a[-1], where=where),
        "N": ctx.dim(b[-1], where=where),
    }


def _cross_entropy(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """cross_entropy: T rows of V logits."""
    return logits_params(ctx, tensor_dims(op.operands[0]), where)


#: graph op kind -> its parameters; elementwise kinds not listed use :func:`elementwise_params`
PARAMS: Mapping[str, ParamsFn] = {
    "embed": _embed,
    "pos_embed": _pos_embed,
    "rmsnorm": _norm,
    "layernorm": _norm,
    "head_rmsnorm": _head_norm,
    "linear": _linear,
    "lm_head": _linear,
    "rope": _rope,
    "attention": _attention,
    "gelu": _gelu,
    "matmul": _matmul,
    "fused_matmul_relu": _matmul,
    "cross_entropy": _cross_entropy,
    "mul_scalar": _mul_scalar,
    "softcap": _softcap,
}


def op_params(ctx: LoweringContext, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
    """The kernel parameters of graph op ``op`` (forward and gradient kernels alike)."""
    fn = PARAMS.get(op.kind)
    if fn is None:
        sig = GRAPH_OPS.get(op.kind)
        if sig is None or not sig.elementwise:
            raise CkirError(f"{where}: no kernel parameters are defined for graph.{op.kind}")
        fn = elementwise_params
    return fn(ctx, op, where)
