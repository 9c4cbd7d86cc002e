"""The phase entry points of the generated C (docs/runtime.md, "Running one layer at a time").

A step run phase by phase (prologue, each layer, epilogue) gives the logits of the
whole step; stopped after layer k, the hidden state equals transformers'
``output_hidden_states[k + 1]``; the entry points refuse phases out of order.  A
training step run phase by phase (forward phases, then the gradients' in reverse)
gives the loss and gradients of ``backward`` bit for bit.  The C examples of
docs/runtime.md are compiled and run against a build.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.resources import runtime_dir  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REL_TOL = 1e-4
TOKENS = [3, 17, 5, 9, 11]  # the C example's
CKIR_ERR_ARG = 10
ARCHS = {"llama": {"num_hidden_layers": 3}, "gpt2": {"num_hidden_layers": 3}}
i32p = ctypes.POINTER(ctypes.c_int32)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, object]]]:
    root = tmp_path_factory.mktemp("phases")
    out: dict[str, tuple[Path, object]] = {}
    for arch, spec in ARCHS.items():
        path = make_tiny_model(arch, root / arch, seed=11, **spec)
        model = ckir.compile(
            path, root / f"{arch}-build", max_context=32, modes=("prefill", "decode", "backward")
        )
        lib = model._lib
        for mode in ("prefill", "decode"):
            getattr(lib, f"ckir_{mode}_prologue").argtypes = [ctypes.c_void_p, i32p, ctypes.c_int64]
            getattr(lib, f"ckir_{mode}_layer").argtypes = [ctypes.c_void_p, ctypes.c_int64]
            getattr(lib, f"ckir_{mode}_epilogue").argtypes = [ctypes.c_void_p]
            hidden = getattr(lib, f"ckir_{mode}_hidden")
            hidden.argtypes = [ctypes.c_void_p, ctypes.c_int64]
            hidden.restype = ctypes.POINTER(ctypes.c_float)
        out[arch] = (path, model)
    yield out
    for _, model in out.values():
        model.close()


def n_layers(model) -> int:
    return int(model._lib.ckir_describe().contents.n_layers)


def call(model, mode: str, phase: str, *args) -> int:
    return int(getattr(model._lib, f"ckir_{mode}_{phase}")(model._ptr, *args))


def prologue(model, mode: str, tokens: list[int]) -> int:
    arr = (ctypes.c_int32 * len(tokens))(*tokens)
    return call(model, mode, "prologue", arr, len(tokens))


def hidden(model, mode: str, layer: int, rows: int, width: int) -> np.ndarray:
    ptr = getattr(model._lib, f"ckir_{mode}_hidden")(model._ptr, layer)
    assert ptr, f"no hidden state for {mode} layer {layer}"
    return np.ctypeslib.as_array(ptr, shape=(rows * width,)).reshape(rows, width).copy()


def layer_by_layer(model, mode: str, tokens: list[int]) -> np.ndarray:
    assert prologue(model, mode, tokens) == 0
    for i in range(n_layers(model)):
        assert call(model, mode, "layer", i) == 0, model._lib.ckir_error(model._ptr)
    assert call(model, mode, "epilogue") == 0
    return model._logits(mode, len(tokens)).copy()


def hf_hidden(path: Path, tokens: list[int]):
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        out = hf(torch.tensor([tokens]), output_hidden_states=True)
    return [h[0].numpy() for h in out.hidden_states], hf.config


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours - ref).max())
    assert err <= REL_TOL * scale, f"{what}: max abs error {err:.3g} > {REL_TOL} * {scale:.3g}"


@pytest.mark.parametrize("arch", list(ARCHS))
def test_layer_by_layer_equals_whole_step(arch: str, models) -> None:
    """Prefill then two decode steps, phase by phase: the logits and positions of
    ckir_prefill / ckir_decode, bit for bit (the same calls in the same order)."""
    _, model = models[arch]
    model.reset()
    whole = [model.prefill(TOKENS).copy()]
    whole += [model.decode(t)[None, :].copy() for t in (7, 2)]
    model.reset()
    phased = [layer_by_layer(model, "prefill", TOKENS)]
    assert model.position == len(TOKENS)
    phased += [layer_by_layer(model, "decode", [t]) for t in (7, 2)]
    assert model.position == len(TOKENS) + 2
    for a, b in zip(phased, whole, strict=True):
        np.testing.assert_array_equal(a, b)
    model.reset()


@pytest.mark.parametrize("arch", list(ARCHS))
def test_stop_early_hidden_state_matches_hf(arch: str, models) -> None:
    """Stopped after layer k, ckir_prefill_hidden(k) is HF's hidden_states[k + 1]
    (every layer but the last, whose HF entry has the final norm applied), and the
    decode step's hidden state after layer k is the next row of HF's."""
    path, model = models[arch]
    refs, config = hf_hidden(path, [*TOKENS, 7])
    width = config.hidden_size
    layers = n_layers(model)
    assert layers == config.num_hidden_layers
    for k in range(layers - 1):
        model.reset()
        assert prologue(model, "prefill", TOKENS) == 0
        for i in range(k + 1):
            assert call(model, "prefill", "layer", i) == 0
        got = hidden(model, "prefill", k, len(TOKENS), width)
        assert_close(got, refs[k + 1][: len(TOKENS)], f"{arch} prefill hidden after layer {k}")
        assert model.position == 0  # a stopped step does not move the position
    for k in range(layers - 1):
        model.reset()
        model.prefill(TOKENS)
        assert prologue(model, "decode", [7]) == 0
        for i in range(k + 1):
            assert call(model, "decode", "layer", i) == 0
        got = hidden(model, "decode", k, 1, width)
        assert_close(got, refs[k + 1][len(TOKENS) :], f"{arch} decode hidden after layer {k}")
    model.reset()


def test_phases_out_of_order_are_refused(models) -> None:
    _, model = models["llama"]
    lib, h = model._lib, model._ptr
    last = n_layers(model) - 1
    model.reset()
    assert call(model, "prefill", "layer", 0) == CKIR_ERR_ARG
    assert b"no prefill step is running (call ckir_prefill_prologue first)" in lib.ckir_error(h)
    assert prologue(model, "prefill", TOKENS) == 0
    assert call(model, "prefill", "layer", 1) == CKIR_ERR_ARG
    assert lib.ckir_error(h) == b"prefill layer 1: the next phase is layer 0"
    assert call(model, "prefill", "epilogue") == CKIR_ERR_ARG
    assert call(model, "prefill", "layer", 0) == 0
    assert call(model, "prefill", "layer", 0) == CKIR_ERR_ARG
    assert call(model, "decode", "layer", 1) == CKIR_ERR_ARG  # another mode's step
    assert call(model, "prefill", "layer", 99) == CKIR_ERR_ARG
    assert lib.ckir_error(h) == f"prefill layer 99: the model has layers 0 to {last}".encode()
    for i in range(1, last + 1):
        assert call(model, "prefill", "layer", i) == 0
    assert call(model, "prefill", "layer", last + 1) == CKIR_ERR_ARG
    assert call(model, "prefill", "epilogue") == 0
    assert call(model, "prefill", "epilogue") == CKIR_ERR_ARG  # the step is over
    assert not model._lib.ckir_prefill_hidden(h, last + 1)
    assert not model._lib.ckir_prefill_hidden(h, -1)
    # a bad token is refused by the prologue, as by ckir_prefill
    assert prologue(model, "prefill", [100000]) == 1
    # a whole step or a reset abandons a step in progress
    for abandon in (lambda: model.prefill(TOKENS), model.reset):
        model.reset()
        assert prologue(model, "prefill", TOKENS) == 0
        assert call(model, "prefill", "layer", 0) == 0
        abandon()
        assert call(model, "prefill", "layer", 1) == CKIR_ERR_ARG
    model.reset()


def _example_source(marker: str = "phases-example") -> str:
    text = (ROOT / "docs" / "runtime.md").read_text()
    m = re.search(rf"<!-- {marker} -->\n```c\n(.*?)```", text, re.S)
    assert m, f"docs/runtime.md has no {marker}"
    return m.group(1)


def _compile_example(model, tmp_path: Path, marker: str) -> tuple[Path, Path]:
    """(the build, the executable) of a C example of docs/runtime.md linked to it."""
    build = Path(model.build_dir)
    src = tmp_path / f"{marker}.c"
    src.write_text(_example_source(marker))
    exe = tmp_path / marker
    include = runtime_dir() / "include"
    cmd = ["cc", "-I", str(build), "-I", str(include), str(src), str(build / "libmodel.so")]
    subprocess.run([*cmd, f"-Wl,-rpath,{build}", "-o", str(exe)], check=True)
    return build, exe


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_docs_c_example(models, tmp_path: Path) -> None:
    """The C program of docs/runtime.md: logits as ckir_prefill's; stopped after
    layer 0, HF's hidden_states[1]."""
    path, model = models["llama"]
    build, exe = _compile_example(model, tmp_path, "phases-example")

    def run(stop: int) -> np.ndarray:
        out = subprocess.run(
            [str(exe), str(build / "weights.bin"), str(stop)],
            check=True,
            capture_output=True,
            text=True,
        )
        return np.array([float(x) for x in out.stdout.split()], dtype=np.float32)

    model.reset()
    whole = model.prefill(TOKENS).copy()
    model.reset()
    np.testing.assert_array_equal(run(-1), whole.reshape(-1))
    refs, config = hf_hidden(path, TOKENS)
    got = run(0).reshape(len(TOKENS), config.hidden_size)
    assert_close(got, refs[1], "docs example: hidden after layer 0")


def test_run_profile_reports_phases_layers_kinds(
    models, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ckir run --profile``: a profiling copy beside the build, and tables per phase,
    per layer and per kernel kind whose phase rows add up to the total; the ordinary
    build keeps no timers."""
    from ckir.cli import main

    _, model = models["llama"]
    build = Path(model.build_dir)
    assert not hasattr(model._lib, "ckir_profile_n")  # no cost when off
    capsys.readouterr()
    assert main(["run", str(build), "--tokens", "3,17,5", "--steps", "3", "--profile"]) == 0
    out = capsys.readouterr()
    assert (build.parent / f"{build.name}-profile" / "libmodel.so").exists()
    lines = out.err.splitlines()
    assert lines[0].startswith(
        "profile: kernel time in ms, summed over the run (prefill 1x, decode 2x"
    )
    assert lines[1].split() == ["phase", "prefill", "decode"]
    rows = {ln.split()[0]: [float(x) for x in ln.split()[1:]] for ln in lines[2:6]}
    assert list(rows) == ["prologue", "layers", "epilogue", "total"]
    for col in range(2):
        parts = sum(rows[p][col] for p in ("prologue", "layers", "epilogue"))
        assert abs(parts - rows["total"][col]) <= 0.002  # three values rounded to 1 us
        assert rows["layers"][col] > 0
    at = lines.index(next(ln for ln in lines if ln.startswith("layer ")))
    layer_rows = [ln.split()[0] for ln in lines[at + 1 : at + 1 + n_layers(model)]]
    assert layer_rows == [str(i) for i in range(n_layers(model))]
    kinds = lines.index(next(ln for ln in lines if ln.startswith("kernel kind")))
    assert {"attention", "embed"} <= {ln.split()[0] for ln in lines[kinds + 1 :]}


@pytest.mark.parametrize("arch", list(ARCHS))
def test_python_layer_steps(arch: str, models) -> None:
    """``prefill_layers`` / ``decode_layers``: each layer's hidden state is the C
    entry point's, ``finish`` gives the whole step's logits bit for bit, and the
    position moves only when a step finishes."""
    path, model = models[arch]
    _, config = hf_hidden(path, TOKENS)
    model.reset()
    whole = model.prefill(TOKENS).copy()
    after = model.decode(7).copy()
    model.reset()
    step = model.prefill_layers(TOKENS)
    assert (step.n_layers, step.width) == (config.num_hidden_layers, config.hidden_size)
    for i in range(model.n_layers):
        h = step.run_layer()
        assert h.shape == (len(TOKENS), config.hidden_size)
        np.testing.assert_array_equal(h, hidden(model, "prefill", i, len(TOKENS), h.shape[1]))
    assert model.position == 0
    np.testing.assert_array_equal(step.finish(), whole)
    assert model.position == len(TOKENS)
    step = model.decode_layers(7)
    for _ in range(model.n_layers):
        assert step.run_layer().shape == (1, config.hidden_size)
    np.testing.assert_array_equal(step.finish(), after)
    model.reset()


def test_python_layer_steps_refuse_misuse(models) -> None:
    _, model = models["llama"]
    model.reset()
    step = model.prefill_layers(TOKENS)
    with pytest.raises(CkirError, match="the next phase is layer 0"):
        step.finish()  # before the layers: the C names the phase that is next
    for _ in range(model.n_layers):
        step.run_layer()
    with pytest.raises(CkirError, match=f"all {model.n_layers} layers have run"):
        step.run_layer()
    step.finish()
    with pytest.raises(CkirError, match="the step has finished"):
        step.finish()
    stopped = model.prefill_layers(TOKENS)  # stopped early: dropped, the position stays
    stopped.run_layer()
    assert model.position == len(TOKENS)
    model.prefill([1])  # a whole step abandons it
    with pytest.raises(CkirError, match="no prefill step is running"):
        stopped.run_layer()
    with pytest.raises(CkirError, match="outside the vocabulary"):
        model.prefill_layers([1, 10**6])
    with pytest.raises(CkirError, match="prefill_layers: expects a non-empty"):
        model.prefill_layers([])
    with pytest.raises(TypeError, match="decode_layers: token must be an int"):
        model.decode_layers("a")  # type: ignore[arg-type]
    model.reset()


TARGETS = [17, 5, 9, 11, 2]  # the backward C example's


def poison_gradients(model) -> None:
    """NaN in every gradient, so that a phase that did not run shows."""
    for region in model.gradient_regions():
        region[...] = np.nan


def backward_by_phases(model, tokens: list[int], targets: list[int]) -> tuple[float, float]:
    step = model.backward_layers(tokens, targets)
    for _ in range(model.n_layers):
        step.run_layer()
    loss = step.epilogue()
    step.grad_epilogue()
    for _ in range(model.n_layers):
        step.run_grad_layer()
    return loss, step.finish()


@pytest.mark.parametrize("arch", list(ARCHS))
def test_backward_layer_by_layer_equals_backward(arch: str, models) -> None:
    """A training step phase by phase: the loss (after the epilogue and at the end) and
    every gradient of ``backward``, bit for bit; an optimizer step after it moves the
    weights as after ``backward``."""
    _, model = models[arch]
    whole_loss = model.backward(TOKENS, TARGETS)
    whole = model.gradients()
    poison_gradients(model)
    loss, final = backward_by_phases(model, TOKENS, TARGETS)
    assert loss == final == whole_loss
    phased = model.gradients()
    assert list(phased) == list(whole)
    for name, g in whole.items():
        np.testing.assert_array_equal(phased[name], g, err_msg=name)
    # a shorter sequence, phase by phase, then the whole step: the same again
    poison_gradients(model)
    short = backward_by_phases(model, TOKENS[:3], TARGETS[:3])[1]
    assert short == model.backward(TOKENS[:3], TARGETS[:3])
    model.reset()


def test_backward_phases_out_of_order_are_refused(models) -> None:
    _, model = models["llama"]
    lib, h = model._lib, model._ptr
    from ckir.model import layers

    assert layers.bind_backward(lib)
    last = n_layers(model) - 1
    tok = (ctypes.c_int32 * 5)(*TOKENS)
    tgt = (ctypes.c_int32 * 5)(*TARGETS)
    model.reset()
    assert lib.ckir_backward_layer(h, 0) == CKIR_ERR_ARG
    assert lib.ckir_error(h) == (
        b"backward layer 0: no backward step is running (call ckir_backward_prologue first)"
    )
    assert lib.ckir_backward_prologue(h, tok, tgt, 5) == 0
    assert lib.ckir_backward_grad_epilogue(h) == CKIR_ERR_ARG
    assert lib.ckir_error(h) == b"backward grad epilogue: the next phase is layer 0"
    assert lib.ckir_backward_layer(h, 1) == CKIR_ERR_ARG
    assert lib.ckir_backward_layer(h, last + 1) == CKIR_ERR_ARG
    assert (
        lib.ckir_error(h) == f"backward layer {last + 1}: the model has layers 0 to {last}".encode()
    )
    for i in range(last + 1):
        assert lib.ckir_backward_layer(h, i) == 0
    assert lib.ckir_backward_grad_layer(h, last) == CKIR_ERR_ARG
    assert lib.ckir_error(h) == b"backward grad layer %d: the next phase is epilogue" % last
    assert lib.ckir_backward_epilogue(h, None) == 0
    assert lib.ckir_backward_grad_epilogue(h) == 0
    assert lib.ckir_backward_grad_layer(h, 0) == CKIR_ERR_ARG  # the last layer comes first
    assert lib.ckir_error(h) == b"backward grad layer 0: the next phase is grad layer %d" % last
    assert lib.ckir_backward_grad_layer(h, -1) == CKIR_ERR_ARG
    assert lib.ckir_backward_grad_prologue(h, None) == CKIR_ERR_ARG
    for i in range(last, -1, -1):
        assert lib.ckir_backward_grad_layer(h, i) == 0
    assert lib.ckir_backward_grad_prologue(h, None) == 0
    assert lib.ckir_backward_grad_prologue(h, None) == CKIR_ERR_ARG  # the step is over
    assert b"no backward step is running" in lib.ckir_error(h)
    # bad ids are refused by the prologue, as by ckir_backward
    bad = (ctypes.c_int32 * 5)(*TOKENS[:4], 100000)
    assert lib.ckir_backward_prologue(h, tok, bad, 5) == 1
    assert lib.ckir_error(h).startswith(b"target id 100000 at index 4")
    # another mode's phases, a whole step, an optimizer step or a reset abandon a step
    # (the weights the optimizer step moves are put back after)
    before = model.weights()
    for abandon in (
        lambda: model.prefill(TOKENS),
        lambda: model.backward(TOKENS, TARGETS),
        lambda: model.optimizer_step(1e-9),
        model.reset,
    ):
        assert lib.ckir_backward_prologue(h, tok, tgt, 5) == 0
        assert lib.ckir_backward_layer(h, 0) == 0
        abandon()
        assert lib.ckir_backward_layer(h, 1) == CKIR_ERR_ARG
    for name, values in before.items():
        model.write(name, values)
    assert lib.ckir_backward_prologue(h, tok, tgt, 5) == 0
    assert call(model, "prefill", "layer", 0) == CKIR_ERR_ARG  # not a prefill step
    model.reset()


def test_python_backward_steps_refuse_misuse(models) -> None:
    _, model = models["gpt2"]
    step = model.backward_layers(TOKENS, TARGETS)
    with pytest.raises(CkirError, match="backward epilogue: the next phase is layer 0"):
        step.epilogue()
    for _ in range(model.n_layers):
        step.run_layer()
    with pytest.raises(CkirError, match=f"all {model.n_layers} layers have run"):
        step.run_layer()
    with pytest.raises(CkirError, match="backward grad layer .*: the next phase is epilogue"):
        step.run_grad_layer()
    step.epilogue()
    step.grad_epilogue()
    for _ in range(model.n_layers):
        step.run_grad_layer()
    with pytest.raises(CkirError, match="every layer's gradients have run"):
        step.run_grad_layer()
    step.finish()
    with pytest.raises(CkirError, match="the step has finished"):
        step.finish()
    with pytest.raises(CkirError, match="backward_layers: 5 tokens but 4 targets"):
        model.backward_layers(TOKENS, TARGETS[:4])
    with pytest.raises(CkirError, match="backward_layers: targets: id 1000000 is outside"):
        model.backward_layers(TOKENS, [*TARGETS[:4], 10**6])
    model.reset()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_docs_backward_c_example(models, tmp_path: Path) -> None:
    """The training C program of docs/runtime.md prints the loss and every gradient of
    ``backward``, bit for bit."""
    _, model = models["llama"]
    build, exe = _compile_example(model, tmp_path, "backward-phases-example")
    loss = model.backward(TOKENS, TARGETS)
    grads = model.gradients()
    model.reset()
    out = subprocess.run(
        [str(exe), str(build / "weights.bin")], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert out[0].startswith("loss ")
    assert np.float32(out[0].split()[1]) == np.float32(loss)
    printed = {ln.split()[0]: np.array(ln.split()[1:], dtype=np.float32) for ln in out[1:]}
    assert sorted(printed) == sorted(f"grad.{name}" for name in grads)
    for name, g in grads.items():
        np.testing.assert_array_equal(printed[f"grad.{name}"], g.reshape(-1), err_msg=name)
