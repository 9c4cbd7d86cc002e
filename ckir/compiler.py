"""``ckir compile``: a checkpoint folder or GGUF file -> a build folder, in one process.

Steps: import (graph IR) -> convert weights (``--dtype``) -> lower each
mode -> fuse (qkv, gate+up+SwiGLU, add+RMSNorm) -> plan layout -> emit C ->
write weights.bin -> build the shared library.  The build also keeps the HF
``config.json`` the model was built from (a GGUF file's: the config its
metadata gave) and a HF folder's tokenizer files, so that
``CompiledModel.save_pretrained`` can write a complete HF folder.  ``prepare`` does the first
half (what the compile cache keys on), ``build`` the second.  Every artifact
is written to a temporary folder next to the target and moved in only when
all steps succeeded, so a failed compile never leaves a half-written build
behind.  Same inputs give byte-identical files (no timestamps, fixed
iteration order).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

import ckir
from ckir.backend.abi import build_fingerprint
from ckir.backend.c_emitter import emit_c
from ckir.backend.layout_writers import plan_to_json, plan_to_map
from ckir.backend.manifest import MANIFEST_FILE, manifest_json
from ckir.backend.weights import WeightSource, write_weights_bin
from ckir.dialects import graph as g
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.errors import CkirError, is_int
from ckir.inspect_tensors import INT8_PREFILL_KEY
from ckir.integrity import (
    BUILD_INFO,
    BUILD_MARKER,
    MARKER_TEXT,
    check_output_dir,
    file_digests,
    replace_dir,
    staging_dir,
)
from ckir.ir_io import print_module
from ckir.passes.annotate_quant import (
    apply_qconfig,
    asks_int8_activations,
    kv_cache_dtype,
    sync_table,
)
from ckir.passes.convert_weights import (
    ConvertWeightsPass,
    convert_weights,
    matrix_weights,
    not_convertible,
    pack_layer_dtypes,
)
from ckir.passes.fuse_add_rmsnorm import FuseAddRmsnormPass
from ckir.passes.fuse_gate_up import FuseGateUpPass
from ckir.passes.fuse_qkv import FuseQkvPass
from ckir.passes.io_manifest import IoManifestPass
from ckir.passes.kv_cache_dtype import KV_DTYPES, KvCacheDtypePass
from ckir.passes.lower_backward import LowerBackwardPass
from ckir.passes.lower_decode import LowerDecodePass
from ckir.passes.lower_prefill import LowerPrefillPass
from ckir.passes.lowering.context import LOGITS_CHOICES
from ckir.passes.lowering.optimizer import AdamWOptions
from ckir.passes.plan_layout import (
    DEBUG_STRATEGY,
    DEFAULT_ALIGN,
    DEFAULT_CANARIES,
    DEFAULT_STRATEGY,
    PlanLayoutPass,
)
from ckir.passes.plan_views import PlanViewsPass
from ckir.passes.tag_phases import TagPhasesPass
from ckir.passes.widen_weights import WidenWeightsPass
from ckir.runtime_build import ISAS
from ckir.vocab import (
    INFERENCE_MODES,
    LOWERED_MODES,
    PANEL_DTYPES,
    PANEL_OF,
    PANEL_VALUES,
    WEIGHT_DTYPES,
)

LIBRARY_NAME = "libmodel.so"
#: the HF config the build was made from (a GGUF file's: synthesized from its metadata)
HF_CONFIG = "config.json"
#: files of a HF source folder copied into the build as they are (those that exist), so a
#: folder saved from the build (``save_pretrained``) loads with its tokenizer
HF_EXTRA_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "generation_config.json",
)


#: what ``CompileOptions.panels=None`` means for an inference build (f32 matrices -> f32p,
#: bf16 ones -> bf16p, q8_0 ones -> q8_0p, q4_1 ones -> q4_1p): on, since the f32 panels
#: measured 1.15x faster in prefill GEMMs (2 threads, AVX-512, weights streamed) and level
#: in decode (benchmarks/bench_panels.py), and against row-major whole models (Zen 4)
#: bf16p 1.12-1.25x in prefill and 1.06-1.39x in decode, q8_0p 1.01-1.05x / 1.00-1.02x,
#: q4_1p 1.05-1.06x / 1.19-1.23x (docs/performance-log.md)
PANELS_DEFAULT = True
#: build.json: graph.weight name -> the panel dtype it is stored in
PANEL_WEIGHTS_KEY = "panel_weights"
#: build.json: every weight declaration's stored dtype
WEIGHT_DTYPES_KEY = "weight_dtypes"
#: build.json: the weight matrices that did not take the requested --dtype, and why
DTYPE_FALLBACKS_KEY = "dtype_fallbacks"
#: what a training build needs (the gradient pass checks every weight again)
_TRAINING_DTYPES = (None, "f32")


@dataclass(frozen=True)
class CompileOptions:
    """Everything that changes a build besides the checkpoint itself."""

    modes: tuple[str, ...] = INFERENCE_MODES
    #: None: the model's maximum positions (symbol C), capped at 256 (the passes' default)
    max_context: int | None = None
    debug: bool = False
    #: None: DEBUG_STRATEGY ("bump": every canary private) for debug builds, else
    #: DEFAULT_STRATEGY ("liveness", what ``ckir-opt --plan-layout`` uses)
    strategy: str | None = None
    align: int = DEFAULT_ALIGN
    canaries: bool = DEFAULT_CANARIES
    template: str | None = None
    isa: str = "native"
    #: storage dtype of weight matrices (--convert-weights); None keeps the source's.
    #: Training builds (modes with "backward") need f32 weights: None or "f32"
    dtype: str | None = None
    #: store the f32, bf16, q8_0, q4_1 and q4_0 weight matrices of an inference build
    #: pre-packed in GEMM panels (``f32p`` / ``bf16p`` / ``q8_0p`` / ``q4_1p`` / ``q4_0p``:
    #: the same values, in the order the kernels read them, so the prefill GEMMs skip
    #: packing the weight at every call and the decode GEMVs run 32 rows at a time; bf16p
    #: needs an even K, q8_0p, q4_1p and q4_0p K % 32 == 0).  Applies to the matrices that
    #: end up in a dtype with a panel twin (:data:`ckir.vocab.PANEL_OF`; ``dtype`` None or
    #: one of those: a GGUF file's Q8_0 / Q4_1 / Q4_0 blocks are repacked exactly; not to
    #: an explicit panel dtype); None: :data:`PANELS_DEFAULT`
    #: for inference builds, off for training builds; True with modes containing
    #: "backward" is an error (training updates plain f32 weights).
    panels: bool | None = None
    #: run the fusion passes (each fires only where the registry has the fused kernel)
    fuse: bool = True
    #: run --plan-views (elementwise outputs written over inputs that die there)
    views: bool = True
    #: prefill logits: "all" rows ([T, V]: scoring, training) or the "last" row ([1, V]:
    #: generation; the footer runs on one row)
    logits: str = "all"
    #: the optimizer step of a training build (modes with "backward"): AdamW's
    #: hyper-parameters other than the learning rate, and gradient clipping
    adamw: AdamWOptions = AdamWOptions()
    #: globs (``fnmatch``) of checkpoint tensors the template may leave unused
    #: (``--allow-unused``); any other tensor no weight uses is an error naming it
    allow_unused: tuple[str, ...] = ()
    #: a ``dtype`` that some weight matrix cannot take (``--strict``) is an error, not a
    #: warning per matrix and a summary line
    strict: bool = False
    #: storage dtype of the KV cache (``--kv-dtype``): "f32", or "q8_0" (Q8_0 blocks of
    #: 32 along head_dim, head_dim % 32 == 0; inference builds only): pass kv-cache-dtype
    kv_dtype: str = "f32"
    #: a QConfig YAML file (``--qconfig``, docs/quantization.md): the qbits of weights,
    #: activations and KV cache, per layer and per tensor; ``dtype`` is then its shorthand
    #: for the weights' default.  ``qconfig_text``: its content, read when the options are
    #: made (what the compile cache keys on)
    qconfig: str | None = None
    qconfig_text: str | None = None

    def __post_init__(self) -> None:
        self._check_kinds()
        self._check_values()
        if isinstance(self.qconfig, Path):
            object.__setattr__(self, "qconfig", str(self.qconfig))
        if self.qconfig is not None and self.qconfig_text is None:
            from ckir.passes.annotate_quant import read_qconfig_text

            object.__setattr__(self, "qconfig_text", read_qconfig_text(self.qconfig))
        if self.qconfig is not None and self.training:
            raise CkirError(f"--qconfig {self.qconfig}: training builds need f32 weights")
        self.adamw.check("training options")
        if not self.modes:
            raise CkirError(f"--modes: give at least one mode ({', '.join(LOWERED_MODES)})")
        bad = [m for m in self.modes if m not in LOWERED_MODES]
        if bad:
            raise CkirError(
                f"--modes: unknown mode(s) {bad}; choose from {', '.join(LOWERED_MODES)}"
            )
        if self.debug and self.strategy not in (None, DEBUG_STRATEGY):
            raise CkirError(
                f"--debug needs the {DEBUG_STRATEGY} layout: under {self.strategy}, buffers "
                "legitimately reuse each other's canary bytes"
            )
        if self.max_context is not None and self.max_context < 1:
            raise CkirError(f"--max-context must be >= 1, got {self.max_context}")

    def _check_kinds(self) -> None:
        """TypeError naming the option when a value has the wrong kind (API callers)."""

        def need(ok: bool, name: str, kind: str) -> None:
            if not ok:
                value = getattr(self, name)
                raise TypeError(f"{name} must be {kind}, got {type(value).__name__} {value!r}")

        need(
            isinstance(self.modes, tuple) and all(isinstance(m, str) for m in self.modes),
            "modes",
            "a tuple of mode names",
        )
        need(self.max_context is None or is_int(self.max_context), "max_context", "an int or None")
        need(is_int(self.align) and self.align > 0, "align", "a positive int")
        for name in ("debug", "canaries", "fuse", "strict", "views"):
            need(isinstance(getattr(self, name), bool), name, "a bool")
        need(self.panels is None or isinstance(self.panels, bool), "panels", "a bool or None")
        need(isinstance(self.logits, str), "logits", "a str")
        for name in ("strategy", "dtype", "qconfig_text"):
            need(getattr(self, name) is None or isinstance(getattr(self, name), str), name, "a str")
        need(self.template is None or isinstance(self.template, (str, Path)), "template", "a path")
        need(self.qconfig is None or isinstance(self.qconfig, (str, Path)), "qconfig", "a path")
        need(isinstance(self.isa, str), "isa", "a str")
        need(isinstance(self.kv_dtype, str), "kv_dtype", "a str")
        need(isinstance(self.adamw, AdamWOptions), "adamw", "an AdamWOptions")
        need(
            isinstance(self.allow_unused, tuple)
            and all(isinstance(a, str) for a in self.allow_unused),
            "allow_unused",
            "a tuple of globs",
        )

    def _check_values(self) -> None:
        """CkirError naming the option when a value is not one of its choices."""
        if self.strategy is not None and self.strategy not in ly.STRATEGIES:
            known = " or ".join(ly.STRATEGIES)
            raise CkirError(f"--strategy: unknown strategy {self.strategy!r}; use {known}")
        if self.dtype is not None and self.dtype not in WEIGHT_DTYPES:
            known = ", ".join(WEIGHT_DTYPES)
            raise CkirError(f"--dtype: unknown dtype {self.dtype!r}; use {known}")
        if self.training and self.dtype not in _TRAINING_DTYPES:
            raise CkirError(
                f"--dtype {self.dtype}: training (modes with backward) needs f32 weights "
                "(compile without --dtype, or with --dtype f32)"
            )
        if self.training and self.panels:
            raise CkirError(
                "panels: training (modes with backward) updates plain f32 weights; "
                f"panel dtypes ({', '.join(PANEL_DTYPES)}) are for inference builds"
            )
        if self.logits not in LOGITS_CHOICES:
            raise CkirError(f"--logits: unknown choice {self.logits!r}; use all or last")
        if self.kv_dtype not in KV_DTYPES:
            raise CkirError(
                f"--kv-dtype: unknown dtype {self.kv_dtype!r}; use {' or '.join(KV_DTYPES)}"
            )
        if self.training and self.kv_dtype != "f32":
            raise CkirError(
                f"--kv-dtype {self.kv_dtype}: training (modes with backward) has no KV cache "
                "to quantize; compile training builds with --kv-dtype f32"
            )
        if self.isa not in ISAS:
            raise CkirError(f"isa: unknown ISA {self.isa!r}; use {', '.join(ISAS)}")

    @property
    def training(self) -> bool:
        """The build has the training programs (a mode containing "backward")."""
        return any("backward" in m for m in self.modes)

    @property
    def uses_panels(self) -> bool:
        """f32 / bf16 / q8_0 / q4_1 / q4_0 weight matrices are stored as f32p / bf16p /
        q8_0p / q4_1p / q4_0p (``panels``, resolved): for ``dtype`` None (the checkpoint's
        f32, bf16 or a GGUF file's Q8_0 / Q4_1 / Q4_0) or a dtype with a panel twin
        (:data:`ckir.vocab.PANEL_OF`), never for training builds."""
        if self.training or (self.dtype is not None and self.dtype not in PANEL_OF):
            return False
        return PANELS_DEFAULT if self.panels is None else self.panels

    @property
    def layout_strategy(self) -> str:
        """``strategy``, resolved: the given one, else DEBUG_STRATEGY for debug builds,
        else DEFAULT_STRATEGY (the default of ``--plan-layout``)."""
        if self.strategy is not None:
            return self.strategy
        return DEBUG_STRATEGY if self.debug else DEFAULT_STRATEGY


@dataclass
class Progress:
    """Prints one line per step with its duration to stderr (silent when quiet)."""

    quiet: bool = False
    steps: list[tuple[str, float]] = field(default_factory=list[tuple[str, float]])

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        """``with progress.step("cc"): ...`` prints ``  cc ... 0.34s`` (or ``failed``)."""
        start = time.perf_counter()
        if not self.quiet:
            print(f"  {what} ...", end="", file=sys.stderr, flush=True)
        try:
            yield
        except BaseException:
            if not self.quiet:
                print(" failed", file=sys.stderr, flush=True)
            raise
        dt = time.perf_counter() - start
        self.steps.append((what, dt))
        if not self.quiet:
            print(f" {dt:.2f}s", file=sys.stderr, flush=True)


def graph_only(module: ModuleOp) -> str:
    """The graph model alone, as a module."""
    clone = module.clone()
    for op in list(clone.ops):
        if not isinstance(op, g.ModelOp):
            op.detach()
            op.erase()
    return print_module(clone)


def import_source(
    path: str | Path, template: str | None, allow_unused: Sequence[str] = ()
) -> tuple[ModuleOp, list[str], WeightSource]:
    """Graph module, warnings and weight source of a HF folder or a GGUF file."""
    from ckir.frontend import import_model

    return import_model(Path(path), template, allow_unused)


def pack_panels(module: ModuleOp) -> None:
    """Store every matrix in the panel dtype of its values (``CompileOptions.panels``):
    f32 ones as f32p, bf16 ones as bf16p where K is even (the others stay bf16), q8_0
    ones as q8_0p, q4_1 ones as q4_1p, q4_k ones as q4_kp ... (their K is a multiple of
    the block already); a weight whose layers differ in dtype, each layer in its twin."""
    pack_layer_dtypes(module)
    for panel, values in PANEL_VALUES.items():
        convert_weights(module, panel, frozenset({values}))


def dtype_fallbacks(module: ModuleOp, dtype: str | None) -> dict[str, tuple[str, str]]:
    """The weight matrices a requested ``dtype`` leaves in another dtype: weight name ->
    (the dtype it keeps, why) (:func:`passes.convert_weights.not_convertible`); empty
    for no ``dtype`` and for ``f32`` (every weight widens).  Call before :func:`lower`."""
    if dtype is None or dtype == "f32":
        return {}
    out: dict[str, tuple[str, str]] = {}
    for model in module.ops:
        if isinstance(model, g.ModelOp):
            out.update(not_convertible(model, dtype))
    return out


def fallback_messages(
    module: ModuleOp, dtype: str, fallbacks: Mapping[str, tuple[str, str]]
) -> tuple[list[str], str]:
    """``(one line per weight matrix that keeps another dtype than --dtype, naming its
    checkpoint tensor; a one-line summary)``."""
    model = next(op for op in module.ops if isinstance(op, g.ModelOp))
    weights = model.weights()
    matrices = len(matrix_weights(model)[0])
    lines = []
    for name, (kept, why) in fallbacks.items():
        decl = weights.get(name)
        tensor = (decl.hf_name or decl.gguf_name) if decl is not None else None
        where = f" (tensor '{tensor}')" if tensor else ""
        lines.append(f"weight {name}{where} stays {kept}: {why}")
    kinds = "/".join(sorted({kept for kept, _ in fallbacks.values()}))
    summary = (
        f"--dtype {dtype}: {len(fallbacks)} of {matrices} weight matrices (declarations; "
        f"each covers all layers) stay {kinds}"
    )
    return lines, summary


def lower(module: ModuleOp, options: CompileOptions) -> None:
    """Convert weights, lower every mode and plan the layout, in place (one process)."""
    ctx = Context()
    if options.dtype == "f32" and options.qconfig is None:  # convert-weights keeps bf16 / ...
        WidenWeightsPass().apply(ctx, module)
    elif options.dtype is not None and options.qconfig is None:  # else: apply_qconfig did it
        ConvertWeightsPass(dtype=options.dtype).apply(ctx, module)
    if options.uses_panels:
        pack_panels(module)
    max_context = options.max_context  # None: the passes' default, min(C, 256)
    passes: list[ModulePass] = []
    if "prefill" in options.modes:
        passes.append(LowerPrefillPass(max_context=max_context, logits=options.logits))
    if "decode" in options.modes:
        passes.append(LowerDecodePass(max_context=max_context))
    if "backward" in options.modes:
        a = options.adamw
        passes.append(
            LowerBackwardPass(
                max_context=max_context,
                beta1=a.beta1,
                beta2=a.beta2,
                eps=a.eps,
                weight_decay=a.weight_decay,
                max_grad_norm=a.max_grad_norm,
            )
        )
    kv_dtype = options.kv_dtype
    if options.qconfig is not None and kv_dtype == "f32":  # the table's kv qbits (kv: 8)
        kv_dtype = kv_cache_dtype(module)
    if kv_dtype != "f32":
        passes.append(KvCacheDtypePass(dtype=kv_dtype))
    if options.fuse:
        passes += [FuseQkvPass(), FuseGateUpPass(), FuseAddRmsnormPass()]
    if options.views:  # in-place reuse: views instead of slots of their own
        passes.append(PlanViewsPass())
    passes.append(TagPhasesPass())  # after every pass that adds or replaces calls
    for p in passes:
        p.apply(ctx, module)
    PlanLayoutPass(
        strategy=options.layout_strategy, align=options.align, canaries=options.canaries
    ).apply(ctx, module)
    IoManifestPass().apply(ctx, module)
    sync_table(module)  # the tensor table says what the build stores
    try:
        module.verify()
    except Exception as err:  # a verifier failure here is a compiler bug or a bad template
        raise CkirError(f"the lowered module does not verify: {err}") from None


@dataclass
class Prepared:
    """A model imported and lowered, not yet written: what the compile cache keys on."""

    module: ModuleOp
    weights: WeightSource
    graph_text: str
    layout_text: str
    options: CompileOptions
    source: Path
    #: files written into the build as they are (name -> bytes): config.json and, for a
    #: HF folder, its tokenizer files; None: read from ``source`` when the build is written
    hf_files: dict[str, bytes] | None = None
    #: weight matrices that did not take ``options.dtype``: name -> (dtype kept, why)
    dtype_fallbacks: dict[str, tuple[str, str]] = field(default_factory=dict[str, tuple[str, str]])


def source_hf_files(source: Path, weights: WeightSource) -> dict[str, bytes]:
    """``config.json`` (+ tokenizer files) to keep in a build of ``source``.

    A HF folder: its config.json and those of :data:`HF_EXTRA_FILES` it has, byte for
    byte.  A GGUF file: the config dict its metadata gave (``GGUFSource.config``)."""
    source = Path(source)
    if source.is_dir():
        out: dict[str, bytes] = {}
        for name in (HF_CONFIG, *HF_EXTRA_FILES):
            path = source / name
            if path.is_file():
                out[name] = path.read_bytes()
        return out
    config = getattr(weights, "config", None)
    if not isinstance(config, dict):
        return {}
    return {HF_CONFIG: (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()}


def prepare(
    path: str | Path,
    options: CompileOptions,
    progress: Progress,
    on_warning: Callable[[str], None] | None = None,
) -> Prepared:
    with progress.step("import"):
        module, warnings, weights = import_source(path, options.template, options.allow_unused)
        for w in warnings:
            (on_warning or (lambda s: None))(w)
        graph_text = graph_only(module)
    if options.qconfig is not None:
        fallbacks = apply_qconfig(module, options, on_warning or (lambda s: None))
    else:
        fallbacks = dtype_fallbacks(module, options.dtype)
    if fallbacks and options.qconfig is None:
        assert options.dtype is not None
        lines, summary = fallback_messages(module, options.dtype, fallbacks)
        if options.strict:
            raise CkirError(f"--strict: {summary}: {'; '.join(lines)}")
        for line in lines:
            (on_warning or (lambda s: None))(f"--dtype {options.dtype}: {line}")
        (on_warning or (lambda s: None))(
            f"{summary} (--strict makes this an error; build.json {WEIGHT_DTYPES_KEY} "
            "records every weight's dtype)"
        )
    with progress.step("lower + plan"):
        lower(module, options)
        layout_text = print_module(module)
    hf_files = source_hf_files(Path(path), weights)
    return Prepared(
        module, weights, graph_text, layout_text, options, Path(path), hf_files, fallbacks
    )


def build(
    prepared: Prepared,
    out_dir: str | Path,
    progress: Progress,
    extra_info: dict[str, object] | None = None,
) -> Path:
    """Write every artifact of a prepared model into ``out_dir`` (atomically).

    ``out_dir`` must be new, empty or an earlier ckir build (see
    :func:`ckir.integrity.check_output_dir`); it is never the source.
    """
    from ckir.runtime_build import build_library

    options, module = prepared.options, prepared.module
    out_dir = check_output_dir(Path(out_dir), prepared.source, required_files())
    work = staging_dir(out_dir, f"{out_dir}: cannot write the build folder")
    try:
        (work / "graph.mlir").write_text(prepared.graph_text)
        (work / "layout.mlir").write_text(prepared.layout_text)
        plan = next(op for op in module.ops if isinstance(op, ly.PlanOp))
        (work / "layout.json").write_text(plan_to_json(plan))
        (work / "layout.map").write_text(plan_to_map(plan))
        lowered_model = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp))
        fingerprint = build_fingerprint(lowered_model, plan)
        (work / MANIFEST_FILE).write_text(manifest_json(plan, fingerprint))
        hf_files = prepared.hf_files
        if hf_files is None:
            hf_files = source_hf_files(prepared.source, prepared.weights)
        for name, data in sorted(hf_files.items()):
            (work / name).write_bytes(data)

        with progress.step("emit C"):
            sources = emit_c(module, fingerprint=fingerprint)
            (work / "model.h").write_text(sources.header)
            (work / "model.c").write_text(sources.source)

        with progress.step("weights.bin"):
            graph_model = next(op for op in module.ops if isinstance(op, g.ModelOp))
            lowered = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp))
            write_weights_bin(
                graph_model,
                lowered,
                plan,
                prepared.weights,
                work / "weights.bin",
                fingerprint=fingerprint,
            )

        with progress.step("cc"):
            build_library(
                work / LIBRARY_NAME,
                isa=options.isa,
                extra_sources=[work / "model.c", *_support_sources()],
                debug=options.debug,
                include_dirs=[work],
            )

        (work / BUILD_MARKER).write_text(MARKER_TEXT)
        info: dict[str, object] = {
            "ckir_version": ckir.__version__,
            "model": graph_model.sym_name.data,
            "modes": list(options.modes),
            "max_context": options.max_context,
            "debug": options.debug,
            "dtype": options.dtype,
            "qconfig": None if options.qconfig is None else Path(options.qconfig).name,
            INT8_PREFILL_KEY: asks_int8_activations(options),
            # graph.weight declarations stored in panels -> their panel dtype
            # (CompiledModel.weight_arrays; builds before bf16p wrote "f32p_weights", a list)
            PANEL_WEIGHTS_KEY: {
                name: d.dtype_name
                for name, d in sorted(graph_model.weights().items())
                if d.dtype_name in PANEL_DTYPES
            },
            # every graph.weight declaration -> the dtype it is stored in, and those
            # matrices that did not take the requested --dtype: name -> [kept, why]
            WEIGHT_DTYPES_KEY: {
                name: d.dtype_name for name, d in sorted(graph_model.weights().items())
            },
            DTYPE_FALLBACKS_KEY: {
                name: list(kept_why) for name, kept_why in sorted(prepared.dtype_fallbacks.items())
            },
            "fuse": options.fuse,
            "logits": options.logits,
            "strategy": options.layout_strategy,
            "isa": options.isa,
            "source": prepared.source.name,
            # HF files kept beside the build (config.json, tokenizer files)
            "hf_files": sorted(hf_files),
            **(extra_info or {}),
            "files": file_digests(work, [p.name for p in work.iterdir()]),
        }
        (work / BUILD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        replace_dir(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir


def compile_model(
    model_path: str | Path,
    out_dir: str | Path,
    options: CompileOptions | None = None,
    *,
    quiet: bool = True,
    on_warning: Callable[[str], None] | None = None,
) -> Path:
    """Compile a HF checkpoint folder (or GGUF file) into the build folder ``out_dir``."""
    options = options or CompileOptions()
    check_output_dir(Path(out_dir), Path(model_path), required_files())  # before the slow part
    progress = Progress(quiet=quiet)
    prepared = prepare(model_path, options, progress, on_warning)
    return build(prepared, out_dir, progress)


def _support_sources() -> list[Path]:
    from ckir.runtime_build import support_sources

    return support_sources()


def required_files() -> tuple[str, ...]:
    """The files every build folder holds, whatever its modes."""
    return (
        "graph.mlir",
        "layout.mlir",
        "layout.json",
        "layout.map",
        "model.h",
        "model.c",
        "weights.bin",
        LIBRARY_NAME,
        BUILD_INFO,
    )
