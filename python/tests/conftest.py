"""Shared fixtures of the Python package's tests: the real-model fixture
cache (``$QPORT_FIXTURES``, else ``~/.cache/qport/fixtures``, as the Rust
tests find it) and the ``qport`` binary of the same build (``$QPORT_BIN``,
set by ``scripts/test-python``), whose JSON the Python API is checked
against. A missing fixture or binary fails the test; nothing is skipped."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

TIMING_KEYS = {"seconds", "timing_ms", "command"}


def fixtures_dir() -> Path:
    d = os.environ.get("QPORT_FIXTURES")
    return Path(d) if d else Path.home() / ".cache/qport/fixtures"


@pytest.fixture(scope="session")
def fx() -> Path:
    d = fixtures_dir()
    assert (d / "models").is_dir(), f"fixtures missing in {d}: run scripts/fetch-fixtures"
    return d


@pytest.fixture(scope="session")
def qport_bin() -> str:
    b = os.environ.get("QPORT_BIN")
    assert b and Path(b).is_file(), "QPORT_BIN must name the qport binary of this build (scripts/test-python sets it)"
    return b


class Cli:
    """Runs the ``qport`` binary."""

    def __init__(self, binary: str):
        self.binary = binary

    def run(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([self.binary, *map(str, args)], capture_output=True, text=True)
        if check:
            assert p.returncode == 0, f"qport {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}"
        return p

    def json(self, *args) -> dict:
        return json.loads(self.run(*args, "--format", "json").stdout)

    def error(self, *args) -> str:
        """The message of a failing command, without the `qport: error: ` prefix."""
        p = self.run(*args, check=False)
        assert p.returncode == 2, (p.returncode, p.stderr)
        lines = [l for l in p.stderr.splitlines() if not l.startswith("qport: warning:")]
        assert lines[0].startswith("qport: error: "), p.stderr
        return "\n".join(lines)[len("qport: error: "):]


@pytest.fixture(scope="session")
def cli(qport_bin) -> Cli:
    return Cli(qport_bin)


def without_timing(doc):
    """``doc`` without the fields that vary run to run or record how it was
    invoked (``seconds``, ``timing_ms``, ``command``), at any depth."""
    if isinstance(doc, dict):
        return {k: without_timing(v) for k, v in doc.items() if k not in TIMING_KEYS}
    if isinstance(doc, list):
        return [without_timing(v) for v in doc]
    return doc


@pytest.fixture(scope="session")
def ppocr_qdq(tmp_path_factory, cli, fx) -> Path:
    """The PP-OCR classifier quantized for j6m by the CLI on 8 text lines."""
    out = tmp_path_factory.mktemp("ppocr-q")
    cli.run("quantize", fx / "models/ppocr-cls.onnx", "--platform", "j6m",
            "--calib", fx / "datasets/ppocr-lines", "--preprocess", "ppocr",
            "--calib-limit", 8, "--out", out, "--force", "-q")
    return out / "model.qdq.onnx"
