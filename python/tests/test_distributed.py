"""qport.distributed on a local Ray cluster (issue 18, item 3): a 4-shard
agree of onnxruntime's u8s8 EfficientNet-Lite0 on 200 photo crops (two
profiles, FP32 controls against the original model) merges into the
one-process document (identical except timing, the recorded command and
the worker-thread count: the one-process run uses two) although one
shard's worker is killed mid-run: Ray retries the shard and the merged
result is still identical."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import ray  # in the test venv's lock: a missing Ray fails, nothing is skipped

import qport
import qport.distributed
from conftest import without_timing


N = 200
PROFILES = ["f32-rne", "avx2-u8s8"]


@pytest.fixture(scope="module")
def effnet(fx):
    return fx / "models/efficientnet-lite0.qdq-u8s8.onnx", fx / "models/efficientnet-lite0.onnx"


@pytest.fixture(scope="module")
def crops(fx):
    return fx / "datasets/photo-crops/eval"


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()


def _args(effnet, crops, threads=1):
    qdq, fp32 = effnet
    # each profile's second run (self-agreement) on the first 70 samples:
    # shard 1 of 4 (samples 50..99) holds the end of the repeated range
    return dict(data=crops, fp32=fp32, preprocess="effnet-lite", n=N, profiles=PROFILES,
                repeat=70, threads=threads)


@pytest.fixture(scope="module")
def unsharded(effnet, crops):
    # On two worker threads (the shards run on one each): the document
    # records the count, and nothing else in it may depend on it.
    doc = qport.agree(effnet[0], **_args(effnet, crops, threads=2))
    assert doc["threads"] == 2
    return doc


def same_study(sharded, unsharded):
    """The documents agree except timing, the recorded command and the
    informational worker-thread count."""
    assert sharded["threads"] == 1
    a, b = without_timing(sharded), without_timing(unsharded)
    del a["threads"], b["threads"]
    return a == b


def test_four_ray_shards_with_one_killed_merge_into_the_unsharded_result(
        local_ray, effnet, crops, unsharded, tmp_path):
    """One run covers both acceptance points (a clean 4-shard run adds
    nothing this one does not check, and costs a minute of CI): shards 0,
    2 and 3 run once; shard 1's worker is killed mid-run, Ray retries it in
    another worker, and the merged document equals the one-process one."""
    work, merged = tmp_path / "work", tmp_path / "merged"
    result, failure = {}, {}

    def run():
        try:
            result["doc"] = qport.distributed.agree(effnet[0], shards=4, work_dir=work,
                                                    out=merged, max_retries=2,
                                                    **_args(effnet, crops))
        except BaseException as e:  # reported by the assertion below
            failure["error"] = e

    t = threading.Thread(target=run)
    t.start()
    # Each shard writes its worker's pid when it starts; kill shard 1's
    # worker while the shard is running.
    pid_file = work / "shard-1.pid"
    deadline = time.monotonic() + 300
    while not pid_file.is_file() and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.is_file(), f"shard 1 never started: {failure}"
    time.sleep(0.5)
    killed = int(pid_file.read_text())
    assert not (work / "shard-1/agree.shard.json").exists(), "shard 1 finished before the kill"
    os.kill(killed, signal.SIGKILL)
    t.join(timeout=600)
    assert not t.is_alive(), "the distributed agree did not finish"
    assert not failure, f"the distributed agree failed: {failure['error']!r}"
    # The retry ran in another worker process and rewrote the pid file.
    assert int(pid_file.read_text()) != killed, "shard 1 was not retried"
    for i in range(4):
        assert (work / f"shard-{i}/agree.shard.json").is_file()
    assert same_study(result["doc"], unsharded)
    assert (merged / "agree.json").is_file()
    assert same_study(json.loads((merged / "agree.json").read_text()), unsharded)


def test_bad_shard_count_is_an_input_error(effnet, crops):
    with pytest.raises(qport.InputError, match="shards must be at least 1"):
        qport.distributed.agree(effnet[0], shards=0, **_args(effnet, crops))
