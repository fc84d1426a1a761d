"""qport.load and Session.run against `qport info` and `qport run` on the
same files: the same info document, bit-identical outputs."""

from __future__ import annotations

import numpy as np
import pytest

import qport
from conftest import without_timing


def effnet_input(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 224, 224)).astype(np.float32)


def test_load_matches_qport_info(cli, fx):
    path = fx / "models/efficientnet-lite0.onnx"
    m = qport.load(path)
    assert m.info == cli.json("info", path)
    assert m.path == str(path)
    assert [i["name"] for i in m.inputs] == [i["name"] for i in m.info["inputs"]]
    assert m.inputs[0]["dtype"] == "float32"
    assert m.opsets == {o["domain"]: o["version"] for o in m.info["opset_imports"]}
    assert sum(m.op_histogram.values()) == m.info["node_count"]
    assert m.unsupported_ops == {}


@pytest.mark.parametrize(
    "model, profile",
    [
        ("efficientnet-lite0.onnx", None),
        ("efficientnet-lite0.qdq-u8s8.onnx", "f32-rne"),
        ("efficientnet-lite0.qdq-u8s8.onnx", "avx2-u8s8"),
    ],
)
def test_run_is_bit_identical_to_qport_run(cli, fx, tmp_path, model, profile):
    path = fx / "models" / model
    m = qport.load(path)
    name = m.inputs[0]["name"]
    x = effnet_input()
    np.savez(tmp_path / "in.npz", **{name: x})
    args = ["run", path, "--inputs", tmp_path / "in.npz", "--output", tmp_path / "out.npz", "-q"]
    if profile:
        args += ["--profile", profile]
    cli.run(*args)
    want = np.load(tmp_path / "out.npz")
    got = m.session(profile=profile).run({name: x})
    assert list(got) == [o["name"] for o in m.outputs]
    for k in want.files:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        assert got[k].tobytes() == want[k].tobytes(), f"output {k} differs from qport run"


def test_threads_and_layouts_do_not_change_outputs(fx):
    m = qport.load(fx / "models/efficientnet-lite0.onnx")
    name = m.inputs[0]["name"]
    x = effnet_input(1)
    one = m.session().run({name: x})
    two = m.session(threads=2).run({name: x})
    # a non-contiguous view of the same values: accepted, gathered in C order
    wide = np.zeros((1, 3, 224, 448), np.float32)
    wide[..., ::2] = x
    view = wide[..., ::2]
    assert not view.flags["C_CONTIGUOUS"]
    strided = m.session().run({name: view})
    fortran = m.session().run({name: np.asfortranarray(x)})
    for k in one:
        assert one[k].tobytes() == two[k].tobytes()
        assert one[k].tobytes() == strided[k].tobytes()
        assert one[k].tobytes() == fortran[k].tobytes()


def test_session_describes_itself(fx):
    m = qport.load(fx / "models/efficientnet-lite0.qdq-u8s8.onnx")
    s = m.session(profile="exact")
    assert s.profile == "exact"
    assert m.session().profile == "fp32"
    assert s.inputs[0]["name"] == m.inputs[0]["name"]
    assert s.inputs[0]["shape"] == m.inputs[0]["shape"]


def test_profiles_platforms_layout_match_the_cli(cli, fx):
    assert qport.profiles() == cli.json("profiles")
    assert qport.platforms() == cli.json("platforms")
    path = fx / "models/efficientnet-lite0.onnx"
    assert qport.layout(path, "j6p") == cli.json("layout", path, "--platform", "j6p")
    assert qport.layout(qport.load(path), "j6m") == cli.json("layout", path, "--platform", "j6m")
    rows = qport.profiles().table()
    assert [r["name"] for r in rows][:2] == ["exact", "f32-rne"]
