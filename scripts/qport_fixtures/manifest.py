"""Cache bookkeeping: output digests, MANIFEST.json, --verify, the layout listing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from . import wheels
from .common import sha256_file, write_json_atomic


def iter_files(root: Path, rel: str):
    """Files under cache-relative ``rel`` (a file or a folder), sorted."""
    p = root / rel
    if p.is_file():
        yield rel
    elif p.is_dir():
        for f in sorted(p.rglob("*")):
            if f.is_file() and not any(part.startswith(".") for part in f.relative_to(root).parts):
                yield f.relative_to(root).as_posix()


def outputs_digest(root: Path, outs: list[str]) -> str:
    """One sha256 over the names and contents of everything a step produced."""
    h = hashlib.sha256()
    for rel in outs:
        for f in iter_files(root, rel):
            h.update(f"{f}\0{sha256_file(root / f)}\n".encode())
    return h.hexdigest()



MANIFEST_SKIP = ("stamps/", "MANIFEST.json")


def manifest_files(root: Path) -> list[str]:
    """Every cache file the manifest covers, sorted (hidden files and stamps/ excluded)."""
    files = []
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if f.is_file() and not rel.startswith(MANIFEST_SKIP) and \
                not any(p.startswith(".") for p in f.relative_to(root).parts):
            files.append(rel)
    return files


def write_manifest(root: Path, records: dict, lock_sha256: str) -> dict:
    """Hash every cache file (except stamps/) into MANIFEST.json; returns it.

    ``lock_sha256`` is the digest of the venv lock the fixtures were made with.
    """
    files = {rel: {"sha256": sha256_file(root / rel), "bytes": (root / rel).stat().st_size}
             for rel in manifest_files(root)}
    manifest = {
        "generated_by": "scripts/fetch-fixtures",
        "venv_lock_sha256": lock_sha256,
        "pinned_wheels": {w.requirement: {"file": w.filename, "sha256": w.sha256}
                          for w in wheels.PINNED},
        "total_bytes": sum(v["bytes"] for v in files.values()),
        "file_count": len(files),
        "steps": records,
        "files": files,
    }
    write_json_atomic(root / "MANIFEST.json", manifest)
    return manifest


def verify_manifest(root: Path) -> list[str]:
    """Problems found by re-hashing every file listed in MANIFEST.json."""
    try:
        manifest = json.loads((root / "MANIFEST.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"MANIFEST.json unreadable: {exc}"]
    problems = []
    for rel, info in manifest["files"].items():
        p = root / rel
        if not p.is_file():
            problems.append(f"missing: {rel}")
        elif sha256_file(p) != info["sha256"]:
            problems.append(f"changed: {rel}")
    for rel in sorted(set(manifest_files(root)) - set(manifest["files"])):
        problems.append(f"not in manifest: {rel}")
    return problems


def layout_lines(root: Path) -> list[str]:
    """A compact tree of the cache: files listed, big folders summarised."""
    lines = []

    def size(p: Path) -> int:
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())

    for top in sorted(p for p in root.iterdir() if not p.name.startswith(".")):
        if top.is_file():
            lines.append(f"{top.name}  ({top.stat().st_size:,} B)")
            continue
        n = sum(1 for f in top.rglob("*") if f.is_file())
        lines.append(f"{top.name}/  ({n} files, {size(top) / 1e6:.1f} MB)")
        for sub in sorted(top.iterdir()):
            if sub.name.startswith("."):
                continue
            if sub.is_file():
                lines.append(f"  {sub.name}  ({sub.stat().st_size:,} B)")
            elif top.name == "node":
                continue
            else:
                k = sum(1 for f in sub.rglob("*") if f.is_file())
                lines.append(f"  {sub.name}/  ({k} files, {size(sub) / 1e6:.2f} MB)")
        if top.name == "node":
            dirs = sum(1 for d in top.iterdir() if d.is_dir())
            lines.append(f"  <case>/model.onnx, <case>/test_data_set_0/{{input,output}}_J.pb  ({dirs} cases)")
    return lines
