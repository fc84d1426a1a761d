"""quantize, agree and diverge from Python against the CLI on the same
inputs: the same quant_config and QDQ bytes, the same JSON except timing
and the recorded command line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import qport
from conftest import without_timing


@pytest.fixture(scope="module")
def ppocr(fx):
    return fx / "models/ppocr-cls.onnx"


@pytest.fixture(scope="module")
def lines(fx):
    return fx / "datasets/ppocr-lines"


@pytest.fixture(scope="module")
def line_tensors(tmp_path_factory, cli, ppocr, lines):
    """Eight text lines as {input: array} dicts (a simple crop-and-scale,
    not the ppocr preset: both sides read the same tensors), and the .npz
    the CLI reads, written from them."""
    from PIL import Image  # the oracle venv's Pillow

    files = sorted(Path(lines).rglob("*.png"))[:8]
    name = qport.load(ppocr).inputs[0]["name"]
    samples = []
    for f in files:
        im = np.asarray(Image.open(f).convert("RGB"), np.float32)
        h, w = im.shape[:2]
        # any fixed tensors will do here: both sides read the same ones
        row = np.zeros((3, 48, 192), np.float32)
        crop = im[: min(h, 48), : min(w, 192)].transpose(2, 0, 1) / 127.5 - 1.0
        row[:, : crop.shape[1], : crop.shape[2]] = crop
        samples.append({name: row[None]})
    path = tmp_path_factory.mktemp("lines") / "lines.npz"
    np.savez(path, **{name: np.stack([s[name] for s in samples])})
    return samples, path


def test_quantize_matches_the_cli(cli, ppocr, lines, tmp_path):
    out = tmp_path / "cli"
    cli.run("quantize", ppocr, "--platform", "j6m", "--calib", lines, "--preprocess", "ppocr",
            "--calib-limit", 8, "--calibration", "mse", "--out", out, "-q")
    phases = []
    art = qport.quantize(ppocr, platform="j6m", calib=lines, preprocess="ppocr", calib_limit=8,
                         calibration="mse", progress=lambda p, d, t: phases.append((p, d, t)))
    assert art.quant_config == json.loads((out / "quant_config.json").read_text())
    want = json.loads((out / "report.json").read_text())
    assert without_timing(art.report) == without_timing(want)
    assert art.report["command"][:2] == ["qport", "quantize"]
    assert art.model_path.read_bytes() == (out / "model.qdq.onnx").read_bytes()
    assert any(p for p, _, _ in phases), "no phase reached the progress callback"
    assert any(d is not None for _, d, _ in phases), "no progress count reached the callback"

    saved = art.save(tmp_path / "py")
    assert sorted(p.name for p in saved.iterdir()) == sorted(qport.Artifact.FILES)
    for f in ("model.qdq.onnx", "quant_config.json"):
        assert (saved / f).read_bytes() == (out / f).read_bytes()
    with pytest.raises(qport.InputError, match="not empty"):
        art.save(saved)
    art.save(saved, force=True)


def test_quantize_takes_samples_in_memory(cli, ppocr, line_tensors, tmp_path):
    samples, npz = line_tensors
    out = tmp_path / "cli"
    cli.run("quantize", ppocr, "--platform", "j6p", "--calib", npz, "--out", out, "-q")
    art = qport.quantize(qport.load(ppocr), platform="j6p", calib=iter(samples))
    assert art.quant_config == json.loads((out / "quant_config.json").read_text())
    assert art.model_path.read_bytes() == (out / "model.qdq.onnx").read_bytes()
    with pytest.raises(qport.InputError, match="no samples"):
        qport.quantize(ppocr, calib=[])


def test_agree_matches_the_cli(cli, ppocr_qdq, lines, tmp_path):
    out = tmp_path / "agree"
    cli.run("agree", ppocr_qdq, "--data", lines, "--preprocess", "ppocr", "--n", 8,
            "--profiles", "all", "--out", out, "-q")
    want = json.loads((out / "agree.json").read_text())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = qport.agree(ppocr_qdq, data=lines, preprocess="ppocr", n=8)
    assert without_timing(got) == without_timing(want)
    assert [str(w.message) for w in seen if w.category is qport.QportWarning] == want["warnings"]
    rows = got.table()
    assert len(rows) == len(want["pairs"]) and rows[0]["a"] == want["pairs"][0]["a"]


def test_diverge_matches_the_cli(cli, ppocr_qdq, lines):
    want = cli.json("diverge", ppocr_qdq, "--data", lines, "--preprocess", "ppocr", "-n", 4,
                    "--profiles", "avx2-u8s8,f32-rne")
    got = qport.diverge(ppocr_qdq, lines, ("avx2-u8s8", "f32-rne"), n=4, preprocess="ppocr")
    assert without_timing(got) == without_timing(want)


def test_to_pandas_is_optional(ppocr):
    report = qport.layout(ppocr, "j6m", input_shape={"x": (1, 3, 48, 192)})
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            report.to_pandas()
    else:
        frame = report.to_pandas()
        assert list(frame["name"]) == [t["name"] for t in report["inputs"] + report["outputs"]]


def test_help_teaches():
    doc = qport.quantize.__doc__
    for word in ("platform", "calib", "Returns", "InputError", "Example"):
        assert word in doc
