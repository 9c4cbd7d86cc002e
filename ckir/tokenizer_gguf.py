"""A GGUF file's vocabulary (``tokenizer.ggml.*`` metadata) as a ``tokenizers.Tokenizer``.

Two vocabulary kinds, named by ``tokenizer.ggml.model``:

* ``gpt2``: byte-level BPE.  ``tokens`` spelled in GPT-2's byte alphabet and
  ``merges`` (``"left right"``); the regex split named by ``tokenizer.ggml.pre``
  (:data:`PRE_TOKENIZERS`), then the byte-level mapping; byte-level decoder.
* ``llama``: SentencePiece BPE.  ``tokens`` with ``scores`` and no merges: a
  merge ``(left, right)`` exists for every way of cutting a token into two
  tokens of the vocabulary, ranked by the score of the token it makes (higher
  first; ties: longer left piece, then longer right piece, then the order the
  tokens and cuts were met: the rule transformers' GGUF loader uses).  Spaces
  become ``▁`` (``U+2581``); ``tokenizer.ggml.add_space_prefix`` (default true)
  puts one ``▁`` before the text when it does not start with one (before the
  first piece of text only, not after a special token); characters the
  vocabulary lacks fall back to the byte tokens ``<0x00>`` .. ``<0xFF>``.  The
  decoder turns ``▁`` back into spaces, joins byte tokens into UTF-8 and drops
  the prefix space again.

How a SentencePiece vocabulary is read can differ per architecture; the
template serving the file's ``general.architecture`` says so in its
``gguf.tokenizer`` block (:data:`TOKENIZER_OPTIONS`, docs/templates.md):
``merges: order`` ranks the derived merges by the tokens' order in the file
instead of their scores (vocabularies whose scores do not follow the merge
order), ``space_prefix: every_text`` puts ``▁`` before every piece of text
between special tokens, even one starting with a space (a normalizer, not the
pre-tokenizer); ``space_tokens: visible`` spells tokens the file writes with
real spaces (``"  "``) with ``▁`` instead, the only way they can match once
spaces became ``▁``.

For both kinds: control tokens (``token_type`` 3), the unknown token (2) and
the tokens named by the BOS / EOS / unknown / padding ids are special tokens
(matched whole in the text, dropped by ``skip_special_tokens``); user-defined
tokens (4) are plain added tokens (matched whole, kept).  ``add_bos_token``
(default true for ``llama``, false for ``gpt2``) and ``add_eos_token`` make
``encode`` add them.

Any other kind (``t5``, ``bert``, ``rwkv`` ...) is refused with one line naming
the file and the kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ckir.errors import CkirError, one_line

# GGUF token types (tokenizer.ggml.token_type)
TOKEN_NORMAL = 1
TOKEN_UNKNOWN = 2
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4
TOKEN_UNUSED = 5
TOKEN_BYTE = 6

#: SentencePiece's visible space
SPIECE_SPACE = "\u2581"

#: GPT-2's split: contractions, letter runs, digit runs, other runs, whitespace
_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
#: Llama 3: case-insensitive contractions, digits in groups of up to three
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen2: as Llama 3 but every digit on its own
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: ``tokenizer.ggml.pre`` -> (regex splits applied in order, BPE ignore_merges), for
#: byte-level BPE.  The last split is followed by byte-level mapping.  A missing key
#: means "default".
PRE_TOKENIZERS: dict[str, tuple[tuple[str, ...], bool]] = {
    "default": ((_GPT2_SPLIT,), False),
    "gpt2": ((_GPT2_SPLIT,), False),
    "gpt-2": ((_GPT2_SPLIT,), False),
    # StarCoder-family vocabularies (SmolLM, SmolLM2, Refact): each digit alone first
    "smollm": ((r"\p{N}", _GPT2_SPLIT), False),
    "starcoder": ((r"\p{N}", _GPT2_SPLIT), False),
    "refact": ((r"\p{N}", _GPT2_SPLIT), False),
    "llama-bpe": ((_LLAMA3_SPLIT,), True),
    "llama3": ((_LLAMA3_SPLIT,), True),
    "smaug-bpe": ((_LLAMA3_SPLIT,), True),
    "qwen2": ((_QWEN2_SPLIT,), False),
    "deepseek-r1-qwen": ((_QWEN2_SPLIT,), False),
}

#: ``tokenizer.ggml.model`` values ckir reads, with what they are
VOCABULARY_KINDS: Mapping[str, str] = {
    "gpt2": "byte-level BPE",
    "llama": "SentencePiece BPE",
}


#: a template's ``gguf.tokenizer`` options (SentencePiece vocabularies) -> allowed values,
#: the first the default
TOKENIZER_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "merges": ("score", "order"),
    "space_prefix": ("first", "every_text"),
    "space_tokens": ("written", "visible"),
}


@dataclass(frozen=True)
class GGUFVocabulary:
    """What :func:`vocabulary_from_gguf` builds: the ``tokenizers`` backend and the
    special token ids and chat template the file names."""

    backend: Any  # a tokenizers.Tokenizer
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    chat_template: str | None


def vocabulary_from_gguf(
    meta: Mapping[str, Any], name: str, options: Mapping[str, str] | None = None
) -> GGUFVocabulary:
    """The tokenizer described by ``meta`` (``tokenizer.*`` keys of the GGUF file ``name``);
    ``options``: the template's ``gguf.tokenizer`` block (:data:`TOKENIZER_OPTIONS`)."""
    opts = {key: values[0] for key, values in TOKENIZER_OPTIONS.items()}
    for key, value in (options or {}).items():
        if value not in TOKENIZER_OPTIONS.get(key, ()):
            raise CkirError(f"{name}: tokenizer option {key}={value!r} is not known")
        opts[key] = value
    kind = meta.get("tokenizer.ggml.model")
    if kind is None:
        raise CkirError(f"{name}: no tokenizer (metadata 'tokenizer.ggml.model' is missing)")
    if kind not in VOCABULARY_KINDS:
        known = ", ".join(f"'{k}' ({v})" for k, v in VOCABULARY_KINDS.items())
        raise CkirError(
            f"{name}: tokenizer.ggml.model is '{kind}', a vocabulary kind ckir cannot read "
            f"(it reads {known})"
        )
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise CkirError(f"{name}: 'tokenizer.ggml.tokens' is missing or not a list of strings")
    types = _per_token(meta, "tokenizer.ggml.token_type", TOKEN_NORMAL, len(tokens), name)
    count = len(tokens)
    ids = {
        key: _id_field(meta, f"tokenizer.ggml.{key}_token_id", name, count)
        for key in ("bos", "eos", "unknown", "padding")
    }
    if kind == "gpt2":
        backend = _byte_level_bpe(meta, tokens, name)
        add_bos_default = False
    else:
        if opts["space_tokens"] == "visible":
            tokens = _visible_spaces(tokens)
        backend = _sentencepiece_bpe(meta, tokens, name, opts)
        add_bos_default = True  # llama.cpp adds BOS to a SentencePiece vocabulary by default
    _add_special_tokens(backend, tokens, types, [i for i in ids.values() if i is not None])
    add_bos = _flag(meta, "tokenizer.ggml.add_bos_token", add_bos_default, name)
    add_eos = _flag(meta, "tokenizer.ggml.add_eos_token", False, name)
    set_post_processor(
        backend,
        tokens,
        ids["bos"] if add_bos else None,
        ids["eos"] if add_eos else None,
        name,
    )
    template = meta.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise CkirError(f"{name}: 'tokenizer.chat_template' is not a string")
    return GGUFVocabulary(backend, ids["bos"], ids["eos"], ids["unknown"], ids["padding"], template)


# ---------------------------------------------------------------------------
# metadata fields
# ---------------------------------------------------------------------------


def _per_token(meta: Mapping[str, Any], key: str, default: Any, count: int, name: str) -> list:
    """A per-token array (``token_type``, ``scores``): ``count`` entries, or ``default``
    for every token when the key is absent."""
    value = meta.get(key)
    if value is None:
        return [default] * count
    if not isinstance(value, list) or len(value) != count:
        got = len(value) if isinstance(value, list) else 0
        raise CkirError(f"{name}: '{key}' has {got} entries for {count} tokens")
    return value


def _id_field(meta: Mapping[str, Any], key: str, name: str, count: int) -> int | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise CkirError(f"{name}: '{key}' = {value!r} is not a token id (vocabulary {count})")
    return int(value)


def _flag(meta: Mapping[str, Any], key: str, default: bool, name: str) -> bool:
    value = meta.get(key, default)
    if not isinstance(value, bool):
        raise CkirError(f"{name}: '{key}' = {value!r} is not a bool")
    return value


# ---------------------------------------------------------------------------
# the two kinds
# ---------------------------------------------------------------------------


def _byte_level_bpe(meta: Mapping[str, Any], tokens: list[str], name: str) -> Any:
    from tokenizers import Regex, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    merges_raw = meta.get("tokenizer.ggml.merges")
    if not isinstance(merges_raw, list):
        raise CkirError(f"{name}: 'tokenizer.ggml.merges' is missing (BPE needs merges)")
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise CkirError(
            f"{name}: tokenizer.ggml.pre '{pre}' is not supported "
            f"(known: {', '.join(sorted(PRE_TOKENIZERS))})"
        )
    splits, ignore_merges = PRE_TOKENIZERS[pre]
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)  # a duplicated string keeps its first id
    merges = _file_merges(merges_raw, name)
    try:
        bpe = models.BPE(vocab, merges, ignore_merges=ignore_merges)
    except Exception as err:
        raise CkirError(f"{name}: the BPE vocabulary does not load ({one_line(err)})") from None
    backend = Backend(bpe)
    steps = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in splits]
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    backend.pre_tokenizer = pre_tokenizers.Sequence(steps)
    backend.decoder = decoders.ByteLevel()
    return backend


def _file_merges(merges_raw: list, name: str) -> list[tuple[str, str]]:
    """``tokenizer.ggml.merges`` (``"left right"`` strings) as pairs."""
    merges: list[tuple[str, str]] = []
    for n, m in enumerate(merges_raw):
        parts = m.split(" ") if isinstance(m, str) else []
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise CkirError(f"{name}: tokenizer.ggml.merges[{n}] = {m!r} is not 'left right'")
        merges.append((parts[0], parts[1]))
    return merges


def merges_from_scores(tokens: Sequence[str], scores: Sequence[float]) -> list[tuple[str, str]]:
    """The BPE merges a SentencePiece vocabulary implies (see the module docstring).

    Every cut of a token into two tokens of the vocabulary is a merge, ranked by
    the token's score (higher first), then by the lengths of the left and right
    pieces (longer first), then by the order met: tokens in vocabulary order, the
    cuts of one token by the ids of their (left, right) pieces.
    """
    ids = {t: i for i, t in enumerate(tokens)}  # a duplicated string: its last id
    score_of = dict(zip(tokens, scores, strict=True))
    ranked: list[tuple[float, int, int, int, str, str]] = []
    for token, score in score_of.items():
        cuts = sorted(
            (
                (ids[token[:k]], ids[token[k:]], k)
                for k in range(1, len(token))
                if token[:k] in ids and token[k:] in ids
            ),
        )
        for _, _, k in cuts:
            left, right = token[:k], token[k:]
            ranked.append((-float(score), -len(left), -len(right), len(ranked), left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _visible_spaces(tokens: list[str]) -> list[str]:
    """Tokens made only of real spaces spelled with ``▁`` (unless that spelling is taken)."""
    taken = set(tokens)
    out = list(tokens)
    for i, t in enumerate(tokens):
        if t and not t.strip(" "):
            visible = SPIECE_SPACE * len(t)
            if visible not in taken:
                out[i] = visible
                taken.add(visible)
    return out


def _sentencepiece_bpe(
    meta: Mapping[str, Any], tokens: list[str], name: str, opts: Mapping[str, str]
) -> Any:
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    merges_raw = meta.get("tokenizer.ggml.merges")
    if isinstance(merges_raw, list):  # rare: the converter wrote the merges
        merges = _file_merges(merges_raw, name)
    elif opts["merges"] == "order":  # the earlier a token, the earlier its merges
        merges = merges_from_scores(tokens, [-float(i) for i in range(len(tokens))])
    else:
        if "tokenizer.ggml.scores" not in meta:
            raise CkirError(
                f"{name}: 'tokenizer.ggml.scores' is missing (a SentencePiece vocabulary "
                "without merges needs the scores its merges are ranked by)"
            )
        scores = _per_token(meta, "tokenizer.ggml.scores", 0.0, len(tokens), name)
        if not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
            raise CkirError(f"{name}: 'tokenizer.ggml.scores' is not a list of numbers")
        merges = merges_from_scores(tokens, scores)
    vocab = {t: i for i, t in enumerate(tokens)}
    try:
        bpe = models.BPE(vocab, merges, fuse_unk=True, byte_fallback=True)
    except Exception as err:
        raise CkirError(f"{name}: the BPE vocabulary does not load ({one_line(err)})") from None
    backend = Backend(bpe)
    prefix = _flag(meta, "tokenizer.ggml.add_space_prefix", True, name)
    if prefix and opts["space_prefix"] == "every_text":
        backend.normalizer = normalizers.Sequence(
            [normalizers.Prepend(SPIECE_SPACE), normalizers.Replace(" ", SPIECE_SPACE)]
        )
    else:
        backend.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement=SPIECE_SPACE, prepend_scheme="first" if prefix else "never", split=False
        )
    steps = [decoders.Replace(SPIECE_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if prefix:
        steps.append(decoders.Strip(" ", 1, 0))
    backend.decoder = decoders.Sequence(steps)
    return backend


# ---------------------------------------------------------------------------
# special tokens
# ---------------------------------------------------------------------------


def _add_special_tokens(
    backend: Any, tokens: Sequence[str], types: Sequence[Any], named: Sequence[int]
) -> None:
    from tokenizers import AddedToken

    special_ids = sorted(
        {i for i, t in enumerate(types) if t in (TOKEN_CONTROL, TOKEN_UNKNOWN)} | set(named)
    )
    special = [AddedToken(tokens[i], special=True, normalized=False) for i in special_ids]
    user = [
        AddedToken(tokens[i], special=False, normalized=False)
        for i, t in enumerate(types)
        if t == TOKEN_USER_DEFINED and i not in set(special_ids)
    ]
    if special:
        backend.add_special_tokens(special)
    if user:
        backend.add_tokens(user)


def set_post_processor(
    backend: Any,
    tokens: Sequence[str],
    bos: int | None,
    eos: int | None,
    name: str,
) -> None:
    """BOS / EOS added by ``encode(..., add_special_tokens=True)`` when the file asks."""
    from tokenizers import processors

    if bos is None and eos is None:
        return
    single = ([f"{tokens[bos]}:0"] if bos is not None else []) + ["$A:0"]
    single += [f"{tokens[eos]}:0"] if eos is not None else []
    pair = single + ([f"{tokens[bos]}:1"] if bos is not None else []) + ["$B:1"]
    pair += [f"{tokens[eos]}:1"] if eos is not None else []
    specials = [(tokens[i], i) for i in {x for x in (bos, eos) if x is not None}]
    try:
        backend.post_processor = processors.TemplateProcessing(
            single=" ".join(single), pair=" ".join(pair), special_tokens=specials
        )
    except Exception as err:
        raise CkirError(f"{name}: cannot add BOS/EOS tokens ({one_line(err)})") from None
