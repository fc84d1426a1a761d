"""The README's Python quick start, extracted and run as written in a
folder where `model.onnx` is EfficientNet-Lite0 and `calib/`, `eval/` hold
photo crops (a few each: the limits in the text are upper bounds)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import qport

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> str:
    text = README.read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the README's Python section has one python block"
    return blocks[0]


def test_readme_python_quick_start_runs_as_written(fx, tmp_path, monkeypatch):
    os.symlink(fx / "models/efficientnet-lite0.onnx", tmp_path / "model.onnx")
    crops = sorted((fx / "datasets/photo-crops/calib").glob("*.png"))
    for sub, picked in (("calib", crops[:6]), ("eval", crops[6:12])):
        (tmp_path / sub).mkdir()
        for f in picked:
            os.symlink(f, tmp_path / sub / f.name)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(quick_start(), "README.md (Python quick start)", "exec"), scope)
    assert isinstance(scope["model"], qport.Model)
    assert set(scope["outputs"]) == {o["name"] for o in scope["model"].outputs}
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == sorted(qport.Artifact.FILES)
    report = scope["report"]
    assert report["schema"] == "qport.agree/2" and report["n"] == 6
    assert len(report["matrix"]["profiles"]) == len(qport.profiles()["profiles"])
