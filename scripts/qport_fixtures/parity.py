"""onnxruntime oracle data for parity tests.

For a model and a list of real inputs this writes::

    parity/<model>/NN.input.npy       NN = 00..15, float32, the model's one input
    parity/<model>/NN.output_J.npy    J = index into the model's outputs
    parity/<model>/META.json          session options, names, shapes, samples

The session options are always explicit and recorded: CPU execution
provider, 1 intra-op and 1 inter-op thread, sequential execution, and the
graph optimization level asked for (``disable`` for FP32 references,
``all``, onnxruntime's default, for the quantized models, whose integer
kernels depend on it). Quantized outputs also depend on the CPU's integer
instructions (AVX2 u8s8 products saturate at int16, VNNI's do not), so the
CPU flags that matter are recorded too.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .common import commit_dir, fresh_dir, link_or_copy, save_npy_atomic, sha256_file, write_json_atomic

OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def make_session(model_path: Path, opt: str = "disable", threads: int = 1,
                 config: dict[str, str] | None = None) -> tuple[ort.InferenceSession, dict]:
    """A CPU session with explicit options, and a JSON record of those options."""
    so = ort.SessionOptions()
    so.graph_optimization_level = OPT_LEVELS[opt]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, value)
    sess = ort.InferenceSession(str(model_path), sess_options=so,
                                providers=["CPUExecutionProvider"])
    record = {
        "onnxruntime_version": ort.__version__,
        "providers": ["CPUExecutionProvider"],
        "graph_optimization_level": so.graph_optimization_level.name,
        "intra_op_num_threads": threads,
        "inter_op_num_threads": 1,
        "execution_mode": "ORT_SEQUENTIAL",
        "session_config_entries": dict(config or {}),
    }
    return sess, record


def host_record() -> dict:
    """The machine facts that can change quantized results."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8",
              "asimd", "asimddp", "i8mm"]
    return {"machine": platform.machine(), "system": platform.system(),
            "cpu_flags": [f for f in wanted if f in flags]}


def write_parity(out_dir: Path, model_path: Path, model_rel: str, inputs: list[np.ndarray],
                 opt: str, samples: list[dict], extra: dict | None = None,
                 link_inputs_from: Path | None = None) -> dict:
    """Run ``inputs`` through the model and write the parity folder (replaced whole).

    ``link_inputs_from`` reuses (hard-links) ``NN.input.npy`` files from
    another parity folder with the same inputs instead of writing copies.
    Returns the META record.
    """
    sess, options = make_session(model_path, opt=opt, threads=1)
    model_inputs, model_outputs = sess.get_inputs(), sess.get_outputs()
    if len(model_inputs) != 1:
        raise ValueError(f"{model_rel}: parity data supports one input, model has {len(model_inputs)}")
    in_name = model_inputs[0].name
    out_names = [o.name for o in model_outputs]
    staging = fresh_dir(out_dir)
    out_shapes, out_dtypes = None, None
    for n, x in enumerate(inputs):
        x = np.ascontiguousarray(x, dtype=np.float32)
        if link_inputs_from is not None:
            src = link_inputs_from / f"{n:02d}.input.npy"
            if not np.array_equal(np.load(src), x):
                raise ValueError(f"{src} does not hold the same input")
            link_or_copy(src, staging / f"{n:02d}.input.npy")
        else:
            save_npy_atomic(staging / f"{n:02d}.input.npy", x)
        outs = sess.run(out_names, {in_name: x})
        out_shapes = [list(o.shape) for o in outs]
        out_dtypes = [str(o.dtype) for o in outs]
        for j, y in enumerate(outs):
            save_npy_atomic(staging / f"{n:02d}.output_{j}.npy", y)
    meta = {
        "model": model_rel,
        "model_sha256": sha256_file(model_path),
        "session_options": options,
        "host": host_record(),
        "count": len(inputs),
        "inputs": [{"name": in_name, "file": "NN.input.npy", "dtype": "float32",
                    "shape": list(np.shape(inputs[0]))}],
        "outputs": [{"name": name, "index": j, "file": f"NN.output_{j}.npy",
                     "dtype": out_dtypes[j], "shape": out_shapes[j]}
                    for j, name in enumerate(out_names)],
        "samples": samples,
    }
    meta.update(extra or {})
    write_json_atomic(staging / "META.json", meta)
    commit_dir(staging, out_dir)
    return meta
