#!/usr/bin/env python3
"""Side-by-side FP32 and INT8 latency: qport vs onnxruntime, interleaved (issue 6, item 5).

Models (batch 1, 3x224x224 float input, 1000-class head):
  effnet       EfficientNet-Lite0 from the fixture cache (real weights).
  mobilenetv2  MobileNetV2 (width 1.0, inverted residuals, Relu6 as Clip(0, 6)),
  resnet50     ResNet-50 (v1.5 bottlenecks, stride on the 3x3 conv), both from
               the fixture cache (models/bench/<key>.random.onnx, built by the
               fixture script's bench-models step, scripts/fixtures.py and
               scripts/qport_fixtures/bench_models.py) with SEEDED RANDOM
               weights (He-scaled). BatchNormalization is folded: every Conv
               carries a bias and there are no BN nodes (what an exporter's BN
               folding leaves). The random weights make these two good for
               LATENCY ONLY, not accuracy.

Quantization: onnxruntime quantize_static, QDQ, per-channel, MinMax,
reduce_range off, weights QInt8; activations QUInt8 ("u8s8") and QInt8
("s8s8"). Calibration: the first --calib (8) tensors of the fixture's
effnet-calib64 inputs for EfficientNet, seeded N(0, 1) tensors for the random
models. The quantized models are cached under target/bench/models/
(<key>.qdq-<act>.calib<N>.onnx) and made only when missing: delete them after
the fixture models change (a new bench-models recipe) to re-quantize.

Peak memory: after the timing, each engine loads and runs one model in a
fresh child process that reports its own peak RSS (VmHWM):
onnxruntime with only the interpreter, numpy and onnxruntime imported (the
baseline), with the FP32 model, and with the QDQ u8s8 artifact; qport with
the FP32 model (`qport bench MODEL`) and with FP32 plus the artifact under
`exact` (`--int8 ... --profiles exact`, both plans in one process).

Method (one process tree, interleaved): for each model, --rounds K rounds;
each round first times onnxruntime (FP32, QDQ u8s8, QDQ s8s8 sessions, made
once per model and kept; CPU EP, default optimizations ORT_ENABLE_ALL,
intra_op_num_threads = --threads, inter_op_num_threads = 1; ceil(runs / K)
timed runs each after the warm-up in round 1), then runs
`qport bench MODEL --int8 U8S8.qdq.onnx --profiles f32-rne,exact,avx2-u8s8
--threads T --runs ceil(runs / K) --warmup W --order blocked --format json` as
a child process (qport times FP32 and each INT8 profile back to back, as the
onnxruntime sessions are timed: each variant's caches warm with its own
weights). Reported
per variant: the median of the K per-round medians (spread: min and max of the
round medians). Drift on a shared machine hits both engines; the ratios are the
result, absolute times move.

--threads T means the same on both sides: T intra-op threads for ONE
inference (onnxruntime's intra_op_num_threads; qport hands a convolution's
row blocks, or a one-block layer's im2col and GEMM, and its pooling,
requantization and large elementwise steps to T threads). With T > 1 each
round first measures how fast one CPU takes back cache lines the other has
read (cross_core_probe: a 320 KiB buffer rewritten on CPU 0 after CPU 1 read
it, GB/s); the report prints it per round beside the round medians, since
on a virtual machine that rate changes from minute to minute with where the
host places the vCPUs, and multi-threaded INT8 times follow it.

    .venv/bin/python scripts/bench/int8_vs_ort.py [--models effnet,mobilenetv2,resnet50]
        [--threads 1] [--runs 20] [--warmup 3] [--rounds 4] [--out target/bench/int8_vs_ort.json]

Needs `bash scripts/fetch-fixtures` (cache: $QPORT_FIXTURES, default
~/.cache/qport/fixtures) and `cargo build --release -p qport-cli` (--qport to
point at another binary).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import threading
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("QPORT_FIXTURES", Path.home() / ".cache/qport/fixtures"))
MODEL_DIR = ROOT / "target/bench/models"  # quantized variants only
PROFILES = ["f32-rne", "exact", "avx2-u8s8"]
ALL_MODELS = ["effnet", "mobilenetv2", "resnet50"]
# FP32 models in the fixture cache (bench/ ones: scripts/qport_fixtures/bench_models.py).
FP32_MODELS = {"effnet": "models/efficientnet-lite0.onnx",
               "mobilenetv2": "models/bench/mobilenetv2.random.onnx",
               "resnet50": "models/bench/resnet50.random.onnx"}


# ---------------------------------------------------------------- quantization


def calibration(model_key, n):
    if model_key == "effnet":
        return np.load(CACHE / "datasets/effnet-calib64/inputs.npy")[:n].astype(np.float32)
    return np.random.default_rng(1234).standard_normal((n, 3, 224, 224)).astype(np.float32)


def quantize(src, dst, act, calib):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self, name, data):
            self.name, self.data, self.i = name, data, 0

        def get_next(self):
            if self.i >= len(self.data):
                return None
            self.i += 1
            return {self.name: self.data[self.i - 1: self.i]}

        def rewind(self):
            self.i = 0

    name = onnx.load(str(src), load_external_data=False).graph.input[0].name
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dst.parent) as tmp:
        out = Path(tmp) / dst.name
        quantize_static(str(src), str(out), calibration_data_reader=Reader(name, calib),
                        quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=False,
                        activation_type=QuantType.QUInt8 if act == "u8s8" else QuantType.QInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
        os.replace(out, dst)


def prepare(key, n_calib):
    """Returns (fp32, u8s8, s8s8) paths, quantizing what is missing.

    The FP32 model comes from the fixture cache; the quantized ones are
    cached under MODEL_DIR and kept while they exist.
    """
    fp32 = CACHE / FP32_MODELS[key]
    if not fp32.exists():
        sys.exit(f"missing {fp32} (fixture cache $QPORT_FIXTURES, default ~/.cache/qport/fixtures): "
                 f"run `bash scripts/fetch-fixtures`")
    paths = [fp32]
    for act in ("u8s8", "s8s8"):
        q = MODEL_DIR / f"{key}.qdq-{act}.calib{n_calib}.onnx"
        if not q.exists():
            print(f"[{key}] quantize_static QDQ {act} ({n_calib} calibration tensors)", file=sys.stderr)
            t = time.time()
            quantize(fp32, q, act, calibration(key, n_calib))
            print(f"[{key}]   {time.time() - t:.1f} s", file=sys.stderr)
        paths.append(q)
    return paths


# ---------------------------------------------------------------- timing


def cross_core_probe(kib=320, reps=200):
    """GB/s at which a thread pinned to one CPU rewrites a buffer that a
    thread pinned to another CPU has just read (every cache line is then
    taken back from the other core), from the median rewrite of 200, the
    better of two tries; None on one CPU. On the 2-vCPU guests measured, 40-70 GB/s when the two vCPUs sat
    near each other, 8-12 GB/s at other times: multi-threaded INT8
    inference, whose layers hand every activation between the cores,
    scales much less in the second state."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    n = kib * 1024
    buf, src, sink = np.zeros(n, np.uint8), np.ones(n, np.uint8), np.empty(n, np.uint8)

    def once():
        turn = [threading.Event(), threading.Event()]
        spent = []

        def reader():
            os.sched_setaffinity(0, {cpus[1]})
            for _ in range(reps):
                turn[1].wait()
                turn[1].clear()
                np.copyto(sink, buf)
                turn[0].set()

        th = threading.Thread(target=reader)
        th.start()
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpus[0]})
        try:
            for _ in range(reps):
                t = time.perf_counter()
                np.copyto(buf, src)
                spent.append(time.perf_counter() - t)
                turn[1].set()
                turn[0].wait()
                turn[0].clear()
        finally:
            th.join()
            os.sched_setaffinity(0, old)
        return n / statistics.median(spent) / 1e9

    return max(once(), once())


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_block(sess, x, runs):
    name = sess.get_inputs()[0].name
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, {name: x})
        out.append((time.perf_counter() - t) * 1e3)
    return out


def qport_bench(exe, fp32, u8s8, threads, runs, warmup):
    cmd = [str(exe), "bench", str(fp32), "--int8", str(u8s8), "--profiles", ",".join(PROFILES),
           "--threads", str(threads), "--runs", str(runs), "--warmup", str(warmup), "--quiet",
           "--order", "blocked", "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"qport bench failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return cmd, json.loads(r.stdout)


# ---------------------------------------------------------------- peak memory

# A child that loads one model into an onnxruntime session (or none: the
# interpreter, numpy and onnxruntime imported, the baseline of every ORT
# row), runs it, and prints its own peak RSS (VmHWM, as `qport bench`
# reports its own). (wait4's ru_maxrss is no use here: Linux carries the
# forking parent's resident size across exec into the child's maximum.)
ORT_CHILD = """
import sys, numpy as np, onnxruntime as ort
path, threads, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if path != "-":
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(7).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    for _ in range(runs):
        s.run(None, {s.get_inputs()[0].name: x})
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(int(hwm.split()[1]) * 1024)
"""


def child_stdout(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r.stdout


def peak_rss(exe, fp32, u8s8, threads, runs):
    """Peak RSS (bytes, VmHWM) of each engine loading and running one
    model, each in a fresh process: FP32, and the QDQ u8s8 artifact
    (qport: built from the FP32 model with `--int8 ... --profiles exact`,
    so it holds both plans, where onnxruntime's row holds one session)."""
    py = [sys.executable, "-c", ORT_CHILD]
    qp = [str(exe), "bench", str(fp32), "--threads", str(threads), "--runs", str(runs),
          "--warmup", "1", "--quiet", "--format", "json"]
    ort_rss = lambda path, n: int(child_stdout(py + [path, str(threads), str(n)]).split()[-1])
    qp_rss = lambda extra: json.loads(child_stdout(qp + extra))["peak_rss_bytes"]
    return {
        "ort_import_only": ort_rss("-", 0),
        "ort_fp32": ort_rss(str(fp32), runs),
        "ort_u8s8": ort_rss(str(u8s8), runs),
        "qport_fp32": qp_rss([]),
        "qport_fp32_and_exact": qp_rss(["--int8", str(u8s8), "--profiles", "exact"]),
    }


def summarize(round_medians):
    return {"median_ms": statistics.median(round_medians), "round_min_ms": min(round_medians),
            "round_max_ms": max(round_medians), "round_medians_ms": round_medians}


def bench_model(key, a, exe):
    fp32, u8s8, s8s8 = prepare(key, a.calib)
    x = np.random.default_rng(7).uniform(-1, 1, (a.batch, 3, 224, 224)).astype(np.float32)
    sessions = {"ort_fp32": ort_session(fp32, a.threads), "ort_u8s8": ort_session(u8s8, a.threads),
                "ort_s8s8": ort_session(s8s8, a.threads)}
    per_round = max(1, math.ceil(a.runs / a.rounds))
    rounds = {k: [] for k in list(sessions) + ["qport_fp32"] + [f"qport_{p}" for p in PROFILES]}
    probes = []
    last = None
    for r in range(a.rounds):
        t0 = time.time()
        # the cores' hand-off rate of this round (multi-threaded runs)
        probes.append(cross_core_probe() if a.threads > 1 else None)
        for k, s in sessions.items():
            if r == 0:
                ort_block(s, x, a.warmup)
            rounds[k].append(statistics.median(ort_block(s, x, per_round)))
        cmd, doc = qport_bench(exe, fp32, u8s8, a.threads, per_round, a.warmup)
        for res in doc["results"]:
            rounds["qport_fp32" if res["kind"] == "fp32" else f"qport_{res['profile']}"].append(res["median_ms"])
        last = (cmd, doc)
        print(f"[{key}] round {r + 1}/{a.rounds} {time.time() - t0:.1f} s", file=sys.stderr)
    med = {k: summarize(v) for k, v in rounds.items()}
    m = {k: v["median_ms"] for k, v in med.items()}
    int8 = {p: m[f"qport_{p}"] for p in PROFILES}
    fastest = min(int8, key=int8.get)
    ratios = {
        "qport_fp32/ort_fp32": m["qport_fp32"] / m["ort_fp32"],
        "qport_fastest_int8/ort_u8s8": int8[fastest] / m["ort_u8s8"],
        "qport_fastest_int8/qport_fp32": int8[fastest] / m["qport_fp32"],
        "qport_exact_int8/qport_fp32": int8["exact"] / m["qport_fp32"],
        "ort_u8s8/ort_fp32": m["ort_u8s8"] / m["ort_fp32"],
        "ort_s8s8/ort_fp32": m["ort_s8s8"] / m["ort_fp32"],
    }
    cmd, doc = last
    rss = peak_rss(exe, fp32, u8s8, a.threads, per_round)
    rss_ratios = {"qport_fp32/ort_fp32": rss["qport_fp32"] / rss["ort_fp32"],
                  "qport_fp32_and_exact/ort_u8s8": rss["qport_fp32_and_exact"] / rss["ort_u8s8"]}
    return {
        "models": {"fp32": str(fp32), "qdq_u8s8": str(u8s8), "qdq_s8s8": str(s8s8)},
        "weights": "fixture (real)" if key == "effnet" else "seeded random (latency only)",
        "latency": med,
        "qport_fastest_int8_profile": fastest,
        "ratios": ratios,
        "qport_command_last_round": cmd,
        "qport_machine": doc["machine"],
        "qport_version": doc.get("qport_version"),
        "qport_peak_rss_bytes": doc.get("peak_rss_bytes"),
        "peak_rss_bytes": rss,
        "peak_rss_ratios": rss_ratios,
        "samples_per_variant": a.rounds * per_round,
        "cross_core_write_gbs_per_round": probes,
    }


def cpu_model():
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "?"


COLS = [("ort_fp32", "ORT FP32"), ("ort_u8s8", "ORT u8s8"), ("ort_s8s8", "ORT s8s8"),
        ("qport_fp32", "qp FP32")] + [(f"qport_{p}", f"qp {p}") for p in PROFILES]
RCOLS = [("qport_fp32/ort_fp32", "qpF/ortF"), ("qport_fastest_int8/ort_u8s8", "qpI8/ortU8"),
         ("qport_fastest_int8/qport_fp32", "qpI8/qpF"), ("qport_exact_int8/qport_fp32", "qpEx/qpF"),
         ("ort_u8s8/ort_fp32", "ortU8/ortF"), ("ort_s8s8/ort_fp32", "ortS8/ortF")]


def print_table(results, threads):
    print(f"\nmedian latency, ms (batch 1, threads {threads})")
    print(f"{'model':12s}" + "".join(f"{h:>14s}" for _, h in COLS))
    for k, r in results.items():
        print(f"{k:12s}" + "".join(f"{r['latency'][c]['median_ms']:14.2f}" for c, _ in COLS))
    print("\nratios (below 1: the numerator is faster)")
    print(f"{'model':12s}" + "".join(f"{h:>12s}" for _, h in RCOLS) + "  fastest qport INT8")
    for k, r in results.items():
        print(f"{k:12s}" + "".join(f"{r['ratios'][c]:12.2f}" for c, _ in RCOLS)
              + f"  {r['qport_fastest_int8_profile']}")
    if threads > 1:
        print("\nper round: cross-core write GB/s (cross_core_probe) and round medians, ms")
        print(f"{'model':12s}{'round':>6s}{'GB/s':>8s}" + "".join(f"{h:>14s}" for _, h in COLS))
        for k, r in results.items():
            for i, g in enumerate(r["cross_core_write_gbs_per_round"]):
                print(f"{k:12s}{i + 1:6d}{g:8.1f}"
                      + "".join(f"{r['latency'][c]['round_medians_ms'][i]:14.2f}" for c, _ in COLS))
    print("\npeak RSS, MiB (each in a fresh process; the ORT rows include the python,"
          " numpy and onnxruntime baseline of the import-only row)")
    print(f"{'model':12s}{'ORT import':>12s}{'ORT FP32':>12s}{'ORT u8s8':>12s}{'qp FP32':>12s}"
          f"{'qp F+exact':>12s}{'qpF/ortF':>10s}{'qpFE/ortU8':>12s}")
    for k, r in results.items():
        m = r["peak_rss_bytes"]
        print(f"{k:12s}" + "".join(f"{m[c] / 2**20:12.0f}" for c in
                                   ("ort_import_only", "ort_fp32", "ort_u8s8", "qport_fp32",
                                    "qport_fp32_and_exact"))
              + f"{r['peak_rss_ratios']['qport_fp32/ort_fp32']:10.2f}"
              + f"{r['peak_rss_ratios']['qport_fp32_and_exact/ort_u8s8']:12.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(ALL_MODELS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1, help="only 1 is supported (the models are batch 1)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per variant, split over the rounds")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4, help="alternations onnxruntime -> qport per model")
    ap.add_argument("--calib", type=int, default=8, help="calibration tensors for quantize_static")
    ap.add_argument("--qport", default=str(ROOT / "target/release/qport"))
    ap.add_argument("--out", default=str(ROOT / "target/bench/int8_vs_ort.json"))
    a = ap.parse_args()
    if a.batch != 1:
        ap.error("--batch: the benchmark models have a fixed batch of 1")
    exe = Path(a.qport)
    if not exe.exists():
        sys.exit(f"missing {exe}: run `cargo build --release -p qport-cli`")
    keys = [k.strip() for k in a.models.split(",") if k.strip()]
    for k in keys:
        if k not in ALL_MODELS:
            ap.error(f"unknown model {k!r} (valid: {', '.join(ALL_MODELS)})")
    t0 = time.time()
    results = {k: bench_model(k, a, exe) for k in keys}
    print_table(results, a.threads)
    machine = next(iter(results.values()))["qport_machine"] if results else None
    doc = {
        "schema": "qport.int8_vs_ort/1",
        "command": [sys.executable] + sys.argv,
        "settings": {"threads": a.threads, "batch": a.batch, "runs": a.runs, "warmup": a.warmup,
                     "rounds": a.rounds, "calib": a.calib, "profiles": PROFILES,
                     "ort_options": {"intra_op_num_threads": a.threads, "inter_op_num_threads": 1,
                                     "graph_optimization_level": "ORT_ENABLE_ALL",
                                     "providers": ["CPUExecutionProvider"]},
                     "aggregate": "median of per-round medians"},
        "machine": {"cpu_model": cpu_model(), "nproc": os.cpu_count(), "kernel": platform.release(),
                    "qport": machine},
        "versions": {"python": platform.python_version(), "onnxruntime": ort.__version__,
                     "onnx": onnx.__version__, "numpy": np.__version__,
                     "qport": next(iter(results.values()))["qport_version"] if results else None},
        "seconds": round(time.time() - t0, 1),
        "results": results,
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, out)
    print(f"\nwrote {out} ({doc['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
