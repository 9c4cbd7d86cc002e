"""The panel weight dtypes on the Python side: packing, sizes, extents, options, builds.

f32p is fp32, bf16p bf16, q8_0p Q8_0 blocks, q4_1p Q4_1 and q4_0p Q4_0 blocks stored in the
32-row panels the kernels read (docs/quantization.md).  f32p: element (n, k) of a
[N, K] matrix at float ``((n // 32) * K + k) * 32 + n % 32``.  bf16p (K even):
element (n, k) at uint16 ``((n // 32) * (K // 2) + k // 2) * 64 + (n % 32) * 2 + k %
2``, its value bf16 (round to nearest even).  q8_0p (K % 32 == 0): panel block (p, b)
of 1088 bytes at byte ``(p * K/32 + b) * 1088`` holds the f16 scales d[32p + r, b] at
bytes ``2r, 2r + 1`` and the int8 q[32p + r, b, 4i + j] at byte ``64 + 128 i + 4 r +
j``.  q4_1p (K % 32 == 0): panel block (p, b) of 640 bytes at byte ``(p * K/32 + b) *
640`` holds the f16 d[32p + r, b] at bytes ``2r, 2r + 1``, the f16 m[32p + r, b] at
``64 + 2r, 65 + 2r`` and the nibble byte qs[32p + r, b, 4g + j] (q[4g + j] low, q[16 +
4g + j] high) at byte ``128 + 128 g + 4 r + j``.  q4_0p: q4_1p without the m (576
bytes a panel block, the nibble groups from byte 64).  The rows past N of the last panel
are zero.  The kernels themselves: tests/test_panel_kernels.py; whole models against
transformers: below and tests/test_weight_dtype_parity.py.
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

PANEL_DTYPES = ["f32p", "bf16p", "q8_0p", "q4_1p", "q4_0p"]
#: the panel dtypes of plain values (one value per element; q8_0p and q4_1p hold blocks)
VALUE_PANELS = ["f32p", "bf16p"]
#: the block panel dtypes and the block format whose blocks they hold
BLOCK_PANELS = {"q8_0p": "q8_0", "q4_1p": "q4_1", "q4_0p": "q4_0"}
#: N around the panel (fewer rows than a panel, one short, exact, one over, ragged two)
ROWS = (1, 31, 32, 33, 65)
#: K per dtype: odd ones for f32p (any K), even ones for bf16p (pairs of k), whole
#: blocks for q8_0p and q4_1p (one, two, three blocks)
COLS = {
    "f32p": (1, 7, 576),
    "bf16p": (2, 8, 576),
    "q8_0p": (32, 64, 96),
    "q4_1p": (32, 64, 96),
    "q4_0p": (32, 64, 96),
}
SHAPES = [(dt, n, k) for dt in VALUE_PANELS for n in ROWS for k in COLS[dt]]
#: bytes per stored value, and values of one row kept together along k
ELEM = {"f32p": 4, "bf16p": 2}
GROUP = {"f32p": 1, "bf16p": 2, "q8_0p": 32, "q4_1p": 32, "q4_0p": 32}
TILE = 32
#: q8_0p: bytes of a Q8_0 block, of a panel block (32 rows x one block)
Q8_BLOCK, Q8_PANEL_BLOCK = 34, 32 * 34
#: q4_1p: bytes of a Q4_1 block, of a panel block (32 rows x one block)
Q41_BLOCK, Q41_PANEL_BLOCK = 20, 32 * 20
#: q4_0p: bytes of a Q4_0 block, of a panel block (32 rows x one block)
Q40_BLOCK, Q40_PANEL_BLOCK = 18, 32 * 18
#: block panel dtype -> (block bytes, panel block bytes)
BLOCK_SIZES = {
    "q8_0p": (Q8_BLOCK, Q8_PANEL_BLOCK),
    "q4_1p": (Q41_BLOCK, Q41_PANEL_BLOCK),
    "q4_0p": (Q40_BLOCK, Q40_PANEL_BLOCK),
}
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


def reference_q8_0p(blocks: np.ndarray, n: int, k: int) -> np.ndarray:
    """q8_0p bytes of the Q8_0 rows ``blocks`` ([N, K/32 * 34]) by the layout formula,
    byte by byte (flat uint8, padding rows zero)."""
    nb, p = k // 32, -(-n // TILE)
    rows = blocks.reshape(n, nb, Q8_BLOCK)
    out = np.zeros(p * nb * Q8_PANEL_BLOCK, dtype=np.uint8)
    for row in range(n):
        panel, r = divmod(row, TILE)
        for b in range(nb):
            base = (panel * nb + b) * Q8_PANEL_BLOCK
            out[base + 2 * r : base + 2 * r + 2] = rows[row, b, :2]  # f16 d, little-endian
            for kk in range(32):
                i, j = divmod(kk, 4)
                out[base + 64 + i * 128 + r * 4 + j] = rows[row, b, 2 + kk]
    return out


def reference_q4p(blocks: np.ndarray, n: int, k: int, has_m: bool) -> np.ndarray:
    """q4_1p (has_m) / q4_0p bytes of the Q4_1 / Q4_0 rows ``blocks`` ([N, K/32 * 20]:
    d, m, qs[16] / [N, K/32 * 18]: d, qs[16]) by the layout formula, byte by byte (flat
    uint8, padding rows zero)."""
    block, pblock = (Q41_BLOCK, Q41_PANEL_BLOCK) if has_m else (Q40_BLOCK, Q40_PANEL_BLOCK)
    qs = 128 if has_m else 64  # the nibble groups' first byte
    nb, p = k // 32, -(-n // TILE)
    rows = blocks.reshape(n, nb, block)
    out = np.zeros(p * nb * pblock, dtype=np.uint8)
    for row in range(n):
        panel, r = divmod(row, TILE)
        for b in range(nb):
            base = (panel * nb + b) * pblock
            out[base + 2 * r : base + 2 * r + 2] = rows[row, b, 0:2]  # f16 d
            if has_m:
                out[base + 64 + 2 * r : base + 64 + 2 * r + 2] = rows[row, b, 2:4]  # f16 m
            for g in range(4):
                for j in range(4):
                    out[base + qs + g * 128 + r * 4 + j] = rows[row, b, block - 16 + 4 * g + j]
    return out


REFERENCE = {
    "q8_0p": reference_q8_0p,
    "q4_1p": lambda blocks, n, k: reference_q4p(blocks, n, k, True),
    "q4_0p": lambda blocks, n, k: reference_q4p(blocks, n, k, False),
}
#: the panel-block byte ranges of the f16 fields (q8_0p: d; q4_1p: d, m; q4_0p: d), per row r
SCALE_BYTES = {"q8_0p": 64, "q4_1p": 128, "q4_0p": 64}


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("k", COLS["q8_0p"])
@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_block_panel_layout(dtype: str, n: int, k: int) -> None:
    """q8_0p / q4_1p is the Q8_0 / Q4_1 blocks of the matrix permuted into panel blocks
    exactly as the layout formula says (the f16 fields, then the quant groups; padding
    rows zero); sizes are whole panels; it unpacks to the same blocks and values bit
    for bit."""
    values = BLOCK_PANELS[dtype]
    block, pblock = BLOCK_SIZES[dtype]
    w = np.random.default_rng(n * 1000 + k).standard_normal((n, k)).astype(np.float32)
    w[0, :3] = [0.0, -3.5, 2**-20]  # a zero, a large and a tiny value in one block
    blocks = quant.quantize(w, values)
    packed = quant.quantize(w, dtype)
    p, nb = -(-n // 32), k // 32
    assert packed.dtype == np.uint8 and packed.flags.c_contiguous
    assert packed.shape == (p, nb, pblock)
    flat = packed.reshape(-1)
    assert np.array_equal(flat, REFERENCE[dtype](blocks, n, k))
    assert np.array_equal(quant.pack_block_panels(blocks, dtype), packed)
    assert np.array_equal(quant.pack_panels(w, dtype), packed)
    # bytes: whole panels, the same on every ISA; values counted with the padding rows
    nbytes = p * 32 * nb * block
    assert packed.nbytes == nbytes == quant.panel_bytes(n, k, dtype)
    assert vocab.storage_bytes(dtype, (n, k)) == nbytes
    assert lw.BufferType.make([n, k], dtype).byte_size == nbytes
    assert lw.BufferType.make([n, k], dtype).stored_values == p * 32 * k
    # back to the blocks and values, bit for bit, from the panels or flat bytes
    assert np.array_equal(quant.unpack_block_panels(packed, (n, k), dtype), blocks)
    assert np.array_equal(quant.unpack_block_panels(flat, (n, k), dtype), blocks)
    want = quant.dequantize(blocks, values)
    for got in (
        quant.dequantize(packed, dtype, shape=(n, k)),
        quant.unpack_panels(flat, (n, k), dtype),
    ):
        assert got.dtype == np.float32 and got.shape == (n, k)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    raw = encode(w, dtype, "w")
    assert raw.dtype == np.uint8 and np.array_equal(raw, flat)
    # the padding rows of the last panel: zero fields and zero quants
    pad = packed[-1].reshape(nb, pblock)
    last = n - (p - 1) * 32
    fields = pad[:, : SCALE_BYTES[dtype]].reshape(nb, -1, 32, 2)
    assert not fields[:, :, last:, :].any()
    quads = pad[:, SCALE_BYTES[dtype] :].reshape(nb, -1, 32, 4)
    assert not quads[:, :, last:, :].any()
    # a whole-panel slice of rows starts at byte r0 * K/32 * block, like row-major blocks
    for r0 in range(0, n, 32):
        assert r0 * nb * block == np.asarray(blocks[:r0]).nbytes
        tail = quant.quantize(w[r0:], dtype).reshape(-1)
        start = r0 * nb * block
        assert np.array_equal(flat[start : start + tail.size], tail)


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("dtype", ["q4_1p", "q4_0p"])
def test_q4_panel_nibbles_are_the_values(dtype: str, n: int) -> None:
    """In q4_1p panel block (p, b), row r's value at k = 4g + j is d * (low nibble of
    byte 128 + 128 g + 4 r + j) + m and at k = 16 + 4g + j d * (its high nibble) + m,
    d and m the f16 at bytes 2r and 64 + 2r; in q4_0p m = -8 d and the nibbles start
    at byte 64: the values the kernels compute."""
    k = 64
    w = np.random.default_rng(n).standard_normal((n, k)).astype(np.float32)
    packed = quant.quantize(w, dtype)
    values = BLOCK_PANELS[dtype]
    want = quant.dequantize(quant.quantize(w, values), values)
    qs = SCALE_BYTES[dtype]
    got = np.zeros((n, k), np.float32)
    for row in range(n):
        p, r = divmod(row, 32)
        for b in range(k // 32):
            blk = packed[p, b]
            d = blk[2 * r : 2 * r + 2].view(np.float16).astype(np.float32)[0]
            if dtype == "q4_1p":
                m = blk[64 + 2 * r : 66 + 2 * r].view(np.float16).astype(np.float32)[0]
            else:
                m = np.float32(-8.0) * d
            for g in range(4):
                for j in range(4):
                    byte = int(blk[qs + 128 * g + 4 * r + j])
                    got[row, 32 * b + 4 * g + j] = d * np.float32(byte & 0xF) + m
                    got[row, 32 * b + 16 + 4 * g + j] = d * np.float32(byte >> 4) + m
    assert np.array_equal(got, want)


@pytest.mark.parametrize(("n", "k"), [(1, 32), (33, 64), (65, 96), (64, 128)])
@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_block_panels_repack_any_block_bytes_exactly(dtype: str, n: int, k: int) -> None:
    """Packing Q8_0 / Q4_1 block bytes is a pure permutation: any bytes (a GGUF file's,
    q = -128, NaN or subnormal scales included) come back bit for bit."""
    block = BLOCK_SIZES[dtype][0]
    rng = np.random.default_rng(n + k)
    blocks = rng.integers(0, 256, size=(n, k // 32 * block), dtype=np.uint8)
    packed = quant.pack_block_panels(blocks, dtype)
    assert np.array_equal(quant.unpack_block_panels(packed, (n, k), dtype), blocks)
    assert np.array_equal(packed.reshape(-1), REFERENCE[dtype](blocks, n, k))
    # every input byte lands once; the others are padding (zero)
    assert np.count_nonzero(packed) == np.count_nonzero(blocks)
    assert np.array_equal(np.sort(packed.reshape(-1))[-blocks.size :], np.sort(blocks.reshape(-1)))
    named = {"q8_0p": (quant.pack_q8_0p, quant.unpack_q8_0p)}
    named["q4_1p"] = (quant.pack_q4_1p, quant.unpack_q4_1p)
    named["q4_0p"] = (quant.pack_q4_0p, quant.unpack_q4_0p)
    pack, unpack = named[dtype]
    assert np.array_equal(pack(blocks), packed)
    assert np.array_equal(unpack(packed, (n, k)), blocks)


@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_block_panels_refuse_k_not_a_multiple_of_32(dtype: str) -> None:
    block, pblock = BLOCK_SIZES[dtype]
    fmt = BLOCK_PANELS[dtype].upper()
    bad = np.ones((33, 48), np.float32)
    need = rf"{dtype} needs K % 32 == 0"
    with pytest.raises(ValueError, match=need):
        quant.pack_panels(bad, dtype)
    with pytest.raises(ValueError, match=need):
        quant.unpack_panels(np.zeros(2 * pblock, np.uint8), (33, 48), dtype)
    with pytest.raises(ValueError, match=need):
        quant.unpack_block_panels(np.zeros(2 * pblock, np.uint8), (33, 48), dtype)
    with pytest.raises(ValueError, match=need):
        vocab.storage_bytes(dtype, (33, 48))
    with pytest.raises(
        CkirError, match=rf"tensor.w has shape \[33, 48\]; {dtype} stores .* K % 32"
    ):
        encode(bad, dtype, "tensor.w")
    with pytest.raises(ValueError, match=rf"{dtype} packs {fmt.lower()} rows"):
        quant.pack_block_panels(np.zeros((2, block + 1), np.uint8), dtype)
    with pytest.raises(ValueError, match=rf"{dtype} packs {fmt.lower()} rows"):
        quant.pack_block_panels(np.zeros((2, block), np.int8), dtype)
    size = 3 * 2 * pblock
    with pytest.raises(ValueError, match=rf"{dtype} \[65, 64\] is {size} bytes"):
        quant.unpack_block_panels(np.zeros(2 * 2 * pblock, np.uint8), (65, 64), dtype)
    with pytest.raises(TypeError, match=rf"{dtype} panels are uint8 bytes"):
        quant.unpack_block_panels(np.zeros(2 * pblock, np.int8), (33, 32), dtype)
    with pytest.raises(ValueError, match=r"'f32p' is not a block panel dtype"):
        quant.pack_block_panels(np.zeros((2, block), np.uint8), "f32p")
    from xdsl.utils.exceptions import VerifyException

    with pytest.raises(VerifyException, match=rf"{dtype} rows must be a multiple of 32"):
        lw.BufferType.make([33, 48], dtype).verify()


@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_block_panels_encode_blocks(dtype: str) -> None:
    """weights.bin from a file's Q8_0 / Q4_1 rows (the GGUF path): the block format
    keeps them, its panel dtype permutes them; another target is a CkirError naming
    the tensor."""
    from ckir.backend.weights import encode_blocks

    values = BLOCK_PANELS[dtype]
    w = np.random.default_rng(7).standard_normal((40, 64)).astype(np.float32)
    rows = quant.quantize(w, values)
    assert np.array_equal(encode_blocks(rows, values, "t"), rows.reshape(-1))
    assert np.array_equal(encode_blocks(rows, dtype, "t"), encode(w, dtype, "t"))
    with pytest.raises(CkirError, match=r"weights.bin: m.gguf: tensor 'x': no block repacking"):
        encode_blocks(rows, "f32p", "m.gguf: tensor 'x'")
    with pytest.raises(CkirError, match=rf"weights.bin: t: {dtype} packs {values} rows"):
        encode_blocks(rows[:, :30], dtype, "t")


def test_dtype_table_entries() -> None:
    assert vocab.storage_bytes("q8_0", 64) == 68
    assert vocab.storage_bytes("q8_0", (3, 64)) == 3 * 68
    assert vocab.storage_bytes("bf16", (5, 3)) == 30
    assert vocab.storage_bytes("f32", 7) == 28
    assert vocab.PANEL_DTYPES == {
        "f32p": 32,
        "bf16p": 32,
        "q8_0p": 32,
        "q4_1p": 32,
        "q4_0p": 32,
        "q4_kp": 32,
        "q6_kp": 32,
        "q5_kp": 32,
        "q5_0p": 32,
        "q5_1p": 32,
    }
    assert vocab.PANEL_VALUES == {
        "f32p": "f32",
        "bf16p": "bf16",
        "q8_0p": "q8_0",
        "q4_1p": "q4_1",
        "q4_0p": "q4_0",
        "q4_kp": "q4_k",
        "q6_kp": "q6_k",
        "q5_kp": "q5_k",
        "q5_0p": "q5_0",
        "q5_1p": "q5_1",
    }
    assert vocab.PANEL_OF == {
        "f32": "f32p",
        "bf16": "bf16p",
        "q8_0": "q8_0p",
        "q4_1": "q4_1p",
        "q4_0": "q4_0p",
        "q4_k": "q4_kp",
        "q6_k": "q6_kp",
        "q5_k": "q5_kp",
        "q5_0": "q5_0p",
        "q5_1": "q5_1p",
    }
    assert vocab.BLOCK_DTYPES["q8_0p"] == vocab.BLOCK_DTYPES["q8_0"] == (34, 32)
    assert vocab.BLOCK_DTYPES["q4_1p"] == vocab.BLOCK_DTYPES["q4_1"] == (20, 32)
    assert vocab.storage_bytes("q8_0p", (33, 64)) == 64 * 2 * 34
    assert vocab.storage_bytes("q4_1p", (33, 64)) == 64 * 2 * 20
    assert vocab.storage_bytes("q4_1p", (65, 96)) == 96 * 3 * 20
    assert vocab.BLOCK_DTYPES["q4_0p"] == vocab.BLOCK_DTYPES["q4_0"] == (18, 32)
    assert vocab.storage_bytes("q4_0p", (33, 64)) == 64 * 2 * 18
    assert quant.Q8_0P_PANEL_BLOCK == 1088 and quant.Q4_1P_PANEL_BLOCK == 640
    assert quant.Q4_0P_PANEL_BLOCK == 576
    assert vocab.BLOCK_DTYPES["q4_kp"] == vocab.BLOCK_DTYPES["q4_k"] == (144, 256)
    assert vocab.BLOCK_DTYPES["q6_kp"] == vocab.BLOCK_DTYPES["q6_k"] == (210, 256)
    assert vocab.storage_bytes("q4_kp", (33, 512)) == 64 * 2 * 144
    assert vocab.storage_bytes("q6_kp", (1, 256)) == 32 * 210
    assert quant.panel_block_bytes("q4_kp") == 4608 and quant.panel_block_bytes("q6_kp") == 6720
    assert quant.panel_block_bytes("q5_kp") == 5632
    assert vocab.BLOCK_DTYPES["q5_0p"] == vocab.BLOCK_DTYPES["q5_0"] == (22, 32)
    assert vocab.BLOCK_DTYPES["q5_1p"] == vocab.BLOCK_DTYPES["q5_1"] == (24, 32)
    assert vocab.storage_bytes("q5_0p", (33, 64)) == 64 * 2 * 22
    assert quant.panel_block_bytes("q5_0p") == 704 and quant.panel_block_bytes("q5_1p") == 768
    for dtype in PANEL_DTYPES:
        with pytest.raises(ValueError, match=rf"{dtype} buffers are \[N, K\] matrices"):
            vocab.storage_bytes(dtype, 64)
        with pytest.raises(ValueError, match=r"stored in panels"):
            quant.block_bytes(dtype)
        assert dtype in vocab.WEIGHT_DTYPES and dtype not in vocab.VALUE_DTYPES
        assert vocab.dtype_info(dtype).k_group == GROUP[dtype]
    assert vocab.dtype_info("f32p").c_type == "float"
    assert vocab.dtype_info("bf16p").c_type == "uint16_t"
    assert vocab.dtype_info("q8_0p").c_type == "uint8_t"
    assert vocab.dtype_info("q4_1p").c_type == "uint8_t"
    assert vocab.dtype_info("bf16").k_group == 1  # not a panel dtype


@pytest.mark.parametrize("dtype", PANEL_DTYPES)
def test_non_finite_values_are_found_in_panels(dtype: str) -> None:
    """NaN / Inf values (f32p, bf16p) or scales (q8_0p: d, q4_1p: d and m, of the
    blocks holding one)."""
    w = np.ones((33, 64), np.float32)
    w[32, 6] = np.nan
    w[0, 40] = np.inf
    with np.errstate(invalid="ignore"):
        packed = quant.pack_panels(w, dtype)
    # q4_1p: the NaN block has d and m = min NaN, the +Inf one d = Inf (its m is 1)
    bad = 3 if dtype == "q4_1p" else 2
    assert quant.count_non_finite(packed, dtype) == bad
    assert quant.count_non_finite(packed.view(np.uint8), dtype) == bad
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
        listed = r"\(f32p, bf16p, q8_0p, q4_0p, q4_1p, q4_kp, q5_kp, q6_kp, q5_0p, q5_1p\)"
        with pytest.raises(CkirError, match=rf"^panels: training .* {listed}"):
            CompileOptions(modes=modes, panels=True)
        # the default (None) is off for training builds
        assert not CompileOptions(modes=modes).uses_panels
    with pytest.raises(CkirError, match=r"^--dtype bf16: training"):
        CompileOptions(modes=("backward",), dtype="bf16")
    with pytest.raises(TypeError, match=r"panels must be a bool or None"):
        CompileOptions(panels="yes")  # type: ignore[arg-type]


def test_panels_switch() -> None:
    from ckir import compiler

    # inference builds store f32 matrices as f32p, bf16 ones as bf16p, q8_0 ones as
    # q8_0p, q4_1 ones as q4_1p and q4_0 ones as q4_0p unless told not to
    assert compiler.PANELS_DEFAULT is True
    for dtype in (None, "f32", "bf16", "q8_0", "q4_1", "q4_0"):
        assert CompileOptions(dtype=dtype).uses_panels, dtype
        assert CompileOptions(dtype=dtype, panels=True).uses_panels, dtype
        assert not CompileOptions(dtype=dtype, panels=False).uses_panels, dtype
    # no f32 / bf16 / block matrices to pack: an explicit panel dtype is all there is
    for dtype in ("f32p", "bf16p", "q8_0p", "q4_1p", "q4_0p"):
        assert not CompileOptions(dtype=dtype, panels=True).uses_panels, dtype


def _declared(module) -> dict[str, str]:
    from ckir.dialects import graph as g

    model = next(op for op in module.ops if isinstance(op, g.ModelOp))
    return {name: d.dtype_name for name, d in model.weights().items()}


def _tiny_llama(tmp_path: Path, edits: dict[str, str]):
    """tests/filecheck/inputs/tiny_llama.mlir with text edits, parsed."""
    from ckir.ir_io import load_module

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


WO_Q8 = {'@"layers.{i}.attn.wo" : [E, H*D] f32': '@"layers.{i}.attn.wo" : [E, H*D] q8_0'}


def _wo_as(values: str) -> dict[str, str]:
    """The edit declaring attn.wo in block format ``values`` (q8_0, q4_1, q4_0)."""
    return {'@"layers.{i}.attn.wo" : [E, H*D] f32': f'@"layers.{{i}}.attn.wo" : [E, H*D] {values}'}


@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_convert_weights_block_panels_leave_k_not_a_multiple_of_32(
    dtype: str, tmp_path: Path
) -> None:
    """--convert-weights{dtype=q8_0p / q4_1p} stores f32 and q8_0 / q4_1 matrices whose K
    is a multiple of 32 in panels (any N: I = 172 rows pad their last panel); down_proj
    (K = I = 172) stays f32, another block format (q4_0, or q8_0 for q4_0p) keeps its
    dtype."""
    from xdsl.context import Context

    from ckir.passes.convert_weights import ConvertWeightsPass, k_multiple, source_dtypes

    values = BLOCK_PANELS[dtype]
    other = "q8_0" if values == "q4_0" else "q4_0"
    assert k_multiple(dtype) == 32 and source_dtypes(dtype) == {"f32", values}
    edits = {
        **_wo_as(values),
        '@"layers.{i}.mlp.gate" : [I, E] f32': f'@"layers.{{i}}.mlp.gate" : [I, E] {other}',
    }
    module = _tiny_llama(tmp_path, edits)
    ConvertWeightsPass(dtype=dtype).apply(Context(), module)
    got = _declared(module)
    assert got["layers.{i}.attn.wo"] == dtype  # was q8_0 / q4_1
    assert got["layers.{i}.attn.wq"] == got["embed"] == got["lm_head"] == dtype  # were f32
    assert got["layers.{i}.mlp.up"] == dtype  # [I, E]: N = 172, K = 64
    assert got["layers.{i}.mlp.gate"] == other
    assert got["layers.{i}.mlp.down"] == "f32"  # K = I = 172
    assert got["final_norm"] == got["layers.{i}.attn_norm"] == "f32"


def test_convert_weights_q4_1p_leaves_q8_0_alone(tmp_path: Path) -> None:
    """One block panel dtype does not take the other's blocks: q4_1p converts f32 and
    q4_1 matrices, a q8_0 one stays q8_0 (that would requantize)."""
    from xdsl.context import Context

    from ckir.passes.convert_weights import ConvertWeightsPass

    module = _tiny_llama(tmp_path, WO_Q8)
    ConvertWeightsPass(dtype="q4_1p").apply(Context(), module)
    got = _declared(module)
    assert got["layers.{i}.attn.wo"] == "q8_0"
    assert got["layers.{i}.attn.wq"] == "q4_1p"


def test_panels_pack_block_matrices(tmp_path: Path) -> None:
    """compiler.pack_panels: q8_0 -> q8_0p, q4_1 -> q4_1p and q4_0 -> q4_0p
    (repackings), f32 -> f32p (never f32 -> a block panel dtype: that would quantize)."""
    from ckir.compiler import pack_panels

    edits = {
        **WO_Q8,
        '@"layers.{i}.mlp.up" : [I, E] f32': '@"layers.{i}.mlp.up" : [I, E] q4_1',
        '@"layers.{i}.mlp.gate" : [I, E] f32': '@"layers.{i}.mlp.gate" : [I, E] q4_0',
    }
    module = _tiny_llama(tmp_path, edits)
    pack_panels(module)
    got = _declared(module)
    assert got["layers.{i}.attn.wo"] == "q8_0p"
    assert got["layers.{i}.mlp.up"] == "q4_1p"
    assert got["layers.{i}.mlp.gate"] == "q4_0p"
    assert got["layers.{i}.attn.wq"] == got["layers.{i}.mlp.down"] == "f32p"
    assert got["final_norm"] == "f32"


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


@pytest.mark.parametrize("dtype", VALUE_PANELS)
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


def _block_oracle_logits(src: Path, tokens: np.ndarray, values: str = "q8_0") -> np.ndarray:
    """transformers' fp32 logits with every matrix a ``values`` (q8_0, q4_1, q4_0) build stores
    quantized (2-D, not GPT-2's positions, K a multiple of 32 along ckir's [N, K])
    replaced by its quantized values (GPT-2's Conv1D weights are [K, N]: quantized along
    their rows' K)."""
    import torch
    import transformers
    from transformers.pytorch_utils import Conv1D

    hf = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    done: set[int] = set()  # a tied head shares its embedding's parameter
    with torch.no_grad():
        for name, module in hf.named_modules():
            if not isinstance(module, torch.nn.Linear | torch.nn.Embedding | Conv1D):
                continue
            if "wpe" in name or id(module.weight) in done:
                continue
            done.add(id(module.weight))
            w = module.weight.detach().numpy()
            w_nk = w.T if isinstance(module, Conv1D) else w
            if w_nk.shape[1] % 32:
                continue
            q = quant.dequantize(quant.quantize(np.ascontiguousarray(w_nk), values), values)
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(q.T if w is not w_nk else q)))
        return hf(torch.tensor(tokens[None, :])).logits[0].numpy()


#: whole-model q8_0 / q4_1 tolerances of tests/test_weight_dtype_parity.py (relative to
#: max |logit|): prefill is fp32 on the block values, decode quantizes x per block of 32
#: (Q4_1's offset term multiplies the quantized activation sum: looser)
BLOCK_TOL = {"q8_0p": (1e-4, 5e-2), "q4_1p": (1e-4, 1.1e-1), "q4_0p": (1e-4, 1.1e-1)}


@pytest.mark.parametrize(("arch", "tied"), [("gpt2", None), ("qwen2", True), ("llama", False)])
@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_block_panel_build_matches_hf(
    dtype: str, arch: str, tied: bool | None, tmp_path: Path
) -> None:
    """A q8_0 / q4_1 / q4_0 build stores its matrices as q8_0p / q4_1p / q4_0p by default
    (ragged V = 250: a padded panel; tied head; biases; fused qkv / gate_up) and gives
    HF's logits on the block values at the dtype's tolerances; save_pretrained refuses it,
    naming the panel dtype."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model(arch, tmp_path / "hf", seed=5, tied=tied, vocab_size=250)
    tokens = np.random.default_rng(2).integers(0, 250, size=9)
    values = BLOCK_PANELS[dtype]
    ref = _block_oracle_logits(src, tokens, values)
    scale = float(np.abs(ref).max())
    prefill_tol, decode_tol = BLOCK_TOL[dtype]
    with ckir.compile(src, tmp_path / "b", dtype=values, max_context=32) as model:
        layout = (tmp_path / "b" / "layout.mlir").read_text()
        for kernel in (f"embed_{dtype}", f"gemm_{dtype}", f"gemv_{dtype}"):
            assert f"lowered.kernel @{kernel} " in layout, kernel
        assert f"] {dtype} hf" in layout and f"] {values} hf" not in layout
        packed = model.info["panel_weights"]
        assert packed["embed"] == dtype and set(packed.values()) <= {dtype, "f32p"}
        first = model.prefill(tokens).copy()
        err = float(np.abs(first - ref).max()) / scale
        tol = decode_tol if model.int8_prefill else prefill_tol  # int8 x as in decode
        assert err <= tol, f"prefill {dtype}: relative error {err:.3g}"
        if model.int8_prefill:  # switched off: fp32 x, the f32 weights' tolerance
            model.int8_prefill = False
            assert not model.int8_prefill
            model.reset()
            err = float(np.abs(model.prefill(tokens) - ref).max()) / scale
            assert err <= prefill_tol, f"prefill {dtype} on fp32 x: relative error {err:.3g}"
            model.int8_prefill = True  # and back: the int8 GEMM's logits again, bit for bit
            model.reset()
            assert np.array_equal(model.prefill(tokens), first)
        model.reset()
        steps = np.stack([model.decode(int(t)) for t in tokens])
        err = float(np.abs(steps - ref).max()) / scale
        assert err <= decode_tol, f"decode {dtype}: relative error {err:.3g}"
        with pytest.raises(CkirError, match=rf"stored as {dtype}; only f32 and bf16 builds"):
            model.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


def test_int8_prefill_switch_on_a_build_without_it(tmp_path: Path) -> None:
    """A build whose library predates ckir_set_int8_prefill: asking for fp32 x where it
    runs int8 x is an error that says to recompile, never a silent no-op; asking for
    int8 x (or fp32 x where it has no int8 GEMM) changes nothing."""
    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=1)
    with ckir.compile(src, tmp_path / "b", dtype="q8_0", max_context=16) as model:
        runs_int8 = model.int8_prefill
        model._set_int8 = None  # as loaded from an old build
        model.int8_prefill = True
        if runs_int8:
            with pytest.raises(CkirError, match="predates the int8 prefill switch; recompile"):
                model.int8_prefill = False
        else:
            model.int8_prefill = False
        assert model.int8_prefill == runs_int8


def test_cli_run_prefills_on_fp32_x_unless_asked(tmp_path: Path, capsys) -> None:
    """``ckir run`` (as ``ckir generate``) prefills a q8_0p build on fp32 x;
    ``--int8-prefill`` gives the library default's int8-x logits."""
    import ckir
    from ckir.cli import main
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=3)
    tokens = [5, 17, 2, 40, 9, 33, 12, 8, 60]
    with ckir.compile(src, tmp_path / "b", dtype="q8_0", max_context=16) as model:
        int8 = model.prefill(tokens).copy()
        model.int8_prefill = False
        model.reset()
        fp32 = model.prefill(tokens).copy()
    assert not np.array_equal(int8, fp32) or not model.int8_prefill_dot
    for flag, want in (([], fp32), (["--int8-prefill"], int8)):
        out = tmp_path / f"logits{len(flag)}.npy"
        args = ["run", str(tmp_path / "b"), "--tokens", ",".join(map(str, tokens))]
        assert main([*args, "--steps", "1", "--logits-out", str(out), *flag]) == 0
        np.testing.assert_array_equal(np.load(out)[: len(tokens)], want)
    capsys.readouterr()


def _slot_bytes(model: Any, weight: str) -> np.ndarray:
    """The bytes of weight instance ``weight`` in a loaded build's weights arena."""
    arena, offset, size, _canary = model.slots()[f"w.{weight}"]
    assert arena == 0
    return model._bytes(0, offset, size)


def _same_blocks_as_row_major(
    plain: Any, packed: Any, shapes: dict[str, tuple[int, int]], dtype: str = "q8_0p"
) -> None:
    """Every ``dtype`` (q8_0p, q4_1p, q4_0p) weight of ``packed`` holds exactly the blocks
    of ``plain``'s row-major copy in the block format, permuted (unpacked bit for bit)."""
    for name, shape in shapes.items():
        rows = _slot_bytes(plain, name)
        panels = _slot_bytes(packed, name)
        assert panels.nbytes == vocab.storage_bytes(dtype, shape), name
        got = quant.unpack_block_panels(panels, shape, dtype)
        assert np.array_equal(got.reshape(-1), rows), name


def _panel_shapes(model: Any, dtype: str = "q8_0p") -> dict[str, tuple[int, int]]:
    """Weight instance -> [N, K] of every ``dtype`` weight of a loaded build (layout.mlir)."""
    import re

    layout = (model.build_dir / "layout.mlir").read_text()
    found = re.findall(
        rf"lowered.buffer @w\.(\S+) weight : !lowered.buf<\[(\d+), (\d+)\], {dtype}>", layout
    )
    return {name: (int(n), int(k)) for name, n, k in found}


def _same_logits_as_row_major(a, b, tokens: np.ndarray) -> None:
    """Build b (panels) against a (the same blocks row-major): decode steps to fp32
    summation order (the same integer scheme); prefill likewise, except where b's
    prefill GEMMs run on int8 x (CompiledModel.int8_prefill): then b's prefill rows
    are a's decode steps (the same scheme; attention's summation order differs, and
    an activation that rounds to the other int8 would show as ~1e-3)."""
    steps_a = np.stack([a.decode(int(t)) for t in tokens])
    a.reset()
    steps_b = np.stack([b.decode(int(t)) for t in tokens])
    b.reset()
    assert np.abs(steps_b - steps_a).max() <= 1e-5 * np.abs(steps_a).max()
    # a native build: int8 x on every SIMD CPU, by vpdpbusd where it has VNNI
    flags = set(Path("/proc/cpuinfo").read_text().split())
    simd, vnni = "avx2" in flags, bool({"avx512_vnni", "avx_vnni"} & flags)
    insn = "vpdpbusd" if vnni else "vpmaddubsw + vpmaddwd" if simd else ""
    assert b.int8_prefill_dot == insn and b.int8_prefill == bool(insn)
    got = b.prefill(tokens)
    want = steps_a if b.int8_prefill else a.prefill(tokens)
    tol = 5e-3 if b.int8_prefill else 1e-5
    assert np.abs(got - want).max() <= tol * np.abs(want).max()
    if b.int8_prefill:  # int8 x switched off: the row-major build's fp32-x prefill
        b.int8_prefill = False
        a.reset(), b.reset()
        want = a.prefill(tokens)
        assert np.abs(b.prefill(tokens) - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_panels_switch_packs_a_block_build(dtype: str, tmp_path: Path) -> None:
    """A q8_0 / q4_1 / q4_0 inference build stores its matrices as q8_0p / q4_1p / q4_0p
    (the default);
    down_proj (K = I = 172, no whole blocks) stays f32, hence f32p.  ``panels=False``
    keeps them row-major.  The panel bytes are the row-major build's blocks permuted,
    and the logits agree to fp32 summation order (same values, same integer scheme)."""
    pytest.importorskip("transformers")
    import ckir
    from ckir.tools.zoo import make_tiny_model

    values = BLOCK_PANELS[dtype]
    src = make_tiny_model("llama", tmp_path / "hf", seed=1, intermediate_size=172)
    tokens = np.arange(1, 8)
    with (
        ckir.compile(src, tmp_path / "plain", dtype=values, max_context=16, panels=False) as a,
        ckir.compile(src, tmp_path / "packed", dtype=values, max_context=16) as b,
    ):
        assert a.info["panel_weights"] == {}
        packed = b.info["panel_weights"]
        assert packed["layers.{i}.mlp.up"] == packed["lm_head"] == dtype
        assert packed["layers.{i}.mlp.down"] == "f32p"
        shapes = _panel_shapes(b, dtype)
        assert shapes["layers.1.mlp.up"] == (172, 64) and len(shapes) == 2 + 2 * 6
        _same_blocks_as_row_major(a, b, shapes, dtype)
        _same_logits_as_row_major(a, b, tokens)
    layout = (tmp_path / "packed" / "layout.mlir").read_text()
    assert f"lowered.kernel @gemv_{dtype} " in layout
    assert f"lowered.kernel @gemv_{values} " not in layout


@pytest.mark.parametrize("dtype", list(BLOCK_PANELS))
def test_gguf_blocks_are_repacked_into_panels(dtype: str, tmp_path: Path) -> None:
    """A GGUF file's Q8_0 / Q4_1 matrices (q/k rows interleaved by the converter,
    restored by ckir) are stored as q8_0p / q4_1p by default: their blocks repacked bit
    for bit (never dequantized), so the build matches the row-major build
    (``panels=False``) to fp32 summation order."""
    pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    from gguf_fixtures import gguf_from_hf

    import ckir
    from ckir.tools.zoo import make_tiny_model

    src = make_tiny_model("llama", tmp_path / "hf", seed=2, intermediate_size=128)
    values = BLOCK_PANELS[dtype]
    path = gguf_from_hf(src, tmp_path / "m.gguf", qtype=values.upper())
    tokens = np.arange(3, 12)
    with (
        ckir.compile(path, tmp_path / "plain", max_context=16, panels=False) as a,
        ckir.compile(path, tmp_path / "packed", max_context=16) as b,
    ):
        assert a.info["panel_weights"] == {}
        assert set(b.info["panel_weights"].values()) == {dtype}
        assert b.info["panel_weights"]["layers.{i}.attn.wq"] == dtype  # unpermuted rows
        shapes = _panel_shapes(b, dtype)
        assert "layers.0.attn.wk" in shapes and "embed" in shapes
        _same_blocks_as_row_major(a, b, shapes, dtype)
        _same_logits_as_row_major(a, b, tokens)
    assert f"] {dtype} gguf" in (tmp_path / "packed" / "layout.mlir").read_text()
    assert f"] {values} gguf" in (tmp_path / "plain" / "layout.mlir").read_text()


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
