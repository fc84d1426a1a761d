"""The Python API over ``qport._qport``: keyword arguments become the
``qport`` command line, JSON documents become :class:`Report` objects,
in-memory data becomes a temporary ``.npz`` the command reads."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _qport
from ._qport import CheckFailed

PathLike = Union[str, "os.PathLike[str]"]
#: Data for a study or calibration: a folder of images (with ``preprocess``),
#: a ``.npy``/``.npz`` file, or an iterable of ``{input name: array}`` dicts.
Data = Union[PathLike, Iterable[Mapping[str, np.ndarray]]]
#: ``progress(phase, done, total)``: ``phase`` is a new phase's label (then
#: ``done`` and ``total`` are None), else ``done`` of ``total`` units.
Progress = Union[Callable[[Optional[str], Optional[int], Optional[int]], Any], Any]


class QportWarning(UserWarning):
    """A warning qport prints as ``qport: warning: ...`` on the command line."""


class Report(dict):
    """A command's JSON document (``docs/cli-json.md``) as a ``dict``:
    ``report["schema"]`` names it (``qport.agree/2``, ...). Equal to
    ``json.loads`` of what ``qport <command> --format json`` prints on the
    same inputs, except timing fields and the recorded command line.
    """

    @property
    def schema(self) -> str:
        """The document's schema, e.g. ``qport.agree/2``."""
        return self["schema"]

    def to_pandas(self):
        """The document's natural table as a ``pandas.DataFrame``: the
        profile pairs of ``agree``, the layers of ``diverge``, the profiles
        of ``profiles``, the platforms of ``platforms``, the tensors of
        ``layout``, the op histogram of ``info``. Needs pandas (``pip
        install pandas``), imported only here."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - message checked by test
            raise ImportError(
                "Report.to_pandas() needs pandas, which is not installed: pip install pandas"
            ) from e
        return pd.DataFrame(self.table())

    def table(self) -> List[Dict[str, Any]]:
        """The rows :meth:`to_pandas` makes a frame of (plain dicts, no pandas)."""
        kind = self["schema"].split("/")[0]
        if kind == "qport.agree":
            return [
                {k: p[k] for k in ("a", "b", "n", "top1_agree", "top1_rate", "bit_identical", "margin_auc")}
                for p in self["pairs"]
            ]
        if kind == "qport.profiles":
            return list(self["profiles"])
        if kind == "qport.platforms":
            return list(self["platforms"])
        if kind == "qport.layout":
            return [dict(t, direction=d) for d in ("inputs", "outputs") for t in self[d]]
        if kind == "qport.info":
            return list(self["op_histogram"])
        if kind == "qport.diverge":
            return list(self.get("layers", []))
        raise TypeError(f"{self['schema']} has no natural table")


def _progress_callback(progress: Progress):
    """``progress`` as the extension's callback: a callable is called as
    is; a tqdm-like object (``update``/``n``/``total``) is driven."""
    if progress is None or progress is False:
        return None
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError as e:
            raise ImportError("progress=True needs tqdm: pip install tqdm, or pass a callable") from e
        progress = tqdm()
    if callable(progress) and not hasattr(progress, "update"):
        return progress
    bar = progress

    def drive(phase, done, total):
        if phase is not None:
            if hasattr(bar, "set_description_str"):
                bar.set_description_str(phase)
            return
        if total is not None and getattr(bar, "total", None) != total:
            bar.total = total
            bar.n = 0
        bar.update(done - bar.n)

    return drive


def _execute(argv: Sequence[str], progress: Progress = None, check: bool = True):
    """Runs ``qport ARGV`` in-process; returns ``(status, document)``.
    Warnings become :class:`QportWarning`; a failed threshold (exit 1)
    raises :class:`CheckFailed` with the document as ``.report`` when
    ``check``."""
    try:
        status, doc, warns = _qport.execute(["qport", *argv], _progress_callback(progress))
    except _qport.Error as e:
        for w in getattr(e, "warnings", []):
            warnings.warn(w, QportWarning, stacklevel=3)
        raise
    for w in warns:
        warnings.warn(w, QportWarning, stacklevel=3)
    report = Report(json.loads(doc)) if doc is not None else None
    if status != 0 and check:
        err = CheckFailed(f"qport {argv[0]}: a check failed its threshold (exit 1)")
        err.exit_code = 1
        err.report = report
        raise err
    return status, report


class _Scratch:
    """A temporary directory removed when its owner is collected."""

    def __init__(self, prefix: str):
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)


def _path_of(model) -> str:
    if isinstance(model, Model):
        return model.path
    if isinstance(model, Artifact):
        return str(model.model_path)
    return os.fspath(model)


def _data_arg(data: Data, scratch: _Scratch, name: str) -> str:
    """A path for ``data``: paths as given; samples written to one ``.npz``
    (one array per input, the sample axis first)."""
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    if isinstance(data, Mapping):
        raise TypeError(f"{name}: give an iterable of {{input name: array}} dicts (one per sample), not one dict")
    columns: Dict[str, list] = {}
    count = 0
    for i, sample in enumerate(data):
        if not isinstance(sample, Mapping):
            raise TypeError(f"{name}: sample {i} is a {type(sample).__name__}, not a {{input name: array}} dict")
        if count and set(sample) != set(columns):
            raise _qport.InputError(
                f"{name}: sample {i} has inputs {sorted(sample)}, sample 0 has {sorted(columns)}"
            )
        for k, v in sample.items():
            columns.setdefault(k, []).append(np.asarray(v))
        count += 1
    if count == 0:
        raise _qport.InputError(f"{name}: no samples")
    path = scratch.path / f"{name}.npz"
    try:
        arrays = {k: np.stack(v) for k, v in columns.items()}
    except ValueError as e:
        raise _qport.InputError(f"{name}: the samples' arrays differ in shape: {e}") from None
    np.savez(path, **arrays)
    return str(path)


def _opt(argv: List[str], flag: str, value) -> None:
    if value is None or value is False:
        return
    if value is True:
        argv.append(flag)
    elif isinstance(value, (list, tuple)) and flag in ("--pp", "--input-shape", "--output"):
        for v in value:
            argv += [flag, str(v)]
    elif isinstance(value, (list, tuple)):
        argv += [flag, ",".join(map(str, value))]
    else:
        argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]


def _shapes(input_shape) -> Optional[List[str]]:
    if input_shape is None:
        return None
    if isinstance(input_shape, Mapping):
        return [f"{k}={','.join(map(str, v))}" for k, v in input_shape.items()]
    return list(input_shape)


class Session:
    """A model made executable, as ``qport run MODEL [--profile P]`` runs it.

    ``run({name: array})`` returns ``{name: array}`` in the model's output
    order, bit-identical to ``qport run``'s outputs on the same inputs.
    Arrays are passed without conversion: each must have the input's dtype
    and shape (a wrong one raises :class:`InputError` with the engine's
    message); a non-contiguous array is accepted and gathered in C order.
    The GIL is released while the model runs.
    """

    def __init__(self, model: "Model", profile: Optional[str], threads: int):
        if int(threads) < 1:
            raise _qport.InputError(f"threads must be at least 1, got {threads}")
        self.model = model
        self.threads = int(threads)
        self._session = model._model.session(profile)

    @property
    def profile(self) -> str:
        """The arithmetic profile (``fp32`` for the float graph)."""
        return self._session.profile

    @property
    def inputs(self) -> List[Dict[str, Any]]:
        """The inputs to feed: ``[{"name", "dtype", "shape"}]``."""
        return [{"name": n, "dtype": d, "shape": s} for n, d, s in self._session.inputs()]

    def run(self, inputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Runs the model on ``inputs`` ({input name: numpy array})."""
        if not isinstance(inputs, Mapping):
            raise _qport.InputError(
                f"Session.run takes a dict {{input name: numpy array}}, not a {type(inputs).__name__}"
            )
        return self._session.run(dict(inputs), self.threads)

    def __repr__(self) -> str:
        return f"<qport.Session {self.model.path!r} profile={self.profile} threads={self.threads}>"


class Model:
    """An ONNX model loaded by :func:`load`.

    ``info`` is its ``qport.info/1`` document (what ``qport info --format
    json`` prints); ``inputs``, ``outputs``, ``opsets`` and
    ``op_histogram`` are views of it.
    """

    def __init__(self, path: PathLike):
        self._model = _qport.load(os.fspath(path))
        self.path: str = self._model.path
        self.info: Report = Report(json.loads(self._model.info_json()))

    @property
    def inputs(self) -> List[Dict[str, Any]]:
        """Graph inputs: ``[{"name", "dtype", "shape"}]`` (a dim is an int,
        a symbolic name or None)."""
        return self.info["inputs"]

    @property
    def outputs(self) -> List[Dict[str, Any]]:
        """Graph outputs, as :attr:`inputs`."""
        return self.info["outputs"]

    @property
    def opsets(self) -> Dict[str, int]:
        """Opset imports: ``{domain: version}`` (``""`` is the ONNX domain)."""
        return {o["domain"]: o["version"] for o in self.info["opset_imports"]}

    @property
    def op_histogram(self) -> Dict[str, int]:
        """Nodes per op type, most frequent first."""
        return {o["op"]: o["count"] for o in self.info["op_histogram"]}

    @property
    def unsupported_ops(self) -> Dict[str, int]:
        """Op types qport's engine cannot run (empty when it runs them all)."""
        return {o["op"]: o["count"] for o in self.info["unsupported_ops"]}

    def session(self, profile: Optional[str] = None, threads: int = 1) -> Session:
        """A :class:`Session` running this model: the float graph
        (``profile`` None or ``"fp32"``), or a quantized model's groups in
        integers under an arithmetic profile (``qport.profiles()`` lists
        them). ``threads`` is intra-op threads (results do not depend on it)."""
        return Session(self, profile, threads)

    def __repr__(self) -> str:
        return f"<qport.Model {self.path!r} {self.info['node_count']} nodes>"


def load(path: PathLike) -> Model:
    """Loads the ONNX model at ``path`` (as ``qport info`` does). Raises
    :class:`InputError` naming the file when it is missing or malformed."""
    return Model(path)


class Artifact:
    """The result of :func:`quantize`: the QDQ model, its resolved
    ``quant_config`` and the ``qport.quantize/1`` report.

    ``save(dir)`` writes exactly what ``qport quantize --out dir`` writes:
    ``model.qdq.onnx``, ``quant_config.json`` and ``report.json``.
    ``model_path`` is the QDQ model in a temporary directory that lives as
    long as this object (pass the artifact itself to :func:`agree`,
    :func:`diverge`, :func:`layout` or :func:`load`).
    """

    FILES = ("model.qdq.onnx", "quant_config.json", "report.json")

    def __init__(self, scratch: _Scratch, out: Path, report: Report):
        self._scratch = scratch
        self._out = out
        self.report: Report = report
        self.quant_config: Dict[str, Any] = json.loads((out / "quant_config.json").read_text())

    @property
    def model_path(self) -> Path:
        """The QDQ model file (temporary; see :meth:`save`)."""
        return self._out / "model.qdq.onnx"

    def load(self) -> Model:
        """The QDQ model, loaded."""
        return Model(self.model_path)

    def save(self, dir: PathLike, force: bool = False) -> Path:
        """Writes the three files into ``dir`` (created if missing; a
        non-empty ``dir`` needs ``force``, as ``--out`` does). Each file is
        written to a temporary name and renamed."""
        d = Path(dir)
        if d.exists() and not d.is_dir():
            raise _qport.InputError(f"--out '{d}' exists and is not a directory")
        if d.is_dir() and any(d.iterdir()) and not force:
            raise _qport.InputError(
                f"output directory '{d}' is not empty; pass force=True to replace "
                f"{', '.join(self.FILES)} there"
            )
        d.mkdir(parents=True, exist_ok=True)
        for name in self.FILES:
            tmp = d / f".{name}.qport-tmp"
            shutil.copyfile(self._out / name, tmp)
            os.replace(tmp, d / name)
        return d

    def __repr__(self) -> str:
        return f"<qport.Artifact for {self.report['platform']} ({self.report['calibration']['method']})>"


def quantize(
    model: Union[PathLike, Model],
    platform: str = "j6m",
    calib: Optional[Data] = None,
    *,
    eval: Optional[Data] = None,
    config: Optional[Union[PathLike, Mapping[str, Any]]] = None,
    calibration: Optional[str] = None,
    preprocess: Optional[str] = None,
    pp: Sequence[str] = (),
    calib_limit: Optional[int] = None,
    eval_limit: Optional[int] = None,
    template: Optional[str] = None,
    fast_perf: bool = False,
    bias_correction: bool = False,
    no_float16_guard: bool = False,
    fp32: Optional[PathLike] = None,
    input_shape: Optional[Union[Mapping[str, Sequence[int]], Sequence[str]]] = None,
    overrides: Optional[PathLike] = None,
    progress: Progress = None,
) -> Artifact:
    """Platform-aware post-training quantization: ``qport quantize``.

    Args:
        model: the FP32 ONNX model (a path or a loaded :class:`Model`).
        platform: target platform or march alias (``qport.platforms()``):
            ``j6e j6m j6b`` (int8 + int16), ``j6h j6p s6p`` (float16 + int8
            GEMMs), host archetypes (``x86-vnni``, ...).
        calib: calibration data: an image folder (with ``preprocess``), a
            ``.npy``/``.npz`` file, or an iterable of ``{input: array}``
            dicts (one per sample; arrays with or without the batch axis).
        eval: held-out data to compare with FP32 (default: the
            calibration samples, with a warning).
        config: a ``quant_config`` (dict, or a JSON file) applied over the
            platform's template (``docs/quant-config.md``).
        calibration: ``max``, ``ema``, ``percentile``, ``kl``, ``mse`` or
            ``load`` (take the scales of a QDQ model).
        preprocess: image preset (``imagenet``, ``effnet-lite``, ``ppocr``,
            ``yolo``) or TOML file; ``pp`` changes fields (``["color=bgr"]``).
        calib_limit, eval_limit: use at most this many samples.
        template: ``default``, ``full-int16``, ``int8`` or ``fast-perf``;
            ``fast_perf=True`` calibrates on synthetic samples.
        input_shape: fixes dynamic dims: ``{"images": [1, 3, 640, 640]}``.
        progress: ``callable(phase, done, total)`` or a tqdm-like bar
            (``True``: a new tqdm bar).

    Returns:
        An :class:`Artifact`: ``.report`` (``qport.quantize/1``),
        ``.quant_config``, ``.save(dir)``.

    Raises:
        InputError: an unknown platform, a bad config key, unreadable or
            misfit data (the CLI's message).
        NonFiniteError: NaN or an infinity in a compared output.

    Example:
        >>> art = qport.quantize("model.onnx", platform="j6m", calib="calib/",
        ...                      preprocess="effnet-lite", calib_limit=100)
        >>> art.report["precision_mix"]; art.save("q")
    """
    scratch = _Scratch("qport-quantize-")
    out = scratch.path / "out"
    argv = ["quantize", _path_of(model), "--platform", platform]
    if calib is not None:
        argv += ["--calib", _data_arg(calib, scratch, "calib")]
    if eval is not None:
        argv += ["--eval", _data_arg(eval, scratch, "eval")]
    if isinstance(config, Mapping):
        cfg = scratch.path / "quant_config.json"
        cfg.write_text(json.dumps(config))
        config = str(cfg)
    _opt(argv, "--config", config)
    _opt(argv, "--calibration", calibration)
    _opt(argv, "--preprocess", preprocess)
    _opt(argv, "--pp", list(pp))
    _opt(argv, "--calib-limit", calib_limit)
    _opt(argv, "--eval-limit", eval_limit)
    _opt(argv, "--template", template)
    _opt(argv, "--fast-perf", fast_perf)
    _opt(argv, "--bias-correction", bias_correction)
    _opt(argv, "--no-float16-guard", no_float16_guard)
    _opt(argv, "--fp32", fp32)
    _opt(argv, "--input-shape", _shapes(input_shape))
    _opt(argv, "--overrides", overrides)
    argv += ["--out", str(out), "--format", "json"]
    _, report = _execute(argv, progress, check=False)
    return Artifact(scratch, out, report)


def agree(
    model: Union[PathLike, Model, Artifact],
    data: Data,
    *,
    profiles: Union[str, Sequence[str]] = "all",
    n: Optional[int] = None,
    repeat: Optional[int] = None,
    fp32: Optional[Union[PathLike, Model]] = None,
    preprocess: Optional[str] = None,
    pp: Sequence[str] = (),
    pot: Optional[str] = None,
    min_agreement: Optional[float] = None,
    output: Sequence[str] = (),
    threads: Optional[int] = None,
    input_shape=None,
    out: Optional[PathLike] = None,
    force: bool = False,
    progress: Progress = None,
) -> Report:
    """Cross-profile agreement of a quantized model: ``qport agree``.

    Runs the artifact under each arithmetic profile (``"all"`` or a list of
    names) on ``data`` (a path, or an iterable of ``{input: array}``
    dicts) and returns the ``qport.agree/2`` document: the top-1 agreement
    matrix, bit-identical outputs, FP32 controls, flips and margins
    (``report.to_pandas()``: one row per profile pair). ``out`` also keeps
    ``agree.json`` there. ``min_agreement`` raises :class:`CheckFailed`
    (with ``.report``) when a pair agrees less.
    """
    scratch = _Scratch("qport-agree-")
    argv = _agree_argv(
        model, data, scratch, profiles=profiles, n=n, repeat=repeat, fp32=fp32,
        preprocess=preprocess, pp=pp, pot=pot, min_agreement=min_agreement,
        output=output, threads=threads, input_shape=input_shape,
    )
    argv += ["--out", os.fspath(out) if out is not None else str(scratch.path / "out")]
    _opt(argv, "--force", force)
    argv += ["--format", "json"]
    return _execute(argv, progress)[1]


def _agree_argv(model, data, scratch: _Scratch, *, profiles, n, repeat, fp32, preprocess, pp,
                pot, min_agreement, output, threads, input_shape) -> List[str]:
    """``agree MODEL --data DATA ...`` without ``--out`` and ``--format``."""
    argv = ["agree", _path_of(model), "--data", _data_arg(data, scratch, "data")]
    _opt(argv, "--profiles", profiles)
    _opt(argv, "--n", n)
    _opt(argv, "--repeat", repeat)
    _opt(argv, "--fp32", _path_of(fp32) if fp32 is not None else None)
    _opt(argv, "--preprocess", preprocess)
    _opt(argv, "--pp", list(pp))
    _opt(argv, "--pot", pot)
    _opt(argv, "--min-agreement", min_agreement)
    _opt(argv, "--output", list(output))
    _opt(argv, "--threads", threads)
    _opt(argv, "--input-shape", _shapes(input_shape))
    return argv


def diverge(
    model: Union[PathLike, Model, Artifact],
    data: Data,
    profiles: Sequence[str] = ("avx2-u8s8", "f32-rne"),
    *,
    n: Optional[int] = None,
    preprocess: Optional[str] = None,
    pp: Sequence[str] = (),
    input_shape=None,
    progress: Progress = None,
) -> Report:
    """Where and why two arithmetic profiles part on a quantized model:
    ``qport diverge``. Returns the ``qport.diverge/2`` document (the first
    diverging layer and the stage: accumulation, requantization scale,
    rounding, bias, epilogue, non-GEMM)."""
    scratch = _Scratch("qport-diverge-")
    argv = ["diverge", _path_of(model), "--data", _data_arg(data, scratch, "data")]
    _opt(argv, "--profiles", list(profiles) if not isinstance(profiles, str) else profiles)
    _opt(argv, "--n", n)
    _opt(argv, "--preprocess", preprocess)
    _opt(argv, "--pp", list(pp))
    _opt(argv, "--input-shape", _shapes(input_shape))
    argv += ["--format", "json"]
    return _execute(argv, progress)[1]


def profiles(profile_files: Sequence[PathLike] = ()) -> Report:
    """The integer-arithmetic profiles (``qport profiles``;
    ``qport.profiles/1``): presets, then those of each TOML/JSON file."""
    argv = ["profiles"]
    for f in profile_files:
        argv += ["--profile-file", os.fspath(f)]
    return _execute(argv + ["--format", "json"])[1]


def platforms(overrides: Optional[PathLike] = None) -> Report:
    """The platform registry (``qport platforms``; ``qport.platforms/1``)."""
    argv = ["platforms"]
    _opt(argv, "--overrides", overrides)
    return _execute(argv + ["--format", "json"])[1]


def layout(
    model: Union[PathLike, Model, Artifact],
    platform: str,
    *,
    input_shape=None,
    overrides: Optional[PathLike] = None,
) -> Report:
    """Runtime tensor descriptors (validShape, stride, alignedByteSize) of
    the model's inputs and outputs on ``platform`` (``qport layout``;
    ``qport.layout/1``)."""
    argv = ["layout", _path_of(model), "--platform", platform]
    _opt(argv, "--input-shape", _shapes(input_shape))
    _opt(argv, "--overrides", overrides)
    return _execute(argv + ["--format", "json"])[1]
