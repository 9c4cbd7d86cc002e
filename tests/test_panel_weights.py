"""The panel weight dtypes on the Python side: packing, sizes, extents, options, builds.

f32p is fp32 and bf16p bf16 stored in the 32-row panels the GEMM kernels read
(docs/quantization.md).  f32p: element (n, k) of a [N, K] matrix at float
``((n // 32) * K + k) * 32 + n % 32``.  bf16p (K even): element (n, k) at uint16
``((n // 32) * (K // 2) + k // 2) * 64 + (n % 32) * 2 + k % 2``, its value bf16 (round
to nearest even).  The rows past N of the last panel are zero.  The kernels themselves:
tests/test_panel_kernels.py; whole models against transformers: below and
tests/test_weight_dtype_parity.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ckir import quant, vocab
from ckir.backend.weights import encode
from ckir.compiler import CompileOptions
from ckir.dialects import lowered as lw
from ckir.dialects.dims import product_factors
from ckir.errors import CkirError
from ckir.registry import extent_values, panel_extent_problem

PANEL_DTYPES = ["f32p", "bf16p"]
#: N around the panel (fewer rows than a panel, one short, exact, one over, ragged two)
ROWS = (1, 31, 32, 33, 65)
#: K per dtype: odd ones for f32p (any K), even ones for bf16p (pairs of k)
COLS = {"f32p": (1, 7, 576), "bf16p": (2, 8, 576)}
SHAPES = [(dt, n, k) for dt in PANEL_DTYPES for n in ROWS for k in COLS[dt]]
#: bytes per stored value, and values of one row per 32-bit slot (along k)
ELEM = {"f32p": 4, "bf16p": 2}
GROUP = {"f32p": 1, "bf16p": 2}
TILE = 32
FILECHECK_INPUTS = Path(__file__).parent / "filecheck" / "inputs"


def stored_values(w: np.ndarray, dtype: str) -> np.ndarray:
    """What each element is stored as: the fp32 value (f32p) or its bf16 bits (bf16p)."""
    return w.astype(np.float32) if dtype == "f32p" else quant.to_bf16(w)


def index_formula(dtype: str, n: int, k: int, N: int, K: int) -> int:
    """The stored-value index of element (n, k) of a [N, K] matrix (docs/quantization.md)."""
    if dtype == "f32p":
        return ((n // 32) * K + k) * 32 + n % 32
    return ((n // 32) * (K // 2) + k // 2) * 64 + (n % 32) * 2 + k % 2


def reference_pack(w: np.ndarray, dtype: str) -> np.ndarray:
    """The panels by the index formula, element by element (flat, padding zero)."""
    n, k = w.shape
    p = -(-n // TILE)
    values = stored_values(w, dtype)
    out = np.zeros(p * TILE * k, dtype=values.dtype)
    for i in range(n):
        for j in range(k):
            out[index_formula(dtype, i, j, n, k)] = values[i, j]
    return out


def numpy_recipe(w: np.ndarray, dtype: str) -> np.ndarray:
    """The reshape recipe of the docs (flat)."""
    n, k = w.shape
    p = -(-n // TILE)
    g = GROUP[dtype]
    values = stored_values(w, dtype)
    padded = np.zeros((p * TILE, k), dtype=values.dtype)
    padded[:n] = values
    return np.ascontiguousarray(padded.reshape(p, TILE, k // g, g).transpose(0, 2, 1, 3)).ravel()


@pytest.mark.parametrize(("dtype", "n", "k"), SHAPES, ids=lambda v: str(v))
def test_pack_unpack_round_trip(dtype: str, n: int, k: int) -> None:
    w = np.random.default_rng(n * 1000 + k).standard_normal((n, k)).astype(np.float32)
    packed = quant.quantize(w, dtype)
    assert packed.flags.c_contiguous
    if dtype == "f32p":
        assert packed.dtype == np.float32 and packed.shape == (-(-n // 32), k, 32)
    else:
        assert packed.dtype == np.uint16 and packed.shape == (-(-n // 32), k // 2, 32, 2)
    flat = packed.reshape(-1)
    ref = reference_pack(w, dtype)
    assert np.array_equal(flat, ref)  # every element where the formula says, padding zero
    assert np.array_equal(flat, numpy_recipe(w, dtype))
    # bytes: the same on every ISA, whole panels
    nbytes = -(-n // 32) * 32 * k * ELEM[dtype]
    assert packed.nbytes == nbytes == quant.panel_bytes(n, k, dtype)
    assert vocab.storage_bytes(dtype, (n, k)) == nbytes
    assert lw.BufferType.make([n, k], dtype).byte_size == nbytes
    assert lw.BufferType.make([n, k], dtype).stored_values == nbytes // ELEM[dtype]
    # unpacked exactly (bf16p: the bf16 values), from the panels or their bytes
    want = w if dtype == "f32p" else quant.bf16_round(w)
    got = quant.dequantize(packed, dtype, shape=(n, k))
    assert got.dtype == np.float32 and got.shape == (n, k)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    raw = encode(w, dtype, "w")
    assert raw.dtype == np.uint8 and raw.nbytes == nbytes
    assert np.array_equal(raw.view(flat.dtype), flat)
    assert np.array_equal(quant.unpack_panels(raw, (n, k), dtype), want)
    # a whole-panel slice of rows starts at value r0 * K, like a row-major matrix
    for r0 in range(0, n, 32):
        tail = quant.quantize(w[r0:], dtype).reshape(-1)
        assert np.array_equal(flat[r0 * k : r0 * k + tail.size], tail)


def test_f32p_default_keeps_the_old_calls() -> None:
    """pack_panels / unpack_panels / panel_bytes without a dtype are f32p's."""
    w = np.arange(33 * 3, dtype=np.float32).reshape(33, 3)
    assert np.array_equal(quant.pack_panels(w), quant.pack_panels(w, "f32p"))
    assert np.array_equal(quant.unpack_panels(quant.pack_panels(w), (33, 3)), w)
    assert quant.panel_bytes(33, 3) == 64 * 3 * 4


def test_bf16p_rounds_to_nearest_even() -> None:
    """bf16p values are bf16's: ties to even, as quant.to_bf16 (one ulp at 1 is 2^-7)."""
    w = np.array([[1 + 2**-8, 1 + 3 * 2**-8], [1 + 2**-8 + 2**-20, -(1 + 2**-9)]], np.float32)
    got = quant.dequantize(quant.pack_panels(w, "bf16p"), "bf16p", shape=(2, 2))
    assert got.tolist() == [[1.0, 1 + 2**-6], [1 + 2**-7, -1.0]]


def test_unpack_needs_the_shape_and_the_right_size() -> None:
    packed = quant.pack_panels(np.ones((33, 8), np.float32))
    with pytest.raises(ValueError, match=r"needs the logical shape"):
        quant.dequantize(packed, "f32p")
    with pytest.raises(ValueError, match=r"f32p \[65, 8\] is 768 values"):
        quant.unpack_panels(packed, (65, 8))
    with pytest.raises(ValueError, match=r"\[N, K\] matrices"):
        quant.pack_panels(np.ones((2, 3, 4), np.float32))
    bf = quant.pack_panels(np.ones((33, 8), np.float32), "bf16p")
    with pytest.raises(ValueError, match=r"needs the logical shape"):
        quant.dequantize(bf, "bf16p")
    with pytest.raises(ValueError, match=r"bf16p \[65, 8\] is 768 values"):
        quant.unpack_panels(bf, (65, 8), "bf16p")
    with pytest.raises(TypeError, match=r"bf16p panels hold uint16 values, got float32"):
        quant.unpack_panels(bf.astype(np.float32), (33, 8), "bf16p")
    with pytest.raises(ValueError, match=r"not a panel dtype"):
        quant.pack_panels(np.ones((2, 2), np.float32), "bf16")


def test_bf16p_refuses_an_odd_k() -> None:
    odd = np.ones((33, 7), np.float32)
    with pytest.raises(ValueError, match=r"bf16p needs K % 2 == 0"):
        quant.pack_panels(odd, "bf16p")
    with pytest.raises(ValueError, match=r"bf16p needs K % 2 == 0"):
        quant.unpack_panels(np.zeros(64 * 7, np.uint16), (33, 7), "bf16p")
    with pytest.raises(ValueError, match=r"bf16p needs K % 2 == 0"):
        vocab.storage_bytes("bf16p", (33, 7))
    with pytest.raises(CkirError, match=r"tensor.w has shape \[33, 7\]; bf16p stores .* K % 2"):
        encode(odd, "bf16p", "tensor.w")
    assert lw.BufferType.make([33, 7], "f32p").byte_size == 64 * 7 * 4  # f32p: any K


def test_dtype_table_entries() -> None:
    assert vocab.storage_bytes("q8_0", 64) == 68
    assert vocab.storage_bytes("q8_0", (3, 64)) == 3 * 68
    assert vocab.storage_bytes("bf16", (5, 3)) == 30
    assert vocab.storage_bytes("f32", 7) == 28
    assert vocab.PANEL_DTYPES == {"f32p": 32, "bf16p": 32}
    assert vocab.PANEL_VALUES == {"f32p": "f32", "bf16p": "bf16"}
    assert vocab.PANEL_OF == {"f32": "f32p", "bf16": "bf16p"}
    for dtype in PANEL_DTYPES:
        with pytest.raises(ValueError, match=rf"{dtype} buffers are \[N, K\] matrices"):
            vocab.storage_bytes(dtype, 64)
        with pytest.raises(ValueError, match=r"stored in panels"):
            quant.block_bytes(dtype)
        assert dtype in vocab.WEIGHT_DTYPES and dtype not in vocab.VALUE_DTYPES
        assert vocab.dtype_info(dtype).k_group == GROUP[dtype]
    assert vocab.dtype_info("f32p").c_type == "float"
    assert vocab.dtype_info("bf16p").c_type == "uint16_t"
    assert vocab.dtype_info("bf16").k_group == 1  # not a panel dtype


@pytest.mark.parametrize("dtype", PANEL_DTYPES)
def test_non_finite_values_are_found_in_panels(dtype: str) -> None:
    w = np.ones((33, 8), np.float32)
    w[32, 6] = np.nan
    w[0, 0] = np.inf
    packed = quant.pack_panels(w, dtype)
    assert quant.count_non_finite(packed, dtype) == 2
    assert quant.count_non_finite(packed.view(np.uint8), dtype) == 2
    with pytest.raises(CkirError, match=r"tensor 'model.w' has 2 non-finite values"):
        encode(w, dtype, "model.w")
    with pytest.raises(CkirError, match=rf"{dtype} stores \[N, K\] matrices"):
        encode(np.ones(8, np.float32), dtype, "model.b")


def test_panel_extents_count_whole_panels() -> None:
    assert product_factors("N*K") == ("N", "K")
    assert product_factors("(A+B)*C*D") == ("(A+B)", "C*D")
    assert product_factors("N+K") is None and product_factors("N") is None
    assert product_factors("N/2*K") is None
    for dtype in PANEL_DTYPES:
        assert panel_extent_problem(dtype, "N*K") is None
        assert "rows*cols" in (panel_extent_problem(dtype, "N+K") or "")
    assert panel_extent_problem("f32", "N+K") is None  # only panel dtypes care
    env = {"N": 33, "K": 10, "Nq": 64}
    for dtype in PANEL_DTYPES:  # values (not bytes) of whole panels
        assert extent_values(dtype, "N*K", env) == 64 * 10
        assert extent_values(dtype, "Nq*K", env) == 64 * 10
    assert extent_values("f32", "N*K", env) == 33 * 10
    assert extent_values("bf16", "N*K", env) == 33 * 10
    assert extent_values("q8_0", "N*K", env) == 33 * 10


def test_training_builds_refuse_panels() -> None:
    for modes in [("backward",), ("prefill", "decode", "backward")]:
        for dtype in PANEL_DTYPES:
            with pytest.raises(CkirError, match=rf"^--dtype {dtype}: training .* needs f32"):
                CompileOptions(modes=modes, dtype=dtype)
        with pytest.raises(CkirError, match=r"^panels: training .* \(f32p, bf16p\)"):
            CompileOptions(modes=modes, panels=True)
        # the default (None) is off for training builds
        assert not CompileOptions(modes=modes).uses_panels
    with pytest.raises(CkirError, match=r"^--dtype bf16: training"):
        CompileOptions(modes=("backward",), dtype="bf16")
    with pytest.raises(TypeError, match=r"panels must be a bool or None"):
        CompileOptions(panels="yes")  # type: ignore[arg-type]


def test_panels_switch() -> None:
    from ckir import compiler

    # inference builds store f32 matrices as f32p and bf16 ones as bf16p unless told not to
    assert compiler.PANELS_DEFAULT is True
    for dtype in (None, "f32", "bf16"):
        assert CompileOptions(dtype=dtype).uses_panels, dtype
        assert CompileOptions(dtype=dtype, panels=True).uses_panels, dtype
        assert not CompileOptions(dtype=dtype, panels=False).uses_panels, dtype
    # no f32 / bf16 matrices to pack: block formats; an explicit panel dtype is all there is
    for dtype in ("q8_0", "q4_0", "q4_1", "f32p", "bf16p"):
        assert not CompileOptions(dtype=dtype, panels=True).uses_panels, dtype


def _declared(module) -> dict[str, str]:
    from ckir.dialects import graph as g

    model = next(op for op in module.ops if isinstance(op, g.ModelOp))
    return {name: d.dtype_name for name, d in model.weights().items()}


def _tiny_llama(tmp_path: Path, edits: dict[str, str]):
    """tests/filecheck/inputs/tiny_llama.mlir with text edits, parsed."""
    from ckir.cost import load_module

    text = (FILECHECK_INPUTS / "tiny_llama.mlir").read_text()
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "graph.mlir"
    path.write_text(text)
    return load_module(path)


ODD_I = {
    "I = 172": "I = 171",  # down_proj [E, I]: K odd
    '@"layers.{i}.attn.wo" : [E, H*D] f32': '@"layers.{i}.attn.wo" : [E, H*D] bf16',
}
DOWN_F32 = '@"layers.{i}.mlp.down" : [E, I] f32'
DOWN_BF16 = '@"layers.{i}.mlp.down" : [E, I] bf16'


def test_convert_weights_bf16p_leaves_an_odd_k(tmp_path: Path) -> None:
    """--convert-weights{dtype=bf16p} packs f32 and bf16 matrices whose K is even; the
    others keep their dtype (f32 down_proj here; bf16 below)."""
    from xdsl.context import Context

    from ckir.passes.convert_weights import ConvertWeightsPass

    module = _tiny_llama(tmp_path, ODD_I)
    ConvertWeightsPass(dtype="bf16p").apply(Context(), module)
    got = _declared(module)
    assert got["layers.{i}.attn.wo"] == "bf16p"  # was bf16
    assert got["layers.{i}.attn.wq"] == got["embed"] == got["lm_head"] == "bf16p"  # were f32
    assert got["layers.{i}.mlp.gate"] == got["layers.{i}.mlp.up"] == "bf16p"  # K = E = 64
    assert got["layers.{i}.mlp.down"] == "f32"  # K = I = 171
    assert got["final_norm"] == got["layers.{i}.attn_norm"] == "f32"
    module = _tiny_llama(tmp_path, {**ODD_I, DOWN_F32: DOWN_BF16})
    ConvertWeightsPass(dtype="bf16p").apply(Context(), module)
    got = _declared(module)
    assert got["layers.{i}.mlp.down"] == "bf16"  # K = 171: stays bf16 (row-major kernels)
    assert got["layers.{i}.mlp.up"] == "bf16p"
    ConvertWeightsPass(dtype="f32p").apply(Context(), module)  # f32p converts f32 only
    assert _declared(module)["layers.{i}.mlp.down"] == "bf16"


def test_panels_pack_each_matrix_in_its_values_dtype(tmp_path: Path) -> None:
    """compiler.pack_panels (CompileOptions.panels): f32 -> f32p whatever K, bf16 -> bf16p
    where K is even; never f32 -> bf16p (that would round)."""
    from ckir.compiler import pack_panels

    edits = {
        **ODD_I,
        DOWN_F32: DOWN_BF16,
        '@"layers.{i}.mlp.up" : [I, E] f32': '@"layers.{i}.mlp.up" : [I, E] bf16',
    }
    module = _tiny_llama(tmp_path, edits)
    pack_panels(module)
    got = _declared(module)
    assert got["layers.{i}.attn.wq"] == got["layers.{i}.mlp.gate"] == "f32p"
    assert got["layers.{i}.attn.wo"] == got["layers.{i}.mlp.up"] == "bf16p"
    assert got["layers.{i}.mlp.down"] == "bf16"  # K = 171
    assert got["final_norm"] == "f32"
    module = _tiny_llama(tmp_path, ODD_I)  # down_proj f32 with K = 171: f32p takes any K
    pack_panels(module)
    assert _declared(module)["layers.{i}.mlp.down"] == "f32p"


# ----------------------------------------------------------------- whole builds (C kernels)


def _hf_logits(src: Path, tokens: np.ndarray, rounded: bool) -> np.ndarray:
    """transformers' fp32 logits, with every linear / embedding matrix bf16-rounded when
    ``rounded`` (what a bf16 build stores)."""
    import torch
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():  # Linear, Embedding, GPT-2's Conv1D
            if rounded and _is_matrix(name, param):
                param.copy_(torch.from_numpy(quant.bf16_round(param.detach().numpy())))
        return hf(torch.tensor(tokens[None, :])).logits[0].numpy()


def _checkpoint(src: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    out: dict[str, np.ndarray] = {}
    for f in sorted(src.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def _is_matrix(name: str, values: Any) -> bool:
    """An HF tensor that a bf16 build stores as bf16 (2-D; not GPT-2's positions)."""
    return values.ndim == 2 and "wpe" not in name


@pytest.mark.parametrize("dtype", PANEL_DTYPES)
@pytest.mark.parametrize(("arch", "tied"), [("gpt2", None), ("qwen2", True), ("llama", False)])
def test_panel_build_matches_hf_and_saves_exactly(
    dtype: str, arch: str, tied: bool | None, tmp_path: Path
) -> None:
    """A whole f32p / bf16p build (ragged V = 250 and I = 172: padded panels; tied head;
    biases; fused qkv / gate_up) gives HF's logits (bf16p: on the bf16-rounded weights)
    at the tolerance of its values' dtype, and save_pretrained unpacks the panels back
    to the checkpoint's exact values (bf16p: their bf16 values)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model(arch, tmp_path / "hf", seed=5, tied=tied, vocab_size=250)
    tokens = np.random.default_rng(2).integers(0, 250, size=9)
    ref = _hf_logits(src, tokens, rounded=dtype == "bf16p")
    scale = float(np.abs(ref).max())
    # f32p explicitly; bf16p as what a bf16 build stores by default (panels on)
    build_dtype = "f32p" if dtype == "f32p" else "bf16"
    with ckir.compile(src, tmp_path / "b", dtype=build_dtype, max_context=32) as model:
        layout = (tmp_path / "b" / "layout.mlir").read_text()
        for kernel in (f"embed_{dtype}", f"gemm_{dtype}", f"gemv_{dtype}"):
            assert f"lowered.kernel @{kernel} " in layout, kernel
        assert f"] {dtype} hf" in layout
        assert "] bf16 hf" not in layout  # every K is even: no matrix left row-major
        packed = model.info["panel_weights"]
        assert packed and set(packed.values()) == {dtype}, packed
        assert model.panel_weights() == packed
        err = float(np.abs(model.prefill(tokens) - ref).max()) / scale
        assert err <= 1e-4, f"prefill {dtype}: relative error {err:.3g}"
        model.reset()
        steps = np.stack([model.decode(int(t)) for t in tokens])
        err = float(np.abs(steps - ref).max()) / scale
        assert err <= 1e-4, f"decode {dtype}: relative error {err:.3g}"
        arrays = model.weight_arrays()
        saved = model.save_pretrained(tmp_path / "saved")
    assert all(a.dtype == np.float32 for a in arrays.values())
    ours, theirs = _checkpoint(saved), _checkpoint(src)
    assert ours.keys() <= theirs.keys() and ours
    for name, values in ours.items():
        want = theirs[name]
        if dtype == "bf16p" and _is_matrix(name, want):
            want = quant.bf16_round(want)
            assert not np.array_equal(values, theirs[name]), f"{name} was not rounded"
        assert np.array_equal(values, want), name


def test_panels_switch_packs_a_bf16_build(tmp_path: Path) -> None:
    """A bf16 inference build stores its matrices as bf16p (the default, or
    ``panels=True``) but the odd-K one (I = 171: down_proj), which stays bf16;
    ``panels=False`` keeps them all row-major.  Both builds hold the same bf16 values
    (weight_arrays equal, bit for bit) and their logits agree."""
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=1, intermediate_size=171)
    tokens = np.arange(1, 8)
    with ckir.compile(src, tmp_path / "plain", dtype="bf16", max_context=16, panels=False) as a:
        want = a.prefill(tokens)
        assert a.info["panel_weights"] == {}
        plain = a.weight_arrays()
    with ckir.compile(src, tmp_path / "packed", dtype="bf16", max_context=16) as b:
        packed_names = b.info["panel_weights"]
        got = b.prefill(tokens)
        packed = b.weight_arrays()
    layout = (tmp_path / "packed" / "layout.mlir").read_text()
    assert packed_names["layers.{i}.mlp.up"] == "bf16p"
    assert "layers.{i}.mlp.down" not in packed_names
    assert "!lowered.buf<[64, 171], bf16>" in layout  # down_proj, row-major
    assert "lowered.kernel @gemv_bf16 " in layout and "lowered.kernel @gemv_bf16p " in layout
    assert plain.keys() == packed.keys()
    for name, values in plain.items():
        assert np.array_equal(values, packed[name]), name
    ref = _checkpoint(src)["model.layers.1.mlp.down_proj.weight"]
    assert np.array_equal(packed["layers.1.mlp.down"], quant.bf16_round(ref))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_panels_switch_packs_an_f32_build(tmp_path: Path) -> None:
    """An f32 inference build stores its matrices as f32p (the default, or ``panels=True``);
    ``panels=False`` keeps them row-major; the logits agree."""
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=1)
    tokens = np.arange(1, 8)
    with ckir.compile(src, tmp_path / "plain", max_context=16, panels=False) as plain:
        want = plain.prefill(tokens)
        assert not plain.info["panel_weights"]
    with ckir.compile(src, tmp_path / "packed", max_context=16) as packed:
        assert packed.info["panel_weights"]["layers.{i}.mlp.down"] == "f32p"
        got = packed.prefill(tokens)
    assert "] f32p hf" in (tmp_path / "packed" / "layout.mlir").read_text()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_builds_before_bf16p_list_their_f32p_weights(tmp_path: Path) -> None:
    """A build.json written before bf16p has ``f32p_weights`` (a list): still read; a
    malformed ``panel_weights`` is a CkirError naming the file."""
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=4)
    with ckir.compile(src, tmp_path / "b", max_context=16) as model:
        want = model.weight_arrays()
        names = sorted(model.info["panel_weights"])
        old = {k: v for k, v in model.info.items() if k != "panel_weights"}
        model.info = {**old, "f32p_weights": names}
        assert model.panel_weights() == dict.fromkeys(names, "f32p")
        got = model.weight_arrays()
        model.info = {**old, "panel_weights": {names[0]: "bf17p"}}
        with pytest.raises(CkirError, match=r"build.json: panel_weights must map"):
            model.weight_arrays()
    assert want.keys() == got.keys()
    for name, values in want.items():
        assert np.array_equal(values, got[name]), name
