"""onnxruntime oracle data for parity tests.

For a model and a list of real inputs this writes::

    parity/<model>/NN.input.npy       NN = 00..15, float32, the model's one input
    parity/<model>/NN.input_K.npy     instead, for samples given as dicts (models
                                      with several inputs): K = index into the
                                      model's inputs, the dtype as given
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
                 config: dict[str, str] | None = None,
                 optimized_model_path: Path | None = None) -> tuple[ort.InferenceSession, dict]:
    """A CPU session with explicit options, and a JSON record of those options.

    ``optimized_model_path`` makes onnxruntime save the graph it optimized
    (``SessionOptions.optimized_model_filepath``) when the session is created.
    """
    so = ort.SessionOptions()
    if optimized_model_path is not None:
        so.optimized_model_filepath = str(optimized_model_path)
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


def write_parity(out_dir: Path, model_path: Path, model_rel: str,
                 inputs: list[np.ndarray] | list[dict[str, np.ndarray]],
                 opt: str, samples: list[dict], extra: dict | None = None,
                 link_inputs_from: Path | None = None) -> dict:
    """Run ``inputs`` through the model and write the parity folder (replaced whole).

    Each sample is an array (the model's one input, saved as float32
    ``NN.input.npy``) or a dict from input name to array (every model
    input, saved in its own dtype as ``NN.input_K.npy``). Samples may differ
    in shape (dynamic dims); META then lists every sample's shapes.
    ``link_inputs_from`` reuses (hard-links) the input files from another
    parity folder with the same inputs instead of writing copies.
    Returns the META record.
    """
    sess, options = make_session(model_path, opt=opt, threads=1)
    model_inputs, model_outputs = sess.get_inputs(), sess.get_outputs()
    in_names = [i.name for i in model_inputs]
    keyed = isinstance(inputs[0], dict)
    if not keyed and len(model_inputs) != 1:
        raise ValueError(f"{model_rel}: samples are plain arrays but the model has "
                         f"{len(model_inputs)} inputs; give dicts")
    if keyed:
        files = [f"input_{k}" for k in range(len(in_names))]
        feeds = [{name: np.ascontiguousarray(x[name]) for name in in_names} for x in inputs]
    else:
        files = ["input"]
        feeds = [{in_names[0]: np.ascontiguousarray(x, dtype=np.float32)} for x in inputs]
    out_names = [o.name for o in model_outputs]
    staging = fresh_dir(out_dir)
    out_shapes, out_dtypes, all_out_shapes = None, None, []
    for n, feed in enumerate(feeds):
        for name, file in zip(in_names, files):
            x = feed[name]
            if link_inputs_from is not None:
                src = link_inputs_from / f"{n:02d}.{file}.npy"
                if not np.array_equal(np.load(src), x):
                    raise ValueError(f"{src} does not hold the same input")
                link_or_copy(src, staging / f"{n:02d}.{file}.npy")
            else:
                save_npy_atomic(staging / f"{n:02d}.{file}.npy", x)
        outs = sess.run(out_names, feed)
        out_shapes = [list(o.shape) for o in outs]
        out_dtypes = [str(o.dtype) for o in outs]
        all_out_shapes.append(out_shapes)
        for j, y in enumerate(outs):
            save_npy_atomic(staging / f"{n:02d}.output_{j}.npy", y)
    in_shapes = [[list(f[name].shape) for name in in_names] for f in feeds]
    meta = {
        "model": model_rel,
        "model_sha256": sha256_file(model_path),
        "session_options": options,
        "host": host_record(),
        "count": len(inputs),
        "inputs": [{"name": name, "file": f"NN.{file}.npy", "dtype": str(feeds[0][name].dtype),
                    "shape": in_shapes[0][k]}
                   for k, (name, file) in enumerate(zip(in_names, files))],
        "outputs": [{"name": name, "index": j, "file": f"NN.output_{j}.npy",
                     "dtype": out_dtypes[j], "shape": out_shapes[j]}
                    for j, name in enumerate(out_names)],
        "samples": samples,
    }
    if any(s != in_shapes[0] for s in in_shapes) or any(s != out_shapes for s in all_out_shapes):
        meta["sample_shapes"] = [{"inputs": i, "outputs": o} for i, o in zip(in_shapes, all_out_shapes)]
    meta.update(extra or {})
    write_json_atomic(staging / "META.json", meta)
    commit_dir(staging, out_dir)
    return meta
