#!/usr/bin/env python3
"""Dump every intermediate value of an onnxruntime run, in qport's dump naming.

Usage::

    ort_dump.py MODEL INPUT [INPUT ...] --out DIR
                [--opt disable|basic|extended|all] [--threads N]
                [--values-from QPORT_DUMP_DIR]

Every value a node produces is made a graph output, the model is run once
in onnxruntime (CPU, default ``--opt all``: the default session), and each
value is written to ``DIR/<escaped name>.npy``: the value name with every
byte outside ``[A-Za-z0-9._-]`` (and a leading ``.``) written as ``%XX``,
as ``qport run --dump`` names its files. The graph inputs are written too.
No ``index.json`` is written: qport's localization (``verify
--target-dumps``) matches the files by their unescaped names.

Inputs are given as for ``ort_run.py`` (``NAME=x.npy``, ``x.npy``,
``x.npz``).

Making a value a graph output keeps onnxruntime from fusing it away: with
every value exposed, a QDQ group's float insides are computed and the
group runs as written in float. ``--values-from`` exposes only the values
a qport dump directory lists (its ``index.json``), e.g. a dump made under
an integer profile, whose lowered groups have no float insides, so
onnxruntime can still fuse those groups as its default session does.

Exit status: 0 success; 1 onnxruntime failed; 2 usage or input error.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ort_run import OPT_LEVELS, InputError, bind_inputs, write_atomic  # noqa: E402

KEPT = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def escape_value_name(name: str) -> str:
    """qport's dump file stem of a value name."""
    out = []
    for i, b in enumerate(name.encode("utf-8")):
        if b in KEPT and not (i == 0 and b == ord(".")):
            out.append(chr(b))
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


def save_npy_atomic(path: Path, arr: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    write_atomic(path, buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Dump every intermediate value of an onnxruntime run as .npy files.")
    parser.add_argument("model", type=Path)
    parser.add_argument("inputs", nargs="+", help="NAME=x.npy, x.npy or x.npz")
    parser.add_argument("--out", type=Path, required=True, help="dump directory")
    parser.add_argument("--opt", choices=sorted(OPT_LEVELS), default="all")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    parser.add_argument("--values-from", type=Path, default=None,
                        help="expose only the values this qport dump directory lists")
    args = parser.parse_args(argv)

    try:
        if not args.model.is_file():
            raise InputError(f"model not found: {args.model}")
        model = onnx.load(str(args.model))
        g = model.graph
        inits = {t.name for t in g.initializer}
        produced = [o for n in g.node for o in n.output if o and o not in inits]
        if args.values_from is not None:
            index = args.values_from / "index.json"
            if not index.is_file():
                raise InputError(f"{index}: no qport dump index")
            listed = {v["name"] for v in json.loads(index.read_text())["values"]}
            produced = [o for o in produced if o in listed]
        have = {o.name for o in g.output}
        for name in produced:
            if name not in have:
                g.output.append(onnx.ValueInfoProto(name=name))
                have.add(name)
        so = ort.SessionOptions()
        so.graph_optimization_level = OPT_LEVELS[args.opt]
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            sess = ort.InferenceSession(model.SerializeToString(), sess_options=so,
                                        providers=["CPUExecutionProvider"])
        except Exception as exc:
            print(f"error: onnxruntime could not load {args.model}: {exc}", file=sys.stderr)
            return 1
        feeds = bind_inputs(args.inputs, [i.name for i in sess.get_inputs()])
        if args.out.exists() and not args.out.is_dir():
            raise InputError(f"{args.out}: exists and is not a directory")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    names = [o.name for o in sess.get_outputs()]
    try:
        results = sess.run(names, feeds)
    except Exception as exc:
        print(f"error: onnxruntime failed to run {args.model}: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    written = 0
    for name, arr in list(feeds.items()) + list(zip(names, results)):
        if not isinstance(arr, np.ndarray):
            continue
        save_npy_atomic(args.out / f"{escape_value_name(name)}.npy", arr)
        written += 1
    print(json.dumps({"model": str(args.model), "out": str(args.out),
                      "onnxruntime": ort.__version__,
                      "graph_optimization_level": so.graph_optimization_level.name,
                      "values": written}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
