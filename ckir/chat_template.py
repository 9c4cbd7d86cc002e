"""Chat templates: the Jinja2 text a checkpoint carries, rendered as transformers renders it.

A checkpoint's chat template (``tokenizer.chat_template`` in a GGUF file,
``chat_template`` in a HF folder's ``tokenizer_config.json`` or its
``chat_template.jinja``) turns a conversation into the prompt text the model
was trained on::

    text = render_chat_template(template, "model.gguf", messages,
                                add_generation_prompt=True, bos_token="<s>")

The environment is the one transformers' ``apply_chat_template`` gives: an
``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``,
the ``loopcontrols`` extension and a ``{% generation %}`` block (rendered as its
body), a ``tojson`` filter that keeps non-ASCII text (``ensure_ascii``,
``indent``, ``separators``, ``sort_keys``), and the globals ``raise_exception``
(a one-line :class:`~ckir.errors.CkirError`), ``strftime_now``, ``dict`` and a
``namespace`` that refuses names starting with ``_``.  The template sees
``messages``, ``add_generation_prompt``, the special tokens passed in
(``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``) and any further
keyword (``tools=...``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ckir.errors import CkirError, one_line

#: (template text, source) -> compiled template (``raise_exception`` names the source)
_COMPILED: dict[tuple[str, str], Any] = {}


def render_chat_template(
    template: str,
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **context: Any,
) -> str:
    """``template`` rendered for ``messages``; ``source`` (a file) is named in errors."""
    if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
        raise CkirError(f"{source}: messages must be a list of {{role, content}} dicts")
    for n, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise CkirError(f"{source}: message {n} must be a dict with a 'role' string")
    compiled = _compile(template, source)
    try:
        return compiled.render(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            **context,
        )
    except CkirError:
        raise
    except Exception as err:  # jinja2 errors, sandbox violations
        raise CkirError(
            f"{source}: chat template failed: {type(err).__name__}: {one_line(err)}"
        ) from None


def _compile(text: str, source: str) -> Any:
    cached = _COMPILED.get((text, source))
    if cached is not None:
        return cached
    import jinja2

    try:
        template = _environment(source).from_string(text)
    except jinja2.TemplateError as err:
        raise CkirError(f"{source}: chat template does not parse: {one_line(err)}") from None
    _COMPILED[(text, source)] = template
    return template


def _environment(source: str) -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %} ... {% endgeneration %}``: marks the assistant's text
        (for training masks in transformers); here it renders its body unchanged."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    class SafeNamespace(jinja2.utils.Namespace):
        """``namespace(...)`` whose attribute names may not start with ``_``."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for key in attrs:
                _check_name(key)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, key: str, value: Any) -> None:
            _check_name(key)
            jinja2.utils.Namespace.__setitem__(self, key, value)

    def _check_name(key: object) -> None:
        if isinstance(key, str) and key.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"a namespace attribute may not start with '_' (got {key!r})"
            )

    def raise_exception(message: object) -> None:
        raise CkirError(f"{source}: chat template: {one_line(message)}")

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            indent=indent,
            separators=separators,
            sort_keys=sort_keys,
        )

    class DictMaker:
        """``dict(...)`` and ``dict.fromkeys(...)``, without the type object itself."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
            return dict.fromkeys(*args, **kwargs)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationBlock, "jinja2.ext.loopcontrols"],
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = DictMaker()
    env.globals["namespace"] = SafeNamespace
    return env
