"""``ckir bench``: tokens/s of ckir against PyTorch, ONNX Runtime and llama.cpp, with rooflines.

    ckir bench MODEL [--modes prefill,decode | --modes train] [--dtype f32,bf16,q8_0,...]
                     [--against torch,onnxruntime,llama.cpp] [--prompt-tokens 128]
                     [--decode-tokens 64] [--context 128] [--repeat 5] [--threads 2]
                     [--isa native|avx2|scalar] [--profile] [--cold-build] [--json FILE]

MODEL is a HF checkpoint folder or a built-in shape (``smollm-135m``,
``qwen2-0.5b``, ``gpt2-small``): random weights, made once with
:func:`ckir.tools.zoo.make_tiny_model` under ``$CKIR_CACHE_DIR/bench-models/``.
Nothing is downloaded.

Method.  ckir is compiled (timed step by step) for every requested dtype.
Every system (ckir per dtype, each baseline per dtype it supports; for f32p /
bf16p / q8_0p / q4_1p / q4_0p, fp32 / bf16 values or Q8_0 / Q4_1 / Q4_0 blocks pre-packed
in ckir's GEMM panels, the baselines run f32 / bf16 / q8_0 / q4_1 / q4_0, once when that
dtype is benched too) runs in a
worker process of its own, loaded once and warmed up; the parent sends one
run at a time, so only one system computes at any moment.  A round runs every
system once per mode, in alternating order (ckir, torch, ckir, torch, ...;
reversed on odd rounds).  Every run is bracketed by the machine probes of
:mod:`ckir.tools.bandwidth` (read bandwidth for decode, FMA peak for prefill), so a
run and the bound it is compared with see the same machine (the host's
bandwidth changes by 2x from one second to the next here).  No system may
keep the CPU busy between runs: ONNX Runtime's thread pool runs without
spinning (its spinning threads halved the probe after its runs).  Printed:
tokens/s median and min-max over rounds, the ratio ckir / baseline (median of
per-round ratios of adjacent runs), and the fraction of the roofline.

* prefill: ``--prompt-tokens`` tokens from an empty cache; every system
  computes the logits of every position (ckir's prefill returns [T, V]).
* decode: ``--decode-tokens`` single-token steps after a ``--context``-token
  prefill; tokens/s over the decode steps only.
* decode bound: bytes read per token = every weight matrix the decode calls
  read (layer weights, LM head) + one row of each gathered table (token /
  position embedding) + the K and V cache rows read by attention at that
  position (mean over the steps), in the stored dtype (f32p / bf16p / q8_0p /
  q4_1p / q4_0p: 4 / 2 bytes per value, 34 / 20 / 18 per block of 32, the zero rows
  padding a matrix's last 32-row panel included, as the kernels stream them; a
  gathered panel row: the bytes of one row of the values' dtype); bound = read
  bandwidth / bytes.  Counted from the build's lowered IR and layout.
* prefill bound: 2 x (parameters of the matrices multiplied) x T + causal
  attention 4 x H x D x T(T+1)/2 per layer, against the FMA peak.

A baseline worker that dies (a signal, or any exit without a reply) while
starting or running is started again once on its fallback path, if it has one
(:class:`Fallback`: keys added to the worker spec).  llama.cpp's is
``"no_repack": true``: load with ``use_extra_bufts=False``, the weights not
repacked into llama.cpp's extra buffer types (on Sapphire Rapids the q8_0/q4_1
workers died with SIGSEGV in ``ggml_backend_amx_mul_mat``).  The restarted
worker is warmed up and the run that died is measured again between fresh
probes; its runs from before (the other path) are discarded, and ratios pair
runs by round, so the other systems' runs are neither lost nor counted twice.
A note says so; when the fallback fails too the row is dropped with a note
naming both failures.

The environment line names the machine kind: the CPU model and the ISA
flags that decide kernels (AVX2, AVX-512 and its VNNI/BF16/FP16, AVX-VNNI,
AMX), and the ISA each system ran with: ckir's runtime build, ATen's CPU
capability (PyTorch's GEMMs go to oneDNN/MKL, which pick their own path, AMX
included, and do not report it), ONNX Runtime's MLAS (dispatched at run time,
not reported), llama.cpp's system info and whether its weights were repacked
(an entry per dtype where the dtypes ran different paths).

Also printed: compile time (checkpoint -> C, weights.bin, C build), peak RSS
of a decode run (a C driver without Python) against weights + state arena
sizes of layout.json, and with ``--profile`` per-kernel time shares of a
decode step and a prefill (model.c rebuilt with a timer around every call).

``--modes train`` (alone) measures training steps instead, with the same
workers, rounds, probes and report: :mod:`ckir.tools.bench_train`.

This module is the command (its arguments, the systems it sets up and the run);
the parts live in modules named for their jobs, and every name of theirs is
re-exported here:

* :mod:`ckir.tools.bench_build`: the built-in shapes, ckir's builds, the cost model;
* :mod:`ckir.tools.bench_runners`: ckir's and the baselines' runners (PyTorch eager,
  ONNX Runtime, llama.cpp and its GGUF), the worker process's loop;
* :mod:`ckir.tools.bench_workers`: the workers seen from the parent, systems, fallbacks;
* :mod:`ckir.tools.bench_measure`: the rounds, the probes around every run, the
  fallback on a dead worker, the C driver runs, the environment lines;
* :mod:`ckir.tools.bench_report`: statistics, bounds, the tables and the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckir.cost import ModelCost
from ckir.errors import CkirError
from ckir.runtime_build import ISAS
from ckir.tools.bench_build import (
    SHAPE_STD,
    SHAPES,
    TRAIN_MODE,
    CompileTimes,
    _log,
    _parsed,
    baseline_dtype,
    build_module,
    build_profile_copy,
    cache_root,
    cold_c_build,
    compile_build,
    isa_suffix,
    model_config,
    model_cost,
    resolve_model,
)
from ckir.tools.bench_measure import (
    INT8_DOT_DTYPES,
    ISA_FLAGS,
    _agreement,
    _drop,
    _fall_back,
    _peak_rss,
    _profile,
    _request,
    _run_one,
    _tokens,
    _workers,
    alternate_rounds,
    call_with_fallback,
    cpu_info,
    fma_probe,
    guarded_call,
    run_rss_driver,
    set_isa_env,
    source_info,
    start_system,
    start_workers,
    system_notes,
    warm_up,
)
from ckir.tools.bench_report import (
    Report,
    _bounds,
    _fractions,
    _per_token,
    _render_compile,
    _render_rooflines,
    _render_rss,
    _tokens_per_run,
    fmt_num,
    fmt_range,
    markdown_table,
    paired_ratios,
    profile_rows,
    rates,
    render,
    render_profile,
    report_json,
    results_table,
    slot_info,
    spread,
)
from ckir.tools.bench_runners import (
    NO_REPACK_PARAM,
    BaselineUnavailable,
    CkirRunner,
    LlamaCppRunner,
    OrtRunner,
    Runner,
    TorchRunner,
    _make_runner,
    _permute_rope,
    _without_repacking,
    ensure_llama_cpp,
    export_onnx,
    process_rss_kb,
    worker_main,
    write_gguf,
)
from ckir.tools.bench_workers import (
    LLAMA_CPP_NO_REPACK,
    Fallback,
    System,
    Worker,
    WorkerDied,
    exit_cause,
    paired_rounds,
)
from ckir.vocab import INFERENCE_MODES, PANEL_OF, WEIGHT_DTYPES, dtype_info

#: re-exported: ``ckir.tools.bench`` stays the entry point of the bench's parts (ckir/cli.py,
#: :mod:`ckir.tools.bench_train`, the tests and benchmarks/ import them from here)
__all__ = [
    "BaselineUnavailable",
    "CkirRunner",
    "CompileTimes",
    "Fallback",
    "INT8_DOT_DTYPES",
    "ISA_FLAGS",
    "LLAMA_CPP_NO_REPACK",
    "LlamaCppRunner",
    "NO_REPACK_PARAM",
    "OrtRunner",
    "Report",
    "Runner",
    "SHAPES",
    "SHAPE_STD",
    "System",
    "TRAIN_MODE",
    "TorchRunner",
    "Worker",
    "WorkerDied",
    "_agreement",
    "_bounds",
    "_drop",
    "_fall_back",
    "_fractions",
    "_log",
    "_make_runner",
    "_parsed",
    "_peak_rss",
    "_per_token",
    "_permute_rope",
    "_profile",
    "_render_compile",
    "_render_rooflines",
    "_render_rss",
    "_request",
    "_run_one",
    "_tokens",
    "_tokens_per_run",
    "_without_repacking",
    "_workers",
    "alternate_rounds",
    "baseline_dtype",
    "build_module",
    "build_profile_copy",
    "cache_root",
    "call_with_fallback",
    "cold_c_build",
    "compile_build",
    "cpu_info",
    "ensure_llama_cpp",
    "exit_cause",
    "export_onnx",
    "fma_probe",
    "fmt_num",
    "fmt_range",
    "guarded_call",
    "isa_suffix",
    "markdown_table",
    "model_config",
    "model_cost",
    "paired_ratios",
    "paired_rounds",
    "process_rss_kb",
    "profile_rows",
    "rates",
    "render",
    "render_profile",
    "report_json",
    "resolve_model",
    "results_table",
    "run_rss_driver",
    "set_isa_env",
    "slot_info",
    "source_info",
    "spread",
    "start_system",
    "start_workers",
    "system_notes",
    "warm_up",
    "worker_main",
    "write_gguf",
]

BASELINES = ("torch", "onnxruntime", "llama.cpp")
BENCH_MODES = (*INFERENCE_MODES, TRAIN_MODE)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="HF checkpoint folder, or " + ", ".join(SHAPES))
    p.add_argument(
        "--modes",
        "--mode",
        default=",".join(INFERENCE_MODES),
        help=f"{','.join(INFERENCE_MODES)} (default both), or {TRAIN_MODE} (training steps)",
    )
    p.add_argument("--dtype", default="f32", help=f"comma list of {', '.join(WEIGHT_DTYPES)}")
    p.add_argument(
        "--against",
        default=None,
        help=f"comma list of {', '.join(BASELINES)} (default none; {TRAIN_MODE}: torch)",
    )
    p.add_argument(
        "--prompt-tokens", type=int, default=128, help=f"prefill length ({TRAIN_MODE}: T)"
    )
    p.add_argument("--decode-tokens", type=int, default=64, help="timed decode steps")
    p.add_argument("--context", type=int, default=128, help="tokens cached before decoding")
    p.add_argument("--repeat", type=int, default=5, help="rounds (every system once per round)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--isa",
        default="native",
        choices=ISAS,
        help="ckir's kernels: native (default), or avx2 / scalar as built for other CPUs",
    )
    p.add_argument("--profile", action="store_true", help="per-kernel time shares of ckir")
    p.add_argument(
        "--cold-build", action="store_true", help="also time the C build with no cached objects"
    )
    p.add_argument("--probe-mib", type=int, default=256, help="read-bandwidth probe buffer")
    p.add_argument("--build-dir", help="where ckir builds go (default: the cache dir)")
    p.add_argument("--json", help="also write every measurement to this JSON file")
    p.add_argument("--timeout", type=float, default=1800, help="seconds a worker may take to start")
    from ckir.tools import bench_train

    bench_train.add_arguments(p)


def _split(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad:
        raise CkirError(f"--{what}: unknown {bad[0]!r} (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(items))


def _split_against(text: str | None, mode: str) -> list[str]:
    """``--against``: the baselines named, or the mode's default when the option is absent
    (none for inference, torch for training)."""
    if text is None:
        return ["torch"] if mode == TRAIN_MODE else []
    return _split(text, BASELINES, "against")


def run(args: argparse.Namespace) -> int:
    modes = tuple(_split(args.modes, BENCH_MODES, "modes"))
    dtypes = _split(args.dtype, WEIGHT_DTYPES, "dtype")
    if not modes or not dtypes:
        raise CkirError("--modes and --dtype need at least one entry")
    for name in ("prompt_tokens", "decode_tokens", "context", "repeat", "threads"):
        if getattr(args, name) < (0 if name == "context" else 1):
            raise CkirError(f"--{name.replace('_', '-')} must be positive")
    if TRAIN_MODE in modes:
        from ckir.tools import bench_train

        if len(modes) > 1:
            raise CkirError(f"--modes {TRAIN_MODE} runs alone (no inference modes with it)")
        report = bench_train.collect(args, dtypes, _split_against(args.against, TRAIN_MODE))
        text = bench_train.render(report)
    else:
        report = collect(args, modes, dtypes, _split_against(args.against, ""))
        text = render(report)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(report_json(report), indent=1) + "\n")
    return 0


def collect(
    args: argparse.Namespace, modes: tuple[str, ...], dtypes: list[str], against: list[str]
) -> Report:
    from ckir.compiler import CompileOptions
    from ckir.passes.convert_weights import k_multiple
    from ckir.tools import bandwidth

    model_dir, name = resolve_model(args.model)
    cfg = model_config(model_dir)
    vocab = int(cfg["vocab_size"])
    max_ctx = max(args.prompt_tokens, args.context + args.decode_tokens)
    positions = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if positions and max_ctx > positions:
        raise CkirError(f"{name}: {max_ctx} tokens needed but the model has {positions} positions")
    build_root = Path(args.build_dir) if args.build_dir else cache_root() / "bench-builds"
    notes: list[str] = []
    if args.isa != "native":
        notes.append(
            f"ckir: compiled with --isa {args.isa} (the kernels other CPUs run); every bound "
            "is still this CPU's fastest instruction of its kind"
        )

    # -- compile ckir, one build per dtype --------------------------------------------
    builds: dict[str, Path] = {}
    compile_times: dict[str, CompileTimes] = {}
    costs: dict[str, ModelCost] = {}
    for dt in dtypes:
        out = build_root / f"{name}-{dt}-ctx{max_ctx}{isa_suffix(args.isa)}"
        _log(f"compiling {name} ({dt}) -> {out}")
        compile_times[dt] = compile_build(
            model_dir, out, dt, max_ctx, args.cold_build, isa=args.isa
        )
        builds[dt] = out
        costs[dt] = model_cost(out)

    # -- systems ---------------------------------------------------------------------
    prompt = _tokens(args.prompt_tokens, vocab, 1)
    context = _tokens(args.context, vocab, 2)
    steps = _tokens(args.decode_tokens, vocab, 3)
    specs: list[tuple[System, dict[str, Any]]] = []
    base = {"threads": args.threads}
    gguf_dir = cache_root() / "bench-gguf"
    if "llama.cpp" in against:
        try:
            ensure_llama_cpp()
        except BaselineUnavailable as exc:
            notes.append(str(exc))
            against = [a for a in against if a != "llama.cpp"]
    for dt in dtypes:
        s = System("ckir", dt, modes)
        specs.append((s, {**base, "kind": "ckir", "build": str(builds[dt])}))
        if dt in PANEL_OF and CompileOptions(dtype=None if dt == "f32" else dt).uses_panels:
            # a K the panels cannot hold stays row-major, unless dt cannot hold it either
            group = dtype_info(PANEL_OF[dt]).k_group
            stays = group > k_multiple(dt)
            notes.append(
                f"ckir {dt}: the weight matrices are stored as {PANEL_OF[dt]} ({dt} in GEMM "
                "panels, the default of inference builds"
                + (f"; those whose K is no multiple of {group} stay {dt})" if stays else ")")
            )
        # the panel dtypes hold the values of f32 / bf16 / q8_0 / q4_1 / q4_0: the
        # baselines run those (once, when that dtype is benched too)
        bdt = baseline_dtype(dt)
        if bdt != dt and bdt in dtypes:
            if against:
                notes.append(f"baselines at {dt}: see their {bdt} rows (the same weights)")
            continue
        for b in against:
            if b == "torch":
                if bdt not in ("f32", "bf16"):
                    notes.append(f"torch: no {dt} weights in PyTorch eager; skipped")
                    continue
                spec = {**base, "kind": "torch", "model": str(model_dir), "dtype": bdt}
                specs.append((System("torch", dt, modes), spec))
            elif b == "onnxruntime":
                if "prefill" not in modes or bdt != "f32":
                    if bdt == "f32":
                        notes.append("onnxruntime: prefill only (no decode run)")
                    continue
                onnx = cache_root() / "bench-onnx" / f"{name}-T{args.prompt_tokens}"
                spec = {
                    **base,
                    "kind": "onnxruntime",
                    "model": str(model_dir),
                    "onnx": str(onnx),
                    "tokens": args.prompt_tokens,
                }
                specs.append((System("onnxruntime", dt, ("prefill",)), spec))
            elif b == "llama.cpp":
                path = gguf_dir / f"{name}-{bdt}.gguf"
                src_mtime = max(f.stat().st_mtime for f in model_dir.glob("*.safetensors"))
                try:
                    if not path.exists() or path.stat().st_mtime < src_mtime:
                        _log(f"llama.cpp: writing {path}")
                        path.parent.mkdir(parents=True, exist_ok=True)
                        write_gguf(model_dir, bdt, path)
                except (BaselineUnavailable, KeyError, ImportError) as exc:
                    notes.append(f"llama.cpp {dt}: cannot write the GGUF file: {exc}")
                    continue
                spec = {
                    **base,
                    "kind": "llama.cpp",
                    "gguf": str(path),
                    "n_ctx": max_ctx,
                    "n_batch": max(args.prompt_tokens, args.context),
                }
                system = System("llama.cpp", dt, modes, fallback=LLAMA_CPP_NO_REPACK)
                specs.append((system, spec))

    report = Report(
        model=name,
        args={k: v for k, v in vars(args).items() if k != "func"},
        costs=costs,
        compile=compile_times,
        systems=[],
        bandwidth=[],
        fma=[],
        bandwidth_4k=[],
        notes=notes,
        rss={},
        profiles={},
        env={},
        builds=builds,
    )
    report.env["ckir"] = source_info()
    report.env["cpu"] = cpu_info()
    report.env["load average at start"] = f"{os.getloadavg()[0]:.2f}"
    with _workers([s for s, _ in specs]):
        systems = report.systems = start_workers(specs, args, report)
        _agreement(systems, prompt, vocab, notes)
        warm_up(systems, prompt, context, steps)
        with (
            bandwidth.ReadProbe(args.probe_mib, huge=True) as probe,
            bandwidth.ReadProbe(args.probe_mib, huge=False) as probe_4k,
        ):
            # the fastest instruction of each kind on this CPU bounds its dtypes: AMX
            # tiles where the CPU has them (ckir's and oneDNN's GEMMs use them there)
            amx_bf16 = bool(bandwidth.amx_peak(args.threads, 1, iters=1000))
            amx_int8 = bool(bandwidth.amx_peak(args.threads, 1, iters=1000, int8=True))
            bf16_dot = amx_bf16 or bool(bandwidth.bf16_dot_peak(args.threads, 1, iters=1000))
            int8_dot = amx_int8 or bool(bandwidth.int8_dot_peak(args.threads, 1, iters=1000))
            report.bf16_insn = "tdpbf16ps" if amx_bf16 else "vdpbf16ps" if bf16_dot else ""
            report.int8_insn = (
                "tdpbssd" if amx_int8 else bandwidth.int8_dot_insn() if int8_dot else ""
            )

            def machine(mode: str, dtype: str) -> float:
                if mode == "decode":
                    value = statistics.median(probe.measure(args.threads, 3))
                    report.bandwidth.append(value)
                elif baseline_dtype(dtype) == "bf16" and bf16_dot:
                    value = fma_probe(args.threads, kind="amx_bf16" if amx_bf16 else "bf16")
                    report.bf16_dot.append(value)
                elif baseline_dtype(dtype) in INT8_DOT_DTYPES and int8_dot:
                    value = fma_probe(args.threads, kind="amx_int8" if amx_int8 else "int8")
                    report.int8_dot.append(value)
                else:
                    value = fma_probe(args.threads)
                    report.fma.append(value)
                return value

            def before_round(r: int) -> None:
                if "decode" in modes:
                    report.bandwidth_4k.append(statistics.median(probe_4k.measure(args.threads, 3)))

            probe.measure(args.threads, 1)
            probe_4k.measure(args.threads, 1)
            bandwidth.fma_peak(args.threads, 1)
            alternate_rounds(
                systems,
                modes,
                args.repeat,
                lambda s, mode, r: _run_one(s, mode, prompt, context, steps),
                machine,
                before_round,
            )
        notes += system_notes(systems)
        set_isa_env(report.env, systems)
        report.env["load average after the rounds"] = f"{os.getloadavg()[0]:.2f}"
        report.rss = {dt: _peak_rss(builds[dt], args, vocab) for dt in dtypes if "decode" in modes}
        if args.profile:
            for dt in dtypes:
                report.profiles[dt] = _profile(builds[dt], args, prompt, context, steps)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ckir bench", description=__doc__.split("\n")[0] if __doc__ else None
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except CkirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        # run the imported module's copy: the runners of ckir.tools.bench_train derive from
        # its classes, not from this __main__ module's
        from ckir.tools import bench as _imported

        sys.exit(_imported.worker_main(sys.argv[2]))
    sys.exit(main())
