"""Sharded studies as Ray tasks (``pip install qport[ray]``).

A study is a pure function of (artifact, data slice, profile): ``qport
agree --shard I/N`` measures a deterministic slice of the inputs and
``qport merge`` combines the slices into exactly the document one process
writes (identical except the timing fields and the recorded command).
:func:`agree` runs the N shards as Ray tasks, each retried when its
worker dies (``max_retries``), and merges them at the end::

    import ray, qport.distributed
    ray.init()                                   # or ray.init(address="auto")
    report = qport.distributed.agree("q/model.qdq.onnx", data="eval/",
                                     preprocess="effnet-lite", shards=8)

The model and data are referenced by path: on a cluster they must be
visible at the same path on every node (a shared file system); in-memory
data is written once to ``work_dir`` (which then must be shared too).
Without a Ray cluster, the same recipe runs on any batch scheduler with the
CLI's ``--shard`` and ``merge`` (``docs/scale-out.md``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional, Sequence, Union

from . import _api, _qport
from ._api import Data, PathLike, Report

__all__ = ["agree"]


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError("qport.distributed needs Ray: pip install 'qport[ray]'") from e
    return ray


def _run_shard(argv: Sequence[str], index: int, count: int, out: str, pid_dir: Optional[str]) -> str:
    """One shard, in a Ray worker: ``qport agree ... --shard I/N --out OUT``.
    A retried shard starts from an empty ``out``."""
    if pid_dir:
        Path(pid_dir, f"shard-{index}.pid").write_text(str(os.getpid()))
    shutil.rmtree(out, ignore_errors=True)
    _qport.execute(["qport", *argv, "--shard", f"{index}/{count}", "--out", out])
    return out


def agree(
    model: Union[PathLike, "_api.Model", "_api.Artifact"],
    data: Data,
    *,
    shards: int,
    profiles: Union[str, Sequence[str]] = "all",
    n: Optional[int] = None,
    repeat: Optional[int] = None,
    fp32=None,
    preprocess: Optional[str] = None,
    pp: Sequence[str] = (),
    pot: Optional[str] = None,
    min_agreement: Optional[float] = None,
    output: Sequence[str] = (),
    threads: Optional[int] = 1,
    input_shape=None,
    out: Optional[PathLike] = None,
    force: bool = False,
    work_dir: Optional[PathLike] = None,
    max_retries: int = 3,
    num_cpus: float = 1,
) -> Report:
    """:func:`qport.agree` in ``shards`` Ray tasks, merged.

    Takes the arguments of :func:`qport.agree` (``threads`` is per task,
    default 1) and returns the same ``qport.agree/2`` document, identical
    except ``seconds`` (the sum of the shards' wall times) and
    ``command``. Each task needs ``num_cpus`` CPUs and is retried up to
    ``max_retries`` times when its worker dies. ``work_dir`` keeps the
    shard directories (default: a temporary directory, removed after the
    merge). Uses the connected Ray cluster, or starts a local one.
    """
    ray = _ray()
    if shards < 1:
        raise _qport.InputError(f"shards must be at least 1, got {shards}")
    scratch = _api._Scratch("qport-ray-")
    root = Path(work_dir) if work_dir is not None else scratch.path
    root.mkdir(parents=True, exist_ok=True)
    argv = _api._agree_argv(
        model, data, scratch, profiles=profiles, n=n, repeat=repeat, fp32=fp32,
        preprocess=preprocess, pp=pp, pot=pot, min_agreement=min_agreement,
        output=output, threads=threads, input_shape=input_shape,
    )
    if not ray.is_initialized():
        ray.init()
    task = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_run_shard)
    dirs = [str(root / f"shard-{i}") for i in range(shards)]
    refs = [task.remote(argv, i, shards, d, str(root)) for i, d in enumerate(dirs)]
    done = ray.get(refs)
    merged = os.fspath(out) if out is not None else str(scratch.path / "merged")
    margv = ["merge", *done, "--out", merged]
    if force:
        margv.append("--force")
    return _api._execute(margv + ["--format", "json"])[1]
