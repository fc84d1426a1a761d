"""qport from Python: platform-aware quantization of ONNX models and INT8
portability studies.

The package is a thin layer over the same Rust library as the ``qport``
command: every function here runs the same code as the command of the same
name and returns the same JSON document (``docs/cli-json.md``) as a
:class:`Report` (a ``dict``), with ``to_pandas()`` where a table is the
natural form.

Quick start::

    import numpy as np, qport

    model = qport.load("model.onnx")             # inputs, outputs, opsets, op histogram
    session = model.session()                     # FP32; model.session(profile="exact") for integers
    out = session.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

    art = qport.quantize(model, platform="j6m", calib="calib/", preprocess="effnet-lite")
    art.save("q")                                 # what `qport quantize --out q` writes
    report = qport.agree("q/model.qdq.onnx", data="eval/", preprocess="effnet-lite")

Errors are :class:`Error` subclasses carrying the CLI's message and exit
code: :class:`InputError` (exit 2: bad files, names, dtypes, shapes),
:class:`CheckFailed` (exit 1), :class:`NonFiniteError` (NaN or infinity in
a compared output), :class:`InternalError` (a bug; exit 101).
"""

from ._qport import (
    CheckFailed,
    Error,
    InputError,
    InternalError,
    NonFiniteError,
    __version__,
)
from ._api import (
    Artifact,
    Model,
    QportWarning,
    Report,
    Session,
    agree,
    diverge,
    layout,
    load,
    platforms,
    profiles,
    quantize,
)

__all__ = [
    "Artifact",
    "CheckFailed",
    "Error",
    "InputError",
    "InternalError",
    "Model",
    "NonFiniteError",
    "QportWarning",
    "Report",
    "Session",
    "__version__",
    "agree",
    "diverge",
    "layout",
    "load",
    "platforms",
    "profiles",
    "quantize",
]
