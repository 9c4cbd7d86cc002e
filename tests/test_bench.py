"""``ckir bench`` smoke tests: tiny models, one round, table format and ratio arithmetic.

No timing assertions: speed targets are measured by hand (docs/performance.md).
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from ckir import cost
from ckir.backend.c_emitter import emit_c
from ckir.tools import bandwidth, bench

# tiny llama of ckir.tools.zoo: E=64, H=4, KV=2 (D=16), I=172, L=2, V=256, untied
E, H, KV, D, I, L, V = 64, 4, 2, 16, 172, 2, 256  # noqa: E741 - the model symbols


@pytest.fixture(scope="module")
def tiny_build(llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "tiny-f32"
    bench.compile_build(llama_dir, out, "f32", max_context=32, cold=False, panels=False)
    return out


def test_cost_model_matches_hand_count(tiny_build: Path) -> None:
    cost = bench.model_cost(tiny_build)
    f = 4  # bytes per f32
    layer_matrices = E * E + 2 * (KV * D) * E + E * E + 3 * I * E
    layer_norms = 2 * E
    expected_decode = (
        E * f  # one embedding row
        + L * (layer_matrices + layer_norms) * f
        + E * f  # final norm
        + V * E * f  # untied LM head
    )
    assert cost.decode_weight_bytes == expected_decode
    assert cost.kv_bytes_per_position == L * 2 * KV * D * f
    assert cost.prefill_params == L * layer_matrices + V * E
    assert cost.attention_hd == L * H * D
    assert cost.max_context == 32
    assert cost.vocab == V
    assert cost.kv_cache == L * 2 * 32 * KV * D * f
    layout = json.loads((tiny_build / "layout.json").read_text())
    sizes = {a["name"]: a["size"] for a in layout["arenas"]}
    assert (cost.weights_arena, cost.state_arena) == (sizes["weights"], sizes["state"])


def test_cost_model_counts_f32p_panels(tiny_build: Path, llama_dir: Path, tmp_path: Path) -> None:
    """f32p matrices cost their padded panels (I = 172 rows -> 192 for gate and up); the
    gathered embedding row and the FLOPs are those of the logical matrices."""
    out = tmp_path / "tiny-f32p"
    bench.compile_build(llama_dir, out, "f32p", max_context=32, cold=False)
    packed, plain = bench.model_cost(out), bench.model_cost(tiny_build)
    padding = L * 2 * (192 - I) * E * 4
    assert packed.decode_weight_bytes == plain.decode_weight_bytes + padding
    assert packed.prefill_params == plain.prefill_params
    assert packed.vocab == V
    assert bench.baseline_dtype("f32p") == "f32" and bench.baseline_dtype("q8_0") == "q8_0"


def test_cost_model_counts_bf16p_panels(tiny_build: Path, llama_dir: Path, tmp_path: Path) -> None:
    """A bf16 build stores its matrices as bf16p (the default): 2 bytes per stored value,
    the padded panels included (I = 172 rows -> 192 for gate and up; down [E, I] has
    E = 64 rows, whole panels), norms 4 bytes per element, a gathered embedding row 2
    bytes per element; the FLOPs are those of the logical matrices."""
    out = tmp_path / "tiny-bf16"
    bench.compile_build(llama_dir, out, "bf16", max_context=32, cold=False)
    assert "] bf16p hf" in (out / "layout.mlir").read_text()
    packed, plain = bench.model_cost(out), bench.model_cost(tiny_build)
    layer_matrices = E * E + 2 * (KV * D) * E + E * E + 2 * 192 * E + E * I
    layer_norms = 2 * E
    expected = E * 2 + L * (layer_matrices * 2 + layer_norms * 4) + E * 4 + V * E * 2
    assert packed.decode_weight_bytes == expected
    assert packed.prefill_params == plain.prefill_params
    assert bench.baseline_dtype("bf16p") == "bf16" and bench.baseline_dtype("bf16") == "bf16"


@pytest.mark.parametrize(("values", "block"), [("q8_0", 34), ("q4_1", 20), ("q4_0", 18)])
def test_cost_model_counts_block_panels(
    values: str, block: int, tiny_build: Path, llama_dir: Path, tmp_path: Path
) -> None:
    """A q8_0 / q4_1 / q4_0 build stores its matrices as q8_0p / q4_1p / q4_0p (the
    default): 34 / 20 / 18 bytes per block of 32 of every stored row, the padded panels
    included (I = 172 rows -> 192 for gate and up); down [E, I] (K = 172, no whole
    blocks) stays f32, stored as f32p (E = 64 rows: whole panels); a gathered embedding
    row is one row of the block format (E/32 blocks); the FLOPs are those of the logical
    matrices."""
    dtype = f"{values}p"
    out = tmp_path / f"tiny-{values}"
    bench.compile_build(llama_dir, out, values, max_context=32, cold=False)
    layout = (out / "layout.mlir").read_text()
    assert f"] {dtype} hf" in layout and f"] {values} hf" not in layout
    packed, plain = bench.model_cost(out), bench.model_cost(tiny_build)
    row = E // 32 * block  # one row of K = E in the block format
    layer_q8_rows = E + 2 * (KV * D) + E + 2 * 192
    layer_bytes = layer_q8_rows * row + E * I * 4 + 2 * E * 4
    expected = row + L * layer_bytes + E * 4 + V * row
    assert packed.decode_weight_bytes == expected
    assert packed.prefill_params == plain.prefill_params
    assert bench.baseline_dtype(dtype) == values


def test_roofline_arithmetic() -> None:
    cost = bench.ModelCost(
        decode_weight_bytes=1000,
        kv_bytes_per_position=10,
        prefill_params=50,
        attention_hd=3,
        weights_arena=0,
        state_arena=0,
        kv_cache=0,
        max_context=0,
        vocab=0,
    )
    # steps at positions 128..191 read 129..192 rows: mean 160.5
    assert cost.decode_bytes(128, 64) == pytest.approx(1000 + 10 * 160.5)
    assert cost.decode_bytes(0, 1) == 1010
    # 2 x params x T + 4 x HD x T(T+1)/2
    assert cost.prefill_flops(4) == 2 * 50 * 4 + 4 * 3 * 10
    # a training step: 3 x the forward of the backward program
    assert cost.train_flops(4) == 0  # an inference build has no backward program
    train = dataclasses.replace(cost, train_params=50, train_attention_hd=3)
    assert train.train_flops(4) == 3 * (2 * 50 * 4 + 4 * 3 * 10)


def test_ratio_and_stats_helpers() -> None:
    assert bench.rates(64, [2.0, 1.0]) == [32.0, 64.0]
    # ckir took 1 s and 2 s, the baseline 3 s and 3 s: ckir is 3x then 1.5x faster
    assert bench.paired_ratios([1.0, 2.0], [3.0, 3.0]) == [3.0, 1.5]
    with pytest.raises(ValueError):
        bench.paired_ratios([1.0], [1.0, 2.0])
    assert bench.spread([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert [bench.fmt_num(x) for x in (1234.5, 56.78, 3.456, 0.01234)] == [
        "1234",
        "56.8",
        "3.46",
        "0.012",
    ]
    assert bench.fmt_range([2.0, 30.0, 5.0]) == "2.00–30.0"
    table = bench.markdown_table(["a", "b"], [["1", "2"]])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_per_call_costs_read_the_declarations(tiny_build: Path) -> None:
    calls = [c for c in cost.call_costs(bench.build_module(tiny_build)) if c.mode == "decode"]
    by_label: dict[str, list[cost.CallCost]] = {}
    for c in calls:
        by_label.setdefault(c.label, []).append(c)
    (embed,) = by_label["header: graph.embed"]
    assert (embed.kind, embed.weight_bytes, embed.matrix_params) == ("embed", E * 4, 0)
    (head,) = by_label["footer: graph.lm_head"]
    assert (head.kind, head.weight_bytes, head.matrix_params) == ("linear", V * E * 4, V * E)
    attention = [c for c in calls if c.kind == "attention"]
    assert [c.kv_bytes_per_position for c in attention] == [2 * KV * D * 4] * L
    assert [c.attention_hd for c in attention] == [H * D] * L
    # kv_store writes the cache: writing is not reading
    assert all(c.kv_bytes_per_position == 0 for c in calls if c.kind == "kv_store")
    assert [c.index for c in calls] == list(range(len(calls)))


def test_profiling_build_times_every_call(tiny_build: Path) -> None:
    text = (tiny_build / "model.c").read_text()
    module = bench.build_module(tiny_build)
    # the profiling model.c is emitted from the build's own IR: the same program
    assert emit_c(module).source == text
    prof = emit_c(module, profile=True)
    calls = list(prof.profile)
    plain = re.findall(r"^\s+ckir_\w+\(.*\);$", text, flags=re.M)
    assert len(calls) == len(plain) > 0
    assert [c.index for c in calls] == list(range(len(calls)))
    assert prof.source.count("ckir_prof_now() - ckir_prof_t0") == len(calls)
    assert {c.mode for c in calls} == {"prefill", "decode"}
    lm_head = [c for c in calls if c.mode == "decode"][-1]
    assert lm_head.kernel == "gemv_f32" and lm_head.weights == ("w.lm_head",)
    assert lm_head.label == "footer: graph.lm_head" and lm_head.kind == "linear"
    assert '"footer: graph.lm_head"' in prof.source
    rows = bench.profile_rows(
        [dataclasses.asdict(c) for c in calls],
        times=[1.0] * len(calls),
        counts=[2.0] * len(calls),
        mode="decode",
        per=2.0,
        slots=bench.slot_info(tiny_build),
    )
    by_kernel = {r[0]: r for r in rows}
    n_decode = sum(c.mode == "decode" for c in calls)
    assert sum(r[1] for r in rows) == n_decode  # calls per step
    gemv = by_kernel["gemv_f32"]  # wo, down (x2 layers) + LM head, f32
    assert gemv[1] == 5 and gemv[3] == (2 * (E * E + E * I) + V * E) * 4


def test_gguf_writer_layout(llama_dir: Path, tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = bench.write_gguf(llama_dir, "q8_0", tmp_path / "tiny.gguf")
    reader = gguf.GGUFReader(str(path))
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "Q8_0"
    assert types["blk.1.ffn_up.weight"] == "Q8_0"
    assert types["blk.1.ffn_down.weight"] == "F32"  # K = 172: not whole blocks (as in ckir)
    assert types["blk.0.attn_norm.weight"] == "F32"
    assert types["output.weight"] == "Q8_0"  # untied tiny llama
    assert len(types) == 2 + 1 + L * 9


def test_gguf_writer_rope_theta(qwen2_tied_dir: Path, tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = bench.write_gguf(qwen2_tied_dir, "f32", tmp_path / "q.gguf")
    field = gguf.GGUFReader(str(path)).fields["qwen2.rope.freq_base"]
    assert float(field.parts[field.data[0]][0]) == 1e6  # transformers 5: rope_parameters


def test_bench_end_to_end(llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    report = tmp_path / "bench.json"
    argv = [
        str(llama_dir),
        "--against",
        "torch",
        "--dtype",
        "f32,q8_0",
        "--repeat",
        "2",
        "--prompt-tokens",
        "8",
        "--decode-tokens",
        "4",
        "--context",
        "8",
        "--probe-mib",
        "16",
        "--profile",
        "--build-dir",
        str(tmp_path / "builds"),
        "--json",
        str(report),
    ]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    header = "| system | dtype | mode | tok/s median | min–max | ckir / this | of bound |"
    assert header in out
    rows = {
        tuple(cells[:3]): cells
        for line in out.splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    for key in [
        ("ckir", "f32", "prefill"),
        ("torch", "f32", "prefill"),
        ("ckir", "q8_0", "decode"),
        ("torch", "f32", "decode"),
    ]:
        assert key in rows, key
    assert "note: torch: no q8_0 weights in PyTorch eager; skipped" in out
    assert "note: ckir f32: the weight matrices are stored as f32p (f32 in GEMM panels" in out
    # q8_0 matrices all have whole blocks: none stays behind
    q8_note = "note: ckir q8_0: the weight matrices are stored as q8_0p (q8_0 in GEMM panels, "
    assert q8_note + "the default of inference builds)\n" in out
    assert re.search(r"logits check torch f32 vs ckir f32: .* = \d\.\de-0[5-9]", out)
    for section in ("Decode roofline", "Prefill roofline", "Compile time", "Peak RSS"):
        assert section in out
    assert "Per-kernel time, ckir q8_0, per decode step" in out
    # the machine kind and the ISA each system ran: the CPU's flags, ckir's runtime build
    # and ATen's capability
    assert re.search(r"cpu: .*, \d+ CPUs; ISA: [a-z0-9_ ]*avx2", out)
    assert re.search(r"ckir ISA: runtime (avx512|avx2|scalar)", out)
    assert re.search(r"torch ISA: ATen [A-Z0-9]+, GEMMs by oneDNN/MKL", out)

    data = json.loads(report.read_text())
    secs = {(s["name"], s["dtype"]): s["seconds"] for s in data["systems"]}
    # the ratio column is the median of per-round ratios of adjacent runs
    for mode in ("prefill", "decode"):
        ckir_s, torch_s = secs["ckir", "f32"][mode], secs["torch", "f32"][mode]
        assert len(ckir_s) == len(torch_s) == 2
        ratio = statistics.median(t / c for c, t in zip(ckir_s, torch_s, strict=True))
        assert rows["torch", "f32", mode][5].startswith(f"{ratio:.2f} (")
        assert rows["ckir", "f32", mode][5] == "—"
    # the decode fraction of bound: tok/s x bytes per token / bandwidth probed around the run
    cost = data["costs"]["f32"]
    per_token = cost["decode_weight_bytes"] + cost["kv_bytes_per_position"] * (8 + 5 / 2)
    ck = next(s for s in data["systems"] if (s["name"], s["dtype"]) == ("ckir", "f32"))
    assert len(ck["probes"]["decode"]) == 2
    fr = [
        4 / s * per_token / (bw * 1e9)
        for s, bw in zip(ck["seconds"]["decode"], ck["probes"]["decode"], strict=True)
    ]
    assert rows["ckir", "f32", "decode"][6] == f"{statistics.median(fr):.2f}"
    rss = data["rss"]["f32"]
    assert rss["hwm_kb"] >= rss["rss_loaded_kb"] > 0
    # q8_0 prefill is bounded by the int8 dot peak where the CPU has one (vpdpbusd with
    # VNNI, else vpmaddubsw; its probes bracket the q8_0 runs), else by the fp32 FMA peak
    q8 = next(s for s in data["systems"] if (s["name"], s["dtype"]) == ("ckir", "q8_0"))
    if bandwidth.int8_dot_peak(1, 1, iters=1000):
        i8 = data["int8_dot_gops"]  # one right before and one right after each run
        insn = bandwidth.int8_dot_insn()
        assert data["int8_dot_insn"] == insn in ("vpdpbusd", "vpmaddubsw")
        assert f"the {insn} peak" in out and len(i8) == 2 * len(q8["probes"]["prefill"])
        pairs = [(i8[2 * i] + i8[2 * i + 1]) / 2 for i in range(len(i8) // 2)]
        assert q8["probes"]["prefill"] == pytest.approx(pairs)
    else:
        assert data["int8_dot_gops"] == [] and "vpdpbusd" not in out


def test_prefill_roofline_without_an_f32_row(
    llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A run without f32 still prints the prefill roofline of its dtypes (bounded by
    the fp32 FMA probe, or by vpdpbusd where the CPU has AVX512-VNNI)."""
    argv = [str(llama_dir), "--dtype", "q8_0", "--modes", "prefill", "--repeat", "1"]
    argv += ["--prompt-tokens", "8", "--context", "16", "--probe-mib", "16"]
    assert bench.main([*argv, "--build-dir", str(tmp_path / "builds")]) == 0
    out = capsys.readouterr().out
    assert "Prefill roofline." in out
    assert re.search(r"^\| q8_0 \| \d", out, re.M)


def test_isa_avx2_benches_the_avx2_kernels(
    llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--isa avx2``: ckir's builds (and its profiling copy) run the AVX2 kernels, in
    folders of their own; the report says so."""
    if " avx2 " not in Path("/proc/cpuinfo").read_text():
        pytest.skip("CPU lacks avx2")
    argv = [str(llama_dir), "--dtype", "f32", "--modes", "decode", "--repeat", "1", "--isa"]
    argv += ["avx2", "--decode-tokens", "2", "--context", "4", "--probe-mib", "16"]
    argv += ["--profile", "--build-dir", str(tmp_path / "builds")]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "ckir ISA: runtime avx2" in out and "compiled with --isa avx2" in out
    built = sorted(p.name for p in (tmp_path / "builds").iterdir())
    assert built == [
        f"{llama_dir.name}-f32-ctx128-avx2",
        f"{llama_dir.name}-f32-ctx128-avx2-profile",
    ]
    for b in built:
        assert json.loads((tmp_path / "builds" / b / "build.json").read_text())["isa"] == "avx2"
        lib = ctypes.CDLL(str(tmp_path / "builds" / b / "libmodel.so"))
        lib.ckir_runtime_isa.restype = ctypes.c_char_p
        assert lib.ckir_runtime_isa() == b"avx2", b


def test_int8_dot_probe_runs_where_the_cpu_has_avx2() -> None:
    peak = bandwidth.int8_dot_peak(1, 2, iters=20_000)
    if not peak:  # the probe library is built -march=native: neither AVX2 nor VNNI here
        assert " avx2 " not in Path("/proc/cpuinfo").read_text()
        return
    assert len(peak) == 2 and all(p > 0 for p in peak)
    vnni = "avx512_vnni" in Path("/proc/cpuinfo").read_text()
    assert bandwidth.int8_dot_insn() == ("vpdpbusd" if vnni else "vpmaddubsw")
    # 128 ops per vpdpbusd (2 per byte of a vpmaddubsw) against 32 (16) flops per zmm
    # (ymm) FMA: well above the fp32 peak
    assert max(peak) > max(bandwidth.fma_peak(1, 2, iters=20_000))


@pytest.mark.parametrize("march", ["haswell", "skylake-avx512"])
def test_int8_dot_probe_without_vnni(march: str, tmp_path: Path) -> None:
    """The vpmaddubsw probe of a CPU without VNNI (AVX2; AVX-512 BW), built here for
    that CPU: 2 ops per byte of the vector, above the FMA peak of the same build."""
    need = {"haswell": ["avx2", "fma"], "skylake-avx512": ["avx512bw", "avx512vl"]}[march]
    flags = Path("/proc/cpuinfo").read_text()
    if not all(f" {f} " in flags for f in need):
        pytest.skip(f"CPU lacks {need}")
    lib_path = tmp_path / "probes.so"
    src = bandwidth.bench_source_dir() / "probes.c"
    cmd = [bandwidth._cc(), "-O2", "-Wall", "-Werror", "-fopenmp", f"-march={march}"]
    cmd += ["-shared", "-fPIC"]
    subprocess.run([*cmd, str(src), "-o", str(lib_path)], check=True)
    lib = ctypes.CDLL(str(lib_path))
    for fn in ("ckb_int8dot", "ckb_int8dot_ops", "ckb_fma", "ckb_fma_flops"):
        getattr(lib, fn).restype = ctypes.c_double
        getattr(lib, fn).argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.ckb_int8dot_insn.restype = ctypes.c_char_p
    assert lib.ckb_int8dot_insn() == b"vpmaddubsw"
    width = 32 if march == "haswell" else 64  # bytes of the vector
    acc = 12 if march == "haswell" else 16  # CKB_ACC chains
    assert lib.ckb_int8dot_ops(2, 1000) == 2 * width * acc * 1000 * 2
    iters = 200_000
    # the best of five interleaved runs each: one run of either can lose its core to
    # another process on a shared host (seen: i8 0.81x fma once, under a load of 3)
    i8, fma = [], []
    for _ in range(5):
        i8.append(lib.ckb_int8dot_ops(1, iters) / lib.ckb_int8dot(1, iters))
        fma.append(lib.ckb_fma_flops(1, iters) / lib.ckb_fma(1, iters))
    assert max(i8) > max(fma) > 0


def test_bench_rejects_bad_arguments(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert bench.main(["smollm-135m", "--dtype", "f16"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --dtype: unknown 'f16'") and err.count("\n") == 1
    assert bench.main([str(tmp_path / "nope")]) == 1
    assert "not a folder and not a built-in shape" in capsys.readouterr().err


def test_bench_train_end_to_end(
    llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ckir.tools import bench_train

    T = 8
    report = tmp_path / "train.json"
    argv = [
        str(llama_dir),
        "--mode",
        "train",
        "--prompt-tokens",
        str(T),
        "--repeat",
        "2",
        "--warmup",
        "1",
        "--rss-steps",
        "2",
        "--profile",
        "--build-dir",
        str(tmp_path / "builds"),
        "--json",
        str(report),
    ]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    rows = {
        tuple(cells[:3]): cells
        for line in out.splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    assert ("ckir", "f32", "train") in rows and ("torch", "f32", "train") in rows
    for section in ("Training roofline", "Layout totals of the training build", "Peak RSS"):
        assert section in out
    assert "Per-phase and per-kernel time, ckir f32, of the training step with the median" in out
    assert "Undisturbed rounds (the FMA probes around both runs >= 0.75 x" in out
    # the same model, the same windows, the same AdamW: the losses agree step by step
    match = re.search(r"losses torch f32 vs ckir f32 over 3 steps .* difference (\S+)", out)
    assert match and float(match.group(1)) < 1e-4, out
    match = re.search(r"loss check torch vs ckir before training: .* difference (\S+)\)", out)
    assert match and float(match.group(1)) < 1e-5, out

    data = json.loads(report.read_text())
    secs = {s["name"]: s["seconds"]["train"] for s in data["systems"]}
    ratio = statistics.median(t / c for c, t in zip(secs["ckir"], secs["torch"], strict=True))
    assert rows["torch", "f32", "train"][5].startswith(f"{ratio:.2f} (")
    # the bound: 3 x the forward FLOPs of the backward program, as counted by hand
    cost = data["costs"]["f32"]
    layer_matrices = E * E + 2 * (KV * D) * E + E * E + 3 * I * E
    assert cost["train_params"] == L * layer_matrices + V * E
    assert cost["train_attention_hd"] == L * H * D
    flops = 3 * (2 * cost["train_params"] * T + 4 * cost["train_attention_hd"] * T * (T + 1) / 2)
    ck = next(s for s in data["systems"] if s["name"] == "ckir")
    fr = [
        flops / s / (fma * 1e9)
        for s, fma in zip(ck["seconds"]["train"], ck["probes"]["train"], strict=True)
    ]
    assert rows["ckir", "f32", "train"][6] == f"{statistics.median(fr):.2f}"
    # layout totals: gradients as big as the weights, AdamW's moments twice
    totals = data["extra"]["layout"]["totals"]
    assert totals["grad"] == totals["weight"] and totals["optimizer_state"] == 2 * totals["weight"]
    assert totals["kv_cache"] == 0  # a training-only build has no KV cache
    rss = data["rss"]["f32"]
    assert rss["hwm_kb"] >= rss["rss_open_kb"] > rss["rss_loaded_kb"] > 0
    assert rss["loss"] > 0

    # the profile's matrix FLOPs: the gradients do twice the forward's (the 3x convention)
    build = Path(tmp_path / "builds" / f"{llama_dir.name}-f32-train-T{T}")
    infos = bench_train.call_infos(build, T)
    gemm = {
        ph: sum(c.flops for c in infos if c.phase == ph and c.kind in bench_train.GEMM_KINDS)
        for ph in ("forward", "gradients")
    }
    assert gemm["forward"] == 2 * cost["train_params"] * T
    assert gemm["gradients"] == 2 * gemm["forward"]
    assert {c.phase for c in infos} == {"forward", "loss", "gradients", "optimizer"}
    assert len(infos) == len(data["profiles"]["f32"]["calls"])


def test_bench_train_quiet_rounds() -> None:
    from ckir.tools import bench_train

    ck = bench.System("ckir", "f32", ("train",), seconds={"train": [1.0, 5.0, 1.0]})
    th = bench.System("torch", "f32", ("train",), seconds={"train": [2.0, 3.0, 4.0]})
    # round 2: a burst of load (probe 100 of a best 300) around ckir's run: left out
    ck.probes = {"train": [300.0, 100.0, 290.0]}
    th.probes = {"train": [280.0, 300.0, 200.0]}  # round 3: torch's run disturbed
    report = bench.Report("m", {}, {}, {}, [ck, th], [], [300.0], [], [], {}, {}, {})
    assert bench_train.quiet_ratios(report) == {"torch f32": (3, [2.0])}


def test_bench_train_rejects_bad_arguments(capsys: pytest.CaptureFixture) -> None:
    assert bench.main(["smollm-135m", "--modes", "train,prefill"]) == 1
    assert "--modes train runs alone" in capsys.readouterr().err
    assert bench.main(["smollm-135m", "--modes", "train", "--dtype", "q8_0"]) == 1
    assert "f32 only" in capsys.readouterr().err


def test_report_names_the_amx_path(
    llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the prefill GEMMs on emulated AMX tiles (CKIR_AMX=emulate reaches the ckir
    worker), the ckir ISA line says so and the prefill roofline warns that its bf16
    row is no speed of this machine."""
    monkeypatch.setenv("CKIR_AMX", "emulate")
    argv = [str(llama_dir), "--dtype", "bf16", "--modes", "prefill", "--repeat", "1"]
    argv += ["--prompt-tokens", "40", "--context", "48", "--probe-mib", "16", "--against", ""]
    assert bench.main([*argv, "--build-dir", str(tmp_path / "builds")]) == 0
    out = capsys.readouterr().out
    if "bf16 GEMMs (M > 32) by vdpbf16ps" not in out and "AMX" not in out:
        pytest.skip("this CPU has no AVX512-BF16: the runtime has no AMX path")
    assert "bf16p GEMMs (M > 32) on emulated AMX tiles (CKIR_AMX=emulate: no speed)" in out
    assert "ran on emulated AMX tiles (CKIR_AMX=emulate; its ISA line)" in out


def test_amx_probe_runs_where_the_cpu_has_amx() -> None:
    """The tile peaks (tdpbf16ps, tdpbssd) the AMX GEMMs are bounded by: empty where the
    CPU lacks AMX (this probe must then never execute a tile instruction), else above
    the vector instructions' peaks of the same kind."""
    from kernel_lib import amx_cpu

    has = amx_cpu()
    bf16 = bandwidth.amx_peak(1, 2, iters=2_000)
    int8 = bandwidth.amx_peak(1, 2, iters=2_000, int8=True)
    if not has:
        assert bf16 == [] and int8 == []
        return
    assert len(bf16) == len(int8) == 2 and min(bf16) > 0 and min(int8) > 0
    assert max(bf16) > max(bandwidth.bf16_dot_peak(1, 2, iters=20_000))
    assert max(int8) > max(bf16)  # twice the products per tile instruction
