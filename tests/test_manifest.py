"""The I/O manifest of a build and its fingerprint (docs/manifest.md).

One llama build with every mode and one GPT-2 build: manifest.json and the
library's ``ckir_io_desc`` agree, the Python API reads logits, KV cache and
gradients through the manifest's handles and writes inputs through them, and the
library and weights.bin of two different builds refuse each other naming both
fingerprints.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import ckir
from ckir.errors import CkirError

MAX_CONTEXT = 12


@pytest.fixture(scope="module")
def builds(
    tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("manifest_builds")
    llama = root / "llama"
    ckir.compile(
        tiny_model("llama"), llama, modes=("prefill", "decode", "backward"), max_context=MAX_CONTEXT
    ).close()
    gpt2 = root / "gpt2"
    ckir.compile(tiny_model("gpt2"), gpt2, max_context=MAX_CONTEXT).close()
    return {"llama": llama, "gpt2": gpt2}


def _json(build: Path) -> dict:
    return json.loads((build / "manifest.json").read_text())


def test_manifest_json_matches_the_library(builds: dict[str, Path]) -> None:
    for build in builds.values():
        data = _json(build)
        with ckir.load(build) as model:
            handles = model.manifest
            assert [h["name"] for h in data["handles"]] == list(handles)
            for h in data["handles"]:
                got = handles[h["name"]]
                assert (got.role, got.mode, got.dtype) == (h["role"], h["mode"], h["dtype"])
                assert (list(got.shape), list(got.dims)) == (h["shape"], h["dims"])
                assert got.arena == {"weights": 0, "state": 1}[h["arena"]]
                assert (got.offset, got.bytes) == (h["offset"], h["bytes"])
                # the handle lies on the slot the plan gave its buffer
                arena, offset, size, _ = model.slots()[h["slot"]]
                assert (arena, offset, size) == (got.arena, got.offset, got.bytes)
            assert int(data["fingerprint"], 16) == model._lib.ckir_fingerprint()
            # the build's own IR gives its fingerprint again (profiling copies re-emit from it)
            assert _fingerprint_of_ir(build) == model._lib.ckir_fingerprint()


def _fingerprint_of_ir(build: Path) -> int:
    from ckir.backend.abi import build_fingerprint
    from ckir.dialects import layout as ly
    from ckir.dialects import lowered as lw
    from ckir.ir_io import parse_module

    module = parse_module((build / "layout.mlir").read_text())
    model = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp))
    plan = next(op for op in module.ops if isinstance(op, ly.PlanOp))
    return build_fingerprint(model, plan)


def test_roles_modes_and_symbols(builds: dict[str, Path]) -> None:
    with ckir.load(builds["llama"]) as model:
        m = model.manifest
        assert m["prefill.tokens"].role == "input" and m["prefill.tokens"].dims == ("T",)
        assert m["prefill.tokens"].shape == (MAX_CONTEXT,)
        assert m["prefill.logits"].dims == ("T", "")
        assert m["decode.tokens"].dims == ("",) and m["decode.tokens"].shape == (1,)
        assert m["backward.targets"].role == "input"
        assert m["backward.loss"].role == "output" and m["backward.loss"].shape == (1,)
        params = [n for n, h in m.items() if h.role == "param"]
        assert "embed" in params and "layers.0.attn.wq" in params
        state = {n: h for n, h in m.items() if h.role == "state"}
        assert state["kv.layers.0.k"].dims[0] == "PT"
        assert state["kv.layers.0.k"].shape[0] == MAX_CONTEXT
        assert {"grad.embed", "adam.m.embed", "adam.v.embed"} <= set(state)
        assert {h.mode for h in m.values() if h.role in ("param", "state")} == {""}


def test_read_and_write_through_handles(builds: dict[str, Path]) -> None:
    with ckir.load(builds["llama"]) as model:
        logits = model.prefill([3, 1, 4, 1, 5])
        np.testing.assert_array_equal(model.read("prefill.logits")[:5], logits)
        np.testing.assert_array_equal(model.read("prefill.tokens")[:5], [3, 1, 4, 1, 5])
        k = model.read("kv.layers.0.k")
        assert np.abs(k[:5]).sum() > 0 and not np.any(k[5:])  # PT = 5 rows filled
        # a param written through its handle is what the next call computes with
        embed = model.read("embed")
        model.write("embed", np.zeros_like(embed))
        model.reset()
        assert not np.any(model.read("embed"))
        zero = model.prefill([3, 1])
        model.write("embed", embed)
        model.reset()
        assert not np.allclose(zero, model.prefill([3, 1]))
        np.testing.assert_array_equal(model.read("embed"), embed)
        with pytest.raises(CkirError, match="no io handle 'logits'"):
            model.read("logits")
        with pytest.raises(CkirError, match="'prefill.logits' is an output"):
            model.write("prefill.logits", logits)
        with pytest.raises(CkirError, match=r"holds f32 \(float32\), got float64"):
            model.write("embed", embed.astype(np.float64))
        with pytest.raises(CkirError, match=r"has shape \[256, 64\]"):
            model.write("embed", embed[:3])
        # fewer rows are fine where the leading dim follows a symbol (T)
        model.write("prefill.tokens", np.array([7, 8], dtype=np.int32))
        assert list(model.read("prefill.tokens")[:2]) == [7, 8]


def test_gradients_are_named_by_the_manifest(builds: dict[str, Path]) -> None:
    with ckir.load(builds["llama"]) as model:
        model.backward([1, 2, 3, 4], [2, 3, 4, 5])
        grads = model.gradients()
        params = {n for n, h in model.manifest.items() if h.role == "param"}
        assert set(grads) <= params and "layers.0.attn.wq" in grads
        np.testing.assert_array_equal(grads["embed"], model.read("grad.embed"))
        assert float(model.read("backward.loss")[0]) > 0


def test_swapped_weights_are_refused_naming_both_fingerprints(
    builds: dict[str, Path], tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(builds["llama"], a)
    shutil.copytree(builds["gpt2"], b)
    fa, fb = _json(a)["fingerprint"], _json(b)["fingerprint"]
    assert fa != fb
    wa, wb = (a / "weights.bin").read_bytes(), (b / "weights.bin").read_bytes()
    (a / "weights.bin").write_bytes(wb)
    (b / "weights.bin").write_bytes(wa)
    for build, mine, theirs in ((a, fa, fb), (b, fb, fa)):
        with pytest.raises(CkirError) as err:
            ckir.load(build)
        msg = str(err.value)
        assert f"written for build fingerprint {theirs}" in msg, msg
        assert f"libmodel.so is build {mine}" in msg, msg


def test_ckir_run_reads_handles(
    builds: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ckir.cli import main

    k, logits = tmp_path / "k.npy", tmp_path / "l.npy"
    args = ["run", str(builds["llama"]), "--tokens", "1,2,3", "--steps", "2"]
    assert main([*args, "--read", f"kv.layers.0.k={k}", "--read", f"decode.logits={logits}"]) == 0
    cache = np.load(k)
    assert cache.shape[0] == MAX_CONTEXT
    assert np.abs(cache[:4]).sum() > 0 and not np.any(cache[4:])  # 3 prompt + 1 decode
    assert np.load(logits).shape[0] == 1
    capsys.readouterr()
    assert main([*args, "--read", f"kv.nope={k}"]) != 0
    assert "no io handle 'kv.nope' in the manifest" in capsys.readouterr().err
    assert main([*args, "--read", "decode.logits"]) != 0
    assert "--read decode.logits: give HANDLE=FILE.npy" in capsys.readouterr().err


def _convention_prefill(model, tokens: list[int]) -> np.ndarray:
    """The logits of a prefill through the convention entry points (ckir_prefill,
    ckir_copy_logits), as the API ran before it used the manifest."""
    import ctypes

    arr = (ctypes.c_int32 * len(tokens))(*tokens)
    assert model._lib.ckir_prefill(model._ptr, arr, len(tokens)) == 0
    out = np.empty((len(tokens), model.vocab_size), np.float32)
    assert model._lib.ckir_copy_logits(model._ptr, out.ctypes.data) == 0
    return out


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_api_steps_go_through_the_handles(builds: dict[str, Path], arch: str) -> None:
    """prefill / decode write their tokens and read their logits through the manifest:
    the logits are the arena's bytes at the handle, bit for bit those of the convention
    entry points, and a handle moved elsewhere moves what is written and read."""
    import dataclasses

    tokens = [3, 1, 4, 1, 5]
    with ckir.load(builds[arch]) as model:
        m = model.manifest
        ref = _convention_prefill(model, tokens)
        ref_next = model.decode(9).copy()
        model.reset()
        got = model.prefill(tokens)
        np.testing.assert_array_equal(got, ref)
        h = m["prefill.logits"]
        arena = model._bytes(h.arena, h.offset, got.nbytes).view(np.float32)
        np.testing.assert_array_equal(arena.reshape(got.shape), got)
        np.testing.assert_array_equal(model.decode(9), ref_next)
        np.testing.assert_array_equal(model.read("decode.tokens")[:1], [9])
        # logits read one row further on: the next rows
        model.reset()
        row = h.bytes // h.shape[0]
        m["prefill.logits"] = dataclasses.replace(h, offset=h.offset + row)
        shifted = model.prefill(tokens)
        np.testing.assert_array_equal(shifted[:-1], ref[1:])
        m["prefill.logits"] = h
        # tokens written elsewhere (into the logits, scratch): the step runs on the ones
        # left in the tokens buffer by the last call
        t = m["prefill.tokens"]
        m["prefill.tokens"] = dataclasses.replace(t, offset=h.offset)
        model.reset()
        stale = model.prefill([7, 7, 7, 7, 7])
        m["prefill.tokens"] = t
        np.testing.assert_array_equal(stale, ref)
        model.reset()
        assert not np.array_equal(model.prefill([7, 7, 7, 7, 7]), ref)
        # a handle of another dtype is refused, naming it
        m["decode.tokens"] = dataclasses.replace(m["decode.tokens"], dtype="f32")
        with pytest.raises(CkirError, match="io handle 'decode.tokens' is f32"):
            model.decode(1)


def test_backward_goes_through_the_handles(builds: dict[str, Path]) -> None:
    """backward writes tokens and targets and reads the loss through the manifest: the
    loss is the arena's float at ``backward.loss``, and targets written elsewhere leave
    the step on the last call's."""
    import dataclasses

    tokens, targets = [1, 2, 3, 4], [2, 3, 4, 5]
    with ckir.load(builds["llama"]) as model:
        m = model.manifest
        loss = model.backward(tokens, targets)
        assert np.float32(loss) == model.read("backward.loss")[0]
        np.testing.assert_array_equal(model.read("backward.targets")[:4], targets)
        other = model.backward(tokens, [9, 9, 9, 9])
        assert other != loss
        t = m["backward.targets"]
        scratch = m["prefill.logits"].offset  # another mode's output
        m["backward.targets"] = dataclasses.replace(t, offset=scratch)
        assert model.backward(tokens, targets) == other  # the targets of the last call
        m["backward.targets"] = t
        assert model.backward(tokens, targets) == loss
        # the loss read one float further on is another value
        lh = m["backward.loss"]
        m["backward.loss"] = dataclasses.replace(lh, offset=lh.offset + 4)
        moved = model.backward(tokens, targets)
        assert np.float32(moved).tobytes() == model._bytes(1, lh.offset + 4, 4).tobytes()
        m["backward.loss"] = lh
