"""``ckir``: the front door.

    ckir import MODEL [-o graph.mlir] [--template T] [--explain]   (HF folder, .gguf, .onnx)
    ckir compile MODEL -o BUILD [--modes prefill,decode] [--max-context N] [--debug]
                 [--logits all|last]
    ckir run BUILD --tokens 1,2,3 [--steps N] [--logits-out F.npy]
    ckir inspect BUILD [--full] [--svg FILE] [--tensors [--json FILE]]
    ckir debug BUILD --compare --tokens 1,2,3 [--mode prefill|decode] [--tol X]
    ckir kernel lower|build|validate|bench|tune FILE [--shape-set A=MxK,B=KxN ...]; kernel serve
    ckir generate [MODEL] --prompt TEXT [--chat] [--max-tokens N] [sampling options]
    ckir train [MODEL] --out DIR [--data FILE] [--steps N] [--seq-len T] [--lr X]
               [--weight-decay W] [--max-grad-norm G] [--accumulate N] [--distributed]
    ckir bench MODEL [--modes prefill,decode] [--dtype f32,bf16] [--against torch,...]
    ckir demo [--arch llama] [--out DIR]

User mistakes print one line (``error: ...``) and exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckir.errors import CkirError, one_line
from ckir.fileio import write_text_atomically
from ckir.inspect_tensors import INT8_PREFILL_KEY, inspect_tensors, register_tensors_options
from ckir.integrity import restore_interrupted
from ckir.runtime_build import ISAS, RuntimeBuildError
from ckir.vocab import INFERENCE_MODES, LOWERED_MODES, WEIGHT_DTYPES

if TYPE_CHECKING:
    from ckir.train import TrainGroup


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> int:
    from ckir.frontend import import_model
    from ckir.ir_io import print_module

    if Path(args.model).suffix.lower() == ".onnx":
        from ckir.onnx_cli import cmd_import_onnx

        return cmd_import_onnx(args)

    # every source compile takes (a HF folder, a GGUF file); the weights are not read here
    module, warnings, _ = import_model(Path(args.model), args.template, tuple(args.allow_unused))
    for w in warnings:
        _warn(w)
    text = print_module(module)
    if args.output:
        out = Path(args.output)
        source = Path(args.model)
        inputs = [source] if source.is_file() else list(source.glob("*"))
        if any(out.resolve() == p.resolve() for p in inputs):
            raise CkirError(f"-o {args.output}: is a file of the source {args.model}")
        write_text_atomically(out, text)
    else:
        sys.stdout.write(text)
    return 0


def _options(args: argparse.Namespace):  # -> CompileOptions
    from ckir.compiler import CompileOptions

    return CompileOptions(
        modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()),
        max_context=args.max_context,
        debug=args.debug,
        strategy=args.strategy,
        template=args.template,
        canaries=not args.no_canaries,
        dtype=args.dtype,
        fuse=not args.no_fuse,
        logits=args.logits,
        panels=False if args.no_panels else None,
        isa=args.isa,
        allow_unused=tuple(args.allow_unused),
        strict=args.strict,
        kv_dtype=args.kv_dtype,
        qconfig=getattr(args, "qconfig", None),
    )


def cmd_compile(args: argparse.Namespace) -> int:
    from ckir.compiler import compile_model

    if not args.output:
        raise CkirError("-o: the output folder name is empty")
    options = _options(args)
    print(f"compiling {args.model} -> {args.output}", file=sys.stderr)
    out = compile_model(args.model, args.output, options, quiet=args.quiet, on_warning=_warn)
    for f in sorted(out.iterdir()):
        print(f"  {f.name:14s} {f.stat().st_size:>12,d} bytes")
    return 0


def _parse_tokens(text: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise CkirError(f"--tokens: expected comma-separated integers, got '{text}'") from None


def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from ckir.model import load

    tokens = _parse_tokens(args.tokens)
    if not tokens:
        raise CkirError("--tokens: give at least one token id")
    if args.steps < 0:
        raise CkirError(f"--steps must be >= 0, got {args.steps}")
    logits_out = Path(args.logits_out) if args.logits_out else None
    if logits_out is not None and (logits_out.is_dir() or str(args.logits_out).endswith("/")):
        raise CkirError(f"--logits-out {args.logits_out}: is a folder; give a file name (.npy)")
    reads: list[tuple[str, Path]] = []
    for spec in args.read:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise CkirError(f"--read {spec}: give HANDLE=FILE.npy (e.g. decode.logits=l.npy)")
        reads.append((name, Path(file)))
    build, profiled = _profiled(Path(args.build), args.profile)
    with load(build) as model:
        # (_int8_prefill_option), or a QConfig's activations: 8 (build.json)
        model.int8_prefill = args.int8_prefill or model.info.get(INT8_PREFILL_KEY) is True
        logits = model.prefill(tokens)
        rows = [logits]
        out: list[int] = []
        nxt = int(logits[-1].argmax())
        for _ in range(args.steps):
            out.append(nxt)
            if len(out) == args.steps:
                break
            step = model.decode(nxt)
            rows.append(step[None, :])
            nxt = int(step.argmax())
        if logits_out is not None:
            logits_out.parent.mkdir(parents=True, exist_ok=True)
            np.save(logits_out, np.concatenate(rows, axis=0))
        for name, path in reads:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, model.read(name))  # a CkirError naming an unknown handle
        _print_profile(model, profiled)
    print(" ".join(str(t) for t in out))
    return 0


def _profiled(build: Path, profile: bool) -> tuple[Path, list | None]:
    """``--profile``: a profiling copy of the build and its timed calls (ckir.profile_report)."""
    if not profile:
        return build, None
    from ckir.profile_report import profiling_build

    return profiling_build(build)


def _print_profile(model: object, profiled: list | None) -> None:
    if profiled is not None:
        from ckir.profile_report import read_timers, report

        print(report(profiled, *read_timers(model)), file=sys.stderr)


def cmd_inspect(args: argparse.Namespace) -> int:
    if args.tensors or args.json:
        return inspect_tensors(Path(args.build), args.json)
    build = Path(args.build)
    layout_map = build / "layout.map"
    if not layout_map.exists():
        raise CkirError(f"{build}: no layout.map (not a ckir build folder?)")
    text = layout_map.read_text()
    # totals first: they are what a user asks for most
    sys.stdout.write(text if args.full else _totals_section(text))
    _memory_report(build / "layout.mlir", args.svg)
    kernels, fused = _kernel_counts(build / "layout.mlir")
    if kernels:
        print("kernel calls per mode:")
        for mode, counts in kernels.items():
            listing = ", ".join(f"{k} x{n}" for k, n in sorted(counts.items()))
            print(f"  {mode}: {listing}")
    print("fusion patterns fired:")
    for mode in kernels:
        print(f"  {mode}: {fused.get(mode) or 'none'}")
    return 0


def _memory_report(path: Path, svg: str | None) -> None:
    """Per mode, the arena against its lower bound; with ``svg``, the picture of memory."""
    from ckir.backend.layout_svg import arena_lines, plan_to_svg
    from ckir.dialects import layout as ly
    from ckir.ir_io import load_module

    if not path.exists():
        if svg:
            raise CkirError(f"{path}: missing, so there is no plan to draw")
        return
    plan = next((op for op in load_module(path).ops if isinstance(op, ly.PlanOp)), None)
    if plan is None:
        raise CkirError(f"{path}: no layout.plan in it")
    print("\n".join(arena_lines(plan)))
    if svg:
        Path(svg).write_text(plan_to_svg(plan))
        print(f"wrote {svg}")


def _totals_section(text: str) -> str:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lower().startswith("totals"):
            return "\n".join(lines[i:]) + "\n"
    return text


def _kernel_counts(path: Path) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Kernel calls per mode and the fusion counts (``fused = {...}``) of each program,
    read from the build's parsed IR."""
    from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr

    from ckir.dialects import lowered as lw
    from ckir.ir_io import load_module
    from ckir.passes.fusion import FUSED_ATTR

    if not path.exists():
        return {}, {}
    counts: dict[str, dict[str, int]] = {}
    fused: dict[str, str] = {}
    for program in load_module(path).walk():
        if not isinstance(program, lw.ProgramOp):
            continue
        mode = program.mode_name
        per = counts.setdefault(mode, {})
        for call in program.body_block.ops:
            if isinstance(call, lw.CallOp):
                per[call.kernel_name] = per.get(call.kernel_name, 0) + 1
        fired = program.attributes.get(FUSED_ATTR)
        if isinstance(fired, DictionaryAttr):
            fused[mode] = ", ".join(
                f"{k} = {v.value.data}" for k, v in fired.data.items() if isinstance(v, IntegerAttr)
            )
    return counts, fused


def _allow_unused_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-unused",
        action="append",
        default=[],
        metavar="NAME_GLOB",
        help="checkpoint tensors (a glob on the whole name, e.g. 'model.layers.*.extra.weight'; "
        "repeatable) the model may leave out; any other tensor the template does not use is "
        "an error",
    )


def _kv_dtype_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kv-dtype",
        default="f32",
        choices=["f32", "q8_0"],
        help="store the KV cache in this dtype (default f32; q8_0: Q8_0 blocks of 32 along "
        "head_dim, as llama.cpp's --cache-type-k/v q8_0: head_dim %% 32 == 0, not for "
        "training builds)",
    )


def _int8_prefill_option(parser: argparse.ArgumentParser) -> None:
    """``--int8-prefill``: the commands that pick tokens from a prompt's logits run its
    prefill on fp32 x unless asked (a near tie of the reference can flip under int8
    x's few-percent error: docs/gguf.md); the library's default is int8 x."""
    parser.add_argument(
        "--int8-prefill",
        action="store_true",
        help="Q8_0/Q4_0/Q4_1 prompt on int8 activations: ~2x faster, logits a few %% off",
    )


def _profile_option(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--profile",
        action="store_true",
        help="time every kernel call (a profiling copy of the build, BUILD-profile) and "
        "print the time per phase, per layer and per kernel kind (stderr)",
    )


def cmd_generate(args: argparse.Namespace) -> int:
    """Compile (through the cache), then stream generated text."""
    from ckir.cache import cached_build, cached_tokenizer
    from ckir.compiler import CompileOptions
    from ckir.generate import (
        Sampler,
        Sampling,
        Stats,
        chat_prompt_ids,
        default_model,
        generate_ids,
    )
    from ckir.model import load

    source = Path(args.model) if args.model else default_model()
    if not source.exists():
        raise CkirError(f"{source}: no such file or folder")
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
    if args.max_tokens < 0:
        raise CkirError(f"--max-tokens must be >= 0, got {args.max_tokens}")
    tokenizer = cached_tokenizer(source)
    if args.chat:
        prompt_ids = chat_prompt_ids(tokenizer, args.prompt)
    else:
        prompt_ids = tokenizer.encode(args.prompt)
    # generation reads the last row only: the footer (lm_head) runs on that row
    options = CompileOptions(
        max_context=args.max_context,
        dtype=args.dtype,
        logits="last",
        allow_unused=tuple(args.allow_unused),
        kv_dtype=args.kv_dtype,
    )
    t0 = time.perf_counter()
    build_dir, cached = cached_build(source, options, quiet=args.quiet, on_warning=_warn)
    build_dir, profiled = _profiled(build_dir, args.profile)
    with load(build_dir) as model:
        model.int8_prefill = args.int8_prefill  # (_int8_prefill_option)
        ready = time.perf_counter() - t0
        print(
            f"[{source.name}: {'cached build' if cached else 'compiled'} in {ready:.2f}s; "
            f"{len(prompt_ids)} prompt tokens]",
            file=sys.stderr,
        )
        stats = Stats()
        stream = tokenizer.stream_decoder()
        stops = {t for t in (tokenizer.eos_id,) if t is not None}
        ids = generate_ids(model, prompt_ids, args.max_tokens, Sampler(sampling), stops, stats)
        for tok in ids:
            piece = stream.push(tok)
            if piece:
                sys.stdout.write(piece)
                sys.stdout.flush()
        sys.stdout.write(stream.flush() + "\n")
        _print_profile(model, profiled)
    print(f"[{stats.summary()}]", file=sys.stderr)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Compile for training (through the cache, or into --build-dir), train on a text
    file, save the trained model as a HF folder (docs/training.md); with --distributed
    (or under torchrun), one process of a data-parallel run (ckir.distributed)."""
    from ckir.train import TrainGroup

    with TrainGroup.start(args.distributed) as group:
        return _train(args, group)


def _train(args: argparse.Namespace, group: TrainGroup) -> int:
    """:func:`cmd_train` in one process of ``group`` (:class:`ckir.train.TrainGroup`)."""
    from ckir.backend.hf_export import check_pretrained_dir
    from ckir.cache import cached_build, cached_tokenizer
    from ckir.compiler import CompileOptions, compile_model
    from ckir.generate import default_model
    from ckir.integrity import check_not_nested
    from ckir.model import load
    from ckir.passes.lowering.optimizer import AdamWOptions
    from ckir.resources import corpus_path
    from ckir.train import (
        Shard,
        StepPrinter,
        check_numbers,
        model_limits,
        read_text,
        run_steps,
        unsaveable,
        windows,
    )
    from ckir.vocab import INFERENCE_MODES

    check_numbers(args.steps, args.seq_len, args.lr)
    if args.accumulate < 1:
        raise CkirError(f"--accumulate must be >= 1, got {args.accumulate}")
    AdamWOptions(weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm).check("train")
    source = Path(args.model) if args.model else default_model()
    if not source.exists():
        raise CkirError(f"{source}: no such file or folder")
    if not args.out:
        raise CkirError("--out: the output folder name is empty")
    out = Path(args.out)
    build_dir = Path(args.build_dir) if args.build_dir else None
    check_pretrained_dir(out, source, "--out")
    if build_dir is not None:
        # the build replaces --build-dir whole: a saved folder inside it would go with it
        check_not_nested(out, "--out", build_dir, "--build-dir")
    data_path = Path(args.data) if args.data else corpus_path()
    text = read_text(data_path)

    context, vocab = model_limits(source, tuple(args.allow_unused))
    t = args.seq_len
    if context is not None and t > context:
        raise CkirError(f"--seq-len {t}: longer than the model's context ({context} positions)")
    tokenizer = cached_tokenizer(source)
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) < t + 1:
        raise CkirError(
            f"--data {data_path}: {len(ids)} tokens; --seq-len {t} needs at least {t + 1}"
        )
    top = max(ids)
    if vocab is not None and top >= vocab:
        raise CkirError(
            f"--data {data_path}: the tokenizer gives token id {top}, outside the model's "
            f"vocabulary [0, {vocab})"
        )
    data = windows(ids, t)
    print(
        f"[{data_path.name}: {len(ids):,d} tokens, {len(data)} windows of {t + 1}]",
        file=group.err,
    )

    options = CompileOptions(
        modes=(*INFERENCE_MODES, "backward"),  # generate from the trained build too
        max_context=t,
        dtype="f32",
        logits="all",
        adamw=AdamWOptions(weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm),
        allow_unused=tuple(args.allow_unused),
    )
    t0 = time.perf_counter()

    def build() -> tuple[Path, bool]:
        if build_dir is not None:
            compile_model(source, build_dir, options, quiet=args.quiet, on_warning=_warn)
            return build_dir, False
        return cached_build(source, options, quiet=args.quiet, on_warning=_warn)

    build_dir, cached = group.on_rank0(build)  # the others load rank 0's build
    with load(build_dir) as model:
        group.check_same_build(model)
        print(
            f"[{source.name}: {'cached build' if cached else 'compiled'} in "
            f"{time.perf_counter() - t0:.2f}s; training {args.steps} steps, lr {args.lr:g}"
            f"{group.describe(args.accumulate)}]",
            file=group.err,
        )
        printer = StepPrinter(args.steps, stream=group.out)
        shard = Shard(args.accumulate, group.rank, group.world)
        result = run_steps(model, data, args.steps, args.lr, printer, shard, group.reduce)
        if group.rank != 0:  # rank 0 checks and saves the weights (every rank has them)
            return 0 if result.failure is None else 1
        stopped = (
            f"step {result.steps_done + 1}/{args.steps}: {result.failure}; stopped. "
            if result.failure is not None
            else ""
        )
        why_not = unsaveable(model, data, result)
        if why_not is not None:
            raise CkirError(f"{stopped}Nothing was saved to {out}: {why_not}")
        saved = model.save_pretrained(out, tokenizer=tokenizer)
    if result.failure is not None:
        raise CkirError(
            f"{stopped}The weights after step {result.steps_done} (the last good one: finite, "
            f"in float16's range, finite loss and logits on its batch) were saved to {saved}"
        )
    rate = result.tokens / result.seconds if result.seconds > 0 else 0.0
    first, last = result.losses[0], result.losses[-1]
    print(
        f"[{result.steps_done} steps, {result.tokens:,d} tokens in {result.seconds:.2f}s "
        f"({rate:,.0f} tok/s); loss {first:.4f} -> {last:.4f}{group.summary(result)}; "
        f"saved to {saved}]",
        file=sys.stderr,
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Make a tiny random model (NumPy + safetensors: no torch), compile it, run it.

    The checkpoint is written like a saved model (whole, with its marker) and the
    build like any build: an earlier demo's folders are replaced, anything else is
    refused (docs/reliability.md, "The folder rule")."""
    import json

    from ckir.backend.hf_export import check_pretrained_dir, write_hf_folder
    from ckir.compiler import HF_CONFIG, CompileOptions, compile_model, required_files
    from ckir.integrity import check_output_dir
    from ckir.model import load
    from ckir.tools.zoo import numpy_model

    out = Path(args.out)
    model_dir = out / f"tiny-{args.arch}"
    build = out / f"build-{args.arch}"
    check_pretrained_dir(model_dir, None, "--out")  # both before anything is written
    check_output_dir(build, model_dir, required_files(), flag="--out")
    print(f"[1/3] making a random-weight tiny {args.arch} checkpoint in {model_dir}")
    config, tensors = numpy_model(args.arch)
    config_bytes = (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()
    write_hf_folder(model_dir, tensors, {HF_CONFIG: config_bytes}, None, "--out")
    print(f"[2/3] compiling to {build}")
    compile_model(model_dir, build, CompileOptions(max_context=64), quiet=False, on_warning=_warn)
    for f in sorted(build.iterdir()):
        print(f"      {f.name:14s} {f.stat().st_size:>10,d} bytes")
    print("[3/3] running: prefill [1, 2, 3, 4] then 8 greedy decode steps")
    with load(build) as model:
        logits = model.prefill([1, 2, 3, 4])
        tokens = [int(logits[-1].argmax())]
        for _ in range(7):
            tokens.append(int(model.decode(tokens[-1]).argmax()))
    print(f"      tokens: {' '.join(map(str, tokens))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ckir", description="Compile HF transformers to C.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("import", help="HF checkpoint folder, GGUF or ONNX file -> graph IR")
    s.add_argument(
        "model", help="folder with config.json and *.safetensors, or a .gguf or .onnx file"
    )
    s.add_argument("-o", "--output", help="write the graph IR here (default: stdout)")
    s.add_argument("--template", help="template name or path (default: by model_type)")
    _allow_unused_option(s)
    s.add_argument("--explain", action="store_true", help="ONNX: matches and misses per rule")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser(
        "compile", help="HF checkpoint folder, GGUF or ONNX file -> build folder with C + library"
    )
    s.add_argument("model")
    s.add_argument("-o", "--output", required=True, help="build folder")
    s.add_argument(
        "--modes",
        default=",".join(INFERENCE_MODES),
        help=f"comma list of {', '.join(LOWERED_MODES)} (default: %(default)s; backward adds "
        "the training programs: ckir_train_step, CompiledModel.train_step)",
    )
    s.add_argument(
        "--max-context",
        type=int,
        default=None,
        help="KV-cache length and longest prompt (default: min(model positions, 256))",
    )
    s.add_argument("--debug", action="store_true", help="check canaries after every layer")
    s.add_argument(
        "--strategy",
        default=None,
        choices=["bump", "liveness"],
        help="memory plan (default: liveness; bump with --debug)",
    )
    s.add_argument("--no-canaries", action="store_true")
    s.add_argument("--no-fuse", action="store_true", help="skip the fusion passes")
    s.add_argument(
        "--logits",
        default="all",
        help="all: prefill logits of every prompt row (default); last: of the last row only",
    )
    s.add_argument(
        "--dtype",
        choices=WEIGHT_DTYPES,
        help="store linear-layer weights in this dtype (default: as in the checkpoint; "
        "f32p / bf16p / q8_0p / q4_1p / q4_0p / q4_kp / q5_kp / q6_kp / q5_0p / q5_1p: the "
        "fp32 / bf16 values or Q8_0 / Q4_1 / Q4_0 / Q5_0 / Q5_1 blocks or Q4_K / Q5_K / Q6_K "
        "super-blocks pre-packed in the GEMM kernels' 32-row panels)",
    )
    s.add_argument(
        "--no-panels",
        action="store_true",
        help="keep f32, bf16, q8_0, q4_1, q4_0, q4_k, q5_k, q6_k, q5_0 and q5_1 weight "
        "matrices row-major (default for inference builds: each in the panels of its panel "
        "twin, f32 ones in f32p, bf16 in bf16p, q8_0 in q8_0p, q4_1 in q4_1p, q4_0 in q4_0p, "
        "q4_k in q4_kp, q5_k in q5_kp, q6_k in q6_kp, q5_0 in q5_0p, q5_1 in q5_1p)",
    )
    s.add_argument(
        "--isa",
        default="native",
        choices=ISAS,
        help="the kernels' instruction set: native (this CPU's, the default; the build "
        "refuses to open on a CPU that lacks any of its extensions), avx2 (Haswell's: AVX2, "
        "FMA, F16C, BMI2; Intel since Haswell, AMD since Zen) or scalar (any x86-64 CPU)",
    )
    s.add_argument("--template")
    _allow_unused_option(s)
    s.add_argument(
        "--strict",
        action="store_true",
        help="a --dtype that some weight matrix cannot take (e.g. K not a multiple of the "
        "block) is an error (default: a warning naming each, and a summary line)",
    )
    _kv_dtype_option(s)
    s.add_argument(
        "--qconfig",
        help="QConfig YAML: qbits of weights / activations / KV cache, per layer and per "
        "tensor (docs/quantization.md); --dtype is then its weights' shorthand",
    )
    s.add_argument("-q", "--quiet", action="store_true")
    s.set_defaults(func=cmd_compile)

    s = sub.add_parser("run", help="run a build: prefill tokens, then greedy decode")
    s.add_argument("build")
    s.add_argument("--tokens", required=True, help="comma-separated token ids")
    s.add_argument("--steps", type=int, default=8, help="greedy tokens to print")
    s.add_argument("--logits-out", help="save the logits of every step (.npy)")
    s.add_argument(
        "--read",
        action="append",
        default=[],
        metavar="HANDLE=FILE",
        help="after the run, save an io handle of the manifest (.npy), e.g. kv.layers.0.k=k.npy "
        "(repeatable; docs/manifest.md)",
    )
    _int8_prefill_option(s)
    _profile_option(s)
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("inspect", help="layout totals and kernel choices of a build")
    s.add_argument("build")
    s.add_argument("--full", action="store_true", help="print the whole layout map")
    s.add_argument("--svg", metavar="FILE", help="draw each arena per mode as an SVG file")
    register_tensors_options(s)
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("generate", help="compile (cached) and generate text")
    s.add_argument("model", nargs="?", help="GGUF file or HF folder (default: SmolLM2-135M)")
    s.add_argument("--prompt", default="What is the capital of France?")
    s.add_argument("--max-tokens", type=int, default=64)
    s.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    s.add_argument("--top-k", type=int, default=0)
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--chat", action="store_true", help="apply the model's chat template")
    s.add_argument("--max-context", type=int, default=None)
    s.add_argument("--dtype", choices=WEIGHT_DTYPES)
    _int8_prefill_option(s)
    _allow_unused_option(s)
    _kv_dtype_option(s)
    s.add_argument("-q", "--quiet", action="store_true", help="no compile progress")
    _profile_option(s)
    s.set_defaults(func=cmd_generate)

    s = sub.add_parser("train", help="train a model on a text file, save it as a HF folder")
    s.add_argument("model", nargs="?", help="GGUF file or HF folder (default: SmolLM2-135M)")
    s.add_argument("--out", required=True, help="folder to save the trained model in (HF)")
    s.add_argument("--data", help="UTF-8 text file (default: the corpus ckir ships)")
    s.add_argument("--steps", type=int, default=20, help="optimizer steps (default: 20)")
    s.add_argument("--seq-len", type=int, default=64, help="tokens per step (default: 64)")
    s.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default: 1e-4)")
    s.add_argument(
        "--weight-decay", type=float, default=0.01, help="AdamW weight decay (default: 0.01)"
    )
    s.add_argument(
        "--max-grad-norm",
        type=float,
        default=1.0,
        help="clip the global gradient norm to this; 0: no clipping (default: 1.0)",
    )
    s.add_argument(
        "--build-dir",
        help="compile into this folder (default: the compile cache, $CKIR_CACHE_DIR)",
    )
    s.add_argument(
        "--accumulate",
        type=int,
        default=1,
        help="windows per step, their gradients accumulated (default: 1)",
    )
    s.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel over torch.distributed (gloo); start with torchrun",
    )
    _allow_unused_option(s)
    s.add_argument("-q", "--quiet", action="store_true", help="no compile progress")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser(
        "bench", help="tokens/s of ckir vs baselines, alternating runs, with rooflines"
    )
    from ckir.tools import bench

    bench.add_arguments(s)
    s.set_defaults(func=bench.run)

    from ckir import debug_compare

    debug_compare.register(sub)

    s = sub.add_parser("demo", help="make, compile and run a tiny random model")
    s.add_argument("--arch", default="llama", choices=["llama", "qwen2", "gpt2", "mistral"])
    s.add_argument("--out", default="out/demo")
    s.set_defaults(func=cmd_demo)

    from ckir import kernel_cli

    kernel_cli.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        for name in ("model", "build"):  # the folder a command reads (docs/reliability.md)
            if getattr(args, name, None):
                restore_interrupted(Path(getattr(args, name)))
        return int(args.func(args))
    except CkirError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except RuntimeBuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a file or folder the user named cannot be read or written
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}{err.strerror or one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
