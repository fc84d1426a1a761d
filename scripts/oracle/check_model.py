#!/usr/bin/env python3
"""Validate an ONNX file with the reference checker.

Usage: ``check_model.py MODEL``

Runs ``onnx.checker.check_model(path, full_check=True)``, which also runs
strict shape inference. Passing the path (not a loaded proto) lets the
checker handle models over 2 GB with external data.

Exit status: 0 the model is valid ("ok: ..." on stdout); 1 the checker
rejected it (its message on stderr); 2 usage error or missing file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("usage: check_model.py MODEL", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"error: model not found: {path}", file=sys.stderr)
        return 2
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, DecodeError, ...
        print(f"error: {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"ok: {path} (onnx {onnx.__version__} checker, full_check)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
