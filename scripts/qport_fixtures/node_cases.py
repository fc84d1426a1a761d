"""ONNX backend node conformance cases, written in the onnx test-data layout.

The onnx wheel ships the case definitions but not the generated data folder.
``onnx.backend.test.case.node.collect_testcases(op_type=None)`` rebuilds them
in memory; this module writes each as::

    node/<name>/model.onnx
    node/<name>/test_data_set_<N>/input_<J>.pb    (TensorProto)
    node/<name>/test_data_set_<N>/output_<J>.pb   (TensorProto)

Every TensorProto carries the name of the graph input/output it belongs to.
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


def write_node_cases(node_dir: Path) -> dict:
    """Collect every node case and write it under ``node_dir`` (replaced whole).

    Returns counts and the skipped cases with their reasons.
    """
    from onnx.backend.test.case.node import collect_testcases

    cases = sorted(collect_testcases(op_type=None), key=lambda c: c.name)
    staging = fresh_dir(node_dir)
    written, skipped = [], []
    for case in cases:
        if case.kind != "node" or case.model is None:
            skipped.append((case.name, f"kind {case.kind!r} without a model"))
            continue
        try:
            files = _case_files(case)
        except SkipCase as why:
            skipped.append((case.name, str(why)))
            continue
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
    commit_dir(staging, node_dir)
    return {"collected": len(cases), "written": len(written), "skipped": len(skipped),
            "onnx_version": onnx.__version__}
