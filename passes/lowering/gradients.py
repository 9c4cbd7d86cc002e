"""Reverse-mode differentiation of a materialized program (the core of ``--lower-backward``).

``materialize`` has cloned the forward graph ops into the backward program and
given every value a buffer.  :func:`differentiate` then appends, after them:

1. the loss: ``cross_entropy_bwd(logits, targets) -> (loss, dlogits)``, where
   dlogits overwrites the logits buffer (the forward never reads it again);
2. for every forward op, in reverse program order, the calls of its gradient
   rule (:data:`RULES`, one per graph op kind), which read the forward
   activations (every value keeps its own buffer: nothing is recomputed) and
   the gradients of the op's results.  A rule passes its kernels the op's
   parameters from :func:`ckir.passes.lowering.op_params.op_params`, the same
   ones the forward pattern passes (a gradient rule reads no attribute itself).

The gradient of a value is one buffer once every consumer of the value has
been differentiated (the reverse order guarantees that).  Contributions are
combined without writing into a buffer another value may still read:

* the first contribution *is* the gradient (an ``add`` passes its output's
  gradient to both inputs as the same buffer: no copy);
* a later one is computed into a fresh buffer and summed with ``add`` into
  another fresh buffer; the liveness planner folds the dead ones together.

Weight gradients are global ``grad`` buffers (``grad.<weight>``, tied weights
share their target's).  A kernel either writes a weight gradient whole
(``write``: linear, bias) or adds into it (``readwrite``: norms, embeddings);
the builder zeroes a gradient before the first kernel that adds into it, and
when a kernel would overwrite a gradient that already holds a contribution it
computes into a scratch buffer and adds that instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from ckir.dialects import graph as g
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.passes.lowering.context import LoweringContext
from ckir.passes.lowering.kernels import (
    ParamValue,
    declare_kernel,
    kernel_call,
    kernel_params,
    select_kernel,
)
from ckir.passes.lowering.op_params import (
    attention_is_plain,
    elementwise_dims_params,
    gelu_kind,
    logits_params,
    norm_offset,
    op_params,
    tensor_dims,
)

LOSS_SCOPE = "loss"


@dataclass(frozen=True)
class WeightGrad:
    """An output operand of a gradient call: the gradient of the op's ``index``-th weight."""

    index: int


Out = str | WeightGrad


@dataclass
class GradientBuilder:
    """Appends the gradient calls to a backward program and names their buffers."""

    ctx: LoweringContext
    calls: list[lw.CallOp] = field(default_factory=list[lw.CallOp])
    #: value -> the buffer holding dloss/dvalue (complete once its consumers are done)
    grads: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    #: new program-local buffers: name -> (shape, dtype, role, source)
    specs: dict[str, tuple[list[int], str, str, str | None]] = field(
        default_factory=dict[str, tuple[list[int], str, str, str | None]]
    )
    #: weight gradients that hold a contribution of this step
    touched: set[str] = field(default_factory=set[str])
    #: weight buffer -> its gradient buffer, in first-use order
    weight_grads: dict[str, str] = field(default_factory=dict[str, str])
    #: gradient buffer -> how many values it is the gradient of (shared ones stay read-only)
    holders: dict[str, int] = field(default_factory=dict[str, int])

    # -- buffers ------------------------------------------------------------------
    def new_buffer(
        self,
        base: str,
        shape: Sequence[int],
        dtype: str = "f32",
        role: str = "activation",
        source: str | None = None,
    ) -> str:
        name, n = base, 1
        while name in self.specs or name in self.ctx.buffer_types:
            name, n = f"{base}_{n}", n + 1
        self.specs[name] = (list(shape), dtype, role, source)
        self.ctx.buffer_types[name] = lw.BufferType.make(list(shape), dtype)
        return name

    def grad_buffer(self, value: SSAValue, scope: str) -> str:
        """A fresh buffer shaped like ``value``'s, for a contribution to its gradient."""
        btype = self.ctx.buffer_types[self.ctx.buffer(value)]
        hint = value.name_hint or "v"
        return self.new_buffer(f"backward.{scope}.d{hint}", btype.shape_ints)

    def owned_grad(self, value: SSAValue, op: Operation) -> str:
        """The gradient of ``value`` for a kernel that updates it in place (no other holder)."""
        buf = self.grads[value]
        if self.holders.get(buf, 1) != 1:
            raise CkirError(
                f"{self.where(op)}: the gradient of %{value.name_hint} is shared with another "
                "value and cannot be updated in place"
            )
        return buf

    def contribute(self, value: SSAValue, buf: str, op: Operation) -> None:
        """Add the contribution held in ``buf`` to the gradient of ``value``."""
        if value not in self.grads:
            self.grads[value] = buf
            self.holders[buf] = self.holders.get(buf, 0) + 1
            return
        scope = self.scope(op)
        total = self.grad_buffer(value, scope)
        self.holders[total] = 1
        self.emit(op, "add", [self.grads[value], buf], [total], self.elementwise(value, op))
        self.grads[value] = total

    # -- calls --------------------------------------------------------------------
    def scope(self, op: Operation | None) -> str:
        return LOSS_SCOPE if op is None else self.ctx.scopes[op][0]

    def where(self, op: Operation | None) -> str:
        label = "the loss" if op is None else f"the gradient of {op.name}"
        return f"backward {self.scope(op)}: {label}"

    def emit(
        self,
        op: Operation | None,
        kind: str,
        ins: Sequence[str],
        outs: Sequence[Out],
        params: Mapping[str, ParamValue],
    ) -> None:
        """One call of a ``kind`` kernel; weight-gradient outputs are resolved here."""
        ctx = self.ctx
        types = ctx.buffer_types
        resolved = [self._weight_grad(op, o) if isinstance(o, WeightGrad) else o for o in outs]
        spec = select_kernel(
            kind,
            ctx.mode,
            [types[n].dtype_name for n in ins],
            [types[n].dtype_name for n in resolved],
            params,
            where=self.where(op),
        )
        origin = lw.OriginAttr.make(
            self.scope(op), "cross_entropy" if op is None else f"grad({op.name})"
        )
        args = kernel_params(spec, params)
        final = list(resolved)
        after: list[lw.CallOp] = []
        for k, (out, arg) in enumerate(zip(outs, spec.outputs(), strict=True)):
            if not isinstance(out, WeightGrad):
                continue
            grad = resolved[k]
            if arg.access == "readwrite" and grad not in self.touched:
                zero = self._call("zero", [], [grad], {"n": types[grad].num_elements}, origin, op)
                self.calls.append(zero)
            elif arg.access == "write" and grad in self.touched:
                # the gradient holds a contribution already: compute into scratch, then add
                tmp = self.new_buffer(
                    f"backward.{self.scope(op)}.{grad}.part", types[grad].shape_ints
                )
                final[k] = tmp
                n = types[grad].num_elements
                after.append(
                    self._call(
                        "add", [grad, tmp], [grad], {"n": n, "rows": 1, "cols": n}, origin, op
                    )
                )
            self.touched.add(grad)
        declare_kernel(ctx.lowered_model, spec)
        self.calls.append(lw.CallOp.make(spec.name, ins, final, args, origin=origin))
        self.calls += after

    def _call(
        self,
        kind: str,
        ins: Sequence[str],
        outs: Sequence[str],
        params: Mapping[str, ParamValue],
        origin: lw.OriginAttr,
        op: Operation | None,
    ) -> lw.CallOp:
        ctx = self.ctx
        return kernel_call(
            ctx.lowered_model,
            ctx.mode,
            ctx.buffer_types,
            kind,
            ins,
            outs,
            params,
            origin=origin,
            where=self.where(op),
        )

    def _weight_grad(self, op: Operation | None, out: WeightGrad) -> str:
        assert op is not None
        weight = self.ctx.weight_buffer(op, out.index)
        grad = self.weight_grads.get(weight)
        if grad is None:
            wtype = self.ctx.buffer_types[weight]
            if wtype.dtype_name != "f32":
                raise CkirError(
                    f"{self.where(op)}: weight @{weight} is {wtype.dtype_name}; training needs "
                    "f32 weights (compile without --dtype, or with --dtype f32)"
                )
            grad = "grad." + weight.removeprefix("w.")
            self.weight_grads[weight] = grad
            self.ctx.buffer_types[grad] = wtype
        return grad

    # -- parameters ---------------------------------------------------------------
    def params(self, op: g.ComputeOp) -> dict[str, ParamValue]:
        """The op's kernel parameters: the same :func:`op_params` its forward pattern reads."""
        return op_params(self.ctx, op, self.where(op))

    def elementwise(self, value: SSAValue, op: Operation | None) -> dict[str, ParamValue]:
        """``n``/``rows``/``cols`` of ``value`` (for summing two contributions to its gradient)."""
        return elementwise_dims_params(self.ctx, tensor_dims(value), self.where(op))


# ----------------------------------------------------------------------------- rules

Rule = Callable[[GradientBuilder, g.ComputeOp], None]


def _linear(b: GradientBuilder, op: g.ComputeOp) -> None:
    """y = x W^T (+ bias): dW = dy^T x, db = column sums of dy, dx = dy W."""
    (x,), (y,) = op.operands, op.results
    dy = b.grads[y]
    params = b.params(op)
    b.emit(op, "linear_bwd_weight", [dy, b.ctx.buffer(x)], [WeightGrad(0)], params)
    if len(op.weight_names) > 1:
        b.emit(op, "bias_bwd", [dy], [WeightGrad(1)], params)
    dx = b.grad_buffer(x, b.scope(op))
    b.emit(op, "linear_bwd_input", [dy, b.ctx.weight_buffer(op, 0)], [dx], params)
    b.contribute(x, dx, op)


def _embed(b: GradientBuilder, op: g.ComputeOp) -> None:
    """y = table[tokens]: the rows of dtable named by the tokens get dy (scatter-add)."""
    (tokens,), (y,) = op.operands, op.results
    ins = [b.ctx.buffer(tokens), b.grads[y]]
    b.emit(op, "embed_bwd", ins, [WeightGrad(0)], b.params(op))


def _pos_embed(b: GradientBuilder, op: g.ComputeOp) -> None:
    """y = x + wpe[0:T]: dwpe[0:T] += dy, dx = dy."""
    (x,), (y,) = op.operands, op.results
    dy = b.grads[y]
    b.emit(op, "pos_embed_bwd", [dy], [WeightGrad(0)], b.params(op))
    b.contribute(x, dy, op)


def _norm(kind: str, offset_kind: str | None = None) -> Rule:
    def rule(b: GradientBuilder, op: g.ComputeOp) -> None:
        """rmsnorm / layernorm: dx from x and gamma; dgamma (and dbeta) added into.

        A norm with a nonzero gamma ``offset`` uses the ``offset_kind`` kernel."""
        (x,), (y,) = op.operands, op.results
        dx = b.grad_buffer(x, b.scope(op))
        outs: list[Out] = [dx, *(WeightGrad(i) for i in range(len(op.weight_names)))]
        ins = [b.ctx.buffer(x), b.ctx.weight_buffer(op, 0), b.grads[y]]
        chosen = offset_kind if offset_kind is not None and norm_offset(op) else kind
        b.emit(op, chosen, ins, outs, b.params(op))
        b.contribute(x, dx, op)

    return rule


def _rope(b: GradientBuilder, op: g.ComputeOp) -> None:
    """qr, kr = rope(q, k): the inverse rotation of dqr and dkr, in place."""
    (q, k), (qr, kr) = op.operands, op.results
    missing = [r.name_hint for r in (qr, kr) if r not in b.grads]
    if missing:
        raise CkirError(f"{b.where(op)}: the loss does not depend on %{missing[0]}")
    dq, dk = b.owned_grad(qr, op), b.owned_grad(kr, op)
    params = b.params(op)
    b.emit(op, "rope_ext_bwd" if "ext" in params else "rope_bwd", [], [dq, dk], params)
    b.contribute(q, dq, op)
    b.contribute(k, dk, op)


def _attention(b: GradientBuilder, op: g.ComputeOp) -> None:
    """a = causal attention(q, k, v): dq, dk, dv with the probabilities recomputed."""
    (q, k, v), (a,) = op.operands, op.results
    scope = b.scope(op)
    dq, dk, dv = (b.grad_buffer(x, scope) for x in (q, k, v))
    ins = [b.ctx.buffer(x) for x in (q, k, v, a)] + [b.grads[a]]
    kind = "attention_bwd" if attention_is_plain(op) else "attention_ext_bwd"
    b.emit(op, kind, ins, [dq, dk, dv], b.params(op))
    for x, d in ((q, dq), (k, dk), (v, dv)):
        b.contribute(x, d, op)


def _unary(kind: str) -> Rule:
    def rule(b: GradientBuilder, op: g.ComputeOp) -> None:
        """y = f(x), elementwise: dx = f'(x) dy."""
        (x,), (y,) = op.operands, op.results
        dx = b.grad_buffer(x, b.scope(op))
        b.emit(op, kind, [b.ctx.buffer(x), b.grads[y]], [dx], b.params(op))
        b.contribute(x, dx, op)

    return rule


def _gelu(b: GradientBuilder, op: g.ComputeOp) -> None:
    """gelu: the backward kernel of the forward's approximation (tanh or erf)."""
    _unary(f"{gelu_kind(op)}_bwd")(b, op)


def _gated(kind: str) -> Rule:
    def rule(b: GradientBuilder, op: g.ComputeOp) -> None:
        """y = act(gate) * up (swiglu, geglu): dgate, dup from gate, up and dy."""
        (gate, up), (y,) = op.operands, op.results
        scope = b.scope(op)
        dgate, dup = b.grad_buffer(gate, scope), b.grad_buffer(up, scope)
        ins = [b.ctx.buffer(gate), b.ctx.buffer(up), b.grads[y]]
        b.emit(op, kind, ins, [dgate, dup], b.params(op))
        b.contribute(gate, dgate, op)
        b.contribute(up, dup, op)

    return rule


def _mul_scalar(b: GradientBuilder, op: g.ComputeOp) -> None:
    """y = x * s: dx = dy * s (the forward kernel itself, on dy)."""
    (x,), (y,) = op.operands, op.results
    dx = b.grad_buffer(x, b.scope(op))
    b.emit(op, "mul_scalar", [b.grads[y]], [dx], b.params(op))
    b.contribute(x, dx, op)


def _add(b: GradientBuilder, op: g.ComputeOp) -> None:
    """y = a + b: both inputs receive dy itself (no call)."""
    dy = b.grads[op.results[0]]
    for x in op.operands:
        b.contribute(x, dy, op)


#: graph op kind -> gradient rule; a kind without one cannot be trained through
RULES: Mapping[str, Rule] = {
    "linear": _linear,
    "lm_head": _linear,
    "embed": _embed,
    "pos_embed": _pos_embed,
    "rmsnorm": _norm("rmsnorm_bwd", "rmsnorm_offset_bwd"),
    "layernorm": _norm("layernorm_bwd"),
    "head_rmsnorm": _norm("rmsnorm_bwd", "rmsnorm_offset_bwd"),
    "rope": _rope,
    "attention": _attention,
    "swiglu": _gated("swiglu_bwd"),
    "gelu": _gelu,
    "add": _add,
    "geglu": _gated("geglu_bwd"),
    "mul_scalar": _mul_scalar,
    "softcap": _unary("softcap_bwd"),
}


# ----------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class Differentiated:
    """What :func:`differentiate` made: weight -> gradient buffers, in first-use order."""

    weight_grads: dict[str, str]


def differentiate(ctx: LoweringContext) -> Differentiated:
    """Append the loss and the gradient calls to ``ctx.program`` (still holding graph ops)."""
    program = ctx.program
    block = program.body_block
    b = GradientBuilder(ctx)
    logits_value, logits_buf = _output(ctx)
    targets = b.new_buffer(
        "backward.targets", [ctx.max_context], "i32", role="io", source="targets"
    )
    loss = b.new_buffer("backward.loss", [1], "f32", role="io", source="output")
    params = logits_params(ctx, tensor_dims(logits_value), "backward loss")
    b.emit(None, "cross_entropy_bwd", [logits_buf, targets], [loss, logits_buf], params)
    b.grads[logits_value] = logits_buf
    b.holders[logits_buf] = 1
    forward = [op for op in block.ops if isinstance(op, g.ComputeOp)]
    for op in reversed(forward):
        if not any(r in b.grads for r in op.results):
            continue  # the loss does not depend on this op
        rule = RULES.get(op.kind)
        if rule is None:
            raise CkirError(
                f"{b.where(op)}: graph.{op.kind} has no gradient rule "
                f"(trainable kinds: {', '.join(sorted(RULES))})"
            )
        rule(b, op)
    for call in b.calls:
        block.add_op(call)
    _declare(ctx, b)
    return Differentiated(dict(b.weight_grads))


def _output(ctx: LoweringContext) -> tuple[SSAValue, str]:
    """The program's output value (the logits) and its buffer, made an activation."""
    outputs = [
        op
        for op in ctx.program.body_block.ops
        if isinstance(op, lw.BufferOp) and op.role == "io" and op.source_name == "output"
    ]
    if len(outputs) != 1:
        raise CkirError(
            f"lower-backward: the graph must output one tensor (the logits), found {len(outputs)}"
        )
    buf = outputs[0]
    name = buf.buffer_name
    value = next((v for v, n in ctx.names.items() if n == name), None)
    if value is None or not isinstance(value.type, g.TensorType) or len(value.type.dims) != 2:
        raise CkirError(f"lower-backward: the output @{name} is not a [T, V] tensor of logits")
    replacement = lw.BufferOp.make(name, "activation", buf.buffer_type)
    ctx.program.body_block.insert_op_before(replacement, buf)
    ctx.program.body_block.erase_op(buf)
    return value, name


def _declare(ctx: LoweringContext, b: GradientBuilder) -> None:
    """The new program buffers (after the forward's) and the global gradient buffers."""
    block = ctx.program.body_block
    anchor = next(op for op in block.ops if not isinstance(op, lw.BufferOp))
    for name, (shape, dtype, role, source) in b.specs.items():
        buf = lw.BufferOp.make(name, role, lw.BufferType.make(shape, dtype), source=source)
        block.insert_op_before(buf, anchor)
    model_block = ctx.lowered_model.body_block
    first_program = next(op for op in model_block.ops if isinstance(op, lw.ProgramOp))
    # in the order of the weights' buffers (declaration order), not of first use
    weights = [op for op in model_block.ops if isinstance(op, lw.BufferOp) and op.role == "weight"]
    for op in weights:
        grad = b.weight_grads.get(op.buffer_name)
        if grad is not None:
            buf = lw.BufferOp.make(grad, "grad", op.buffer_type, source=op.buffer_name)
            model_block.insert_op_before(buf, first_program)
