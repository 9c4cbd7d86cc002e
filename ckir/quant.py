"""Weight dtypes of the runtime: bf16, f32p / bf16p / q8_0p / q4_1p / q4_0p panels, GGUF
blocks Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q4_K, Q5_K, Q6_K (:mod:`ckir.kquant`).

NumPy quantizers and dequantizers written for ckir (see docs/quantization.md).
A quantized tensor of logical shape ``[..., K]`` is stored as a ``uint8`` array
``[..., K // 32 * block_bytes]``: each row is K/32 consecutive little-endian
blocks of 32 elements along K.

Block layouts (the GGUF ones):

- ``q8_0`` (34 bytes): f16 ``d``, int8 ``q[32]``; value = d * q.
- ``q4_0`` (18 bytes): f16 ``d``, uint8 ``qs[16]``; element j < 16 is
  ``(qs[j] & 0xF) - 8``, element j + 16 is ``(qs[j] >> 4) - 8``; value = d * that.
- ``q4_1`` (20 bytes): f16 ``d``, f16 ``m``, uint8 ``qs[16]``; nibbles as in q4_0
  without the -8; value = d * q + m.
- ``q5_0`` (22 bytes): f16 ``d``, uint32 ``qh`` (little-endian), uint8 ``qs[16]``;
  element j has q4_0's nibble as its low 4 bits and bit j of ``qh`` as its fifth;
  value = d * (q - 16).
- ``q5_1`` (24 bytes): f16 ``d``, f16 ``m``, ``qh``, ``qs`` as in q5_0; value = d * q + m.

The quantizers reproduce the rounding of the GGUF reference quantizers, so they
produce the same bytes as ``gguf.quants.quantize``; the dequantizers compute in
float32 exactly as the C runtime does (``d * q``, and ``(d * q) + m`` with no
fused multiply-add), so they match ``gguf.quants.dequantize`` bit for bit.
``bf16`` is the top half of an fp32, rounded to nearest even (NaNs are kept
NaN, made quiet).

Panel dtypes store the values of a plain dtype (``ckir.vocab.PANEL_VALUES``) in
the order the GEMM kernels read them.  ``f32p`` is fp32, exact: a ``[N, K]``
matrix is ``P = ceil(N / 32)`` panels, panel p holding rows ``32p .. 32p + 31``
as K rows of 32 floats, so element (n, k) is at float ``((n // 32) * K + k) * 32
+ n % 32``.  ``bf16p`` is bf16 (rounded as ``bf16``) in the same panels of k
*pairs* (K even): panel row j holds, for each of the 32 rows, bf16(w[n, 2j]) then
bf16(w[n, 2j + 1]), so element (n, k) is at uint16 ``((n // 32) * (K // 2) + k //
2) * 64 + (n % 32) * 2 + k % 2``.  The rows past N of the last panel are zeros
(``P * 32 * K`` values).  ``q8_0p`` (K % 32 == 0) is the Q8_0 blocks of a
matrix (the same bytes, permuted): panel p is K/32 *panel blocks* of 1088 bytes,
block b holding the 32 f16 scales ``d[32p + r, b]`` (bytes 0..63), then 8 *quad
rows* i of 128 bytes, byte ``64 + 128 i + 4 r + j`` being ``q[32p + r, b, 4i + j]``;
padding rows have d = 0 and q = 0.  ``q4_1p`` is the same for Q4_1 blocks: panel
blocks of 640 bytes, the 32 f16 ``d[32p + r, b]`` (bytes 0..63), the 32 f16 ``m``
(bytes 64..127), then 4 groups g of 128 bytes, byte ``128 + 128 g + 4 r + j`` being
the nibble byte ``qs[32p + r, b, 4g + j]`` (q[4g + j] low, q[16 + 4g + j] high).
``q4_0p`` is q4_1p without the m: panel blocks of 576 bytes, the 32 f16 ``d``
(bytes 0..63), then the 4 nibble groups from byte 64 (a value is d (q - 8)).
:func:`pack_panels` / :func:`unpack_panels` convert (floats); unpacking needs the
logical shape (``dequantize(arr, "bf16p", shape=(N, K))``); :func:`pack_block_panels`
/ :func:`unpack_block_panels` (:func:`pack_q8_0p`, :func:`pack_q4_1p`, ...) permute
block bytes both ways, bit for bit.
"""

from __future__ import annotations

import numpy as np

from ckir.kquant import (
    KQUANT_BYTES,
    QK_K,
    byte_blocks,
    count_non_finite_kquant,
    dequantize_kquant,
    quantize_q4_k,
    quantize_q5_k,
    quantize_q6_k,
)
from ckir.vocab import (
    BLOCK_DTYPES,
    ELEMENT_BYTES,
    PANEL_DTYPES,
    PANEL_VALUES,
    WEIGHT_DTYPES,
    DType,
    dtype_info,
    storage_bytes,
)

QK = 32
"""Elements per block of every block format here."""

#: bytes per 32-element block of the (row-major) block formats quantized here (the
#: K-quants, super-blocks of 256, are in :mod:`ckir.kquant`)
_BLOCK_BYTES = {
    k: nbytes
    for k, (nbytes, elems) in BLOCK_DTYPES.items()
    if k in WEIGHT_DTYPES and k not in PANEL_DTYPES and k not in KQUANT_BYTES
}
assert all(BLOCK_DTYPES[k][1] == QK for k in _BLOCK_BYTES)
assert all(BLOCK_DTYPES[k] == (nbytes, QK_K) for k, nbytes in KQUANT_BYTES.items())
#: block bytes and leading f16 scale bytes of each block format of 32
_SCALE_BYTES = {
    k: (BLOCK_DTYPES[k][0], scale)
    for k, scale in {"q8_0": 2, "q4_0": 2, "q4_1": 4, "q5_0": 2, "q5_1": 4}.items()
}


def block_bytes(dtype: str) -> tuple[int, int]:
    """(elements per block, bytes per block) of ``dtype``; scalars are one-element blocks.

    Panel dtypes (f32p, bf16p, q8_0p, q4_1p, q4_0p) are not stored by rows: ValueError (see
    :func:`panel_bytes`).
    """
    if dtype not in WEIGHT_DTYPES:
        raise ValueError(f"unknown weight dtype {dtype!r}")
    if dtype in PANEL_DTYPES:
        raise ValueError(f"{dtype} is stored in panels, not rows: its size depends on N")
    if dtype in _BLOCK_BYTES:
        return QK, _BLOCK_BYTES[dtype]
    if dtype in KQUANT_BYTES:
        return QK_K, KQUANT_BYTES[dtype]
    return 1, ELEMENT_BYTES[dtype]


def row_bytes(dtype: str, k: int) -> int:
    """Bytes of one row of ``k`` elements of ``dtype`` (k must be a multiple of the block)."""
    elems, nbytes = block_bytes(dtype)
    if k % elems:
        raise ValueError(f"{dtype} rows need K % {elems} == 0, got K = {k}")
    return k // elems * nbytes


def _panel_dtype(dtype: str) -> DType:
    """The :class:`~ckir.vocab.DType` of panel dtype ``dtype``; ValueError otherwise."""
    if dtype not in PANEL_DTYPES:
        raise ValueError(f"{dtype!r} is not a panel dtype ({', '.join(PANEL_DTYPES)})")
    return dtype_info(dtype)


def panel_bytes(n: int, k: int, dtype: str = "f32p") -> int:
    """Bytes of an ``[n, k]`` matrix stored as panel dtype ``dtype`` (whole 32-row panels)."""
    _panel_dtype(dtype)
    return storage_bytes(dtype, (n, k))


def _panel_shape(d: DType, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(N, K, P) of an ``[N, K]`` matrix stored as ``d``: ValueError unless 2-D with K a
    multiple of the dtype's k group."""
    if len(shape) != 2:
        raise ValueError(f"{d.name} stores [N, K] matrices, got shape {tuple(shape)}")
    n, k = (int(v) for v in shape)
    if k % d.k_group:
        what = "k pairs" if d.block is None else "whole blocks"
        raise ValueError(f"{d.name} needs K % {d.k_group} == 0 ({what}), got shape {(n, k)}")
    assert d.panel is not None
    return n, k, -(-n // d.panel)


#: block panel dtypes: the byte offsets, in a block of their block format, of the f16
#: fields stored as 32 f16 (one per row) at the start of a panel block, in this order
#: (q8_0 d; q4_1 d, m; q4_0 d; q4_k / q5_k d, dmin; q6_k d, its last two bytes; q5_0 d;
#: q5_1 d, m); the block's other bytes, in order, follow as quads of 4 bytes per row
#: (q5_0 / q5_1: quad plane 0 each row's 32-bit qh, planes 1..4 its qs quads)
_PANEL_BLOCK_FIELDS: dict[str, tuple[int, ...]] = {
    "q8_0p": (0,),
    "q4_1p": (0, 2),
    "q4_0p": (0,),
    "q4_kp": (0, 2),
    "q5_kp": (0, 2),
    "q6_kp": (208,),
    "q5_0p": (0,),
    "q5_1p": (0, 2),
}
assert set(_PANEL_BLOCK_FIELDS) == {d for d in PANEL_DTYPES if d in BLOCK_DTYPES}
#: rows per panel, bytes of one f16 field, quant bytes of one row per group (k quads of
#: q8_0p; for q4_1p and q4_0p the 4 bytes hold k = 4g + j in their low nibbles, 16 + 4g
#: + j high)
_PB_ROWS, _PB_F16, _PB_QUAD = 32, 2, 4
assert all(PANEL_DTYPES[d] == _PB_ROWS for d in _PANEL_BLOCK_FIELDS)


def panel_block_bytes(dtype: str) -> int:
    """Bytes of one panel block of block panel dtype ``dtype`` (32 rows x one block of its
    block format: q8_0p 32 x 34 = 1088, q4_1p 32 x 20 = 640, q4_0p 32 x 18 = 576, q4_kp
    32 x 144 = 4608, q6_kp 32 x 210 = 6720, q5_0p 32 x 22 = 704, q5_1p 32 x 24 = 768)."""
    if dtype not in _PANEL_BLOCK_FIELDS:
        raise ValueError(f"{dtype!r} is not a block panel dtype ({', '.join(_PANEL_BLOCK_FIELDS)})")
    return _PB_ROWS * BLOCK_DTYPES[dtype][0]


def _q6_k_plane_order() -> tuple[int, ...]:
    """q6_kp's quad planes g (the 4-byte groups of a Q6_K block after its f16 d: ql
    0..31, qh 32..47, the scales 48..51) in their stored order, the order in which its
    decode core reads them (runtime/kernels/quant_q6kp.c): for each half h and step u,
    for L = 4u .. 4u + 3 the planes ql 16h + L, ql 16h + 8 + L, qh 32 + 8h + L; after
    the first step of a half its two scale planes 48 + 2h, 49 + 2h.  Read in address
    order, the hardware prefetcher streams the block (in ql / qh / scales order the
    core's reads jumped between three places of each block, and streamed at 0.8x)."""
    order: list[int] = []
    for h in range(2):
        for u in range(2):
            for lq in range(4 * u, 4 * u + 4):
                order += [16 * h + lq, 16 * h + 8 + lq, 32 + 8 * h + lq]
            if u == 0:
                order += [48 + 2 * h, 49 + 2 * h]
    return tuple(order)


#: block panel dtypes whose quad planes are not stored in byte order: the planes in
#: their stored order (the others: 0, 1, 2, ...)
_PANEL_PLANE_ORDER: dict[str, tuple[int, ...]] = {"q6_kp": _q6_k_plane_order()}
assert sorted(_PANEL_PLANE_ORDER["q6_kp"]) == list(range(52))


def _block_order(dtype: str) -> np.ndarray:
    """The bytes of one block of ``dtype``'s block format in panel order: its f16 fields
    (``_PANEL_BLOCK_FIELDS``), then the rest as quads of 4 bytes, in order or in the
    dtype's plane order (``_PANEL_PLANE_ORDER``)."""
    nbytes, fields = BLOCK_DTYPES[dtype][0], _PANEL_BLOCK_FIELDS[dtype]
    head = [o + i for o in fields for i in range(_PB_F16)]
    rest = [i for i in range(nbytes) if i not in head]
    planes = _PANEL_PLANE_ORDER.get(dtype, range(len(rest) // _PB_QUAD))
    quads = [rest[_PB_QUAD * g + j] for g in planes for j in range(_PB_QUAD)]
    return np.array(head + quads, dtype=np.intp)


#: bytes of one panel block of q8_0p (1088), q4_1p (640) and q4_0p (576)
Q8_0P_PANEL_BLOCK = panel_block_bytes("q8_0p")
Q4_1P_PANEL_BLOCK = panel_block_bytes("q4_1p")
Q4_0P_PANEL_BLOCK = panel_block_bytes("q4_0p")


def pack_block_panels(blocks: np.ndarray, dtype: str) -> np.ndarray:
    """Block bytes of a ``[N, K]`` matrix in the block format of block panel dtype
    ``dtype`` (q8_0 rows for q8_0p, q4_k rows for q4_kp: uint8 ``[N, K/B * block
    bytes]``, B the block's elements) -> its panels, uint8 ``[P, K/B, panel block
    bytes]`` (P = ceil(N/32)), contiguous: a byte permutation (exact), the rows of the
    last panel past N zero.

    Panel block (p, b), for the F f16 fields of a block (``_PANEL_BLOCK_FIELDS``: q8_0
    d; q4_1 d, m; q4_k d, dmin; q6_k d) and its Q other bytes (q8_0: 32 int8; q4_1: 16
    bytes of nibbles; q4_k: 12 scale bytes and 128 of nibbles; q6_k: ql, qh, scales):
    bytes ``64 f + 2 r .. 64 f + 2 r + 1`` are field f of row ``32p + r``'s block b;
    then Q/4 quad planes of 128 bytes, byte ``64 F + 128 s + 4 r + j`` being that
    block's other byte 4g + j (r = 0..31, j = 0..3) for plane g in slot s: g = s, except
    q6_kp's, whose planes are stored in the order its core reads them
    (``_q6_k_plane_order``)."""
    panel_block_bytes(dtype)  # ValueError unless a block panel dtype
    fields, values = len(_PANEL_BLOCK_FIELDS[dtype]), PANEL_VALUES[dtype]
    a = np.ascontiguousarray(blocks)
    nbytes, elems = BLOCK_DTYPES[values]
    if a.dtype != np.uint8 or a.ndim != 2 or a.shape[1] % nbytes:
        raise ValueError(
            f"{dtype} packs {values} rows (uint8 [N, K/{elems} * {nbytes}]), "
            f"got {a.dtype} {a.shape}"
        )
    n, nb = a.shape[0], a.shape[1] // nbytes
    p = -(-n // _PB_ROWS)
    padded = np.zeros((p * _PB_ROWS, nb, nbytes), dtype=np.uint8)
    padded[:n] = a.reshape(n, nb, nbytes)[..., _block_order(dtype)]
    by_block = padded.reshape(p, _PB_ROWS, nb, nbytes).transpose(0, 2, 1, 3)  # [P, B, r, blk]
    split = fields * _PB_F16
    scales = by_block[..., :split].reshape(p, nb, _PB_ROWS, fields, _PB_F16)
    scales = scales.transpose(0, 1, 3, 2, 4).reshape(p, nb, -1)  # [P, B, f, r, 2]
    quads = by_block[..., split:].reshape(p, nb, _PB_ROWS, -1, _PB_QUAD)  # [.., r, g, j]
    quads = quads.transpose(0, 1, 3, 2, 4).reshape(p, nb, -1)  # [P, B, g, r, j]
    return np.ascontiguousarray(np.concatenate([scales, quads], axis=2))


def unpack_block_panels(arr: np.ndarray, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Panels of block panel dtype ``dtype`` of the ``[N, K]`` matrix of logical
    ``shape`` (uint8, any shape with ``ceil(N/32) * K/B * panel block bytes`` bytes)
    -> its block bytes, uint8 ``[N, K/B * block bytes]``, exactly those
    :func:`pack_block_panels` packed (inverse permutation, bit for bit)."""
    pblock = panel_block_bytes(dtype)
    fields, d = len(_PANEL_BLOCK_FIELDS[dtype]), dtype_info(dtype)
    n, k, p = _panel_shape(d, tuple(shape))
    a = np.ascontiguousarray(arr)
    if a.dtype != np.uint8:
        raise TypeError(f"{dtype} panels are uint8 bytes, got {a.dtype}")
    nbytes, elems = BLOCK_DTYPES[dtype]
    nb = k // elems
    if a.size != p * nb * pblock:
        raise ValueError(
            f"{dtype} [{n}, {k}] is {p * nb * pblock} bytes ({p} panels of {nb} "
            f"blocks of {pblock}), got {a.size}"
        )
    a = a.reshape(p, nb, pblock)
    split = fields * _PB_ROWS * _PB_F16
    scales = a[..., :split].reshape(p, nb, fields, _PB_ROWS, _PB_F16).transpose(0, 1, 3, 2, 4)
    quads = a[..., split:].reshape(p, nb, -1, _PB_ROWS, _PB_QUAD).transpose(0, 1, 3, 2, 4)
    by_block = np.concatenate(
        [scales.reshape(p, nb, _PB_ROWS, -1), quads.reshape(p, nb, _PB_ROWS, -1)], axis=3
    )
    ordered = np.empty_like(by_block)
    ordered[..., _block_order(dtype)] = by_block
    rows = ordered.transpose(0, 2, 1, 3).reshape(p * _PB_ROWS, nb * nbytes)[:n]
    return np.ascontiguousarray(rows)


def pack_q8_0p(blocks: np.ndarray) -> np.ndarray:
    """Q8_0 block bytes of a ``[N, K]`` matrix (uint8 ``[N, K/32 * 34]``) -> its q8_0p
    panels, uint8 ``[P, K/32, 1088]`` (:func:`pack_block_panels`): bytes 0..63 of panel
    block (p, b) the f16 scales ``d[32p + r, b]``, r = 0..31; byte ``64 + 128 i + 4 r +
    j`` the int8 ``q[32p + r, b, 4i + j]``, i = 0..7, j = 0..3."""
    return pack_block_panels(blocks, "q8_0p")


def unpack_q8_0p(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """q8_0p panels -> the Q8_0 block bytes, uint8 ``[N, K/32 * 34]``
    (:func:`unpack_block_panels`)."""
    return unpack_block_panels(arr, shape, "q8_0p")


def pack_q4_1p(blocks: np.ndarray) -> np.ndarray:
    """Q4_1 block bytes of a ``[N, K]`` matrix (uint8 ``[N, K/32 * 20]``) -> its q4_1p
    panels, uint8 ``[P, K/32, 640]`` (:func:`pack_block_panels`): bytes 0..63 of panel
    block (p, b) the f16 ``d[32p + r, b]``, bytes 64..127 the f16 ``m[32p + r, b]``,
    r = 0..31; byte ``128 + 128 g + 4 r + j`` the nibble byte ``qs[32p + r, b, 4g + j]``
    (low nibble q[4g + j], high q[16 + 4g + j]), g = 0..3, j = 0..3."""
    return pack_block_panels(blocks, "q4_1p")


def unpack_q4_1p(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """q4_1p panels -> the Q4_1 block bytes, uint8 ``[N, K/32 * 20]``
    (:func:`unpack_block_panels`)."""
    return unpack_block_panels(arr, shape, "q4_1p")


def pack_q4_0p(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 block bytes of a ``[N, K]`` matrix (uint8 ``[N, K/32 * 18]``) -> its q4_0p
    panels, uint8 ``[P, K/32, 576]`` (exact; see :func:`pack_block_panels`)."""
    return pack_block_panels(blocks, "q4_0p")


def unpack_q4_0p(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """q4_0p panels -> the Q4_0 block bytes, uint8 ``[N, K/32 * 18]``
    (:func:`unpack_block_panels`)."""
    return unpack_block_panels(arr, shape, "q4_0p")


def pack_panels(arr: np.ndarray, dtype: str = "f32p") -> np.ndarray:
    """float ``[N, K]`` -> its panels in panel dtype ``dtype``, contiguous, P = ceil(N/32):

    - ``f32p``: float32 ``[P, K, 32]``, the values exact;
    - ``bf16p``: uint16 ``[P, K/2, 32, 2]`` bf16 bits (rounded as :func:`to_bf16`),
      K even;
    - ``q8_0p`` / ``q4_1p``: uint8 ``[P, K/32, 1088]`` / ``[P, K/32, 640]`` panel
      blocks (quantized as :func:`quantize_q8_0` / :func:`quantize_q4_1`, then
      :func:`pack_block_panels`), K % 32 == 0.

    The rows of the last panel past N are zeros."""
    d = _panel_dtype(dtype)
    a = np.asarray(arr, dtype=np.float32)
    n, k, p = _panel_shape(d, a.shape)
    if dtype in _PANEL_BLOCK_FIELDS:
        return pack_block_panels(quantize(a, PANEL_VALUES[dtype]), dtype)
    g, rows = d.k_group, d.panel
    assert rows is not None
    values = quantize(a, PANEL_VALUES[dtype])  # the plain dtype's encoding: exact to unpack
    padded = np.zeros((p * rows, k), dtype=values.dtype)
    padded[:n] = values
    out = np.ascontiguousarray(padded.reshape(p, rows, k // g, g).transpose(0, 2, 1, 3))
    return out.reshape(p, k, rows) if g == 1 else out


def unpack_panels(arr: np.ndarray, shape: tuple[int, ...], dtype: str = "f32p") -> np.ndarray:
    """Panels of ``dtype`` -> the float32 ``[N, K]`` matrix of logical ``shape`` (inverse
    of :func:`pack_panels`).

    ``arr``: any shape holding ``ceil(N/32)*32*K`` stored values (f32p floats, bf16p
    uint16 bits), or their bytes as uint8 (weights.bin); q8_0p / q4_1p / q4_0p: their bytes
    (the values of their Q8_0 / Q4_1 blocks, :func:`unpack_block_panels` for the
    blocks themselves)."""
    d = _panel_dtype(dtype)
    n, k, p = _panel_shape(d, tuple(shape))
    if dtype in _PANEL_BLOCK_FIELDS:
        return dequantize(unpack_block_panels(arr, (n, k), dtype), PANEL_VALUES[dtype])
    g, rows = d.k_group, d.panel
    assert rows is not None and d.numpy is not None
    a = np.ascontiguousarray(arr)
    if a.dtype == np.uint8:
        a = a.reshape(-1).view(d.numpy)
    elif not np.can_cast(a.dtype, d.numpy, "same_kind"):
        raise TypeError(f"{dtype} panels hold {np.dtype(d.numpy)} values, got {a.dtype}")
    a = np.asarray(a, dtype=d.numpy).reshape(-1)
    if a.size != p * rows * k:
        raise ValueError(
            f"{dtype} [{n}, {k}] is {p * rows * k} values ({p} panels of {rows}x{k}), got {a.size}"
        )
    values = a.reshape(p, k // g, rows, g).transpose(0, 2, 1, 3).reshape(p * rows, k)[:n]
    return np.ascontiguousarray(dequantize(values, PANEL_VALUES[dtype]), dtype=np.float32)


def _blocks(arr: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim == 0 or a.shape[-1] % QK:
        raise ValueError(f"last dimension must be a multiple of {QK}, got shape {a.shape}")
    return a.reshape(-1, QK), a.shape


def _inverse(d: np.ndarray) -> np.ndarray:
    """1 / d in float32, 0 where d == 0."""
    safe = np.where(d == 0, np.float32(1), d)
    return np.where(d == 0, np.float32(0), np.float32(1) / safe).astype(np.float32)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest integer, ties away from zero (C roundf), exactly."""
    t = np.trunc(v)
    frac = v - t  # exact in float32
    return t + np.sign(v) * (np.abs(frac) >= np.float32(0.5))


def _f16_bytes(v: np.ndarray) -> np.ndarray:
    """float32 [n, 1] -> its IEEE half (round to nearest even) as uint8 [n, 2]; a value
    beyond float16's range becomes an infinity (``count_non_finite`` finds it)."""
    with np.errstate(over="ignore"):
        return v.astype(np.float16).view(np.uint8).reshape(-1, 2)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """uint8 [n, 32] in 0..15 -> uint8 [n, 16]: byte j = q[j] | q[j + 16] << 4."""
    return q[:, :16] | (q[:, 16:] << np.uint8(4))


def _unpack_nibbles(qs: np.ndarray) -> np.ndarray:
    """uint8 [n, 16] -> uint8 [n, 32] (inverse of _pack_nibbles)."""
    return np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=1)


def _finish(blocks: np.ndarray, shape: tuple[int, ...], nbytes: int) -> np.ndarray:
    return np.ascontiguousarray(blocks).reshape(*shape[:-1], shape[-1] // QK * nbytes)


def quantize_q8_0(arr: np.ndarray) -> np.ndarray:
    """Q8_0: d = max|x| / 127 (fp32, stored as f16), q = round_half_away(x * (1/d))."""
    b, shape = _blocks(arr)
    d = (np.abs(b).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    q = _round_half_away(b * _inverse(d))
    out = np.concatenate([_f16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)
    return _finish(out, shape, 34)


def quantize_q4_0(arr: np.ndarray) -> np.ndarray:
    """Q4_0: v = the element of largest |x| (first on ties), d = v / -8,
    q = min(trunc(x * (1/d) + 8.5), 15)."""
    b, shape = _blocks(arr)
    imax = np.abs(b).argmax(axis=1)[:, None]
    d = (np.take_along_axis(b, imax, axis=1) / np.float32(-8)).astype(np.float32)
    v = np.trunc(b * _inverse(d) + np.float32(8.5))
    q = np.clip(v, 0, 15).astype(np.uint8)
    out = np.concatenate([_f16_bytes(d), _pack_nibbles(q)], axis=1)
    return _finish(out, shape, 18)


def quantize_q4_1(arr: np.ndarray) -> np.ndarray:
    """Q4_1: m = min x, d = (max x - m) / 15, q = min(trunc((x - m) * (1/d) + 0.5), 15)."""
    b, shape = _blocks(arr)
    lo = b.min(axis=1, keepdims=True)
    hi = b.max(axis=1, keepdims=True)
    d = ((hi - lo) / np.float32(15)).astype(np.float32)
    v = np.trunc((b - lo) * _inverse(d) + np.float32(0.5))
    q = np.clip(v, 0, 15).astype(np.uint8)
    out = np.concatenate([_f16_bytes(d), _f16_bytes(lo), _pack_nibbles(q)], axis=1)
    return _finish(out, shape, 20)


def _pack_q5(q: np.ndarray) -> np.ndarray:
    """uint8 [n, 32] in 0..31 -> uint8 [n, 20]: the 4 bytes of ``qh`` (bit j = q[j] >> 4,
    little-endian) then the 16 nibble bytes of the low 4 bits."""
    qh = np.packbits(q >> np.uint8(4), axis=1, bitorder="little")
    return np.concatenate([qh, _pack_nibbles(q & np.uint8(0x0F))], axis=1)


def _unpack_q5(b: np.ndarray) -> np.ndarray:
    """uint8 [n, 20] (``qh`` then ``qs``) -> the 32 values 0..31 of each block, as uint8."""
    high = np.unpackbits(b[:, :4], axis=1, bitorder="little")
    return _unpack_nibbles(b[:, 4:]) | (high << np.uint8(4))


def quantize_q5_0(arr: np.ndarray) -> np.ndarray:
    """Q5_0: v = the element of largest |x| (first on ties), d = v / -16,
    q = min(trunc(x * (1/d) + 16.5), 31)."""
    b, shape = _blocks(arr)
    imax = np.abs(b).argmax(axis=1)[:, None]
    d = (np.take_along_axis(b, imax, axis=1) / np.float32(-16)).astype(np.float32)
    v = np.trunc(b * _inverse(d) + np.float32(16.5))
    q = np.clip(v, 0, 31).astype(np.uint8)
    out = np.concatenate([_f16_bytes(d), _pack_q5(q)], axis=1)
    return _finish(out, shape, 22)


def quantize_q5_1(arr: np.ndarray) -> np.ndarray:
    """Q5_1: m = min x, d = (max x - m) / 31, q = min(trunc((x - m) * (1/d) + 0.5), 31)."""
    b, shape = _blocks(arr)
    lo = b.min(axis=1, keepdims=True)
    hi = b.max(axis=1, keepdims=True)
    d = ((hi - lo) / np.float32(31)).astype(np.float32)
    v = np.trunc((b - lo) * _inverse(d) + np.float32(0.5))
    q = np.clip(v, 0, 31).astype(np.uint8)
    out = np.concatenate([_f16_bytes(d), _f16_bytes(lo), _pack_q5(q)], axis=1)
    return _finish(out, shape, 24)


def _qblocks(arr: np.ndarray, dtype: str) -> tuple[np.ndarray, tuple[int, ...]]:
    return byte_blocks(arr, dtype, _BLOCK_BYTES[dtype], QK)


def _f16(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view(np.float16).astype(np.float32)


def dequantize(arr: np.ndarray, dtype: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """float32 values of ``arr`` stored as ``dtype`` (the inverse of the quantizers' layout).

    ``shape`` is the logical ``[N, K]`` of a panel matrix (required for f32p, bf16p
    q8_0p, q4_1p and q4_0p: their storage does not tell N); other dtypes ignore it.
    """
    if dtype == "f32":
        return np.asarray(arr, dtype=np.float32)
    if dtype in PANEL_DTYPES:
        if shape is None:
            raise ValueError(f"dequantize({dtype}) needs the logical shape [N, K]")
        return unpack_panels(arr, shape, dtype)
    if dtype == "bf16":
        return from_bf16(arr)
    if dtype in KQUANT_BYTES:
        return dequantize_kquant(arr, dtype)
    if dtype not in _BLOCK_BYTES:
        raise ValueError(f"unknown weight dtype {dtype!r}")
    blk, shape = _qblocks(arr, dtype)
    if dtype == "q8_0":
        out = _f16(blk[:, 0:2]) * blk[:, 2:].view(np.int8).astype(np.float32)
    elif dtype == "q4_0":
        q = _unpack_nibbles(blk[:, 2:]).astype(np.float32) - np.float32(8)
        out = _f16(blk[:, 0:2]) * q
    elif dtype == "q5_0":
        q = _unpack_q5(blk[:, 2:]).astype(np.float32) - np.float32(16)
        out = _f16(blk[:, 0:2]) * q
    elif dtype == "q5_1":
        q = _unpack_q5(blk[:, 4:]).astype(np.float32)
        out = (_f16(blk[:, 0:2]) * q) + _f16(blk[:, 2:4])
    else:
        q = _unpack_nibbles(blk[:, 4:]).astype(np.float32)
        out = (_f16(blk[:, 0:2]) * q) + _f16(blk[:, 2:4])
    return out.astype(np.float32).reshape(shape)


def count_non_finite(arr: np.ndarray, dtype: str) -> int:
    """Non-finite (NaN/Inf) values in ``arr`` (float32 values, or bytes stored as ``dtype``).

    For the block formats only the f16 scales at the start of each block can be
    non-finite (``d``, and ``m`` of q4_1 / q5_1, ``d`` and ``dmin`` of q4_k / q5_k, ``d`` of
    q6_k), so only they are checked: a cheap pass over 2-4 bytes per block (q8_0p: the 32
    scales that open each 1088-byte panel block; q4_1p: the 32 d and 32 m that open
    each 640-byte one).
    """
    if dtype in _PANEL_BLOCK_FIELDS:  # panel blocks: 32 f16 per field, then the quants
        pblock = panel_block_bytes(dtype)
        raw = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        if raw.size % pblock:
            raise ValueError(
                f"{dtype} data must be whole {pblock}-byte panel blocks, got {raw.size} bytes"
            )
        split = len(_PANEL_BLOCK_FIELDS[dtype]) * _PB_ROWS * _PB_F16
        scales = _f16(raw.reshape(-1, pblock)[:, :split])
        return int(scales.size - np.count_nonzero(np.isfinite(scales)))
    if dtype in PANEL_DTYPES:  # the panels (their plain dtype's values, zero padding) or bytes
        if np.asarray(arr).dtype == np.uint8:
            arr = np.ascontiguousarray(arr).reshape(-1).view(dtype_info(dtype).numpy)
        dtype = PANEL_VALUES[dtype]
    if dtype in ("f32", "bf16"):
        values = from_bf16(arr) if dtype == "bf16" else np.asarray(arr, dtype=np.float32)
        return int(values.size - np.count_nonzero(np.isfinite(values)))
    if dtype in KQUANT_BYTES:
        return count_non_finite_kquant(arr, dtype)
    if dtype not in _SCALE_BYTES:
        raise ValueError(f"unknown weight dtype {dtype!r}")
    block, scale = _SCALE_BYTES[dtype]
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    if raw.size % block:
        raise ValueError(f"{dtype} data must be whole {block}-byte blocks, got {raw.size} bytes")
    scales = _f16(raw.reshape(-1, block)[:, :scale])
    return int(scales.size - np.count_nonzero(np.isfinite(scales)))


def quantize(arr: np.ndarray, dtype: str) -> np.ndarray:
    """``arr`` (float) stored as ``dtype``: float32, bf16 (uint16), panels
    (:func:`pack_panels`: f32p float32 ``[P, K, 32]``, bf16p uint16 ``[P, K/2, 32, 2]``,
    q8_0p uint8 ``[P, K/32, 1088]``, q4_1p uint8 ``[P, K/32, 640]``) or block bytes
    (uint8)."""
    if dtype == "f32":
        return np.ascontiguousarray(arr, dtype=np.float32)
    if dtype in PANEL_DTYPES:
        return pack_panels(arr, dtype)
    if dtype == "bf16":
        return to_bf16(arr)
    fns = {
        "q8_0": quantize_q8_0,
        "q4_0": quantize_q4_0,
        "q4_1": quantize_q4_1,
        "q5_0": quantize_q5_0,
        "q5_1": quantize_q5_1,
        "q4_k": quantize_q4_k,
        "q5_k": quantize_q5_k,
        "q6_k": quantize_q6_k,
    }
    if dtype not in fns:
        raise ValueError(f"unknown weight dtype {dtype!r}")
    return fns[dtype](arr)


def to_bf16(arr: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint16), round to nearest, ties to even; NaN stays NaN (quiet)."""
    u = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32)
    is_nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    with np.errstate(over="ignore"):
        rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (u >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(is_nan, quiet, rounded).astype(np.uint16)


def from_bf16(arr: np.ndarray) -> np.ndarray:
    """bf16 bits (uint16) -> float32 (exact)."""
    u = np.ascontiguousarray(arr, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return u.view(np.float32)


def bf16_round(arr: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (to_bf16 then from_bf16)."""
    return from_bf16(to_bf16(arr))
