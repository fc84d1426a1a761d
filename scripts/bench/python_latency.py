#!/usr/bin/env python3
"""Python `Session.run` latency against the Rust engine's, in one process.

Times EfficientNet-Lite0 (FP32, batch 1, one thread) through the Python
package (`qport.load(...).session().run({...})`, numpy in, numpy out) and
through `qport bench` run in-process by the same extension (the Rust loop
around the same plan, no Python), alternating blocks of rounds so drift
hits both alike; prints both medians and their ratio, and checks that the
Python outputs are bit-identical to `qport run`'s on the same input (the
`qport` binary named by --qport). Not a test: a measurement for
BENCHMARKS.md. Build the extension in release first, e.g.

    maturin build --release -m python/Cargo.toml -o target/wheels
    pip install --no-deps --target target/python-release target/wheels/qport-*.whl
    PYTHONPATH=target/python-release python scripts/bench/python_latency.py \\
        --model $QPORT_FIXTURES/models/efficientnet-lite0.onnx --qport target/release/qport
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import qport
from qport import _qport


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--qport", required=True, help="the qport binary, for the bit-identity check")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20, help="rounds per block")
    a = ap.parse_args()

    model = qport.load(a.model)
    name = model.inputs[0]["name"]
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    session = model.session()

    with tempfile.TemporaryDirectory() as d:
        np.savez(f"{d}/in.npz", **{name: x})
        # its summary is not this script's output (stdout is the JSON)
        subprocess.run([a.qport, "run", a.model, "--inputs", f"{d}/in.npz", "--output", f"{d}/out.npz", "-q"],
                       check=True, stdout=subprocess.DEVNULL)
        want = np.load(f"{d}/out.npz")
        got = session.run({name: x})
        identical = all(got[k].tobytes() == want[k].tobytes() for k in want.files)

    for _ in range(3):
        session.run({name: x})
    py_ms, rust_ms = [], []
    for _ in range(a.blocks):
        _, doc, _ = _qport.execute(["qport", "bench", a.model, "--runs", str(a.runs), "--warmup", "2",
                                    "--threads", "1", "--format", "json"])
        fp32 = [r for r in json.loads(doc)["results"] if r["kind"] == "fp32"][0]
        rust_ms.append(fp32["median_ms"])
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            session.run({name: x})
            times.append((time.perf_counter() - t0) * 1e3)
        py_ms.append(statistics.median(times))
    py, rust = statistics.median(py_ms), statistics.median(rust_ms)
    print(json.dumps({
        "model": Path(a.model).name,
        "python_session_run_median_ms": round(py, 3),
        "rust_bench_fp32_median_ms": round(rust, 3),
        "ratio_python_over_rust": round(py / rust, 4),
        "blocks": a.blocks, "runs_per_block": a.runs,
        "python_blocks_ms": [round(v, 3) for v in py_ms],
        "rust_blocks_ms": [round(v, 3) for v in rust_ms],
        "outputs_bit_identical_to_qport_run": identical,
    }, indent=2))


if __name__ == "__main__":
    main()
