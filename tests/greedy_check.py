"""Greedy generation of ckir against a reference, with a principled tolerance.

Decode quantizes activations to Q8 (like llama.cpp), so greedy text can leave
the reference's where the reference itself nearly ties; where that happens
depends on the ISA's summation order, so an "identical N tokens" assertion
holds on one machine and fails on the next.  The check instead asks for at
least ``min_equal`` identical tokens, and at the first divergence for a top-1
gap of the reference (same prefix) no larger than ``rel`` of its max |logit|.
"""

from __future__ import annotations

import numpy as np


def assert_greedy_agrees(
    got: list[int], want: list[int], ref_logits: np.ndarray, min_equal: int, rel: float
) -> int | None:
    """Check ``got`` against ``want``; ``ref_logits[k]`` are the reference's logits for token k.

    Returns the first divergence (None when identical)."""
    assert len(got) == len(want) == len(ref_logits), (len(got), len(want), len(ref_logits))
    first = next((k for k, (a, b) in enumerate(zip(got, want, strict=True)) if a != b), None)
    print(f"greedy: first divergence at token {first} of {len(want)}")
    if first is None:
        return None
    assert first >= min_equal, f"ckir and the reference diverge at token {first} (< {min_equal})"
    ref = ref_logits[first]  # the reference's logits for token `first` (same prefix as ours)
    gap = float(ref[want[first]] - ref[got[first]])
    print(f"greedy: reference top-1 gap there {gap:.3f} (max |logit| {np.abs(ref).max():.1f})")
    assert 0 <= gap <= rel * float(np.abs(ref).max()), gap
    return first
