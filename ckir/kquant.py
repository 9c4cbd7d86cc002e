"""GGUF's K-quants Q4_K, Q5_K and Q6_K: NumPy quantizers and dequantizers written for ckir.

A K-quant row is K/256 consecutive *super-blocks* of 256 elements (little-endian,
no padding); docs/quantization.md ("K-quants") has the layouts:

- ``q4_k`` (144 bytes): f16 ``d``, f16 ``dmin``, 12 bytes of 6-bit scales ``sc[8]``
  and mins ``m[8]`` (one per sub-block of 32), 128 bytes ``qs`` of 4-bit ``q``;
  value = ``(d * sc[j]) * q - dmin * m[j]`` for sub-block j.
- ``q5_k`` (176 bytes): ``d``, ``dmin``, the 12 scale bytes, 32 bytes ``qh`` (bit j of
  ``qh[l]`` is the fifth bit of element l of sub-block j), 128 bytes ``qs``; q in 0..31,
  value as q4_k.
- ``q6_k`` (210 bytes): 128 bytes ``ql`` (low 4 bits), 64 bytes ``qh`` (high 2 bits),
  16 int8 scales (one per sub-block of 16), f16 ``d`` last; value = ``(d * sc[i]) *
  (q - 32)``.

The dequantizers compute in float32 in the order of ``gguf.quants.dequantize``
(``d * sc`` first, exact: an 11-bit f16 significand times an integer of at most 8
bits), so they match it bit for bit.  The quantizers are ckir's own (the gguf
package has none for these types): per sub-block an affine (q4_k, q5_k) or
symmetric (q6_k) range, the sub-block scales quantized to 6 (8) bits against the
super-block's f16 ``d``, then every element rounded to the nearest level of its
quantized scale.
"""

from __future__ import annotations

import numpy as np

QK_K = 256
"""Elements per super-block."""
#: bytes per super-block of each K-quant dtype
KQUANT_BYTES = {"q4_k": 144, "q5_k": 176, "q6_k": 210}
#: byte offset and count of the f16 fields of a super-block (q4_k / q5_k: d, dmin at
#: the start; q6_k: d at the end): the only values that can be non-finite
KQUANT_F16 = {"q4_k": (0, 2), "q5_k": (0, 2), "q6_k": (208, 1)}


def _super_blocks(arr: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim == 0 or a.shape[-1] % QK_K:
        raise ValueError(f"K-quants need a last dimension multiple of {QK_K}, got shape {a.shape}")
    return a.reshape(-1, QK_K), a.shape


def byte_blocks(
    arr: np.ndarray, dtype: str, nbytes: int, elems: int
) -> tuple[np.ndarray, tuple[int, ...]]:
    """Block bytes ``arr`` of ``dtype`` (uint8, rows of whole ``nbytes``-byte blocks of
    ``elems`` values) -> (uint8 [blocks, nbytes], the logical shape of the values)."""
    a = np.ascontiguousarray(arr)
    if a.dtype != np.uint8:
        raise TypeError(f"{dtype} data must be uint8 bytes, got {a.dtype}")
    if a.ndim == 0 or a.shape[-1] % nbytes:
        raise ValueError(f"{dtype} rows must be whole {nbytes}-byte blocks, got shape {a.shape}")
    return a.reshape(-1, nbytes), (*a.shape[:-1], a.shape[-1] // nbytes * elems)


def _f16(b: np.ndarray) -> np.ndarray:
    """uint8 [n, 2] -> float32 [n, 1] (the little-endian f16)."""
    return np.ascontiguousarray(b).view(np.float16).astype(np.float32)


def _to_f16(v: np.ndarray) -> np.ndarray:
    """float32 [n] -> float16 [n] (nearest even; beyond range: inf, found by the caller)."""
    with np.errstate(over="ignore"):
        return np.asarray(v, dtype=np.float32).astype(np.float16)


def unpack_scale_min(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 12 scale bytes of q4_k / q5_k super-blocks (uint8 [n, 12]) -> (sc, m), uint8
    [n, 8] each in 0..63.  Sub-block j < 4: ``sc = s[j] & 63``, ``m = s[j + 4] & 63``;
    j >= 4: ``sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4``, ``m = s[j + 4] >> 4 |
    (s[j] >> 6) << 4``."""
    s = scales.astype(np.uint8)
    lo, mid, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([lo & 63, (hi & 15) | ((lo >> 6) << 4)], axis=1)
    m = np.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=1)
    return sc, m


def pack_scale_min(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Inverse of :func:`unpack_scale_min`: sc, m uint8 [n, 8] in 0..63 -> uint8 [n, 12]."""
    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    lo = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    mid = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    hi = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return np.concatenate([lo, mid, hi], axis=1)


def _affine_levels(blk: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """q (float32 [n, 8, 32], 0..15 or 0..31) and the (D, DM) float32 [n, 8, 1] of q4_k /
    q5_k super-blocks ``blk`` (uint8 [n, bytes])."""
    n = blk.shape[0]
    sc, m = unpack_scale_min(blk[:, 4:16])
    d = (_f16(blk[:, 0:2]) * sc.astype(np.float32)).reshape(n, 8, 1)
    dm = (_f16(blk[:, 2:4]) * m.astype(np.float32)).reshape(n, 8, 1)
    qs = blk[:, -128:].reshape(n, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = (qs & np.uint8(15)).reshape(n, 8, 32)
    if dtype == "q5_k":
        bits = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
        q = q | (((blk[:, 16:48].reshape(n, 1, 32) >> bits) & np.uint8(1)) << np.uint8(4))
    return np.stack([d, dm]), q.astype(np.float32)


def _q6_levels(blk: np.ndarray) -> np.ndarray:
    """q - 32 of q6_k super-blocks (uint8 [n, 210]) as float32 [n, 16, 16]."""
    n = blk.shape[0]
    ql = blk[:, 0:128].reshape(n, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    ql = (ql & np.uint8(15)).reshape(n, 2, 4, 32)
    sh = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    qh = (blk[:, 128:192].reshape(n, 2, 1, 32) >> sh) & np.uint8(3)
    q = (ql | (qh << np.uint8(4))).astype(np.int16) - 32
    return q.reshape(n, 16, 16).astype(np.float32)


def dequantize_kquant(arr: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values of K-quant bytes ``arr`` (uint8 ``[..., K/256 * bytes]``) -> ``[..., K]``,
    bit-equal to ``gguf.quants.dequantize``."""
    if dtype not in KQUANT_BYTES:
        raise ValueError(f"{dtype!r} is not a K-quant ({', '.join(KQUANT_BYTES)})")
    blk, shape = byte_blocks(arr, dtype, KQUANT_BYTES[dtype], QK_K)
    n = blk.shape[0]
    if dtype == "q6_k":
        d = _f16(blk[:, 208:210]) * blk[:, 192:208].view(np.int8).astype(np.float32)
        out = d.reshape(n, 16, 1) * _q6_levels(blk)
    else:
        (dd, dm), q = _affine_levels(blk, dtype)
        out = dd * q - dm
    return out.astype(np.float32).reshape(shape)


def _quantize_affine(arr: np.ndarray, dtype: str) -> np.ndarray:
    """q4_k (nmax 15) / q5_k (nmax 31) super-blocks of ``arr``."""
    nmax = 15 if dtype == "q4_k" else 31
    x, shape = _super_blocks(arr)
    n = x.shape[0]
    sub = x.reshape(n, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0).astype(np.float32)  # m >= 0: the offset is -dmin*m
    hi = sub.max(axis=2)
    scale = ((hi - lo) / np.float32(nmax)).astype(np.float32)
    mins = -lo
    d16 = _to_f16(scale.max(axis=1) / np.float32(63))
    dmin16 = _to_f16(mins.max(axis=1) / np.float32(63))
    d, dmin = d16.astype(np.float32)[:, None], dmin16.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d > 0, np.clip(np.rint(scale / d), 0, 63), 0).astype(np.uint8)
        m = np.where(dmin > 0, np.clip(np.rint(mins / dmin), 0, 63), 0).astype(np.uint8)
        big_d = (d * sc.astype(np.float32))[:, :, None]
        big_m = (dmin * m.astype(np.float32))[:, :, None]
        q = np.where(big_d > 0, np.rint((sub + big_m) / big_d), 0)
    q = np.clip(np.nan_to_num(q), 0, nmax).astype(np.uint8)  # [n, 8, 32]
    qs = (q[:, 0::2] & 15) | ((q[:, 1::2] & 15) << 4)  # [n, 4, 32]: chunk c = sub-blocks 2c, 2c+1
    parts = [
        d16.reshape(n, 1).view(np.uint8),
        dmin16.reshape(n, 1).view(np.uint8),
        pack_scale_min(sc, m),
    ]
    if dtype == "q5_k":
        bits = ((q >> 4) & 1).astype(np.uint8) << np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
        parts.append(np.bitwise_or.reduce(bits, axis=1))  # [n, 32]
    parts.append(qs.reshape(n, 128))
    out = np.concatenate(parts, axis=1)
    return np.ascontiguousarray(out).reshape(*shape[:-1], shape[-1] // QK_K * KQUANT_BYTES[dtype])


def quantize_q4_k(arr: np.ndarray) -> np.ndarray:
    """Q4_K super-blocks of float ``arr`` (last dim a multiple of 256) -> uint8 ``[..., K/256
    * 144]``.  Per sub-block of 32: ``min = min(x, 0)``, ``scale = (max - min) / 15``;
    ``d = max scale / 63``, ``dmin = max(-min) / 63`` (f16); ``sc = rint(scale / d)``, ``m =
    rint(-min / dmin)`` (0..63); ``q = clip(rint((x + dmin m) / (d sc)), 0, 15)``."""
    return _quantize_affine(arr, "q4_k")


def quantize_q5_k(arr: np.ndarray) -> np.ndarray:
    """Q5_K super-blocks (176 bytes): :func:`quantize_q4_k` with 32 levels (q in 0..31)."""
    return _quantize_affine(arr, "q5_k")


def quantize_q6_k(arr: np.ndarray) -> np.ndarray:
    """Q6_K super-blocks of float ``arr`` -> uint8 ``[..., K/256 * 210]``.  Per sub-block of 16:
    ``s = max|x| / 31``; ``d = max s / 127`` (f16); ``sc = rint(s / d)`` (0..127, int8); ``q =
    clip(rint(x / (d sc)), -32, 31)``, stored as q + 32."""
    x, shape = _super_blocks(arr)
    n = x.shape[0]
    sub = x.reshape(n, 16, 16)
    s = (np.abs(sub).max(axis=2) / np.float32(31)).astype(np.float32)
    d16 = _to_f16(s.max(axis=1) / np.float32(127))
    d = d16.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d > 0, np.clip(np.rint(s / d), 0, 127), 0).astype(np.int8)
        big_d = (d * sc.astype(np.float32))[:, :, None]
        q = np.where(big_d > 0, np.rint(sub / big_d), 0)
    q = (np.clip(np.nan_to_num(q), -32, 31) + 32).astype(np.uint8).reshape(n, 2, 4, 32)
    low = q & np.uint8(15)
    ql = low[:, :, 0:2, :] | (low[:, :, 2:4, :] << np.uint8(4))  # [n, 2, 2, 32]
    sh = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    qh = np.bitwise_or.reduce((q >> np.uint8(4)) << sh, axis=2)  # [n, 2, 32]
    out = np.concatenate(
        [ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8)]
        + [d16.reshape(n, 1).view(np.uint8)],
        axis=1,
    )
    return np.ascontiguousarray(out).reshape(*shape[:-1], shape[-1] // QK_K * 210)


def count_non_finite_kquant(arr: np.ndarray, dtype: str) -> int:
    """Non-finite f16 fields (q4_k / q5_k: d, dmin; q6_k: d) in K-quant bytes ``arr``."""
    nbytes = KQUANT_BYTES[dtype]
    off, count = KQUANT_F16[dtype]
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    if raw.size % nbytes:
        raise ValueError(f"{dtype} data must be whole {nbytes}-byte blocks, got {raw.size} bytes")
    scales = _f16(raw.reshape(-1, nbytes)[:, off : off + 2 * count].reshape(-1, 2))
    return int(scales.size - np.count_nonzero(np.isfinite(scales)))
