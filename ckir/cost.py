"""Cost model: what each kernel call reads and computes, from the lowered IR alone.

An analysis over a parsed module (a ``lowered.model``, optionally with its
``layout.plan``), not over printed text.  Every call is read through the
``lowered.kernel`` it names: the op kind says what the call computes, the
operand accesses and the buffer types say what it reads.

* :func:`call_costs` — one :class:`CallCost` per call, in program order:
  weight bytes read, parameters of the weight matrices multiplied (two FLOPs
  per parameter per token), KV-cache bytes read per cached position, and
  ``H * D`` of attention calls (four FLOPs per query-key pair per ``H * D``).
* :func:`model_cost` — the per-token totals ``ckir bench`` builds its
  rooflines on (:class:`ModelCost`).

Example (the IR loader is :mod:`ckir.ir_io`)::

    module = load_module(Path("build/layout.mlir"))
    cost = model_cost(module)
    cost.decode_bytes(context=128, steps=64)   # bytes one decode step streams
    cost.prefill_flops(tokens=256)
    cost.train_flops(tokens=128)               # training builds: forward x TRAIN_FLOPS_FACTOR
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.vocab import LOWERED_MODES, PANEL_DTYPES, PANEL_VALUES, storage_bytes

__all__ = [
    "GATHER_KINDS",
    "MATRIX_KINDS",
    "TRAIN_FLOPS_FACTOR",
    "CallCost",
    "ModelCost",
    "call_costs",
    "model_cost",
]

#: op kinds that read one row of their weight table per token, not the whole table
GATHER_KINDS: frozenset[str] = frozenset({"embed", "pos_embed"})
#: op kinds that multiply by their 2-D weights (two FLOPs per weight per token)
MATRIX_KINDS: frozenset[str] = frozenset(
    {"linear", "lm_head", "matmul", "fused_matmul_relu", "fused_qkv", "fused_gate_up"}
)

#: FLOPs of one training step / FLOPs of its forward: the backward of a matrix product
#: is two products of the same size (dx = dy W, dW = dy^T x) and attention's backward
#: likewise (dq, dk from dS; dv, dP from dout).  The convention ignores the cheap
#: element-wise and norm kernels, the optimizer, and ``attention_bwd``'s recomputation of
#: the probabilities (one more q k^T: attention backward is 2.5x its forward, not 2x)
TRAIN_FLOPS_FACTOR = 3


def forward_flops(params: int, attention_hd: int, tokens: int) -> float:
    """FLOPs of a forward over ``tokens`` tokens from position 0: two per matrix parameter
    per token, four per causal query-key pair per ``H * D`` of attention."""
    causal_pairs = tokens * (tokens + 1) / 2
    return 2.0 * params * tokens + 4.0 * attention_hd * causal_pairs


@dataclass(frozen=True)
class CallCost:
    """What one ``lowered.call`` reads and computes (per call, ``T`` tokens at a time)."""

    mode: str
    #: position of the call in its program
    index: int
    kernel: str
    kind: str
    #: the origin's label, or the kernel name when the call has no origin
    label: str
    #: weight bytes read per call of one token (gathers: one row; others: whole buffers,
    #: a panel dtype (f32p, bf16p, q8_0p, q4_1p, q4_0p) with the zero rows that pad its last
    #: panel: the kernels stream them too)
    weight_bytes: int
    #: parameters of the 2-D weight matrices multiplied (0 unless a matrix kind)
    matrix_params: int
    #: KV-cache bytes read per cached position (attention calls)
    kv_bytes_per_position: int
    #: heads x head dim of an attention call (0 otherwise)
    attention_hd: int


@dataclass
class ModelCost:
    """What one token costs, summed over the calls of the decode and prefill programs."""

    #: weight bytes decode reads per token (matrices in full, one row of gathered tables)
    decode_weight_bytes: int
    #: K + V cache bytes attention reads per context position (all layers)
    kv_bytes_per_position: int
    #: parameters of the weight matrices prefill multiplies, per token
    prefill_params: int
    #: sum over prefill attention calls of H * D
    attention_hd: int
    weights_arena: int
    state_arena: int
    kv_cache: int
    max_context: int
    vocab: int
    #: the backward program's forward half (training builds; 0 otherwise): parameters of
    #: the matrices it multiplies per token, and the sum of H * D of its attention calls
    train_params: int = 0
    train_attention_hd: int = 0

    def decode_bytes(self, context: int, steps: int) -> float:
        """Mean bytes per decode step over ``steps`` steps after ``context`` cached tokens
        (the step at position p reads p + 1 cache rows)."""
        mean_rows = context + (steps + 1) / 2
        return self.decode_weight_bytes + self.kv_bytes_per_position * mean_rows

    def prefill_flops(self, tokens: int) -> float:
        """FLOPs of a ``tokens``-token prefill from an empty cache."""
        return forward_flops(self.prefill_params, self.attention_hd, tokens)

    def train_flops(self, tokens: int) -> float:
        """FLOPs of one training step on ``tokens`` tokens: ``TRAIN_FLOPS_FACTOR`` x the
        FLOPs of the backward program's forward (counted like a prefill)."""
        return TRAIN_FLOPS_FACTOR * forward_flops(
            self.train_params, self.train_attention_hd, tokens
        )


def lowered_model(module: ModuleOp) -> lw.LoweredModelOp:
    models = [op for op in module.ops if isinstance(op, lw.LoweredModelOp)]
    if len(models) != 1:
        raise CkirError(f"cost model: expected one lowered.model, found {len(models)}")
    return models[0]


def _buffers(model: lw.LoweredModelOp) -> dict[str, lw.BufferOp]:
    return {op.buffer_name: op for op in model.body_block.ops if isinstance(op, lw.BufferOp)}


def _row_bytes(btype: lw.BufferType) -> int:
    """Bytes of one row of a weight table (what a gather reads per token).

    A panel table (f32p, bf16p, q8_0p, q4_1p, q4_0p) counts the bytes of one row of the dtype
    whose values it stores: 4 / 2 bytes per element, 34 / 20 per block of 32.  (A row's values
    are spread over its panel, so the cache lines touched are more.)"""
    if btype.dtype_name in PANEL_DTYPES:
        return storage_bytes(PANEL_VALUES[btype.dtype_name], btype.shape_ints[1])
    return btype.byte_size // btype.shape_ints[0]


def call_costs(module: ModuleOp) -> list[CallCost]:
    """The cost of every call of every program, programs in order, calls in program order."""
    model = lowered_model(module)
    globals_ = _buffers(model)
    out: list[CallCost] = []
    for program in model.programs().values():
        for index, call in enumerate(program.calls()):
            decl = call.declaration()
            if decl is None:
                raise CkirError(f"cost model: lowered.call @{call.kernel_name} is not declared")
            kind = decl.kind_name
            weight_bytes = matrix_params = kv_bytes = 0
            for arg, name in call.bindings(decl):
                buf = globals_.get(name)
                if buf is None or arg.writes:
                    continue
                btype = buf.buffer_type
                if buf.role == "weight":
                    weight_bytes += _row_bytes(btype) if kind in GATHER_KINDS else btype.byte_size
                    if kind in MATRIX_KINDS and len(btype.shape_ints) == 2:
                        matrix_params += btype.num_elements
                elif buf.role == "kv_cache" and kind == "attention":
                    kv_bytes += btype.byte_size // btype.shape_ints[0]
            params = call.param_values
            hd = 0
            if kind == "attention":
                h, d = params.get("H", 0), params.get("D", 0)
                hd = h * d if isinstance(h, int) and isinstance(d, int) else 0
            label = call.origin.label if call.origin is not None else call.kernel_name
            out.append(
                CallCost(
                    mode=program.mode_name,
                    index=index,
                    kernel=call.kernel_name,
                    kind=kind,
                    label=label,
                    weight_bytes=weight_bytes,
                    matrix_params=matrix_params,
                    kv_bytes_per_position=kv_bytes,
                    attention_hd=hd,
                )
            )
    return out


def model_cost(module: ModuleOp, *, max_context: int = 0) -> ModelCost:
    """Per-token totals of the module's decode and prefill programs, and of the forward half
    of its backward program (training builds).

    ``max_context`` is the fallback when the model has no KV cache.  Arena
    sizes come from the module's ``layout.plan`` (0 without one).
    """
    model = lowered_model(module)
    calls = call_costs(module)
    buffers = _buffers(model)
    decode = [c for c in calls if c.mode == "decode"]
    prefill = [c for c in calls if c.mode == "prefill"]
    # the backward program's forward: its matrix and attention calls (the gradient
    # calls are kinds of their own: linear_bwd_*, attention_bwd)
    train = [c for c in calls if c.mode == "backward"]
    caches = [b for b in buffers.values() if b.role == "kv_cache"]
    arena_size: dict[str, int] = {}
    for plan in (op for op in module.ops if isinstance(op, ly.PlanOp)):
        for arena in plan.body_block.ops:
            if isinstance(arena, ly.ArenaOp):
                arena_size[arena.arena_name] = arena.size_bytes
    vocab = 0
    programs = model.programs()
    embed_mode = next((m for m in LOWERED_MODES if m in programs), "")
    for call in programs[embed_mode].calls() if embed_mode else []:
        decl = call.declaration()
        if vocab == 0 and decl is not None and decl.kind_name == "embed":
            tables = [buffers[n] for n in call.in_names if n in buffers]
            vocab = tables[0].buffer_type.shape_ints[0] if tables else 0
    return ModelCost(
        decode_weight_bytes=sum(c.weight_bytes for c in decode),
        kv_bytes_per_position=sum(c.kv_bytes_per_position for c in decode),
        prefill_params=sum(c.matrix_params for c in prefill),
        attention_hd=sum(c.attention_hd for c in prefill),
        weights_arena=arena_size.get("weights", 0),
        state_arena=arena_size.get("state", 0),
        kv_cache=sum(b.buffer_type.byte_size for b in caches),
        max_context=max((b.buffer_type.shape_ints[0] for b in caches), default=max_context),
        vocab=vocab,
        train_params=sum(c.matrix_params for c in train),
        train_attention_hd=sum(c.attention_hd for c in train),
    )
