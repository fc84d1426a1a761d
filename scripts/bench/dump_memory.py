#!/usr/bin/env python3
"""Peak memory of `qport run --dump` against a plain `qport run`.

For EfficientNet-Lite0 (FP32, float graph) and its u8s8 QDQ artifact
(`--profile f32-rne`, integer plan), runs `qport run` on one input from the
fixture cache without and with `--dump DIR`, and prints the peak resident
set size of each run (`/usr/bin/time -f %M`, KiB), the ratio, and the
number and size of the values dumped. `--dump` streams each value to disk
as the engine produces it, so the ratio stays near 1 (the acceptance bound
is 1.5). Each run is repeated `--repeat` times and the largest peak kept.

Usage: dump_memory.py QPORT_BINARY [--repeat N] [--json OUT.json]
(build with `cargo build --release -p qport-cli`; fixtures from
`scripts/fetch-fixtures`, `QPORT_FIXTURES` honoured)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = [
    ("efficientnet-lite0.onnx", "fp32"),
    ("efficientnet-lite0.qdq-u8s8.onnx", "f32-rne"),
]


def fixtures() -> Path:
    return Path(os.environ.get("QPORT_FIXTURES") or Path.home() / ".cache/qport/fixtures")


def peak_kib(cmd: list[str]) -> int:
    """Runs `cmd` under /usr/bin/time and returns its peak RSS in KiB."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", t.name, *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
        return int(t.read().strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("qport")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    x = fixtures() / "parity/efficientnet-lite0/00.input.npy"
    if not x.is_file():
        print(f"missing fixture {x}: run scripts/fetch-fixtures", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, profile in CASES:
            m = fixtures() / "models" / model
            base = [args.qport, "run", str(m), "--input", f"input={x}", "--profile", profile]
            dump = Path(tmp) / model
            plain = max(peak_kib(base) for _ in range(args.repeat))
            dumped = max(peak_kib([*base, "--dump", str(dump)]) for _ in range(args.repeat))
            index = json.loads((dump / "index.json").read_text())
            size = sum(p.stat().st_size for p in dump.glob("*.npy"))
            row = {"model": model, "profile": profile, "plain_kib": plain, "dump_kib": dumped,
                   "ratio": dumped / plain, "values": len(index["values"]), "dump_bytes": size}
            rows.append(row)
            print(f"{model:<36} {profile:<8} plain {plain:>8} KiB  --dump {dumped:>8} KiB  "
                  f"ratio {dumped / plain:.3f}  ({row['values']} values, {size / 2**20:.1f} MiB on disk)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["ratio"] <= 1.5 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
