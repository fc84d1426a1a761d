#!/usr/bin/env python3
"""onnxruntime's integer outputs of a QOperator model, layer by layer.

Runs ``--model`` (a QOperator model: QLinearConv, QLinearAdd, ...) with
onnxruntime's CPU execution provider and its default session options (the
integer kernels a deployment gets) on every sample of ``--inputs`` (``.npy``,
first axis = samples, one graph input with batch 1), with the output of every
node whose op type is in ``--ops`` (default: QLinearConv) added as a graph
output next to the model's own outputs. Writes to ``--out`` (a directory):
``names.json`` (the list of value names, model outputs first, then the
layers in graph order) and ``NNNN.npy`` per name, stacked over samples.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--ops", default="QLinearConv")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    m = onnx.load(args.model)
    ops = set(args.ops.split(","))
    names = [o.name for o in m.graph.output]
    for n in m.graph.node:
        if n.op_type in ops and n.output[0] not in names:
            names.append(n.output[0])
            m.graph.output.append(onnx.ValueInfoProto(name=n.output[0]))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.load(args.inputs)
    feed = sess.get_inputs()[0].name
    runs = [sess.run(names, {feed: x[i : i + 1]}) for i in range(len(x))]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        np.save(out / f"{k:04d}.npy", np.concatenate([r[k] for r in runs]))
    (out / "names.json").write_text(json.dumps(names))
    print(f"{len(x)} samples, {len(names)} values -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
