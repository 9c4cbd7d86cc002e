"""End-to-end parity of the fusion passes on tiny random llama / qwen2 / gpt2 checkpoints.

Each model is built twice through the Python API (import -> lower prefill and
decode -> [fuse-qkv, fuse-gate-up, fuse-add-rmsnorm] -> plan-layout ->
``ckir.compiler.build``): once with the fusions, once without.  Prefill and
decode logits of the fused build must match the unfused build within 1e-5 and
HF transformers within 1e-4 (max abs error relative to the largest logit).
Prefill runs with 5 tokens (fused GEMMs in their streaming form, M <= 8), 11
and 40 tokens (blocked-GEMM form; 40 x 172 gate/up columns span two tiles).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from xdsl.context import Context  # noqa: E402

import ckir.compiler as compiler  # noqa: E402
from ckir.backend.weights import SafetensorsSource  # noqa: E402
from ckir.compiler import CompileOptions, Prepared, Progress, graph_only, print_module  # noqa: E402
from ckir.frontend.hf import import_hf  # noqa: E402
from ckir.model import CompiledModel  # noqa: E402
from ckir.passes.convert_weights import ConvertWeightsPass  # noqa: E402
from ckir.passes.fuse_add_rmsnorm import FuseAddRmsnormPass  # noqa: E402
from ckir.passes.fuse_gate_up import FuseGateUpPass  # noqa: E402
from ckir.passes.fuse_qkv import FuseQkvPass  # noqa: E402
from ckir.passes.fusion import fused_counts  # noqa: E402
from ckir.passes.lower_decode import LowerDecodePass  # noqa: E402
from ckir.passes.lower_prefill import LowerPrefillPass  # noqa: E402
from ckir.passes.plan_layout import PlanLayoutPass  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

ARCHS = {
    "llama": {"arch": "llama"},
    "qwen2": {"arch": "qwen2"},  # q/k/v biases, tied head
    "gpt2": {"arch": "gpt2"},  # biases everywhere, layernorm, gelu MLP
}
#: what each pass must have fired per program (2 layers)
EXPECTED_FUSED = {
    "llama": {"add_rmsnorm": 4, "gate_up": 2, "qkv": 2},
    "qwen2": {"add_rmsnorm": 4, "gate_up": 2, "qkv": 2},
    "gpt2": {"qkv": 2},
}
MAX_CONTEXT = 64
VS_UNFUSED = 1e-5
VS_HF = 1e-4


def fusion_passes():
    return [FuseQkvPass(), FuseGateUpPass(), FuseAddRmsnormPass()]


def prepare(
    path: Path, fused: bool | list, max_context: int = MAX_CONTEXT, dtype: str | None = None
) -> Prepared:
    """What ``ckir.compiler.prepare`` does, with fusion passes before plan-layout.

    ``fused``: True for all three passes, False for none, or a list of passes;
    ``dtype``: weight storage (``--convert-weights``), None for the checkpoint's.
    """
    module, _ = import_hf(path, None)
    graph_text = graph_only(module)
    ctx = Context()
    if dtype is not None:
        ConvertWeightsPass(dtype=dtype).apply(ctx, module)
    LowerPrefillPass(max_context=max_context).apply(ctx, module)
    LowerDecodePass(max_context=max_context).apply(ctx, module)
    passes = fusion_passes() if fused is True else list(fused or [])
    for p in passes:
        p.apply(ctx, module)
    PlanLayoutPass(strategy="liveness").apply(ctx, module)
    module.verify()
    options = CompileOptions(max_context=max_context, dtype=dtype, fuse=bool(passes))
    return Prepared(
        module, SafetensorsSource(path), graph_text, print_module(module), options, path
    )


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fusion_models")
    out: dict[str, Path] = {}
    for key, spec in ARCHS.items():
        spec = dict(spec)
        arch = spec.pop("arch")
        out[key] = make_tiny_model(arch, root / key, seed=11, **spec)
    return out


@pytest.fixture(scope="session")
def builds(checkpoints, tmp_path_factory: pytest.TempPathFactory):
    """{arch: (fused model, unfused model, fused counts)}"""
    root = tmp_path_factory.mktemp("fusion_builds")
    out = {}
    for key, path in checkpoints.items():
        models = []
        counts = {}
        for fused in (True, False):
            prepared = prepare(path, fused)
            if fused:
                counts = fused_counts(prepared.module)
            out_dir = root / f"{key}_{'fused' if fused else 'plain'}"
            compiler.build(prepared, out_dir, Progress(quiet=True))
            models.append(CompiledModel(out_dir))
        out[key] = (models[0], models[1], counts)
    yield out
    for fused, plain, _ in out.values():
        fused.close()
        plain.close()


def hf_model(path: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model


def assert_close(ours: np.ndarray, ref: np.ndarray, rel: float, what: str) -> None:
    assert ours.shape == ref.shape, what
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    assert err <= rel * scale, f"{what}: max abs error {err:.3g} > {rel} * {scale:.3g}"


@pytest.mark.parametrize("key", list(ARCHS))
def test_the_expected_patterns_fired(key, builds):
    fused, plain, counts = builds[key]
    assert counts == {"prefill": EXPECTED_FUSED[key], "decode": EXPECTED_FUSED[key]}
    text = (fused.build_dir / "layout.mlir").read_text()
    assert "fused = {" in text
    assert "fused = {" not in (plain.build_dir / "layout.mlir").read_text()
    c_source = (fused.build_dir / "model.c").read_text()
    kernels = {"qkv": "ckir_gemv_qkv", "gate_up": "ckir_gemv_gate_up_f32("}
    kernels["add_rmsnorm"] = "ckir_add_rmsnorm_f32("
    for pattern, c_name in kernels.items():
        assert (c_name in c_source) == (pattern in EXPECTED_FUSED[key]), pattern


@pytest.mark.parametrize("n_tokens", [5, 11, 40])
@pytest.mark.parametrize("key", list(ARCHS))
def test_prefill(key, n_tokens, checkpoints, builds):
    fused, plain, _ = builds[key]
    tokens = np.random.default_rng(n_tokens).integers(0, fused.vocab_size, size=n_tokens)
    fused.reset()
    plain.reset()
    ours, ref = fused.prefill(tokens), plain.prefill(tokens)
    assert_close(ours, ref.astype(np.float64), VS_UNFUSED, f"{key} prefill vs unfused")
    with torch.no_grad():
        hf = hf_model(checkpoints[key])(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert_close(ours, hf.astype(np.float64), VS_HF, f"{key} prefill vs HF")


@pytest.mark.parametrize("key", list(ARCHS))
def test_decode(key, checkpoints, builds):
    fused, plain, _ = builds[key]
    rng = np.random.default_rng(2)
    prompt = rng.integers(0, fused.vocab_size, size=5)
    steps = rng.integers(0, fused.vocab_size, size=8)
    hf = hf_model(checkpoints[key])
    fused.reset()
    plain.reset()
    fused.prefill(prompt)
    plain.prefill(prompt)
    with torch.no_grad():
        out = hf(torch.tensor(prompt[None, :]), use_cache=True)
        cache = out.past_key_values
        for i, tok in enumerate(steps):
            ours, ref = fused.decode(int(tok)), plain.decode(int(tok))
            assert_close(ours, ref.astype(np.float64), VS_UNFUSED, f"{key} decode {i} vs unfused")
            out = hf(torch.tensor([[int(tok)]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            hf_logits = out.logits[0, -1].numpy().astype(np.float64)
            assert_close(ours, hf_logits, VS_HF, f"{key} decode {i} vs HF")


@pytest.mark.parametrize(
    "dtype", ["bf16", "bf16p", "q8_0", "q8_0p", "q4_1", "q4_1p", "q4_0", "q4_0p"]
)
def test_weight_dtypes_fused_equals_unfused(dtype, checkpoints, tmp_path):
    """bf16 / bf16p / Q8_0 / q8_0p / Q4_1 / q4_1p / Q4_0 / q4_0p weights: the fused
    kernels compose the unfused ones (same numerics)."""
    path = checkpoints["qwen2"]  # q/k/v biases
    models = []
    for fused in (True, False):
        prepared = prepare(path, fused, dtype=dtype)
        if fused:
            counts = fused_counts(prepared.module)
            assert counts["decode"] == EXPECTED_FUSED["qwen2"], counts
            assert counts["prefill"] == EXPECTED_FUSED["qwen2"], counts
        out_dir = tmp_path / f"{dtype}_{fused}"
        compiler.build(prepared, out_dir, Progress(quiet=True))
        models.append(CompiledModel(out_dir))
    fused_m, plain_m = models
    try:
        tokens = np.random.default_rng(4).integers(0, fused_m.vocab_size, size=12)
        a, b = fused_m.prefill(tokens), plain_m.prefill(tokens)
        assert_close(a, b.astype(np.float64), VS_UNFUSED, f"{dtype} prefill")
        for tok in tokens[:6]:
            a, b = fused_m.decode(int(tok)), plain_m.decode(int(tok))
            assert_close(a, b.astype(np.float64), VS_UNFUSED, f"{dtype} decode")
    finally:
        fused_m.close()
        plain_m.close()


def test_fused_plan_has_no_gate_up_buffers(builds):
    fused, plain, _ = builds["llama"]

    def names(model: CompiledModel) -> set[str]:
        lines = (model.build_dir / "layout.map").read_text().splitlines()
        return {line.split()[-1] for line in lines if line.strip()}

    for mode in ("prefill", "decode"):
        for layer in (0, 1):
            scope = f"{mode}.layers.{layer}"
            assert {f"{scope}.gate", f"{scope}.up", f"{scope}.m"} <= names(plain)
            assert f"{scope}.m" in names(fused)
            assert not {f"{scope}.gate", f"{scope}.up"} & names(fused)


# ------------------------------------------------------------------ benchmark (by hand)
#
#   .venv/bin/python tests/test_fusion_parity.py --bench [--rounds 7] [--steps 64]
#       [--dtype bf16|q8_0|q4_0|q4_1] [--pair] [--workdir DIR]
#
# Builds a random-weight SmolLM-135M-shaped llama (hidden 576, 30 layers, 9/3
# heads, intermediate 1536, vocab 49152, tied) without fusions, with all three,
# and with each one alone; then, round after round, runs every build in turn
# (alternating, so machine noise hits all alike): prefill of 128 tokens, then
# --steps decode steps timed one by one.  Prints medians over rounds of decode
# tokens/s (1 / median step time) and prefill tokens/s, and the median (and
# quartiles) of the per-round ratio to the unfused build run in the same round.


def _bench(argv: list[str]) -> None:
    import argparse
    import statistics
    import tempfile
    import time

    ap = argparse.ArgumentParser(description="fusion passes: decode/prefill tokens/s")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--dtype", default=None, help="weight dtype (--convert-weights)")
    ap.add_argument("--pair", action="store_true", help="only unfused vs all three")
    args = ap.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ckir-fusion-bench-"))
    ckpt = work / "smollm135m_shape"
    if not (ckpt / "config.json").exists():
        make_tiny_model(
            "llama",
            ckpt,
            seed=0,
            hidden_size=576,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            intermediate_size=1536,
            vocab_size=49152,
            tie_word_embeddings=True,
            max_position_embeddings=2048,
        )
    variants = {
        "unfused": [],
        "all three": fusion_passes(),
    }
    if not args.pair:
        variants |= {
            "qkv only": [FuseQkvPass()],
            "gate_up only": [FuseGateUpPass()],
            "add_rmsnorm only": [FuseAddRmsnormPass()],
        }
    models: dict[str, CompiledModel] = {}
    ctx_len = args.prompt + args.steps + 8
    for name, passes in variants.items():
        out = work / f"build_{args.dtype or 'f32'}_{name.replace(' ', '_')}"
        prepared = prepare(ckpt, passes, max_context=ctx_len, dtype=args.dtype)
        compiler.build(prepared, out, Progress(quiet=True))
        models[name] = CompiledModel(out)
        print(f"built {name}: {fused_counts(prepared.module)}", flush=True)
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, 49152, size=args.prompt)
    decode_tps: dict[str, list[float]] = {n: [] for n in models}
    prefill_tps: dict[str, list[float]] = {n: [] for n in models}
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for name in order:
            m = models[name]
            m.reset()
            t0 = time.perf_counter()
            logits = m.prefill(prompt)
            prefill_tps[name].append(args.prompt / (time.perf_counter() - t0))
            tok = int(logits[-1].argmax())
            times = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                tok = int(m.decode(tok).argmax())
                times.append(time.perf_counter() - t0)
            decode_tps[name].append(1.0 / statistics.median(times))
        print(f"round {r + 1}/{args.rounds} done", flush=True)

    def paired(tps: dict[str, list[float]], name: str) -> tuple[float, float, float]:
        """Median and quartiles of the per-round ratio to the unfused build."""
        ratios = sorted(a / b for a, b in zip(tps[name], tps["unfused"], strict=True))
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        return q[1], q[0], q[2]

    print(
        f"\n{'build':<18} {'decode tok/s':>12} {'ratio [IQR]':>20} "
        f"{'prefill tok/s':>14} {'ratio [IQR]':>20}"
    )
    for name in models:
        d, p = statistics.median(decode_tps[name]), statistics.median(prefill_tps[name])
        rd, rp = paired(decode_tps, name), paired(prefill_tps, name)
        print(
            f"{name:<18} {d:12.2f} {rd[0]:6.3f} [{rd[1]:.3f}, {rd[2]:.3f}] "
            f"{p:14.1f} {rp[0]:6.3f} [{rp[1]:.3f}, {rp[2]:.3f}]"
        )
    for m in models.values():
        m.close()


if __name__ == "__main__":
    import sys

    _bench(sys.argv[1:])
