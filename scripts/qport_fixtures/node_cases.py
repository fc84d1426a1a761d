"""ONNX backend node conformance cases, written in the onnx test-data layout.

The onnx wheel ships the case definitions but not the generated data folder.
``onnx.backend.test.case.node.collect_testcases(op_type=None)`` rebuilds them
in memory; this module writes each as::

    node/<name>/model.onnx
    node/<name>/test_data_set_<N>/input_<J>.pb    (TensorProto)
    node/<name>/test_data_set_<N>/output_<J>.pb   (TensorProto)

Every TensorProto carries the name of the graph input/output it belongs to.

One deliberate change to the generated data: ``Cast``/``CastLike`` from a
float type to a 2- or 4-bit integer. The ONNX specification leaves a float to
fixed-point conversion *undefined* when the value is out of range, and the
``onnx`` reference converts through ``ml_dtypes``, whose answer changed
between releases (0.6 wraps ``[-9, 8, 9]`` to ``[7, -8, -7]``, 0.7 gives 0).
qport defines it as it does for every integer width: truncate toward zero,
NaN to 0, saturate to the type's range (onnxruntime's CPU ``Cast`` to int4
clamps as well). :func:`define_subbyte_casts` rewrites only the out-of-range
elements of those expected outputs to that rule, after checking that every
in-range element equals the reference's value, and lists the cases it changed
in ``REWRITTEN.txt``. The decision is documented in ``conformance/README.md``.
Cases with a sequence, optional or map value anywhere in their graph
inputs/outputs or data are skipped (qport only reads tensors) and listed in
``SKIPPED.txt`` as ``name<TAB>reason``. ``INDEX.txt`` lists the cases that
were written, one name a line; lines starting with ``#`` are comments.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from .common import commit_dir, fresh_dir


class SkipCase(Exception):
    """This case cannot be written as plain tensors; the message says why."""


def _value_kind(value_info: onnx.ValueInfoProto) -> str:
    return value_info.type.WhichOneof("value") or "undefined"


def _to_tensor_proto(value, name: str) -> TensorProto:
    """One data value as a TensorProto named ``name``."""
    if isinstance(value, TensorProto):
        out = TensorProto()
        out.CopyFrom(value)
        out.name = name
        return out
    if value is None:
        raise SkipCase(f"{name}: None (an absent optional) is not a tensor")
    if isinstance(value, (list, tuple, dict)):
        raise SkipCase(f"{name}: {type(value).__name__} value (sequence/map) is not a tensor")
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise SkipCase(f"{name}: unsupported value type {type(value).__name__}")
    return numpy_helper.from_array(value, name)


def _check_values(kind: str, infos, values) -> list[TensorProto]:
    if len(values) > len(infos):
        raise SkipCase(f"{len(values)} {kind} values for {len(infos)} graph {kind}s")
    protos = []
    for info, value in zip(infos, values):
        k = _value_kind(info)
        if k != "tensor_type":
            raise SkipCase(f"graph {kind} {info.name!r} has {k.replace('_type', '')} type")
        protos.append(_to_tensor_proto(value, info.name))
    return protos


def _case_files(case) -> dict[str, bytes]:
    """All files of one case, relative path -> bytes; raises SkipCase."""
    graph = case.model.graph
    files = {"model.onnx": case.model.SerializeToString()}
    for n, (inputs, outputs) in enumerate(case.data_sets):
        d = f"test_data_set_{n}"
        for j, t in enumerate(_check_values("input", graph.input, list(inputs))):
            files[f"{d}/input_{j}.pb"] = t.SerializeToString()
        for j, t in enumerate(_check_values("output", graph.output, list(outputs))):
            files[f"{d}/output_{j}.pb"] = t.SerializeToString()
    return files


FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
SUBBYTE_RANGES = {
    TensorProto.INT4: (-8, 7),
    TensorProto.UINT4: (0, 15),
    TensorProto.INT2: (-2, 1),
    TensorProto.UINT2: (0, 3),
}


def _elem_type(info: onnx.ValueInfoProto) -> int:
    return info.type.tensor_type.elem_type


def define_subbyte_casts(name: str, files: dict[str, bytes], model: onnx.ModelProto) -> bool:
    """Rewrite the out-of-range elements of a float -> 2/4-bit integer cast.

    Applies to ``test_cast*``/``test_castlike*`` cases whose first graph input
    is a float type and whose output is INT4/UINT4/INT2/UINT2. Expected
    values become ``clip(trunc(x), lo, hi)`` with NaN -> 0 (qport's rule);
    every in-range element must already equal the reference's value, else
    this raises (the reference changed in a way the rule does not explain).
    Returns whether any value changed.
    """
    if not name.startswith(("test_cast_", "test_castlike_")):
        return False
    graph = model.graph
    out_type = _elem_type(graph.output[0])
    if _elem_type(graph.input[0]) not in FLOAT_TYPES or out_type not in SUBBYTE_RANGES:
        return False
    lo, hi = SUBBYTE_RANGES[out_type]
    changed = False
    for rel in sorted(files):
        if not rel.endswith("/output_0.pb"):
            continue
        x_proto = TensorProto.FromString(files[rel.replace("output_0", "input_0")])
        y_proto = TensorProto.FromString(files[rel])
        x = numpy_helper.to_array(x_proto).astype(np.float64)
        ref = numpy_helper.to_array(y_proto).astype(np.int64)
        t = np.where(np.isnan(x), 0.0, np.trunc(x))
        in_range = (t >= lo) & (t <= hi)
        want = np.clip(t, lo, hi).astype(np.int64)
        if not np.array_equal(ref[in_range], want[in_range]):
            raise RuntimeError(f"{name}: the onnx reference disagrees with trunc() on in-range values")
        if np.array_equal(ref, want):
            continue
        new = numpy_helper.from_array(want.astype(numpy_helper.to_array(y_proto).dtype), y_proto.name)
        files[rel] = new.SerializeToString()
        changed = True
    return changed


def write_node_cases(node_dir: Path) -> dict:
    """Collect every node case and write it under ``node_dir`` (replaced whole).

    Returns counts and the skipped cases with their reasons.
    """
    from onnx.backend.test.case.node import collect_testcases

    cases = sorted(collect_testcases(op_type=None), key=lambda c: c.name)
    staging = fresh_dir(node_dir)
    written, skipped, rewritten = [], [], []
    for case in cases:
        if case.kind != "node" or case.model is None:
            skipped.append((case.name, f"kind {case.kind!r} without a model"))
            continue
        try:
            files = _case_files(case)
        except SkipCase as why:
            skipped.append((case.name, str(why)))
            continue
        if define_subbyte_casts(case.name, files, case.model):
            rewritten.append(case.name)
        for rel, data in files.items():
            path = staging / case.name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        written.append(case.name)

    header = (
        f"# ONNX backend node test cases written by scripts/fetch-fixtures (onnx {onnx.__version__}).\n"
        f"# {len(written)} written; {len(skipped)} skipped (see SKIPPED.txt); "
        f"{len(cases)} collected.\n"
    )
    (staging / "INDEX.txt").write_text(header + "".join(f"{n}\n" for n in written))
    (staging / "SKIPPED.txt").write_text(
        "# name<TAB>reason: cases not written because they use non-tensor values.\n"
        + "".join(f"{n}\t{r}\n" for n, r in skipped)
    )
    (staging / "REWRITTEN.txt").write_text(
        "# Cases whose out-of-range float -> 2/4-bit integer expected values were set to\n"
        "# qport's rule (truncate, NaN -> 0, saturate); see conformance/README.md.\n"
        + "".join(f"{n}\n" for n in rewritten)
    )
    commit_dir(staging, node_dir)
    return {"collected": len(cases), "written": len(written), "skipped": len(skipped),
            "rewritten": rewritten, "onnx_version": onnx.__version__}
