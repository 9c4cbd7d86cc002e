"""Template parts: ``include:`` of shared params, checks, gguf config and ``use:`` fragments."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_template import MINI, MINI_CONFIG, write

from ckir.errors import CkirError
from ckir.template import TEMPLATES_DIR, load_template

# a part with a param, a check, a gguf config entry and a two-op fragment with a local value
PART = """\
params:
  scale: {key: scale, type: float, default: 2.0}
checks:
  - assert: scale > 0
    message: scale must be positive
gguf_config:
  scale: "{arch}.scale"
fragments:
  scaled_norm:
    args: [x]
    results: [y]
    ops:
      - op: n = rmsnorm(x)
        weights: [norm]
        attrs: {eps: $eps}
      - op: y = mul_scalar(n)
        attrs: {value: $scale}
"""

# MINI with the body's rmsnorm replaced by the fragment
USES = MINI.replace("symbols:", "include: [extra]\nsymbols:", 1).replace(
    """    - op: h = rmsnorm(x)
      weights: [norm]
      attrs: {eps: $eps}
""",
    "    - use: h = scaled_norm(x)\n",
)
GGUF = """\
gguf:
  architectures: [mini]
  config:
    dim: "{arch}.embedding_length"
  tensors:
    token_embd.weight: emb
"""


def with_part(tmp_path: Path, template: str = USES, part: str = PART) -> Path:
    (tmp_path / "parts").mkdir(exist_ok=True)
    (tmp_path / "parts" / "extra.yaml").write_text(part)
    return write(tmp_path, template)


def error(tmp_path: Path, template: str = USES, part: str = PART) -> str:
    with pytest.raises(CkirError) as err:
        load_template(with_part(tmp_path, template, part))
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_fragment_expands_with_renamed_values(tmp_path: Path) -> None:
    tpl = load_template(with_part(tmp_path))
    ops = tpl.body.ops
    assert [op.text for op in ops[:2]] == ["h__n = rmsnorm(x)", "h = mul_scalar(h__n)"]
    assert [p.name for p in tpl.params] == ["scale", "eps"]  # the part's first
    assert [c.message for c in tpl.checks] == ["scale must be positive"]
    spec = tpl.instantiate({**MINI_CONFIG, "scale": 3.0})
    assert spec.body.ops[1].attrs == {"value": 3.0}
    with pytest.raises(CkirError, match="scale must be positive"):
        tpl.instantiate({**MINI_CONFIG, "scale": -1.0})
    from ckir.frontend.build_graph import build_graph

    build_graph(spec, "mini").verify()


def test_two_uses_get_their_own_locals(tmp_path: Path) -> None:
    text = USES.replace(
        "    - use: h = scaled_norm(x)\n",
        "    - use: h0 = scaled_norm(x)\n    - use: h = scaled_norm(h0)\n",
    )
    ops = load_template(with_part(tmp_path, text)).body.ops
    assert [op.text for op in ops[:4]] == [
        "h0__n = rmsnorm(x)",
        "h0 = mul_scalar(h0__n)",
        "h__n = rmsnorm(h0)",
        "h = mul_scalar(h__n)",
    ]


def test_gguf_config_is_merged(tmp_path: Path) -> None:
    tpl = load_template(with_part(tmp_path, USES + GGUF))
    assert tpl.gguf is not None and tpl.gguf.config["scale"] == ("{arch}.scale",)
    assert "dim" in tpl.gguf.config


def test_a_copied_template_finds_ckir_own_parts(tmp_path: Path) -> None:
    text = (TEMPLATES_DIR / "llama.yaml").read_text()
    assert "include: [rope_scaling]" in text
    tpl = load_template(write(tmp_path, text, "llama.yaml"))  # no parts/ beside it
    assert any(p.name == "rope_type" for p in tpl.params)


@pytest.mark.parametrize(
    ("template", "part", "match"),
    [
        (USES.replace("[extra]", "[nope]"), PART, r"no part 'nope' \(.*parts/nope.yaml"),
        (USES.replace("[extra]", "[extra, extra]"), PART, "part 'extra' is included twice"),
        (USES.replace("[extra]", "[1]"), PART, "include.0.: expected a part name"),
        (USES, PART + "oops: 1\n", "extra.yaml: top level: unknown key 'oops'"),
        (USES, PART.replace("args: [x]", "args: x"), "extra.yaml: fragments.scaled_norm.args"),
        (USES, PART.replace("    results: [y]\n", ""), "scaled_norm: missing 'results'"),
        (USES, PART.replace("- op: n = rmsnorm(x)", "- use: n = other(x)"), "cannot 'use'"),
        (USES, PART.replace("n = rmsnorm(x)", "n = rmsnorm x"), r"ops\[0\]: needs 'op:"),
        (USES.replace("scaled_norm(x)", "scaled_nrm(x)"), PART, "unknown fragment 'scaled_nrm'"),
        (USES.replace("h = scaled_norm(x)", "h, g = scaled_norm(x)"), PART, "got 1 and 2"),
        (USES.replace("h = scaled_norm(x)", "h = scaled_norm"), PART, "is not 'out"),
        (USES.replace("- use: h = scaled_norm(x)", "- use: h = scaled_norm(x)\n      if: a"),
         PART, "unknown key 'if'"),
        (USES, PART.replace("y = mul_scalar(n)", "z = mul_scalar(n)"), "does not define 'h'"),
        (USES.replace("  eps: {key", "  scale: {key: s}\n  eps: {key"), PART,
         r"mini.yaml: params.scale: 'scale' is already a param of .*extra.yaml"),
        (USES + GGUF.replace("    dim:", '    scale: "x"\n    dim:'), PART,
         "gguf.config: 'scale' is also given by .*extra.yaml"),
        # a mistake inside the fragment is reported at the use, naming the part's op
        (USES, PART.replace("weights: [norm]", "weights: [nope]"),
         r"body.ops\[0\] \(use scaled_norm: .*extra.yaml ops\[0\]\).*unknown weight 'nope'"),
        (USES, PART.replace("scale > 0", "scale >"), "extra.yaml: checks"),
    ],
)
def test_part_errors(tmp_path: Path, template: str, part: str, match: str) -> None:
    msg = error(tmp_path, template, part)
    assert re.search(match, msg), msg


def test_repo_parts_are_used() -> None:
    """Every part ckir ships is included by at least one template."""
    parts = {p.stem for p in (TEMPLATES_DIR / "parts").glob("*.yaml")}
    used = {
        name
        for t in TEMPLATES_DIR.glob("*.yaml")
        for line in t.read_text().splitlines()
        if line.startswith("include:")
        for name in line.split("[", 1)[1].split("]", 1)[0].replace(" ", "").split(",")
    }
    assert parts and parts <= used
