"""``ckir bench``'s runners: what a worker process runs for one system, ckir's build
(:class:`CkirRunner`) or a baseline (PyTorch eager, ONNX Runtime, llama.cpp), the worker
process's request loop (:func:`worker_main`), and llama.cpp's preparation (installed on
first use, a GGUF written from the HF checkpoint).  Part of :mod:`ckir.tools.bench`."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ckir.errors import CkirError
from ckir.tools.bench_build import _log, model_config


class BaselineUnavailable(CkirError):
    """A baseline cannot run here; the message says why, in one line."""


class Runner:
    """Worker-side interface: time a prefill, time decode steps after a context."""

    info: dict[str, Any]

    def prefill(self, tokens: list[int]) -> float:
        raise NotImplementedError

    def decode(self, context: list[int], tokens: list[int]) -> float:
        raise NotImplementedError

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        """Every ``stride``-th logit of the last row after prefilling ``tokens``."""
        raise NotImplementedError

    def train(self, tokens: list[int], targets: list[int]) -> dict[str, float]:
        """One timed training step: ``{"s": seconds, "loss": loss before the update}``."""
        raise NotImplementedError

    def loss(self, tokens: list[int], targets: list[int]) -> float:
        """The mean cross-entropy of ``tokens`` against ``targets``, weights unchanged."""
        raise NotImplementedError


class StatefulRunner(Runner):
    """A runner over a model that keeps its own KV state, timed the same way for every
    such system: ``_reset()`` empties the state, ``_feed(tokens)`` runs a prompt,
    ``_step(token)`` one decode step (bound in ``__init__``: no extra call per step)."""

    _reset: Callable[[], Any]
    _feed: Callable[[list[int]], Any]
    _step: Callable[[int], Any]

    def prefill(self, tokens: list[int]) -> float:
        self._reset()
        t0 = time.perf_counter()
        self._feed(tokens)
        return time.perf_counter() - t0

    def decode(self, context: list[int], tokens: list[int]) -> float:
        self._reset()
        self._feed(context)
        step = self._step
        t0 = time.perf_counter()
        for tok in tokens:
            step(tok)
        return time.perf_counter() - t0


class CkirRunner(StatefulRunner):
    def __init__(self, build: str, threads: int) -> None:
        from ckir.model import load

        self.m = load(build)
        self._reset, self._feed, self._step = self.m.reset, self.m.prefill, self.m.decode
        lib = self.m._lib
        lib.ckir_set_num_threads.argtypes = [ctypes.c_int]
        lib.ckir_set_num_threads(threads)
        lib.ckir_runtime_isa.restype = ctypes.c_char_p
        isa = f"runtime {lib.ckir_runtime_isa().decode()}"
        # the AMX mode (ckir_set_amx; a build older than the AMX path has none)
        amx_fn = getattr(lib, "ckir_runtime_amx", None)
        amx = int(amx_fn()) if amx_fn is not None else 0
        if amx:
            tiles = "AMX tiles" if amx == 1 else "emulated AMX tiles (CKIR_AMX=emulate: no speed)"
            isa += f", bf16p GEMMs (M > 32) on {tiles} (tdpbf16ps), other bf16 by vdpbf16ps"
            if self.m.int8_prefill_dot:
                isa += f", q8_0p/q4_0p/q4_1p GEMMs on int8 x on {tiles} (tdpbssd/tdpbsud)"
        else:
            if lib.ckir_runtime_bf16_dot():
                isa += ", bf16 GEMMs (M > 32) by vdpbf16ps"
            if self.m.int8_prefill_dot:
                isa += f", q8_0p/q4_0p/q4_1p GEMMs on int8 x by {self.m.int8_prefill_dot}"
        self.info = {"threads": threads, "isa": isa}
        self._prof = hasattr(lib, "ckir_profile_n")
        if self._prof:
            lib.ckir_profile_n.restype = ctypes.c_longlong
            lib.ckir_profile_times.restype = ctypes.POINTER(ctypes.c_double)
            lib.ckir_profile_counts.restype = ctypes.POINTER(ctypes.c_longlong)

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        self.m.reset()
        return [float(x) for x in self.m.prefill(tokens)[-1, ::stride]]

    def prof_reset(self) -> None:
        self.m._lib.ckir_profile_reset()

    def prof_get(self) -> dict[str, list[float]]:
        lib = self.m._lib
        n = int(lib.ckir_profile_n())
        t, c = lib.ckir_profile_times(), lib.ckir_profile_counts()
        return {"times": [t[i] for i in range(n)], "counts": [float(c[i]) for i in range(n)]}


class TorchRunner(Runner):
    def __init__(self, model_dir: str, dtype: str, threads: int) -> None:
        import torch
        import transformers

        torch.set_num_threads(threads)
        self.torch = torch
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=tdtype)
        self.model.eval()
        self.info = {
            "threads": torch.get_num_threads(),
            "attn": getattr(self.model.config, "_attn_implementation", "?"),
            "version": torch.__version__,
            # ATen's vector kernels; GEMMs go to oneDNN/MKL, which dispatch (AMX included)
            # on their own and do not say which path they take
            "isa": f"ATen {torch.backends.cpu.get_cpu_capability()}, GEMMs by oneDNN/MKL",
        }

    def _ids(self, tokens: list[int]) -> Any:
        return self.torch.tensor([tokens], dtype=self.torch.long)

    def prefill(self, tokens: list[int]) -> float:
        ids = self._ids(tokens)
        with self.torch.inference_mode():
            t0 = time.perf_counter()
            self.model(input_ids=ids, use_cache=True)
            return time.perf_counter() - t0

    def decode(self, context: list[int], tokens: list[int]) -> float:
        with self.torch.inference_mode():
            out = self.model(input_ids=self._ids(context), use_cache=True)
            cache = out.past_key_values
            steps = [self._ids([t]) for t in tokens]
            t0 = time.perf_counter()
            for ids in steps:
                out = self.model(input_ids=ids, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
            return time.perf_counter() - t0

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        with self.torch.inference_mode():
            logits = self.model(input_ids=self._ids(tokens), use_cache=False).logits
        return [float(x) for x in logits[0, -1, ::stride].float()]


def export_onnx(model_dir: str, path: Path, tokens: int) -> None:
    """``torch.onnx.export`` (dynamo) of the model's logits for a fixed [1, tokens] input."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()

    class Logits(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, use_cache=False).logits

    ids = torch.zeros((1, tokens), dtype=torch.long)
    tmp = path.parent / (path.name + ".tmp")
    errors = []
    for dynamo in (True, False):
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            with torch.no_grad():
                torch.onnx.export(
                    Logits(model),
                    (ids,),
                    str(tmp / "model.onnx"),
                    dynamo=dynamo,
                    input_names=["input_ids"],
                    output_names=["logits"],
                    external_data=True,
                )
            break
        except Exception as exc:  # report every exporter's reason
            text = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            reason = f"{type(exc).__name__}: {text[-1] if text else ''}"[:200]
            errors.append(f"dynamo={dynamo}: {reason}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BaselineUnavailable("torch.onnx.export failed (" + "; ".join(errors) + ")")
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


class OrtRunner(Runner):
    def __init__(self, model_dir: str, onnx_dir: str, tokens: int, threads: int) -> None:
        import onnxruntime as ort

        path = Path(onnx_dir)
        if not (path / "model.onnx").exists():
            export_onnx(model_dir, path, tokens)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # ORT's pool threads spin for up to ~0.3 s after a run: measured, the
        # FMA probe right after an ORT prefill read half the machine (96 vs 190
        # GFLOP/s), which inflated ORT's fraction of bound and slowed whichever
        # system ran next.  Without spinning the probes agree (198 vs 196).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sess = ort.InferenceSession(
            str(path / "model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.tokens = tokens
        self.info = {
            "threads": threads,
            "version": ort.__version__,
            "isa": "MLAS, dispatched at run time (no API names the path)",
        }

    def prefill(self, tokens: list[int]) -> float:
        import numpy as np

        ids = np.asarray([tokens], dtype=np.int64)
        t0 = time.perf_counter()
        self.sess.run(None, {"input_ids": ids})
        return time.perf_counter() - t0

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        import numpy as np

        out = self.sess.run(None, {"input_ids": np.asarray([tokens], dtype=np.int64)})[0]
        return [float(x) for x in out[0, -1, ::stride]]


#: the keyword (llama.cpp's model parameter) that keeps the weights in llama.cpp's plain CPU
#: buffers: no repacking into the extra buffer types (AMX, the CPU repack layouts)
NO_REPACK_PARAM = "use_extra_bufts"


class LlamaCppRunner(StatefulRunner):
    """llama.cpp through llama-cpp-python.  ``no_repack``: load with ``use_extra_bufts=False``
    (the worker spec key ``"no_repack": true``, the fallback of a worker that died with the
    repacked weights)."""

    def __init__(
        self, gguf_path: str, threads: int, n_ctx: int, n_batch: int, no_repack: bool = False
    ) -> None:
        import llama_cpp

        params: dict[str, Any] = dict(
            model_path=gguf_path,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=True,  # ckir's prefill returns every row: same work
            type_k=llama_cpp.GGML_TYPE_F32,  # ckir's KV cache is fp32
            type_v=llama_cpp.GGML_TYPE_F32,
            verbose=False,
        )
        with contextlib.ExitStack() as stack:
            if no_repack:
                params |= stack.enter_context(_without_repacking(llama_cpp))
            self.llm = llama_cpp.Llama(**params)
        llm = self.llm
        self._reset, self._feed, self._step = llm.reset, llm.eval, lambda tok: llm.eval([tok])
        model_params = getattr(self.llm, "model_params", None)
        if no_repack and getattr(model_params, NO_REPACK_PARAM, False):
            raise BaselineUnavailable(
                f"llama-cpp-python {llama_cpp.__version__}: {NO_REPACK_PARAM}=False did not "
                "reach the model parameters (weights still repacked)"
            )
        system = llama_cpp.llama_print_system_info()
        text = system.decode() if isinstance(system, bytes) else str(system)
        # "CPU : SSE3 = 1 | AVX2 = 1 | ... | REPACK = 1 |": the names set to 1
        on = [p.split("=")[0] for p in text.split("|") if p.strip().endswith("= 1")]
        features = [name.split(":")[-1].strip() for name in on]
        repack = (
            f"weight repacking off ({NO_REPACK_PARAM}=False)"
            if no_repack
            else "weight repacking on (extra buffer types, AMX where built)"
        )
        self.info = {
            "threads": threads,
            "version": llama_cpp.__version__,
            "isa": f"{' '.join(features) or text.strip()}; {repack}",
            "repack": not no_repack,
        }

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        self.llm.reset()
        self.llm.eval(tokens)
        return [float(x) for x in self.llm.scores[len(tokens) - 1, ::stride]]


@contextlib.contextmanager
def _without_repacking(llama_cpp: Any) -> Iterator[dict[str, Any]]:
    """Inside: ``llama_cpp.Llama`` loads the model with ``use_extra_bufts=False``; yields
    the keywords to add to the ``Llama(...)`` call.

    A ``Llama`` that names the parameter gets the keyword.  llama-cpp-python 0.3.x does not
    (read in 0.3.36's source: ``Llama.__init__`` takes unknown keywords in ``**kwargs`` and
    drops them, so the keyword alone would change nothing) but its ctypes
    ``llama_model_params`` has the field (llama.cpp's model parameter; older llama.cpp
    lacks it), and ``Llama`` starts from ``llama_model_default_params()``: inside this
    context that function returns defaults with the field off.  A version with neither
    raises :class:`BaselineUnavailable`; the caller checks ``Llama.model_params`` after
    loading."""
    version = getattr(llama_cpp, "__version__", "?")
    if NO_REPACK_PARAM in inspect.signature(llama_cpp.Llama).parameters:
        yield {NO_REPACK_PARAM: False}
        return
    try:  # the ctypes bindings: llama.py calls its llama_model_default_params()
        bindings = importlib.import_module(f"{llama_cpp.__name__}.llama_cpp")
    except ImportError:
        bindings = None
    struct = getattr(bindings, "llama_model_params", None)
    fields = {f[0] for f in getattr(struct, "_fields_", ())}
    defaults = getattr(bindings, "llama_model_default_params", None)
    if bindings is None or defaults is None or NO_REPACK_PARAM not in fields:
        raise BaselineUnavailable(
            f"llama-cpp-python {version} cannot load without weight repacking: neither "
            f"Llama() nor llama_model_params has {NO_REPACK_PARAM} (built on an older llama.cpp)"
        )

    def no_repack_defaults() -> Any:
        p = defaults()
        setattr(p, NO_REPACK_PARAM, False)
        return p

    bindings.llama_model_default_params = no_repack_defaults
    try:
        yield {}
    finally:
        bindings.llama_model_default_params = defaults


def _make_runner(spec: dict[str, Any]) -> Runner:
    kind = spec["kind"]
    if kind == "ckir":
        return CkirRunner(spec["build"], spec["threads"])
    if kind == "torch":
        return TorchRunner(spec["model"], spec["dtype"], spec["threads"])
    if kind == "onnxruntime":
        return OrtRunner(spec["model"], spec["onnx"], spec["tokens"], spec["threads"])
    if kind == "llama.cpp":
        return LlamaCppRunner(
            spec["gguf"],
            spec["threads"],
            spec["n_ctx"],
            spec["n_batch"],
            no_repack=bool(spec.get("no_repack", False)),
        )
    if kind.endswith("-train"):
        from ckir.tools import bench_train

        return bench_train.make_runner(spec)
    raise ValueError(f"unknown worker kind {kind!r}")


def process_rss_kb() -> dict[str, float]:
    """This process's resident set now and its high-water mark (``/proc/self/status``, kB)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = float(value.split()[0])
    return out


def worker_main(spec_text: str) -> int:
    """The worker process: replies go to a private copy of stdout; fd 1 becomes stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(reply_fd, "w")

    def reply(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        runner = _make_runner(json.loads(spec_text))
    except BaselineUnavailable as exc:
        reply({"error": str(exc)})
        return 1
    except Exception as exc:
        text = str(exc).strip().splitlines()
        reply({"error": f"{type(exc).__name__}: {text[0] if text else ''}"})
        return 1
    reply({"ok": True, **runner.info})
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg["op"]
        try:
            if op == "quit":
                break
            if op == "prefill":
                reply({"s": runner.prefill(msg["tokens"])})
            elif op == "decode":
                reply({"s": runner.decode(msg["context"], msg["tokens"])})
            elif op == "sample":
                reply({"values": runner.sample(msg["tokens"], msg["stride"])})
            elif op == "train":
                reply(runner.train(msg["tokens"], msg["targets"]))
            elif op == "loss":
                reply({"loss": runner.loss(msg["tokens"], msg["targets"])})
            elif op == "rss":
                reply(process_rss_kb())
            elif op == "prof_reset" and isinstance(runner, CkirRunner):
                runner.prof_reset()
                reply({"ok": True})
            elif op == "prof_get" and isinstance(runner, CkirRunner):
                reply(runner.prof_get())
            else:
                reply({"error": f"unsupported request {op!r}"})
        except Exception as exc:
            reply({"error": f"{type(exc).__name__}: {exc}"})
    return 0


def ensure_llama_cpp(log: Callable[[str], None] = _log) -> None:
    """Import llama_cpp in a child process; pip-install llama-cpp-python if that fails."""
    probe = [sys.executable, "-c", "import llama_cpp"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return
    log("llama.cpp: installing llama-cpp-python from PyPI (source build, about 5 minutes) ...")
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    cmd = [sys.executable, "-m", "pip", "install", "--no-binary", "llama-cpp-python"]
    proc = subprocess.run([*cmd, "llama-cpp-python"], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        err = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        raise BaselineUnavailable(f"llama.cpp: pip install llama-cpp-python failed: {err.strip()}")
    if subprocess.run(probe, capture_output=True).returncode != 0:
        raise BaselineUnavailable("llama.cpp: llama_cpp does not import after installing it")


def _permute_rope(w: Any, heads: int) -> Any:
    """HF rotate-half q/k rows -> llama.cpp's interleaved (GPT-J) rope order."""
    n = w.shape[0]
    return w.reshape(heads, 2, n // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(model_dir: Path, dtype: str, out: Path) -> Path:
    """A GGUF file of the HF checkpoint for llama.cpp, matrices stored as ``dtype``.

    Like ckir's ``--dtype``: 2-D matrices (embeddings, projections, LM head)
    are converted (block formats only where K is a multiple of 32), GPT-2's
    position table, norms and biases stay f32.  No tokenizer: the vocabulary
    is declared as ``none`` with ``vocab_size`` dummy tokens (token ids only).
    """
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    from ckir import quant

    cfg = model_config(model_dir)
    mtype = cfg["model_type"]
    tensors: dict[str, np.ndarray] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    gq = gguf.GGMLQuantizationType
    raw = {"bf16": gq.BF16, "q8_0": gq.Q8_0, "q4_0": gq.Q4_0, "q4_1": gq.Q4_1}

    tmp = out.with_name(out.name + ".tmp")
    if mtype in ("llama", "mistral"):
        arch = "llama"
    elif mtype in ("qwen2", "gpt2"):
        arch = mtype
    else:
        raise BaselineUnavailable(f"llama.cpp: no GGUF writer for model_type {mtype!r}")
    w = gguf.GGUFWriter(str(tmp), arch)

    def add(name: str, arr: np.ndarray, convert: bool = True) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        blocky = dtype.startswith("q")
        if convert and dtype != "f32" and arr.ndim == 2 and not (blocky and arr.shape[1] % 32):
            data = quant.quantize(arr, dtype)
            if dtype == "bf16":
                data = data.view(np.uint8)
            w.add_tensor(name, data, raw_dtype=raw[dtype])
        else:
            w.add_tensor(name, arr)

    if arch == "gpt2":
        E, L, H = cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
        p = "transformer." if "transformer.wte.weight" in tensors else ""
        w.add_context_length(cfg["n_positions"])
        w.add_embedding_length(E)
        w.add_block_count(L)
        w.add_feed_forward_length(cfg.get("n_inner") or 4 * E)
        w.add_head_count(H)
        w.add_layer_norm_eps(cfg.get("layer_norm_epsilon", 1e-5))
        add("token_embd.weight", tensors[f"{p}wte.weight"])
        add("position_embd.weight", tensors[f"{p}wpe.weight"], convert=False)
        for i in range(L):
            h = f"{p}h.{i}."
            for src, dst in (("ln_1", "attn_norm"), ("ln_2", "ffn_norm")):
                add(f"blk.{i}.{dst}.weight", tensors[h + src + ".weight"])
                add(f"blk.{i}.{dst}.bias", tensors[h + src + ".bias"])
            for src, dst in (
                ("attn.c_attn", "attn_qkv"),
                ("attn.c_proj", "attn_output"),
                ("mlp.c_fc", "ffn_up"),
                ("mlp.c_proj", "ffn_down"),
            ):
                add(f"blk.{i}.{dst}.weight", tensors[h + src + ".weight"].T)  # Conv1D
                add(f"blk.{i}.{dst}.bias", tensors[h + src + ".bias"])
        add("output_norm.weight", tensors[f"{p}ln_f.weight"])
        add("output_norm.bias", tensors[f"{p}ln_f.bias"])
        if "lm_head.weight" in tensors and not cfg.get("tie_word_embeddings", True):
            add("output.weight", tensors["lm_head.weight"])
    else:
        E, L = cfg["hidden_size"], cfg["num_hidden_layers"]
        H = cfg["num_attention_heads"]
        KV = cfg.get("num_key_value_heads") or H
        w.add_context_length(cfg.get("max_position_embeddings", 2048))
        w.add_embedding_length(E)
        w.add_block_count(L)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(H)
        w.add_head_count_kv(KV)
        rope = cfg.get("rope_parameters") or {}  # transformers 5 nests rope_theta here
        w.add_rope_freq_base(float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))))
        w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
        add("token_embd.weight", tensors["model.embed_tokens.weight"])
        for i in range(L):
            h = f"model.layers.{i}."
            q = tensors[h + "self_attn.q_proj.weight"]
            k = tensors[h + "self_attn.k_proj.weight"]
            if arch == "llama":
                q, k = _permute_rope(q, H), _permute_rope(k, KV)
            add(f"blk.{i}.attn_norm.weight", tensors[h + "input_layernorm.weight"])
            add(f"blk.{i}.attn_q.weight", q)
            add(f"blk.{i}.attn_k.weight", k)
            add(f"blk.{i}.attn_v.weight", tensors[h + "self_attn.v_proj.weight"])
            if arch == "qwen2":
                for part in ("q", "k", "v"):
                    add(f"blk.{i}.attn_{part}.bias", tensors[h + f"self_attn.{part}_proj.bias"])
            add(f"blk.{i}.attn_output.weight", tensors[h + "self_attn.o_proj.weight"])
            add(f"blk.{i}.ffn_norm.weight", tensors[h + "post_attention_layernorm.weight"])
            add(f"blk.{i}.ffn_gate.weight", tensors[h + "mlp.gate_proj.weight"])
            add(f"blk.{i}.ffn_up.weight", tensors[h + "mlp.up_proj.weight"])
            add(f"blk.{i}.ffn_down.weight", tensors[h + "mlp.down_proj.weight"])
        add("output_norm.weight", tensors["model.norm.weight"])
        if "lm_head.weight" in tensors and not cfg.get("tie_word_embeddings", False):
            add("output.weight", tensors["lm_head.weight"])
    w.add_vocab_size(int(cfg["vocab_size"]))
    w.add_tokenizer_model("none")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    return out
