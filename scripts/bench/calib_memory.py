#!/usr/bin/env python3
"""Peak memory of `qport quantize` calibration vs the number of samples.

Builds a folder of 1000 PNG crops (the 700 fixture photo crops, then the
calibration crops again under new names; hard links where possible), runs
`qport quantize --calibration max` on the first 100 and on all 1000 (same
model, platform and preprocessing; no --eval), and prints the peak resident
set size of each run (`/usr/bin/time -f %M`, KiB) and their ratio. Streaming
calibration keeps the two within a few percent.

Usage: calib_memory.py QPORT_BINARY [--model M] [--counts 100,1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def fixtures() -> Path:
    return Path(os.environ.get("QPORT_FIXTURES") or Path.home() / ".cache/qport/fixtures")


def link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("qport")
    ap.add_argument("--model", default=str(fixtures() / "models/efficientnet-lite0.onnx"))
    ap.add_argument("--counts", default="100,1000")
    ap.add_argument("--platform", default="j6m")
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    crops = sorted((fixtures() / "datasets/photo-crops").rglob("*.png"))
    if not crops:
        print("no photo crops: run scripts/fetch-fixtures", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "crops"
        folder.mkdir()
        for i in range(max(counts)):
            link(crops[i % len(crops)], folder / f"{i:05d}.png")
        for n in counts:
            out = Path(tmp) / f"out{n}"
            cmd = ["/usr/bin/time", "-f", "%M", args.qport, "quantize", args.model,
                   "--platform", args.platform, "--calib", str(folder), "--preprocess", "effnet-lite",
                   "--calibration", "max", "--calib-limit", str(n), "--out", str(out),
                   "--format", "json", "--quiet"]
            t = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr, file=sys.stderr)
                return 1
            rss = int(p.stderr.strip().splitlines()[-1])
            rep = json.loads(p.stdout)
            rows.append({"samples": rep["calibration"]["samples"], "peak_rss_kib": rss,
                         "seconds": round(time.time() - t, 1)})
            print(f"{rows[-1]['samples']:>6} samples: peak RSS {rss / 1024:.1f} MiB "
                  f"({rows[-1]['seconds']} s)")
    ratio = rows[-1]["peak_rss_kib"] / rows[0]["peak_rss_kib"]
    print(f"peak RSS ratio {rows[-1]['samples']} / {rows[0]['samples']} samples: {ratio:.3f}")
    print(json.dumps({"runs": rows, "ratio": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
