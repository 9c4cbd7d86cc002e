"""graph.rope's frequency scaling reduced to the coefficients of the one rope kernel.

The rope kernels (``runtime/kernels/ckir_rope.h``) know a single formula for
the inverse frequency of pair ``i`` of the ``R`` rotated dims of a head::

    b = theta ** (-2i / R)
    m = clamp(ramp_w * b + ramp_i * i + ramp_0, 0, 1)
    inv_freq(i) = b * ((1 - m) / factor + m)

and scale cos and sin by ``mscale``.  ``longrope`` instead gives a table of
per-pair divisors (``ext``, kernels ``rope_ext_f32`` / ``rope_ext_bwd_f32``):
``inv_freq(i) = 1 / (ext[i] * theta ** (2i / R))``.  Every other ``rope_type`` of
graph.rope is an instance of the formula: this module computes the coefficients
at compile time from the op's attributes, following the definitions in
transformers' ``modeling_rope_utils`` (plain, linear, the wavelength-band
smoothing, YaRN and LongRoPE), so C needs no case per type, and the forward
kernel and its backward (``rope_bwd``) take the very same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, UnitAttr
from xdsl.ir import Operation

from ckir.dialects.graph import rope_rotary_dim
from ckir.errors import CkirError


@dataclass(frozen=True)
class RopeCoefficients:
    """The scaling parameters of the rope kernels (see the module docstring)."""

    R: int
    factor: float = 1.0
    ramp_w: float = 0.0
    ramp_i: float = 0.0
    ramp_0: float = 0.0
    mscale: float = 1.0
    #: longrope: per-pair divisors of the frequencies (R/2), replacing the formula
    ext: tuple[float, ...] | None = None

    @property
    def kernel(self) -> str:
        """The op kind of the rope kernels that take these coefficients."""
        return "rope" if self.ext is None else "rope_ext"

    def params(self) -> dict[str, int | float | tuple[float, ...]]:
        """As kernel parameters."""
        if self.ext is not None:
            return {"R": self.R, "mscale": self.mscale, "ext": self.ext}
        return {
            "R": self.R,
            "factor": self.factor,
            "ramp_w": self.ramp_w,
            "ramp_i": self.ramp_i,
            "ramp_0": self.ramp_0,
            "mscale": self.mscale,
        }


def _float(op: Operation, name: str) -> float | None:
    attr = op.properties.get(name)
    return float(attr.value.data) if isinstance(attr, FloatAttr) else None


def _need(op: Operation, name: str, kind: str, where: str) -> float:
    v = _float(op, name)
    if v is None:
        attr = op.properties.get(name)
        if isinstance(attr, IntegerAttr):
            return float(attr.value.data)
        raise CkirError(f'{where}: rope_type = "{kind}" needs {name}')
    return v


def yarn_attention_factor(
    factor: float,
    attention_factor: float | None,
    mscale: float | None,
    mscale_all_dim: float | None,
) -> float:
    """YaRN's scale of cos and sin: given, or from factor (and mscale / mscale_all_dim)."""
    if attention_factor is not None:
        return attention_factor

    def get(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if mscale and mscale_all_dim:
        return get(factor, mscale) / get(factor, mscale_all_dim)
    return get(factor)


def yarn_ramp(
    beta_fast: float, beta_slow: float, dim: int, theta: float, context: float, truncate: bool
) -> tuple[float, float]:
    """YaRN's correction range ``(low, high)`` of pair indices (its linear ramp's ends)."""

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no zero-width ramp
    return float(low), float(high)


def rope_coefficients(op: Operation, head_dim: int, where: str) -> RopeCoefficients:
    """The kernel coefficients of graph.rope ``op`` whose heads are ``head_dim`` wide."""
    kind_attr = op.properties.get("rope_type")
    kind = kind_attr.data if isinstance(kind_attr, StringAttr) else "default"
    r = rope_rotary_dim(head_dim, _float(op, "partial_rotary_factor"))
    if r < 2 or r % 2 or r > head_dim:
        raise CkirError(f"{where}: rotates {r} of {head_dim} dims; that must be even and >= 2")
    if kind == "default":
        return RopeCoefficients(r)
    if kind == "longrope":
        return _longrope(op, r, where)
    factor = _need(op, "factor", kind, where)
    if kind == "linear":
        return RopeCoefficients(r, factor)
    context = _need(op, "original_context", kind, where)
    if kind == "wavelength":
        # keep b where its wavelength 2*pi/b is below context/high, divide it by
        # factor above context/low, and blend linearly in context/wavelength between
        low = _need(op, "low_freq_factor", kind, where)
        high = _need(op, "high_freq_factor", kind, where)
        if not high > low:
            raise CkirError(f"{where}: high_freq_factor must be greater than low_freq_factor")
        return RopeCoefficients(
            r, factor, ramp_w=context / (2 * math.pi * (high - low)), ramp_0=-low / (high - low)
        )
    if kind == "yarn":
        theta = _need(op, "theta", kind, where)
        low, high = yarn_ramp(
            _float(op, "beta_fast") or 32.0,
            _float(op, "beta_slow") or 1.0,
            r,
            theta,
            context,
            isinstance(op.properties.get("truncate"), UnitAttr),
        )
        mscale = yarn_attention_factor(
            factor,
            _float(op, "attention_factor"),
            _float(op, "mscale"),
            _float(op, "mscale_all_dim"),
        )
        # b / factor from pair index `high` on, b itself up to `low`, linear between
        return RopeCoefficients(
            r, factor, ramp_i=-1.0 / (high - low), ramp_0=high / (high - low), mscale=mscale
        )
    raise CkirError(f'{where}: rope_type = "{kind}" has no kernel coefficients')


def longrope_attention_factor(factor: float, original_context: float) -> float:
    """LongRoPE's default scale of cos and sin: ``sqrt(1 + ln(factor) / ln(original))``
    when ``factor > 1``, else 1."""
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1.0 + math.log(factor) / math.log(original_context))


def _longrope(op: Operation, r: int, where: str) -> RopeCoefficients:
    """longrope: the divisor table ``ext_factors`` and the attention factor."""
    ext_attr = op.properties.get("ext_factors")
    if not isinstance(ext_attr, DenseArrayBase):
        raise CkirError(f'{where}: rope_type = "longrope" needs ext_factors')
    ext = tuple(float(v) for v in ext_attr.get_values())
    if len(ext) != r // 2:
        raise CkirError(
            f"{where}: ext_factors has {len(ext)} values; {r} rotated dims need {r // 2}"
        )
    context = _need(op, "original_context", "longrope", where)
    mscale = _float(op, "attention_factor")
    if mscale is None:
        factor = _float(op, "factor")
        scaled = op.properties.get("scaled_context")
        if factor is None:
            factor = scaled.value.data / context if isinstance(scaled, IntegerAttr) else 1.0
        mscale = longrope_attention_factor(factor, context)
    return RopeCoefficients(r, mscale=mscale, ext=ext)


def wavelength_from_factors(factors: np.ndarray, theta: float) -> dict[str, float | int] | None:
    """The ``wavelength`` attributes whose frequencies are ``b_i / factors[i]``.

    ``factors`` are per-pair divisors of the plain inverse frequencies
    ``b_i = theta^(-2i/R)`` over ``R = 2 len(factors)`` dims, as llama.cpp's
    converter stores the wavelength-band scaling (GGUF ``rope_freqs.weight``).
    Returns ``{}`` when every factor is 1 (plain RoPE), None when no wavelength
    band reproduces them to 1e-5.  The band's three parameters are determined
    only up to a common scale (the frequencies depend on ``original_context /
    low_freq_factor`` and ``original_context / high_freq_factor``), so
    ``low_freq_factor`` is taken as 1 and the other two fitted from the smoothed
    pairs; at least two pairs must lie inside the band.
    """
    f = np.asarray(factors, dtype=np.float64).reshape(-1)
    if f.size == 0 or not np.all(np.isfinite(f)) or np.any(f <= 0):
        return None
    if np.allclose(f, 1.0, rtol=0, atol=1e-6):
        return {}
    n = f.size
    b = theta ** (-2.0 * np.arange(n) / (2 * n))
    factor = float(f.max())
    tol = 1e-5 * factor
    band = (f > 1 + tol) & (f < factor - tol)
    if band.sum() < 2:
        return None
    # inside the band 1/f = (1 - s)/factor + s with s = ramp_w * b + ramp_0
    s = (1 / f[band] - 1 / factor) / (1 - 1 / factor)
    ramp_w, ramp_0 = np.polyfit(b[band], s, 1)
    if not (ramp_w > 0 and ramp_0 < 0):
        return None
    high = 1.0 - 1.0 / ramp_0
    context = int(round(-2 * math.pi * ramp_w / ramp_0))
    if context <= 0:
        return None
    attrs: dict[str, float | int] = {
        "factor": factor,
        "low_freq_factor": 1.0,
        "high_freq_factor": float(high),
        "original_context": context,
    }
    # the attributes must give the factors back
    m = np.clip(context / (2 * math.pi * (high - 1.0)) * b - 1.0 / (high - 1.0), 0.0, 1.0)
    back = 1.0 / ((1 - m) / factor + m)
    if not np.allclose(back, f, rtol=1e-5, atol=0):
        return None
    return attrs
