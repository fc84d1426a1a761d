#!/usr/bin/env python3
"""onnxruntime's view of a ``qport tune`` result.

``qport tune`` scores every configuration with qport's own engine. This
script runs the tuned artifact (``OUT/model.qdq.onnx``) and the FP32 model
with onnxruntime on the same evaluation samples and reports the figure the
tune's target is in -- top-1 agreement with FP32, mean output cosine,
SQNR, or accuracy against labels -- next to the value ``tune.json``
records for its final configuration. Two onnxruntime sessions are
reported: graph optimizations off (every QuantizeLinear /
DequantizeLinear runs as written, the QDQ semantics qport simulates) and
the default session (QDQ groups fused into integer kernels).

Samples: an ``.npz`` (one array per model input, samples stacked on axis
0) or an image folder read as qport reads it (recursive, sorted by path,
``.png`` / ``.jpg`` / ``.jpeg``, hidden entries skipped) and preprocessed
as qport's ``effnet-lite`` or ``ppocr`` preset does (checked bit for bit
on the photo crops).

Usage (the venv of ``scripts/setup-venv``)::

    .venv/bin/python scripts/ort_tune_check.py TUNE_DIR --eval held-out/ --preprocess effnet-lite \\
        [--model FP32.onnx] [--eval-limit N] [--labels folders:0,180|labels.txt] \\
        [--tolerance 0.5] [--json out.json]

``--model`` defaults to the model ``tune.json`` names. Exit 1 when the
disabled-optimization session's figure differs from qport's by more than
``--tolerance`` points (top-1 / accuracy) or ``--tolerance`` / 100
(cosine), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ort_calibrators import load_samples, score, session  # noqa: E402
from qport_fixtures.preprocess import ppocr_cls_preprocess  # noqa: E402

def effnet_lite(img: Image.Image) -> np.ndarray:
    """qport's ``effnet-lite`` preset: the fixtures' EfficientNet
    preprocessing with torchvision's centre-crop offsets,
    ``round((side - 224) / 2)`` half to even (the fixtures floor them)."""
    img = img.convert("RGB")
    w, h = img.size
    side = 256
    scale = side / min(w, h)
    nw, nh = max(side, round(w * scale)), max(side, round(h * scale))
    if (nw, nh) != (w, h):
        img = img.resize((nw, nh), Image.BICUBIC)
    left, top = round((nw - 224) / 2), round((nh - 224) / 2)
    img = img.crop((left, top, left + 224, top + 224))
    x = (np.asarray(img, dtype=np.float32) - 127.0) / 128.0
    return np.ascontiguousarray(x.transpose(2, 0, 1)[np.newaxis])


PREPROCESS = {"effnet-lite": effnet_lite, "ppocr": ppocr_cls_preprocess}
IMAGE_EXT = {".png", ".jpg", ".jpeg"}


def image_files(root: Path) -> list[Path]:
    """Images under ``root`` in qport's order (path components compared in turn)."""
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and p.suffix.lower() in IMAGE_EXT:
            out.append(p)
    return sorted(out, key=lambda p: p.relative_to(root).parts)


def load_eval(path: Path, preprocess: str | None, input_name: str, limit: int | None):
    """Samples (dicts of arrays) and, for image folders, their files."""
    if path.is_dir():
        if preprocess not in PREPROCESS:
            raise SystemExit(f"{path}: images need --preprocess ({', '.join(PREPROCESS)})")
        files = image_files(path)[:limit]
        fn = PREPROCESS[preprocess]
        return [{input_name: fn(Image.open(f))} for f in files], files
    samples = load_samples(path)[:limit]
    return samples, None


def load_labels(spec: str, root: Path, files: list[Path] | None, n: int) -> list[int]:
    """Class indices as ``qport --labels`` reads them (files or class folders)."""
    if spec.startswith("folders"):
        if files is None:
            raise SystemExit("--labels folders needs an image folder")
        names = spec.split(":", 1)[1].split(",") if ":" in spec else None
        out = []
        for f in files:
            folder = f.relative_to(root).parts[0]
            out.append(names.index(folder) if names else int(folder))
        return out
    p = Path(spec)
    if p.suffix == ".npy":
        return [int(x) for x in np.load(p).ravel()][:n]
    vals = [ln.strip() for ln in p.read_text().splitlines()]
    return [int(v) for v in vals if v and not v.startswith("#")][:n]


def accuracy(outs: list[list[np.ndarray]], labels: list[int]) -> float:
    """Share of samples whose first [N, C] output's arg-max is the label."""
    hits = 0
    for o, label in zip(outs, labels):
        cls = next(x for x in o if x.ndim == 2)
        hits += int(cls[0].argmax() == label)
    return hits / len(labels)


def default_session(path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tune_dir", type=Path)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--eval", type=Path, required=True)
    ap.add_argument("--preprocess", choices=sorted(PREPROCESS))
    ap.add_argument("--eval-limit", type=int)
    ap.add_argument("--labels")
    ap.add_argument("--tolerance", type=float, default=0.5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tune = json.loads((args.tune_dir / "tune.json").read_text())
    fin = tune["trajectory"][tune["final_step"]]
    metric = tune["target"]["metric"]
    model = args.model or Path(tune["model"]["path"])
    artifact = args.tune_dir / "model.qdq.onnx"
    fp32_plain = session(model)
    input_name = fp32_plain.get_inputs()[0].name
    samples, files = load_eval(args.eval, args.preprocess, input_name, args.eval_limit)
    if len(samples) != tune["samples"]:
        print(f"note: {len(samples)} samples here, {tune['samples']} in tune.json", file=sys.stderr)
    labels = None
    if metric == "accuracy":
        if not args.labels:
            raise SystemExit("the tune's target is accuracy: give the same --labels")
        labels = load_labels(args.labels, args.eval, files, len(samples))
    ref = [fp32_plain.run(None, s) for s in samples]
    rows = {}
    for name, sess in (("ort (optimizations off)", session(artifact)),
                       ("ort (default session)", default_session(artifact))):
        got = [sess.run(None, s) for s in samples]
        sc = score(ref, got)
        if labels is not None:
            sc["accuracy"] = accuracy(got, labels)
        rows[name] = sc
    qport = fin["score"]
    key = {"top1": "top1", "cosine": "cosine", "accuracy": "accuracy"}.get(metric)
    if key is None:
        raise SystemExit(f"target metric {metric}: compare top1, cosine or accuracy targets")
    scale = 100.0 if key in ("top1", "accuracy") else 1.0
    unit = " pt" if scale == 100.0 else ""
    print(f"{args.tune_dir}: target {metric} >= {tune['target']['min']:.6g}; "
          f"final step {tune['final_step']} promotes {len(fin['promoted'])} nodes, "
          f"{100 * fin['mac_share'].get('int16', 0.0):.1f}% of MACs at int16; {len(samples)} samples")
    print(f"  {'run':<26} {key:>10}   cosine     vs qport")
    print(f"  {'qport (tune.json)':<26} {scale * qport[key]:>10.4f} {qport['cosine']:.6f}")
    gaps = {}
    for name, sc in rows.items():
        gap = scale * (sc[key] - qport[key])
        gaps[name] = gap
        print(f"  {name:<26} {scale * sc[key]:>10.4f} {sc['cosine']:.6f} {gap:+.4f}{unit}")
    limit = args.tolerance if scale == 100.0 else args.tolerance / 100.0
    ok = abs(gaps["ort (optimizations off)"]) <= limit
    print(f"  within {limit}{unit} of qport: {'yes' if ok else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps({
            "tune_dir": str(args.tune_dir), "metric": metric, "samples": len(samples),
            "qport": qport, "onnxruntime": rows, "gaps": gaps, "within_tolerance": ok,
        }, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
