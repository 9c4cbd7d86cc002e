"""graph.rope's scaling coefficients against transformers' RoPE definitions.

passes/lowering/rope_scaling.py reduces each rope_type to the coefficients of the
kernels' one inverse-frequency formula (kernel_lib.rope_inv_freq evaluates it in
float32 as ckir_rope.h does); here the result is compared with the inverse
frequencies and attention scale of transformers' ``ROPE_INIT_FUNCTIONS`` for
configs whose bands, ramps and partial rotation cover every branch.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import rope_inv_freq

from ckir.dialects import graph as g
from ckir.errors import CkirError
from ckir.passes.lowering.rope_scaling import rope_coefficients

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


def _rope_op(attrs: dict) -> g.ComputeOp:
    t = g.TensorType.make(["T", 8], "f32")
    return g.compute_op(
        "rope", [], [t, t], attrs={"heads": 1, "kv_heads": 1, "head_dim": 8, **attrs}
    )


def _hf(rope_parameters: dict, head_dim: int, partial: float | None, ctx: int = 4096):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = dict(rope_parameters)
    if partial is not None:
        params["partial_rotary_factor"] = partial
    cfg = LlamaConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=ctx,
        rope_parameters=params,
    )
    kind = params["rope_type"]
    if kind == "default":
        inv = 1.0 / (
            params["rope_theta"]
            ** (
                torch.arange(0, int(head_dim * (partial or 1)), 2).float()
                / int(head_dim * (partial or 1))
            )
        )
        return inv.numpy(), 1.0
    inv, scale = ROPE_INIT_FUNCTIONS[kind](cfg, "cpu")
    return inv.numpy(), float(scale)


# (transformers' rope_parameters, graph.rope's attributes, head_dim, partial_rotary_factor)
CASES = [
    ({"rope_type": "default", "rope_theta": 10000.0}, {}, 64, None),
    ({"rope_type": "default", "rope_theta": 10000.0}, {}, 30, 0.4),
    (
        {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
        {"rope_type": "linear", "factor": 4.0},
        64,
        None,
    ),
    (
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        {
            "rope_type": "wavelength",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_context": 8192,
        },
        128,
        None,
    ),
    (  # a small original context: most dims in the smoothed band
        {
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 3.0,
            "low_freq_factor": 2.0,
            "high_freq_factor": 7.0,
            "original_max_position_embeddings": 40,
        },
        {
            "rope_type": "wavelength",
            "factor": 3.0,
            "low_freq_factor": 2.0,
            "high_freq_factor": 7.0,
            "original_context": 40,
        },
        22,
        None,
    ),
    (
        {
            "rope_type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
        {"rope_type": "yarn", "factor": 4.0, "original_context": 32768, "truncate": True},
        128,
        None,
    ),
    (
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 2.5,
            "original_max_position_embeddings": 64,
            "beta_fast": 8.0,
            "beta_slow": 2.0,
            "mscale": 0.7,
            "mscale_all_dim": 0.3,
            "truncate": False,
        },
        {
            "rope_type": "yarn",
            "factor": 2.5,
            "original_context": 64,
            "beta_fast": 8.0,
            "beta_slow": 2.0,
            "mscale": 0.7,
            "mscale_all_dim": 0.3,
        },
        28,
        0.5,
    ),
    (
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 100,
            "attention_factor": 1.3,
        },
        {
            "rope_type": "yarn",
            "factor": 16.0,
            "original_context": 100,
            "attention_factor": 1.3,
            "truncate": True,
        },
        18,
        None,
    ),
]


@pytest.mark.parametrize("hf,attrs,head_dim,partial", CASES)
def test_coefficients_give_transformers_inv_freq(hf, attrs, head_dim, partial):
    theta = hf["rope_theta"]
    full = {"theta": theta, **attrs}
    if partial is not None:
        full["partial_rotary_factor"] = partial
    op = _rope_op(full)
    c = rope_coefficients(op, head_dim, "test")
    want, scale = _hf(hf, head_dim, partial)
    assert 2 * len(want) == c.R
    got = rope_inv_freq(c.R, theta, c.factor, (c.ramp_w, c.ramp_i, c.ramp_0))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    assert c.mscale == pytest.approx(scale, rel=1e-12)
    if attrs.get("rope_type", "default") != "default":
        assert not np.allclose(got, rope_inv_freq(c.R, theta)), "the scaling changed nothing"


def test_coefficients_refuse_an_odd_rotation():
    op = _rope_op({"theta": 1e4, "partial_rotary_factor": 0.5})
    with pytest.raises(CkirError, match="rotates 5 of 10 dims"):
        rope_coefficients(op, 10, "test")


@pytest.mark.parametrize("dim,theta", [(128, 500000.0), (64, 500000.0)])
def test_wavelength_from_real_sized_factors(dim: int, theta: float) -> None:
    """The divisors llama.cpp writes for Llama 3.1 / 3.2's rope (factor 8 / 32, bands
    1 and 4, original context 8192) give those attributes back, and the frequencies
    of the recovered band are transformers'."""
    from ckir.passes.lowering.rope_scaling import wavelength_from_factors

    factor = 8.0 if dim == 128 else 32.0
    hf = {
        "rope_type": "llama3",
        "rope_theta": theta,
        "factor": factor,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    want, _ = _hf(hf, dim, None, ctx=131072)
    plain = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    attrs = wavelength_from_factors((plain / want).astype(np.float32), theta)
    assert attrs is not None
    assert attrs["original_context"] == 8192 and attrs["factor"] == pytest.approx(factor)
    assert attrs["high_freq_factor"] == pytest.approx(4.0, rel=1e-5)
    op = _rope_op({"theta": theta, "rope_type": "wavelength", **attrs})
    c = rope_coefficients(op, dim, "test")
    got = rope_inv_freq(c.R, theta, c.factor, (c.ramp_w, c.ramp_i, c.ramp_0))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)


def test_wavelength_from_factors_refuses_what_no_band_gives() -> None:
    from ckir.passes.lowering.rope_scaling import wavelength_from_factors

    assert wavelength_from_factors(np.ones(8, np.float32), 1e4) == {}
    assert wavelength_from_factors(np.array([1, 3, 1, 2], np.float32), 1e4) is None
    assert wavelength_from_factors(np.array([1, 1, 2, 2], np.float32), 1e4) is None  # no band
