"""``ckir inspect BUILD --svg FILE``: the arena per mode against its lower bound, and the
picture of memory, rendered by a real browser (headless Chromium) to a PNG that is not
blank (several role colours, many non-white pixels).  Skips when ``chromium`` is absent
(scripts/setup.sh installs it as root where apt-get works)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from ckir.backend.layout_svg import INPLACE_STROKE, ROLE_COLOURS, plan_to_svg
from ckir.dialects import layout as ly
from ckir.ir_io import load_module
from ckir.tools.zoo import make_numpy_model


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("svg")
    src = make_numpy_model("llama", root / "llama")
    out = root / "build"
    cmd = [sys.executable, "-m", "ckir.cli", "compile", str(src), "-o", str(out)]
    proc = subprocess.run([*cmd, "--max-context", "32", "-q"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def read_png_rgb(path: Path) -> np.ndarray:
    """The RGB pixels ``[H, W, 3]`` of an 8-bit, non-interlaced RGB or RGBA PNG (what
    Chromium's screenshots are), decoded with zlib: no imaging library needed."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        n = struct.unpack(">I", data[pos : pos + 4])[0]
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    out = np.zeros((height, stride), dtype=np.int64)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) % 256
        else:  # 1 (sub), 3 (average), 4 (Paeth) depend on the left pixel: byte by byte
            cur = np.zeros(stride, dtype=np.int64)
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                if kind == 1:
                    pred = a
                elif kind == 3:
                    pred = (a + b) // 2
                else:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) % 256
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)[:, :, :3]


def _inspect(build: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ckir.cli", "inspect", str(build), *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_inspect_prints_arena_and_bound_per_mode(build: Path, tmp_path: Path) -> None:
    proc = _inspect(build)
    assert proc.returncode == 0, proc.stderr
    plan = next(op for op in load_module(build / "layout.mlir").ops if isinstance(op, ly.PlanOp))
    for mode, (used, bound) in ly.mode_usage(plan).items():
        assert f"{used:,} / {bound:>14,}  {used / bound:.2f}x" in proc.stdout, mode
    assert "prefill" in proc.stdout and "decode" in proc.stdout


def test_svg_draws_every_live_slot_and_the_bound(build: Path) -> None:
    plan = next(op for op in load_module(build / "layout.mlir").ops if isinstance(op, ly.PlanOp))
    svg = plan_to_svg(plan)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    state = plan.arenas()["state"]
    modes = {s.live_range[0] for s in state.slots() if s.live_range}
    live = sum(1 for s in state.slots() if s.live_range)
    permanent = sum(1 for s in state.slots() if s.live_range is None)
    by_name = {s.buffer_name: s for s in state.slots()}
    views = [v for v in state.views() if by_name[v.root_name].live_range]
    perm_views = len(state.views()) - len(views)
    # two panels per mode (whole arena, transient slots alone): a box per live slot and
    # view in both, the permanent ones in every mode's first panel
    boxes = 2 * (live + len(views)) + (permanent + perm_views) * len(modes)
    assert svg.count("<title>") - 1 == boxes
    assert svg.count("mode prefill") == 2 and svg.count("mode decode") == 2
    assert "lower bound" in svg or "arena = bound" in svg
    for role in ("kv_cache", "activation", "io"):
        assert ROLE_COLOURS[role] in svg


def test_svg_and_inspect_show_views_and_inplace_reuse(build: Path) -> None:
    """--plan-views made in-place reuses (the residual adds, swiglu): the plan marks them,
    the SVG draws each as a hatched box with its own outline (not the pure views' dashed
    one), the legend names it, and ``ckir inspect`` prints the counts and bytes."""
    plan = next(op for op in load_module(build / "layout.mlir").ops if isinstance(op, ly.PlanOp))
    state = plan.arenas()["state"]
    inplace = [v for v in state.views() if v.is_inplace]
    assert inplace, "the build has no in-place reuse"
    totals = plan.totals()
    assert totals[ly.INPLACE_BYTES_KEY] == sum(v.size_bytes for v in inplace) > 0
    rows = [v for v in state.views() if v.row_offset is not None]
    assert rows, "the build has no KV append views"
    assert totals[ly.COPIES_KEY] == len(rows)
    svg = plan_to_svg(plan)
    # both panels of its mode draw every in-place view (their roots are transient); the
    # KV append views (roots: the permanent caches) are in each mode's whole-arena panel
    assert svg.count('class="inplace"') == 2 * len(inplace)
    assert svg.count('class="rowview"') == 2 * len(rows)  # two modes
    assert svg.count('class="view"') == 2 * (len(state.views()) - len(inplace) - len(rows))
    assert "KV append (row P)</text>" in svg
    assert f'stroke="{INPLACE_STROKE}"' in svg and "in-place reuse</text>" in svg
    assert "url(#inplace-hatch)" in svg
    proc = _inspect(build)
    assert proc.returncode == 0, proc.stderr
    want = f"{len(inplace)} in-place reuses, {totals[ly.INPLACE_BYTES_KEY]:,} bytes"
    assert want in proc.stdout
    assert "saved.inplace" in proc.stdout  # the totals section prints the key too


def test_svg_renders_in_headless_chromium(build: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it as root)")
    svg = tmp_path / "memory.svg"
    proc = _inspect(build, "--svg", str(svg))
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "memory.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={png}",
        "--window-size=1100,1100",
    ]
    subprocess.run([chromium, *flags, svg.as_uri()], capture_output=True, timeout=120)
    assert png.exists(), "chromium wrote no screenshot"
    pixels = read_png_rgb(png).reshape(-1, 3).astype(np.int64)
    non_white = (pixels < 245).any(axis=1).mean()
    assert non_white > 0.2, f"only {non_white:.1%} of the pixels are not white"
    wanted = [ROLE_COLOURS[r] for r in ("kv_cache", "activation", "io")]
    for colour in wanted:  # the roles' fills, blended at 0.8 opacity over white
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        blended = np.round(0.8 * rgb + 0.2 * 255)
        near = (np.abs(pixels - blended).max(axis=1) <= 12).mean()
        assert near > 0.001, f"role colour {colour} is missing from the rendering"
