#!/usr/bin/env python3
"""Run an ONNX model in onnxruntime (the reference peer) and save its outputs.

Usage::

    ort_run.py MODEL INPUT [INPUT ...] --out OUT.npz
               [--opt disable|basic|extended|all] [--threads N]
               [--config KEY=VALUE ...] [--outputs NAME,NAME]

Inputs, matched to the model's graph inputs (initializers excluded):

- ``NAME=path.npy``  one array for the input called NAME;
- ``path.npy``       the next graph input not yet given, in graph order;
- ``path.npz``       arrays by key: a key equal to an input name goes to that
                     input; keys ``arr_0``, ``arr_1``... (``np.savez`` without
                     names) fill the remaining inputs in graph order.

Arrays are fed as stored (no dtype conversion). The output ``.npz`` holds
one array per model output, keyed by output name, written atomically. The
session is CPU only, ``--threads`` intra-op threads (default 1), 1 inter-op
thread, sequential; ``--opt`` picks the graph optimization level (default
``disable``). ``--config`` adds session config entries, e.g.
``session.x64quantprecision=1``. A one-line JSON summary of the run goes to
stderr.

Exit status: 0 success; 1 onnxruntime failed to load or run the model;
2 usage or input error (missing file, unknown or missing input name).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class InputError(Exception):
    """A usage or input problem (exit status 2)."""


def load_array_file(path: Path):
    """Load ``.npy`` (one array) or ``.npz`` (a dict of arrays) without pickle."""
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable .npy/.npz file: {exc}") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            return {k: data[k] for k in data.files}
    return data


def bind_inputs(specs: list[str], input_names: list[str]) -> dict[str, np.ndarray]:
    """Match the command-line input specs to the model's input names."""
    feeds: dict[str, np.ndarray] = {}
    positional: list[tuple[str, np.ndarray]] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and not Path(spec).exists():
            if name not in input_names:
                raise InputError(f"{spec}: model has no input {name!r}; inputs: {input_names}")
            value = load_array_file(Path(path))
            if isinstance(value, dict):
                raise InputError(f"{spec}: NAME= takes a .npy file, not .npz")
            feeds[name] = value
            continue
        value = load_array_file(Path(spec))
        if isinstance(value, dict):
            for key, arr in value.items():
                if key in input_names:
                    feeds[key] = arr
                elif key.startswith("arr_"):
                    positional.append((f"{spec}:{key}", arr))
                else:
                    raise InputError(f"{spec}: key {key!r} is not a model input; inputs: {input_names}")
        else:
            positional.append((spec, value))
    free = [n for n in input_names if n not in feeds]
    if len(positional) > len(free):
        extra = [label for label, _ in positional[len(free):]]
        raise InputError(f"more inputs than the model takes: {extra} left over")
    for name, (_, arr) in zip(free, positional):
        feeds[name] = arr
    missing = [n for n in input_names if n not in feeds]
    if missing:
        raise InputError(f"no data for model input(s) {missing}")
    return feeds


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` to a temp file in the destination folder, then rename."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(path, buf.getvalue())


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file in the destination folder, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run an ONNX model in onnxruntime and save outputs as .npz.")
    parser.add_argument("model", type=Path)
    parser.add_argument("inputs", nargs="+", help="NAME=x.npy, x.npy or x.npz")
    parser.add_argument("--out", type=Path, required=True, help="output .npz")
    parser.add_argument("--opt", choices=sorted(OPT_LEVELS), default="disable")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="session config entry (repeatable)")
    parser.add_argument("--outputs", default=None, help="comma-separated output names (default all)")
    args = parser.parse_args(argv)

    try:
        if not args.model.is_file():
            raise InputError(f"model not found: {args.model}")
        if args.threads < 1:
            raise InputError("--threads must be at least 1")
        so = ort.SessionOptions()
        so.graph_optimization_level = OPT_LEVELS[args.opt]
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        config = {}
        for entry in args.config:
            key, sep, value = entry.partition("=")
            if not sep or not key:
                raise InputError(f"--config wants KEY=VALUE, got {entry!r}")
            config[key] = value
            so.add_session_config_entry(key, value)
        try:
            sess = ort.InferenceSession(str(args.model), sess_options=so,
                                        providers=["CPUExecutionProvider"])
        except Exception as exc:
            print(f"error: onnxruntime could not load {args.model}: {exc}", file=sys.stderr)
            return 1
        input_names = [i.name for i in sess.get_inputs()]
        all_outputs = [o.name for o in sess.get_outputs()]
        wanted = args.outputs.split(",") if args.outputs else all_outputs
        unknown = [n for n in wanted if n not in all_outputs]
        if unknown:
            raise InputError(f"unknown output(s) {unknown}; outputs: {all_outputs}")
        feeds = bind_inputs(args.inputs, input_names)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    try:
        results = sess.run(wanted, feeds)
    except Exception as exc:
        print(f"error: onnxruntime failed to run {args.model}: {exc}", file=sys.stderr)
        return 1
    save_npz_atomic(args.out, dict(zip(wanted, results)))
    summary = {
        "model": str(args.model),
        "out": str(args.out),
        "onnxruntime": ort.__version__,
        "graph_optimization_level": so.graph_optimization_level.name,
        "intra_op_num_threads": args.threads,
        "session_config_entries": config,
        "inputs": {k: [str(v.dtype), list(v.shape)] for k, v in feeds.items()},
        "outputs": {k: [str(v.dtype), list(v.shape)] for k, v in zip(wanted, results)},
    }
    print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
