"""Chat templates: rendered as transformers' ``apply_chat_template`` renders them, and
``ckir generate --chat`` prompting with the template the checkpoint carries.

Oracle: transformers' ``apply_chat_template`` on the same HF folder / GGUF file
(text and token ids).  The end-to-end test compiles a tiny random Llama in a GGUF
file that carries a SentencePiece vocabulary and a chat template.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from gguf_fixtures import tokenizer_metadata, write_gguf  # noqa: E402
from spm_fixtures import spm_metadata, train_spm_bpe, write_bpe_folder  # noqa: E402

from ckir.errors import CkirError  # noqa: E402
from ckir.generate import chat_prompt_ids  # noqa: E402
from ckir.tokenizer import Tokenizer  # noqa: E402

#: a template using what real ones use: namespace, loop controls, tojson with
#: options, dict(), a generation block, raise_exception, whitespace control
RICH_TEMPLATE = "\n".join(
    [
        "{{ bos_token }}",
        "{%- set ns = namespace(system='', turns=0) %}",
        "{%- for m in messages %}",
        "  {%- if m['role'] == 'system' %}{% set ns.system = m['content'] %}{% continue %}"
        "{% endif %}",
        "  {%- if m['role'] not in ['user', 'assistant'] %}"
        "{{ raise_exception('bad role ' + m['role']) }}{% endif %}",
        "  {%- set ns.turns = ns.turns + 1 %}",
        "  {%- if m['role'] == 'user' %}",
        "[INST] {% if ns.system and loop.index0 == 1 %}<<SYS>>{{ ns.system }}<</SYS>> "
        "{% endif %}{{ m['content'] | trim }} [/INST]",
        "  {%- else %}",
        "{% generation %} {{ m['content'] }}{{ eos_token }}{% endgeneration %}",
        "  {%- endif %}",
        "{%- endfor %}",
        "{%- if tools %}",
        "TOOLS {{ tools | tojson(indent=2, sort_keys=True) }} "
        "{{ dict(a=1, b='ü') | tojson(separators=(',', ':')) }}",
        "{%- endif %}",
        "{%- if add_generation_prompt %} Answer ({{ ns.turns }} turns):{% endif %}",
    ]
)

CHAT = [
    {"role": "system", "content": "Sei kurz."},
    {"role": "user", "content": "Grüße aus München! 我们今天去北京?"},
    {"role": "assistant", "content": "Gut 🤗"},
    {"role": "user", "content": "  And now?  "},
]
TOOLS = [{"name": "weather", "parameters": {"city": "Zürich", "units": ["C", "F"]}}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab = train_spm_bpe()
    return write_bpe_folder(
        tmp_path_factory.mktemp("chat") / "hf", vocab, chat_template=RICH_TEMPLATE
    )


def _ids(value: object) -> list[int]:
    if isinstance(value, dict) or hasattr(value, "input_ids"):
        value = value["input_ids"]  # type: ignore[index]
    return list(value)  # type: ignore[call-overload]


def test_rich_template_matches_transformers(folder: Path) -> None:
    ours = Tokenizer.from_hf_dir(folder)
    ref = transformers.AutoTokenizer.from_pretrained(str(folder))
    for gen in (True, False):
        for tools in (None, TOOLS):
            want = ref.apply_chat_template(
                CHAT, add_generation_prompt=gen, tools=tools, tokenize=False
            )
            assert ours.apply_chat_template(CHAT, add_generation_prompt=gen, tools=tools) == want
            want_ids = ref.apply_chat_template(
                CHAT, add_generation_prompt=gen, tools=tools, tokenize=True
            )
            assert ours.encode_chat(CHAT, add_generation_prompt=gen, tools=tools) == _ids(want_ids)
    text = ours.apply_chat_template(CHAT, tools=TOOLS)
    assert '"city": "Zürich"' in text and '{"a":1,"b":"ü"}' in text  # tojson options
    assert "<<SYS>>Sei kurz.<</SYS>>" in text and text.endswith("Answer (3 turns):")


def test_template_errors_are_one_line(folder: Path) -> None:
    ours = Tokenizer.from_hf_dir(folder)
    with pytest.raises(CkirError) as err:
        ours.apply_chat_template([{"role": "tool", "content": "x"}])
    assert str(err.value) == "hf: chat template: bad role tool"
    evil = Tokenizer(ours.backend, chat_template="{% set ns = namespace(_x=1) %}", source="e")
    with pytest.raises(CkirError, match=r"^e: chat template failed: SecurityError: "):
        evil.apply_chat_template(CHAT)


def test_chat_prompt_ids_match_transformers(folder: Path) -> None:
    """``--chat``: one user message, the generation prompt, BOS written once."""
    ours = Tokenizer.from_hf_dir(folder)
    ref = transformers.AutoTokenizer.from_pretrained(str(folder))
    msg = [{"role": "user", "content": "Wie heißt die Hauptstadt?"}]
    want = _ids(ref.apply_chat_template(msg, add_generation_prompt=True, tokenize=True))
    got = chat_prompt_ids(ours, msg[0]["content"])
    assert got == want
    assert got.count(ours.bos_id) == 1


def test_chat_without_template_is_a_clear_error(tmp_path: Path) -> None:
    tok = Tokenizer.from_gguf(
        write_gguf(tmp_path / "plain.gguf", "llama", tokenizer_metadata(), {})
    )
    with pytest.raises(CkirError) as err:
        chat_prompt_ids(tok, "hi")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("plain.gguf: --chat needs a chat template and this checkpoint has none")
    assert "drop --chat" in msg


def test_cli_chat_without_template(tmp_path: Path) -> None:
    """The CLI says so before compiling anything (the file has no weights at all)."""
    src = write_gguf(tmp_path / "plain.gguf", "llama", tokenizer_metadata(), {})
    env = {**os.environ, "CKIR_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-m", "ckir.cli", "generate", str(src), "--chat", "--prompt", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1
    assert "plain.gguf: --chat needs a chat template" in errors[0]


@pytest.mark.slow
def test_generate_chat_on_a_sentencepiece_gguf(tmp_path: Path) -> None:
    """A tiny random Llama in a GGUF with a SentencePiece vocabulary and a chat
    template compiles and generates; the prompt is transformers' chat ids."""
    pytest.importorskip("torch")
    from gguf_fixtures import gguf_from_hf

    from ckir.tools.zoo import make_tiny_model

    vocab = train_spm_bpe()
    template = "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
    hf = make_tiny_model("llama", tmp_path / "hf", seed=3, vocab_size=len(vocab.tokens))
    path = gguf_from_hf(hf, tmp_path / "spm-llama.gguf", metadata=spm_metadata(vocab, template))
    ref = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    prompt = "Grüße aus München 🤗"
    want = _ids(
        ref.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
    )
    env = {**os.environ, "CKIR_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "ckir.cli", "generate", str(path), "--chat"]
    out = subprocess.run(
        [*cmd, "--prompt", prompt, "--max-tokens", "4", "--max-context", "64"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    reported = re.search(r"(\d+) prompt tokens", out.stderr)
    assert reported is not None and int(reported.group(1)) == len(want), out.stderr
    assert json.dumps(out.stdout)  # text was streamed (random weights: any text)
