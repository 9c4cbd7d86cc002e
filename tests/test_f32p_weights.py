"""The f32p weight dtype on the Python side: packing, sizes, extents, options.

f32p is fp32 stored in the 32-row panels the GEMM kernels read (docs/quantization.md):
element (n, k) of a [N, K] matrix at float ``((n // 32) * K + k) * 32 + n % 32``, the
rows past N of the last panel zero.  The kernels themselves: tests/test_f32p_kernels.py;
whole models against transformers: tests/test_weight_dtype_parity.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from ckir import quant, vocab
from ckir.backend.weights import encode
from ckir.compiler import CompileOptions
from ckir.dialects import lowered as lw
from ckir.dialects.dims import product_factors
from ckir.errors import CkirError
from ckir.registry import extent_values, panel_extent_problem

SHAPES = [(n, k) for n in (1, 31, 32, 33, 65) for k in (1, 7, 576)]


def reference_pack(w: np.ndarray) -> np.ndarray:
    n, k = w.shape
    p = -(-n // 32)
    return np.ascontiguousarray(
        np.pad(w, ((0, p * 32 - n), (0, 0))).reshape(p, 32, k).transpose(0, 2, 1),
        dtype=np.float32,
    )


@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
def test_pack_unpack_round_trip(n: int, k: int) -> None:
    w = np.random.default_rng(n * 1000 + k).standard_normal((n, k)).astype(np.float32)
    packed = quant.quantize(w, "f32p")
    assert packed.dtype == np.float32 and packed.flags.c_contiguous
    assert np.array_equal(packed, reference_pack(w))
    flat = packed.reshape(-1)
    for i, j in [(0, 0), (n - 1, k - 1), (n // 2, k // 3), (n - 1, 0)]:
        assert flat[((i // 32) * k + j) * 32 + i % 32] == w[i, j]
    pad = packed.shape[0] * 32 - n
    if pad:
        assert not packed[-1, :, 32 - pad :].any()  # the padding rows are zeros
    # bytes: the same everywhere
    nbytes = -(-n // 32) * 32 * k * 4
    assert packed.nbytes == nbytes == quant.panel_bytes(n, k)
    assert vocab.storage_bytes("f32p", (n, k)) == nbytes
    assert lw.BufferType.make([n, k], "f32p").byte_size == nbytes
    assert lw.BufferType.make([n, k], "f32p").stored_values == nbytes // 4
    # unpacked exactly, from the float panels or from their bytes (weights.bin)
    assert np.array_equal(quant.dequantize(packed, "f32p", shape=(n, k)), w)
    raw = encode(w, "f32p", "w")
    assert raw.dtype == np.uint8 and raw.nbytes == nbytes
    assert np.array_equal(raw.view("<f4"), flat)
    assert np.array_equal(quant.unpack_panels(raw, (n, k)), w)


def test_unpack_needs_the_shape_and_the_right_size() -> None:
    packed = quant.pack_panels(np.ones((33, 8), np.float32))
    with pytest.raises(ValueError, match=r"needs the logical shape"):
        quant.dequantize(packed, "f32p")
    with pytest.raises(ValueError, match=r"f32p \[65, 8\] is 768 floats"):
        quant.unpack_panels(packed, (65, 8))
    with pytest.raises(ValueError, match=r"\[N, K\] matrices"):
        quant.pack_panels(np.ones((2, 3, 4), np.float32))


def test_sizes_of_other_dtypes_unchanged() -> None:
    assert vocab.storage_bytes("q8_0", 64) == 68
    assert vocab.storage_bytes("q8_0", (3, 64)) == 3 * 68
    assert vocab.storage_bytes("bf16", (5, 3)) == 30
    assert vocab.storage_bytes("f32", 7) == 28
    with pytest.raises(ValueError, match=r"f32p buffers are \[N, K\] matrices"):
        vocab.storage_bytes("f32p", 64)
    with pytest.raises(ValueError, match=r"stored in panels"):
        quant.block_bytes("f32p")
    assert vocab.PANEL_DTYPES == {"f32p": 32}
    assert "f32p" in vocab.WEIGHT_DTYPES and "f32p" not in vocab.VALUE_DTYPES
    assert vocab.dtype_info("f32p").c_type == "float"


def test_non_finite_values_are_found_in_panels() -> None:
    w = np.ones((33, 7), np.float32)
    w[32, 6] = np.nan
    w[0, 0] = np.inf
    assert quant.count_non_finite(quant.pack_panels(w), "f32p") == 2
    assert quant.count_non_finite(quant.pack_panels(w).view(np.uint8), "f32p") == 2
    with pytest.raises(CkirError, match=r"tensor 'model.w' has 2 non-finite values"):
        encode(w, "f32p", "model.w")
    with pytest.raises(CkirError, match=r"f32p stores \[N, K\] matrices"):
        encode(np.ones(8, np.float32), "f32p", "model.b")


def test_panel_extents_count_whole_panels() -> None:
    assert product_factors("N*K") == ("N", "K")
    assert product_factors("(A+B)*C*D") == ("(A+B)", "C*D")
    assert product_factors("N+K") is None and product_factors("N") is None
    assert product_factors("N/2*K") is None
    assert panel_extent_problem("f32p", "N*K") is None
    assert panel_extent_problem("f32", "N+K") is None  # only panel dtypes care
    assert "rows*cols" in (panel_extent_problem("f32p", "N+K") or "")
    env = {"N": 33, "K": 9, "Nq": 64}
    assert extent_values("f32p", "N*K", env) == 64 * 9
    assert extent_values("f32p", "Nq*K", env) == 64 * 9
    assert extent_values("f32", "N*K", env) == 33 * 9
    assert extent_values("q8_0", "N*K", env) == 33 * 9


def test_training_builds_refuse_f32p() -> None:
    for modes in [("backward",), ("prefill", "decode", "backward")]:
        with pytest.raises(CkirError, match=r"^--dtype f32p: training .* needs f32 weights"):
            CompileOptions(modes=modes, dtype="f32p")
        with pytest.raises(CkirError, match=r"^panels: training"):
            CompileOptions(modes=modes, panels=True)
        # the default (None) is off for training builds
        assert not CompileOptions(modes=modes).uses_panels
    with pytest.raises(CkirError, match=r"^--dtype bf16: training"):
        CompileOptions(modes=("backward",), dtype="bf16")
    with pytest.raises(TypeError, match=r"panels must be a bool or None"):
        CompileOptions(panels="yes")  # type: ignore[arg-type]


def test_panels_switch() -> None:
    from ckir import compiler

    # inference builds store f32 matrices as f32p unless told otherwise
    assert compiler.PANELS_DEFAULT is True
    assert CompileOptions().uses_panels
    assert CompileOptions(dtype="f32").uses_panels
    assert not CompileOptions(panels=False).uses_panels
    assert CompileOptions(panels=True).uses_panels
    assert CompileOptions(dtype="f32", panels=True).uses_panels
    assert not CompileOptions(dtype="q8_0", panels=True).uses_panels  # no f32 matrices left
    assert not CompileOptions(dtype="f32", panels=False).uses_panels


@pytest.mark.parametrize(("arch", "tied"), [("gpt2", None), ("qwen2", True), ("llama", False)])
def test_f32p_build_matches_hf_and_saves_exactly(arch: str, tied: bool | None, tmp_path) -> None:
    """A whole f32p build (ragged V = 250 and I = 172: padded panels; tied head; biases;
    fused qkv / gate_up) gives HF's logits at the fp32 tolerance, and save_pretrained
    unpacks the panels back to the checkpoint's exact values."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from safetensors.numpy import load_file

    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model(arch, tmp_path / "hf", seed=5, tied=tied, vocab_size=250)
    tokens = np.random.default_rng(2).integers(0, 250, size=9)
    hf = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
    scale = float(np.abs(ref).max())
    with ckir.compile(src, tmp_path / "b", dtype="f32p", max_context=32) as model:
        layout = (tmp_path / "b" / "layout.mlir").read_text()
        for kernel in ("embed_f32p", "gemm_f32p", "gemv_f32p"):
            assert f"lowered.kernel @{kernel} " in layout, kernel
        assert "f32p_weights" in model.info and model.info["f32p_weights"]
        err = float(np.abs(model.prefill(tokens) - ref).max()) / scale
        assert err <= 1e-4, f"prefill f32p: relative error {err:.3g}"
        model.reset()
        steps = np.stack([model.decode(int(t)) for t in tokens])
        err = float(np.abs(steps - ref).max()) / scale
        assert err <= 1e-4, f"decode f32p: relative error {err:.3g}"
        saved = model.save_pretrained(tmp_path / "saved")
    ours, theirs = load_file(str(saved / "model.safetensors")), {}
    for f in sorted(src.glob("*.safetensors")):
        theirs.update(load_file(str(f)))
    assert ours.keys() <= theirs.keys() and ours
    for name, values in ours.items():
        assert np.array_equal(values, theirs[name]), name


def test_panels_switch_packs_an_f32_build(tmp_path) -> None:
    """An f32 inference build stores its matrices as f32p (the default, or ``panels=True``);
    ``panels=False`` keeps them row-major; the logits agree."""
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=1)
    tokens = np.arange(1, 8)
    with ckir.compile(src, tmp_path / "plain", max_context=16, panels=False) as plain:
        want = plain.prefill(tokens)
        assert not plain.info["f32p_weights"]
    with ckir.compile(src, tmp_path / "packed", max_context=16) as packed:
        assert "layers.{i}.mlp.down" in packed.info["f32p_weights"]
        got = packed.prefill(tokens)
    assert "] f32p hf" in (tmp_path / "packed" / "layout.mlir").read_text()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
