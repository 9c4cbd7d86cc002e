"""The vocabulary of ckir: execution modes, dtypes, buffer roles and op kinds.

Every other module derives its lists from here (the dialects' verifiers, the
template engine, the kernel registry, the compiler driver, the weight writer,
the benchmarks); ``tests/test_vocab.py`` checks that none keeps a copy of its
own.  File formats keep their own names (safetensors ``"BF16"``, GGUF
``"Q4_1"``) in their frontends, mapped onto these dtypes.

Nothing here imports xDSL: the table is plain data, cheap to import anywhere.

Adding a graph op kind means adding its :class:`OpSignature` to
:data:`GRAPH_OPS` (see docs/adding-an-op.md); adding a mode means adding a
:class:`Mode`; adding a dtype means adding a :class:`DType`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "ATTR_KINDS",
    "BLOCK_DTYPES",
    "DTYPES",
    "DTYPE_TABLE",
    "ELEMENT_BYTES",
    "GLOBAL_ROLES",
    "GRAPH_OPS",
    "INFERENCE_MODES",
    "KERNEL_ONLY_OPS",
    "KERNEL_OPS",
    "LOCAL_ROLES",
    "LOWERED_MODES",
    "MODES",
    "MODE_TABLE",
    "PANEL_DTYPES",
    "PANEL_OF",
    "PANEL_SLOT_BYTES",
    "PANEL_VALUES",
    "PERMANENT_ROLES",
    "REPORTED_ROLES",
    "ROLES",
    "SCHEDULE_KEYS",
    "VALUE_DTYPES",
    "WEIGHT_DTYPES",
    "DType",
    "Mode",
    "OpSignature",
    "dtype_info",
    "storage_bytes",
]


# ----------------------------------------------------------------------------- modes


@dataclass(frozen=True)
class Mode:
    """An execution mode: one ``lowered.program`` and one C entry point per mode."""

    name: str
    doc: str
    #: a ``--lower-<name>`` pass exists, so ``ckir compile`` can build it
    lowered: bool
    #: runs on tokens and writes logits: a field of the generated ``ckir_model_desc``
    #: (``ckir_prefill`` / ``ckir_decode``); the training modes have entry points of their own
    inference: bool = False


MODE_TABLE: tuple[Mode, ...] = (
    Mode("prefill", "T >= 1 new tokens at position P: GEMMs, fills the KV cache", True, True),
    Mode(
        "decode", "one new token at position P: GEMVs over the weights and the KV cache", True, True
    ),
    Mode(
        "backward",
        "forward over T tokens with the activations kept, the loss over targets, then "
        "the gradient of every weight (training)",
        True,
    ),
    # made by --lower-backward together with the backward program
    Mode("optimize", "one AdamW step of every weight from its gradient (training)", False),
)
#: every mode of the design (graph ``when`` guards, lowered programs)
MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE)
#: the modes a lowering pass exists for (``ckir compile --modes``, the registry)
LOWERED_MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE if m.lowered)
#: the modes that map tokens to logits (the default of ``ckir compile --modes``)
INFERENCE_MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE if m.inference)


# ----------------------------------------------------------------------------- dtypes


@dataclass(frozen=True)
class DType:
    """A dtype: its storage, its C type, its NumPy dtype and where it may appear.

    Plain dtypes have ``elem_bytes``; block-quantized ones (GGUF layouts) have
    ``block = (bytes per block, elements per block)`` and a row holds whole blocks.

    A *panel* dtype (``panel`` set: ``f32p``, ``bf16p``, ``q8_0p``, ``q4_1p``) stores a 2-D
    ``[N, K]`` matrix in a GEMM-friendly order: P = ceil(N / panel) panels, panel p
    holding rows ``panel*p .. panel*p + panel - 1``, k-major.  Plain panel dtypes
    (f32p, bf16p) hold ``elem_bytes``-sized values as K/g panel rows of ``panel``
    32-bit slots, slot ``n % panel`` holding the g = :attr:`k_group` values of row
    n at k = g*j .. g*j + g - 1 (f32p: g = 1, one float; bf16p: g = 2, the pair k =
    2j, 2j + 1): element (n, k) is at value index ``((n // panel) * (K // g) + k //
    g) * panel * g + (n % panel) * g + k % g``.  A block panel dtype (q8_0p, q4_1p, q4_0p)
    holds the blocks of its block format, the ``panel`` rows' blocks b of each panel
    together ("panel blocks", g = the block's elements; docs/quantization.md for the
    byte order inside one).  K must be a multiple of g.  The rows of the last
    panel past N are zeros: storage is ``P * panel`` rows of the plain layout
    (``P * panel * K * elem_bytes`` bytes, or ``P * panel * K / g * block bytes``),
    not N rows, so the rows from a multiple of ``panel`` on start where they would
    in a row-major matrix.  Panel buffers are always 2-D; their sizes depend on the
    shape, not on the element count alone (:func:`storage_bytes` takes the shape).
    A panel dtype stores the values of the dtype with the same encoding
    (:data:`PANEL_VALUES`: f32p the f32 values, bf16p the bf16 ones, q8_0p q8_0's
    blocks, q4_1p q4_1's).
    """

    name: str
    c_type: str
    #: NumPy dtype string of one element (bf16 is held as its raw ``<u2`` bits); None for blocks
    numpy: str | None
    elem_bytes: int | None = None
    block: tuple[int, int] | None = None
    #: may be the dtype of a graph tensor value (activations, inputs)
    value: bool = False
    #: a weight dtype ``ckir compile --dtype`` produces (kernels exist for it)
    weight: bool = False
    #: panel dtypes: rows per panel (the matrix is stored panel by panel, k-major)
    panel: int | None = None

    @property
    def k_group(self) -> int:
        """Values of one row along k that a panel keeps together: those sharing a
        32-bit slot of a panel row (:data:`PANEL_SLOT_BYTES` / ``elem_bytes``: f32p 1,
        bf16p 2), or one block of a block panel dtype (q8_0p, q4_1p, q4_0p: 32); 1 for other
        dtypes.  A panel matrix's K is a multiple of it."""
        if self.panel is None:
            return 1
        if self.block is not None:
            return self.block[1]
        assert self.elem_bytes is not None
        return PANEL_SLOT_BYTES // self.elem_bytes


#: bytes of one slot of a panel row: the values of one matrix row that a panel keeps
#: together along k (``vdpbf16ps`` multiplies bf16 pairs, AMX bf16 tiles hold them too)
PANEL_SLOT_BYTES = 4


DTYPE_TABLE: tuple[DType, ...] = (
    DType("f32", "float", "<f4", elem_bytes=4, value=True, weight=True),
    # fp32 matrices pre-packed in 32-row GEMM panels (docs/quantization.md)
    DType("f32p", "float", "<f4", elem_bytes=4, weight=True, panel=32),
    DType("bf16", "uint16_t", "<u2", elem_bytes=2, value=True, weight=True),
    # bf16 matrices pre-packed in 32-row GEMM panels of k pairs (docs/quantization.md)
    DType("bf16p", "uint16_t", "<u2", elem_bytes=2, weight=True, panel=32),
    DType("f16", "uint16_t", "<f2", elem_bytes=2, value=True),
    DType("i32", "int32_t", "<i4", elem_bytes=4, value=True),
    DType("i64", "int64_t", "<i8", elem_bytes=8, value=True),
    # GGUF blocks, addressed as bytes by the kernels
    DType("q8_0", "uint8_t", None, block=(34, 32), weight=True),
    # Q8_0 blocks pre-packed in 32-row GEMM panels (docs/quantization.md)
    DType("q8_0p", "uint8_t", None, block=(34, 32), weight=True, panel=32),
    DType("q4_0", "uint8_t", None, block=(18, 32), weight=True),
    # Q4_0 blocks pre-packed in 32-row GEMM panels (docs/quantization.md)
    DType("q4_0p", "uint8_t", None, block=(18, 32), weight=True, panel=32),
    DType("q4_1", "uint8_t", None, block=(20, 32), weight=True),
    # Q4_1 blocks pre-packed in 32-row GEMM panels (docs/quantization.md)
    DType("q4_1p", "uint8_t", None, block=(20, 32), weight=True, panel=32),
    # GGUF K-quants: super-blocks of 256 (docs/quantization.md, "K-quants")
    DType("q4_k", "uint8_t", None, block=(144, 256), weight=True),
    DType("q5_k", "uint8_t", None, block=(176, 256), weight=True),
    DType("q6_k", "uint8_t", None, block=(210, 256), weight=True),
    # Q4_K / Q5_K / Q6_K super-blocks pre-packed in 32-row GEMM panels (docs/quantization.md)
    DType("q4_kp", "uint8_t", None, block=(144, 256), weight=True, panel=32),
    DType("q5_kp", "uint8_t", None, block=(176, 256), weight=True, panel=32),
    DType("q6_kp", "uint8_t", None, block=(210, 256), weight=True, panel=32),
    # GGUF 5-bit blocks of 32 (docs/quantization.md): Q5_0 (d, qh, qs) and Q5_1 (d, m, qh, qs)
    DType("q5_0", "uint8_t", None, block=(22, 32), weight=True),
    DType("q5_1", "uint8_t", None, block=(24, 32), weight=True),
    # Q5_0 / Q5_1 blocks pre-packed in 32-row GEMM panels (docs/quantization.md)
    DType("q5_0p", "uint8_t", None, block=(22, 32), weight=True, panel=32),
    DType("q5_1p", "uint8_t", None, block=(24, 32), weight=True, panel=32),
)
_BY_NAME: Mapping[str, DType] = MappingProxyType({d.name: d for d in DTYPE_TABLE})
#: every dtype name: what a graph tensor, a weight or a lowered buffer may hold
DTYPES: tuple[str, ...] = tuple(_BY_NAME)
#: bytes per element of the plain dtypes
ELEMENT_BYTES: Mapping[str, int] = MappingProxyType(
    {d.name: d.elem_bytes for d in DTYPE_TABLE if d.elem_bytes is not None}
)
#: panel dtypes: rows per panel (their ELEMENT_BYTES entry is the size of one value)
PANEL_DTYPES: Mapping[str, int] = MappingProxyType(
    {d.name: d.panel for d in DTYPE_TABLE if d.panel is not None}
)


def _panel_values(d: DType) -> str:
    """The dtype whose values panel dtype ``d`` stores: the one not in panels with its
    encoding (NumPy dtype, C type and block: f32p f32, bf16p bf16, q8_0p q8_0, q4_1p q4_1)."""
    same = [
        o.name
        for o in DTYPE_TABLE
        if o.panel is None and (o.numpy, o.c_type, o.block) == (d.numpy, d.c_type, d.block)
    ]
    if len(same) != 1:
        raise AssertionError(f"panel dtype {d.name}: no single plain dtype of its encoding {same}")
    return same[0]


#: panel dtype -> the dtype whose values it stores, in panels (f32p -> f32, q8_0p -> q8_0,
#: q4_1p -> q4_1)
PANEL_VALUES: Mapping[str, str] = MappingProxyType(
    {d.name: _panel_values(d) for d in DTYPE_TABLE if d.panel is not None}
)
#: dtype -> the panel dtype that stores its values pre-packed (f32 -> f32p, q8_0 -> q8_0p,
#: q4_1 -> q4_1p)
PANEL_OF: Mapping[str, str] = MappingProxyType({v: p for p, v in PANEL_VALUES.items()})
assert len(PANEL_OF) == len(PANEL_VALUES), "two panel dtypes store the same values"
#: block-quantized dtypes: (bytes per block, elements per block); q8_0p, q4_1p and q4_0p included
#: (their rows are whole blocks too, laid out in panels: ``PANEL_DTYPES`` tells them apart)
BLOCK_DTYPES: Mapping[str, tuple[int, int]] = MappingProxyType(
    {d.name: d.block for d in DTYPE_TABLE if d.block is not None}
)
#: dtypes of graph tensor values
VALUE_DTYPES: tuple[str, ...] = tuple(d.name for d in DTYPE_TABLE if d.value)
#: weight dtypes ckir compiles to (``--dtype``)
WEIGHT_DTYPES: tuple[str, ...] = tuple(d.name for d in DTYPE_TABLE if d.weight)


def dtype_info(name: str) -> DType:
    """The :class:`DType` called ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r} (known: {', '.join(DTYPES)})") from None


def storage_bytes(name: str, shape: int | Sequence[int]) -> int:
    """Bytes of a buffer of dtype ``name`` and logical ``shape``.

    ``shape`` is the dims, or an element count for dtypes whose size depends on
    the count alone.  Block dtypes: whole blocks per row (last dim); an element
    count is taken as one row.  Panel dtypes (``f32p``, ``bf16p``, ``q8_0p``,
    ``q4_1p``): the shape must be ``[N, K]`` with K a multiple of :attr:`DType.k_group`;
    ``ceil(N / panel) * panel`` rows of K values (the padding rows included).
    """
    d = dtype_info(name)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if d.panel is not None:
        if isinstance(shape, int) or len(dims) != 2:
            raise ValueError(f"{name} buffers are [N, K] matrices; got shape {shape!r}")
        n, k = dims
        if k % d.k_group:
            raise ValueError(f"{name} needs K % {d.k_group} == 0; got shape {shape!r}")
        rows_padded = -(-n // d.panel) * d.panel
        if d.block is not None:
            return rows_padded * (k // d.block[1]) * d.block[0]
        assert d.elem_bytes is not None
        return rows_padded * k * d.elem_bytes
    rows = 1
    for dim in dims[:-1]:
        rows *= dim
    row = dims[-1] if dims else 1
    if d.block is not None:
        block_bytes, block_elems = d.block
        return rows * -(-row // block_elems) * block_bytes
    assert d.elem_bytes is not None
    return rows * row * d.elem_bytes


# ----------------------------------------------------------------------------- roles

#: buffer roles of the lowered and layout dialects
ROLES: tuple[str, ...] = (
    "weight",
    "kv_cache",
    "activation",
    "io",
    "scratch",
    "grad",
    "optimizer_state",
)
#: roles of buffers declared at model level (shared by every program)
GLOBAL_ROLES: frozenset[str] = frozenset({"weight", "kv_cache", "grad", "optimizer_state"})
#: roles of buffers declared inside a program
LOCAL_ROLES: frozenset[str] = frozenset({"activation", "io", "scratch", "grad"})
#: roles live for the whole run (never share bytes in the state arena)
PERMANENT_ROLES: tuple[str, ...] = ("kv_cache", "io", "grad", "optimizer_state")
#: roles whose totals every layout plan reports, even when 0
#: (grad and optimizer_state appear in the totals of the builds that have them: training)
REPORTED_ROLES: tuple[str, ...] = ("weight", "kv_cache", "activation", "io")


# ----------------------------------------------------------------------------- op kinds

#: kinds of op attributes: python value kinds plus ``dim`` (a dim expression) and
#: ``schedule`` (a ``#graph.schedule`` hint)
ATTR_KINDS: tuple[str, ...] = ("float", "int", "bool", "str", "dim", "schedule", "floats")


@dataclass(frozen=True)
class OpSignature:
    """What a graph op kind takes: operands, results, weights and attributes.

    ``attrs`` maps attribute name -> (kind, required), in the order the graph
    dialect prints them; ``choices`` lists the allowed values of string attributes.

    ``elementwise`` ops take operands of one tensor type and give a result of that
    type; the lowering handles them all with one pattern (params ``n``, ``rows``,
    ``cols``), and the graph dialect makes their op class from ``doc`` unless it
    defines one by hand (for attributes or extra checks).

    ``kernel`` names another kind whose registry kernels serve this one (its
    :mod:`ckir.passes.lowering.op_params` entry shapes the params for them, e.g.
    a norm per head is the row norm over ``T*heads`` rows of ``head_dim``);
    empty: the kind's own kernels.
    """

    ins: int
    outs: int
    #: (min, max) number of weights
    weights: tuple[int, int]
    attrs: Mapping[str, tuple[str, bool]] = field(default_factory=dict)
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    elementwise: bool = False
    doc: str = ""
    kernel: str = ""

    @property
    def weight_counts(self) -> tuple[int, ...]:
        """Every allowed number of weights."""
        return tuple(range(self.weights[0], self.weights[1] + 1))

    @property
    def dim_attrs(self) -> tuple[str, ...]:
        """The attributes that are dim expressions."""
        return tuple(k for k, (kind, _) in self.attrs.items() if kind == "dim")


#: the fields of a ``#graph.schedule`` hint, in printing order
SCHEDULE_KEYS: tuple[str, ...] = ("tile_m", "tile_n", "tile_k", "vectorize")

_HEADS = {"heads": ("dim", True), "kv_heads": ("dim", True), "head_dim": ("dim", True)}
_SCHEDULE = {"schedule": ("schedule", False)}
#: graph.rope's kinds of frequency scaling (absent: ``default``, plain RoPE)
ROPE_TYPES: tuple[str, ...] = ("default", "linear", "wavelength", "yarn", "longrope")
#: graph.rope's optional attributes: the scaling of ``rope_type`` and partial rotation
#: (which ones each type takes: ``ckir.dialects.graph.ROPE_TYPE_ATTRS``)
_ROPE_SCALING = {
    "rope_type": ("str", False),
    "factor": ("float", False),
    "low_freq_factor": ("float", False),
    "high_freq_factor": ("float", False),
    "original_context": ("int", False),
    "beta_fast": ("float", False),
    "beta_slow": ("float", False),
    "attention_factor": ("float", False),
    "mscale": ("float", False),
    "mscale_all_dim": ("float", False),
    "truncate": ("bool", False),
    # longrope: per-pair frequency divisors (its short factors), R/2 of them
    "ext_factors": ("floats", False),
    # longrope: the context its long factors were made for (max_position_embeddings);
    # its ratio to original_context is the default factor
    "scaled_context": ("int", False),
    "partial_rotary_factor": ("float", False),
}

#: the graph dialect's compute ops (``graph.<kind>``), by kind
GRAPH_OPS: Mapping[str, OpSignature] = MappingProxyType(
    {
        "embed": OpSignature(1, 1, (1, 1)),
        "pos_embed": OpSignature(1, 1, (1, 1)),
        "rmsnorm": OpSignature(1, 1, (1, 1), {"eps": ("float", True), "offset": ("float", False)}),
        "layernorm": OpSignature(1, 1, (2, 2), {"eps": ("float", True)}),
        "head_rmsnorm": OpSignature(
            1,
            1,
            (1, 1),
            {"head_dim": ("dim", True), "eps": ("float", True), "offset": ("float", False)},
            kernel="rmsnorm",
        ),
        "linear": OpSignature(1, 1, (1, 2)),
        "rope": OpSignature(
            2,
            2,
            (0, 0),
            {
                "theta": ("float", True),
                **_HEADS,
                **_ROPE_SCALING,
                # layers i with (i + 1) % local_pattern != 0 rotate by local_theta, unscaled
                "local_theta": ("float", False),
                "local_pattern": ("int", False),
            },
            {"rope_type": ROPE_TYPES},
        ),
        "attention": OpSignature(
            3,
            1,
            (0, 0),
            {
                **_HEADS,
                "causal": ("bool", True),
                # scores q.k / sqrt(scale_dim) (default head_dim), soft-capped by
                # softcap * tanh(s / softcap), keys limited to the last `window` positions
                # on the layers `window_pattern` selects (docs/dialects/graph.md)
                "scale_dim": ("float", False),
                "softcap": ("float", False),
                "window": ("int", False),
                "window_pattern": ("int", False),
            },
        ),
        "swiglu": OpSignature(
            2, 1, (0, 0), elementwise=True, doc="``silu(gate) * up``: ``gate, up -> y``."
        ),
        "gelu": OpSignature(
            1,
            1,
            (0, 0),
            {"approximate": ("str", True)},
            {"approximate": ("tanh", "none")},
            elementwise=True,
        ),
        "relu": OpSignature(1, 1, (0, 0), _SCHEDULE, elementwise=True),
        "add": OpSignature(
            2, 1, (0, 0), elementwise=True, doc="Add, used for explicit residuals: ``a + b``."
        ),
        "mul": OpSignature(2, 1, (0, 0), elementwise=True, doc="Product: ``a * b``."),
        "lm_head": OpSignature(1, 1, (1, 2), kernel="linear"),  # its own kind: the footer's
        "cross_entropy": OpSignature(2, 1, (0, 0)),
        "matmul": OpSignature(2, 1, (0, 0), _SCHEDULE),
        "fused_matmul_relu": OpSignature(2, 1, (0, 0), _SCHEDULE),
        "softmax": OpSignature(1, 1, (0, 0), elementwise=True, doc="Softmax over the last dim."),
        "geglu": OpSignature(
            2,
            1,
            (0, 0),
            elementwise=True,
            doc="``gelu_tanh(gate) * up`` (GELU with the tanh approximation): ``gate, up -> y``.",
        ),
        "softcap": OpSignature(1, 1, (0, 0), {"cap": ("float", True)}, elementwise=True),
        "mul_scalar": OpSignature(
            1,
            1,
            (0, 0),
            {"value": ("float", True), "exponent": ("float", False)},
            elementwise=True,
        ),
    }
)

#: ops that exist only as kernels: steps of a graph op's lowering, and fusions
KERNEL_ONLY_OPS: frozenset[str] = frozenset(
    {
        "kv_store",
        "copy_last_row",
        "fused_qkv",
        "fused_gate_up",
        "fused_add_rmsnorm",
        # training (mode backward): gradients and the optimizer step
        "adamw",
        "grad_sumsq",
        "scale",
        "cross_entropy_bwd",
        "rmsnorm_bwd",
        "swiglu_bwd",
        "gelu_bwd",
        "embed_bwd",
        "pos_embed_bwd",
        "layernorm_bwd",
        "linear_bwd_input",
        "linear_bwd_weight",
        "bias_bwd",
        "rope_bwd",
        "attention_bwd",
        "clip_coef",
        "zero",
        # rmsnorm with a gamma offset (its own kernels, so --fuse-add-rmsnorm leaves it alone)
        "rmsnorm_offset",
        "rmsnorm_offset_bwd",
        "geglu_bwd",
        "softcap_bwd",
        # attention with a scale, soft-capping or a sliding window (their own kernels)
        "attention_ext",
        "attention_ext_bwd",
        # rope with per-pair frequency divisors (rope_type longrope; their own kernels)
        "rope_ext",
        "rope_ext_bwd",
        # gelu with approximate = "none" (erf; its own kernels)
        "gelu_erf",
        "gelu_erf_bwd",
        # attention with an additive bias [H, T, S] (the ONNX backend's attn_mask)
        "attention_bias",
    }
)
#: every ``op`` a registry kernel may implement
KERNEL_OPS: frozenset[str] = frozenset(GRAPH_OPS) | KERNEL_ONLY_OPS
