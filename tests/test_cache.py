"""The compile cache: reuse, key checks on load, rebuild on mismatch, atomic builds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckir import cache
from ckir.compiler import BUILD_INFO, CompileOptions
from ckir.model import load


@pytest.fixture
def model_dir(llama_dir: Path) -> Path:
    return llama_dir


def test_second_request_is_served_from_the_cache(model_dir: Path, tmp_path: Path) -> None:
    opts = CompileOptions(max_context=16)
    first, cached1 = cache.cached_build(model_dir, opts, root=tmp_path)
    second, cached2 = cache.cached_build(model_dir, opts, root=tmp_path)
    assert (cached1, cached2) == (False, True)
    assert first == second
    info = json.loads((first / BUILD_INFO).read_text())
    key = info["cache_key"]
    assert first.name == key["key"]
    assert set(key) >= {"ir", "ckir_version", "model_abi", "runtime", "isa", "weights_source"}
    with load(second) as m:
        assert m.prefill([1, 2, 3]).shape == (3, m.vocab_size)


def test_other_options_give_another_build(model_dir: Path, tmp_path: Path) -> None:
    a, _ = cache.cached_build(model_dir, CompileOptions(max_context=16), root=tmp_path)
    b, cached = cache.cached_build(model_dir, CompileOptions(max_context=32), root=tmp_path)
    assert not cached and a != b


def test_logits_option_gives_another_build(model_dir: Path, tmp_path: Path) -> None:
    """``ckir generate`` builds with logits="last": never served an "all" build, nor back."""
    a, _ = cache.cached_build(model_dir, CompileOptions(max_context=16), root=tmp_path)
    opts = CompileOptions(max_context=16, logits="last")
    b, cached = cache.cached_build(model_dir, opts, root=tmp_path)
    assert not cached and a != b
    assert cache.cached_build(model_dir, opts, root=tmp_path) == (b, True)
    with load(b) as m:
        assert m.logits_rows == "last"
        assert m.prefill([1, 2, 3]).shape == (1, m.vocab_size)


def test_key_mismatch_on_load_rebuilds(model_dir: Path, tmp_path: Path) -> None:
    opts = CompileOptions(max_context=16)
    build, _ = cache.cached_build(model_dir, opts, root=tmp_path)
    info_path = build / BUILD_INFO
    info = json.loads(info_path.read_text())
    info["cache_key"]["runtime"] = "0" * 64  # as if built by another runtime
    info_path.write_text(json.dumps(info))
    assert not cache.build_is_valid(build)
    again, cached = cache.cached_build(model_dir, opts, root=tmp_path)
    assert not cached and again == build
    assert cache.build_is_valid(again)


def test_runtime_change_invalidates(model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    opts = CompileOptions(max_context=16)
    build, _ = cache.cached_build(model_dir, opts, root=tmp_path)
    monkeypatch.setattr(cache, "runtime_fingerprint", lambda isa, debug: "f" * 64)
    assert not cache.build_is_valid(build)
    _, cached = cache.cached_build(model_dir, opts, root=tmp_path)
    assert not cached


def test_incomplete_build_is_not_used(model_dir: Path, tmp_path: Path) -> None:
    opts = CompileOptions(max_context=16)
    build, _ = cache.cached_build(model_dir, opts, root=tmp_path)
    (build / "libmodel.so").unlink()
    _, cached = cache.cached_build(model_dir, opts, root=tmp_path)
    assert not cached and (build / "libmodel.so").exists()


def test_touched_checkpoint_changes_the_key(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    src = tmp_path / "src"
    shutil.copytree(model_dir, src)
    opts = CompileOptions(max_context=16)
    a, _ = cache.cached_build(src, opts, root=tmp_path / "c")
    weights = next(src.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # a different weight value: the IR is the same, the blob is not
    weights.write_bytes(bytes(data))
    b, cached = cache.cached_build(src, opts, root=tmp_path / "c")
    assert not cached and a != b


def test_tokenizer_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second request reads the cached JSON, not the GGUF metadata; a touched
    source or a corrupt entry is read from the source again."""
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    from gguf_fixtures import tokenizer_metadata, write_gguf

    from ckir import tokenizer as tokenizer_mod

    src = write_gguf(tmp_path / "tok.gguf", "llama", tokenizer_metadata(), {})
    root = tmp_path / "cache"
    reads: list[Path] = []
    real = tokenizer_mod._gguf_metadata

    def counting(path: Path):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(tokenizer_mod, "_gguf_metadata", counting)
    first = cache.cached_tokenizer(src, root=root)
    second = cache.cached_tokenizer(src, root=root)
    assert len(reads) == 1
    assert second.to_json() == first.to_json()
    assert second.encode(" the cat<|im_end|>") == first.encode(" the cat<|im_end|>")
    (entry,) = (root / "tokenizers").iterdir()
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".")]  # no temp files

    entry.write_text("{not json")
    third = cache.cached_tokenizer(src, root=root)
    assert len(reads) == 2 and third.to_json() == first.to_json()
    assert json.loads(entry.read_text())["format"] == 1  # rewritten

    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    cache.cached_tokenizer(src, root=root)
    assert len(reads) == 3
    assert len(list((root / "tokenizers").iterdir())) == 2


def test_hf_folder_tokenizer_is_read_each_time(tmp_path: Path) -> None:
    """A folder's tokenizer (tokenizer.json, chat_template.jinja) is not cached."""
    pytest.importorskip("tokenizers")
    from gguf_fixtures import tokenizer_metadata, write_gguf

    from ckir.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(write_gguf(tmp_path / "t.gguf", "llama", tokenizer_metadata(), {}))
    d = tmp_path / "hf"
    d.mkdir()
    tok.backend.save(str(d / "tokenizer.json"))
    (d / "chat_template.jinja").write_text("A{{ messages[0]['content'] }}")
    root = tmp_path / "cache"
    msgs = [{"role": "user", "content": "x"}]
    assert cache.cached_tokenizer(d, root=root).apply_chat_template(msgs) == "Ax"
    (d / "chat_template.jinja").write_text("B{{ messages[0]['content'] }}")
    assert cache.cached_tokenizer(d, root=root).apply_chat_template(msgs) == "Bx"
    assert not (root / "tokenizers").exists()
