"""The plan interpreter (ckir.interp) against the C build of the same plan, and
``ckir debug --compare``.

Every template under templates/ on a tiny random checkpoint with odd sizes: the
interpreter's prefill logits and decode logits (after the prefill, with the KV cache)
equal the C build's within 1e-5 of the largest logit.  ``--compare`` agrees call by call
on a healthy build and, on a copy whose model.c calls a broken attention kernel (a
test-only edit of the emitted source), names the first attention call and its output.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_gemma import make_tiny as make_gemma  # noqa: E402
from test_gemma3 import make_tiny as make_gemma3  # noqa: E402
from test_parity import compiled  # noqa: E402
from test_templates_phi3_starcoder2 import make_model as make_phi3_starcoder2  # noqa: E402
from test_training import NOISE_ULPS  # noqa: E402

from ckir import cli  # noqa: E402
from ckir.debug_compare import compare  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.interp import PlanInterpreter, find_model_and_plan, read_weights_bin  # noqa: E402
from ckir.ir_io import load_module  # noqa: E402
from ckir.resources import templates_dir  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

MAX_CONTEXT = 32
REL_TOL = 1e-5

#: template -> a tiny random checkpoint it serves
CASES: dict[str, Callable[[Path], Path]] = {
    "llama": lambda out: make_tiny_model("llama", out, seed=3),
    "qwen2": lambda out: make_tiny_model("qwen2", out, seed=3, tied=False),
    "qwen3": lambda out: make_tiny_model("qwen3", out, seed=3, attention_bias=True),
    "gpt2": lambda out: make_tiny_model("gpt2", out, seed=3),
    "gemma": lambda out: make_gemma("gemma_mha_untied_bias", out),
    "gemma2": lambda out: make_gemma("gemma2_gqa_capped", out),
    "gemma3": lambda out: make_gemma3("gemma3_gqa_scaled", out),
    "phi3": lambda out: make_phi3_starcoder2("phi3_gqa", out),
    "starcoder2": lambda out: make_phi3_starcoder2("starcoder2", out),
    "phi": lambda out: make_phi3_starcoder2("phi_gqa", out),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("interp_models")
    return {key: make(root / key) for key, make in CASES.items()}


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    yield from compiled(checkpoints, tmp_path_factory.mktemp("interp_builds"), MAX_CONTEXT)


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str, rel_tol: float = REL_TOL) -> None:
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} != {ref.shape}"
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    assert err <= rel_tol * scale, f"{what}: max abs error {err:.3g} > {rel_tol} * {scale:.3g}"


def assert_prefill_follows_int8(
    model,
    interp,
    tokens: np.ndarray,
    what: str,
    rel_tol: float = REL_TOL,
    then: Callable[[], None] | None = None,
    int8_rel_tol: float | None = None,
) -> None:
    """The interpreter's prefill equals the C build's with int8 prefill on and off: it
    rounds x where the C GEMMs do (a runtime without int8 GEMMs keeps it off). ``then``
    runs after each of the two prefills (e.g. decode steps on the cache it left);
    ``int8_rel_tol`` (default ``rel_tol``): the bound with int8 prefill on."""
    for int8 in (True, False):
        model.reset()
        interp.reset()
        model.int8_prefill = int8
        interp.int8_prefill = model.int8_prefill
        got, want = interp.prefill(tokens), model.prefill(tokens)
        tol = rel_tol if int8_rel_tol is None or not model.int8_prefill else int8_rel_tol
        assert_close(got, want, f"{what} prefill (int8 {model.int8_prefill})", tol)
        if then is not None:
            then()


def test_every_template_has_a_case() -> None:
    names = {p.stem for p in templates_dir().glob("*.yaml")}
    assert names == set(CASES), f"templates without an interpreter case: {names - set(CASES)}"


@pytest.mark.parametrize("key", list(CASES))
def test_interpreter_logits_equal_the_c_build(key: str, builds) -> None:
    model = builds[key]
    interp = PlanInterpreter(model.build_dir)
    tokens = np.random.default_rng(5).integers(0, model.vocab_size, size=7)
    model.reset()
    assert_close(interp.prefill(tokens), model.prefill(tokens), f"{key} prefill")
    for step, token in enumerate((3, model.vocab_size - 1, 11)):
        assert_close(interp.decode(token), model.decode(token), f"{key} decode {step}")
    assert interp.position == model.position == 10
    interp.reset()
    model.reset()
    assert_close(interp.decode(5), model.decode(5), f"{key} decode from an empty cache")


#: weight dtypes and prefill options beyond the default f32 panels
VARIANTS = {
    "bf16": dict(dtype="bf16"),
    "q8_0": dict(dtype="q8_0"),
    "q4_0": dict(dtype="q4_0"),
    "q4_1": dict(dtype="q4_1", panels=False),
    "f32_last": dict(logits="last"),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_interpreter_follows_weight_dtypes(variant: str, checkpoints, tmp_path: Path) -> None:
    """Dequantized weights; x quantized per block of 32 where the C kernels do it (decode
    GEMVs of Q8_0 / Q4_0 / Q4_1, the int8 prefill GEMMs of their panels) and not where
    they multiply fp32 x (int8 prefill off)."""
    import ckir

    options = VARIANTS[variant]
    with ckir.compile(
        checkpoints["llama"], tmp_path / variant, max_context=MAX_CONTEXT, **options
    ) as model:
        interp = PlanInterpreter(model.build_dir)
        tokens = np.random.default_rng(2).integers(0, model.vocab_size, size=12)

        def decode_steps() -> None:
            for token in (7, 100):
                assert_close(interp.decode(token), model.decode(token), f"{variant} decode")

        assert_prefill_follows_int8(model, interp, tokens, variant, then=decode_steps)


@pytest.mark.parametrize("key", list(CASES))
def test_interpreter_training_step_equals_the_c_build(key: str, checkpoints, tmp_path) -> None:
    """backward: the loss and every gradient; optimizer_step (clipped AdamW): the logits of
    the updated weights, prefill and decode."""
    import ckir

    modes = ("prefill", "decode", "backward")
    with ckir.compile(
        checkpoints[key], tmp_path / key, max_context=MAX_CONTEXT, modes=modes
    ) as model:
        interp = PlanInterpreter(model.build_dir)
        rng = np.random.default_rng(8)
        tokens, targets = (rng.integers(0, model.vocab_size, size=9) for _ in range(2))
        loss, want = interp.backward(tokens, targets), model.backward(tokens, targets)
        assert abs(loss - want) <= REL_TOL * abs(want), f"{key} loss {loss} != {want}"
        grads, want_grads = interp.gradients(), model.gradients()
        assert set(grads) == set(want_grads)
        # a gradient zero in exact arithmetic (the key bias) is rounding noise on both
        # sides: held to test_training's noise floor
        gmax = max(float(np.abs(g).max()) for g in want_grads.values())
        floor = NOISE_ULPS * float(np.finfo(np.float32).eps) * gmax
        for name, grad in want_grads.items():
            err = float(np.abs(grads[name] - grad).max())
            tol = max(REL_TOL * float(np.abs(grad).max()), floor)
            assert err <= tol, f"{key} gradient of {name}: max error {err:.3g} > {tol:.3g}"
        interp.optimizer_step(1e-3)
        model.optimizer_step(1e-3)
        tokens = [5, 6, 7]
        assert_close(interp.prefill(tokens), model.prefill(tokens), f"{key} prefill after a step")
        assert_close(interp.decode(8), model.decode(8), f"{key} decode after a step")


def test_interpreter_refuses_bad_tokens_and_overflow(builds) -> None:
    interp = PlanInterpreter(builds["llama"].build_dir)
    with pytest.raises(CkirError, match="token id 256 is outside the vocabulary"):
        interp.prefill([1, 256])
    with pytest.raises(CkirError, match="does not fit"):
        interp.prefill(list(range(MAX_CONTEXT + 1)))
    assert interp.position == 0


def test_interpreter_of_a_module_in_memory(builds) -> None:
    """from_module: a pass author's module with the build's weights (same weights layout),
    walked call by call; a weights.bin of another build is refused, naming both
    fingerprints."""
    build = builds["qwen3"].build_dir
    module = load_module(build / "layout.mlir")
    model, plan = find_model_and_plan(module, "test")
    weights = read_weights_bin(build / "weights.bin", model, plan)
    mine = PlanInterpreter.from_module(module, weights)
    tokens = [9, 8, 7, 6]
    calls = list(mine.steps("prefill", tokens))
    assert [c.index for c in calls] == list(range(len(mine.calls("prefill"))))
    assert calls[0].kind == "embed" and calls[0].outputs[0][1] == 4 * 48  # T * E
    builds["qwen3"].reset()
    assert_close(mine.logits("prefill", 4), builds["qwen3"].prefill(tokens), "from_module")
    with pytest.raises(CkirError, match="written for build fingerprint 0x[0-9a-f]{16}, but this"):
        read_weights_bin(builds["llama"].build_dir / "weights.bin", model, plan)


def test_a_kind_without_reference_is_named(builds, monkeypatch) -> None:
    from ckir.reference import kernels

    monkeypatch.delitem(kernels.REFERENCE, "rope")
    interp = PlanInterpreter(builds["llama"].build_dir)
    with pytest.raises(CkirError, match="no reference for kernel kind 'rope' \\(@rope_f32\\)"):
        interp.prefill([1, 2])
    assert interp.position == 0


def test_interpreter_names_a_damaged_build(tmp_path: Path) -> None:
    with pytest.raises(CkirError, match="not a ckir build"):
        PlanInterpreter(tmp_path)


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_compare_agrees_on_a_healthy_build(builds, mode: str) -> None:
    result = compare(builds["qwen2"].build_dir, [4, 8, 15, 16], mode=mode)
    assert result.mismatch is None, result.summary()
    per_run = len(PlanInterpreter(builds["qwen2"].build_dir).calls(mode))
    assert result.calls == per_run * (1 if mode == "prefill" else 4)
    assert "calls agree" in result.summary()


def broken_attention(source: str) -> str:
    """model.c whose attention calls add 0.5 to the first output value (test only)."""
    wrapper = (
        "static void broken_attention(const float *q, const float *k, const float *v, "
        "float *out, int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {\n"
        "  ckir_attention_f32(q, k, v, out, T, P, H, KV, D);\n"
        "  out[0] += 0.5f;\n"
        "}\n"
    )
    edited, n = re.subn(r"(?m)^  ckir_attention_f32\(", "  broken_attention(", source)
    assert n > 0, "no attention call in model.c"
    return edited.replace("#include <math.h>\n", "#include <math.h>\n" + wrapper, 1)


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_compare_names_a_broken_kernel(builds, tmp_path: Path, mode: str) -> None:
    build = builds["llama"].build_dir
    calls = PlanInterpreter(build).calls(mode)
    first = next(i for i, c in enumerate(calls) if c.kernel_name == "attention_f32")
    result = compare(build, [1, 2, 3], mode=mode, edit=broken_attention, work=tmp_path / "t")
    m = result.mismatch
    assert m is not None, result.summary()
    assert (m.step, m.index, m.kernel, m.slot) == (0, first, "attention_f32", f"{mode}.layers.0.a")
    assert m.origin == "layers.0: graph.attention"
    assert result.calls == first + 1  # both runs stopped at the broken call
    assert "first difference: call" in result.summary()


def test_debug_command(builds, capsys) -> None:
    build = str(builds["gpt2"].build_dir)
    assert cli.main(["debug", build, "--compare", "--tokens", "1,2,3", "--tol", "1e-4"]) == 0
    assert "calls agree" in capsys.readouterr().out
    assert cli.main(["debug", build, "--compare", "--tokens", "1,x"]) != 0
    assert "--tokens: comma-separated token ids" in capsys.readouterr().err
    assert cli.main(["debug", build, "--compare", "--tokens", "1,9999"]) != 0
    assert "outside the vocabulary" in capsys.readouterr().err
    assert cli.main(["debug", build, "--tokens", "1"]) != 0
    assert "give --compare" in capsys.readouterr().err


@pytest.fixture(scope="module")
def train_build(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A llama build with the backward mode (the gradient calls to compare)."""
    import ckir

    out = tmp_path_factory.mktemp("interp_train") / "llama"
    modes = ("prefill", "decode", "backward")
    ckir.compile(checkpoints["llama"], out, max_context=MAX_CONTEXT, modes=modes).close()
    return out


def test_compare_backward_agrees_and_names_a_broken_kernel(train_build: Path, tmp_path) -> None:
    """--mode backward: every call of one backward (forward, loss, every gradient) agrees;
    a broken forward attention is named at its first call in the backward program."""
    tokens = [3, 1, 4, 1, 5, 9]
    result = compare(train_build, tokens, mode="backward")
    assert result.mismatch is None, result.summary()
    assert result.calls == len(PlanInterpreter(train_build).calls("backward"))
    assert result.summary().startswith("backward: ") and "; loss " in result.summary()
    calls = PlanInterpreter(train_build).calls("backward")
    first = next(i for i, c in enumerate(calls) if c.kernel_name == "attention_f32")
    broken = compare(
        train_build, tokens, mode="backward", edit=broken_attention, work=tmp_path / "t"
    )
    m = broken.mismatch
    assert m is not None, broken.summary()
    assert (m.index, m.kernel, m.slot) == (first, "attention_f32", "backward.layers.0.a")


def test_debug_command_backward(train_build: Path, capsys) -> None:
    build = str(train_build)
    args = ["debug", build, "--compare", "--mode", "backward", "--tokens", "1,2,3"]
    assert cli.main([*args, "--targets", "2,3,4"]) == 0
    assert "calls agree" in capsys.readouterr().out
    assert cli.main([*args, "--targets", "2,3"]) != 0
    assert "3 tokens but 2 targets" in capsys.readouterr().err
    assert cli.main([*args[:-1], "1"]) != 0
    assert "needs at least two tokens" in capsys.readouterr().err
    assert cli.main(["debug", build, "--compare", "--tokens", "1,2", "--targets", "3,4"]) != 0
    assert "only --mode backward takes targets" in capsys.readouterr().err
