"""Bad input from Python raises the documented qport.Error subclasses with
the CLI's message, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import qport


@pytest.fixture(scope="module")
def effnet(fx):
    return qport.load(fx / "models/efficientnet-lite0.onnx")


def x(shape=(1, 3, 224, 224), dtype=np.float32):
    return np.zeros(shape, dtype)


def cli_run_error(cli, model_path, tmp_path, name, arr):
    np.savez(tmp_path / "in.npz", **{name: arr})
    return cli.error("run", model_path, "--inputs", tmp_path / "in.npz", "-q")


@pytest.mark.parametrize(
    "arr",
    [x(dtype=np.float64), x(dtype=np.int64), x((1, 3, 224, 225)), x((3, 224, 224))],
    ids=["float64", "int64", "wrong-size", "wrong-rank"],
)
def test_wrong_dtype_or_shape_has_the_cli_message(cli, fx, tmp_path, effnet, arr):
    name = effnet.inputs[0]["name"]
    with pytest.raises(qport.InputError) as e:
        effnet.session().run({name: arr})
    assert e.value.exit_code == 2
    assert str(e.value) == cli_run_error(cli, effnet.path, tmp_path, name, arr)


def test_missing_and_unknown_inputs_are_named(cli, fx, tmp_path, effnet):
    name = effnet.inputs[0]["name"]
    with pytest.raises(qport.InputError) as e:
        effnet.session().run({})
    # the CLI's message up to its hint on how to pass the input
    want = cli.error("run", effnet.path, "-q").split(";")[0]
    assert str(e.value).startswith(want + "; give it in the dict"), str(e.value)
    assert f"'{name}'" in str(e.value)
    with pytest.raises(qport.InputError) as e:
        effnet.session().run({name: x(), "nope": x()})
    assert "unknown input 'nope'" in str(e.value)
    assert f"the model's inputs are: {name}" in str(e.value)


def test_not_an_array_or_not_a_dict(effnet):
    name = effnet.inputs[0]["name"]
    with pytest.raises(qport.InputError, match="numpy array"):
        effnet.session().run({name: [[0.0]]})
    with pytest.raises(qport.InputError, match="complex64"):
        effnet.session().run({name: x(dtype=np.complex64)})
    with pytest.raises(qport.InputError, match="dict"):
        effnet.session().run([x()])


def test_missing_or_malformed_model(cli, tmp_path):
    with pytest.raises(qport.InputError) as e:
        qport.load(tmp_path / "missing.onnx")
    assert str(e.value) == cli.error("info", tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage\xff\xff")
    with pytest.raises(qport.InputError) as e:
        qport.load(bad)
    assert str(e.value) == cli.error("info", bad)
    assert isinstance(e.value, qport.Error)


def test_unknown_platform_and_profile(cli, fx, tmp_path, effnet):
    path = fx / "models/ppocr-cls.onnx"
    calib = fx / "datasets/ppocr-lines"
    with pytest.raises(qport.InputError) as e:
        qport.quantize(path, platform="j7x", calib=calib, preprocess="ppocr")
    want = cli.error("quantize", path, "--platform", "j7x", "--calib", calib,
                     "--preprocess", "ppocr", "--out", tmp_path / "q")
    assert str(e.value) == want
    assert "j7x" in want
    with pytest.raises(qport.InputError) as e:
        qport.layout(path, "j7x")
    assert str(e.value) == cli.error("layout", path, "--platform", "j7x")
    with pytest.raises(qport.InputError) as e:
        effnet.session(profile="nope")
    assert "unknown arithmetic profile `nope`; valid: fp32" in str(e.value)
    with pytest.raises(qport.InputError):
        effnet.session(threads=0)


def test_bad_keyword_values_carry_clap_messages(fx):
    with pytest.raises(qport.InputError, match="invalid value 'nope' for '--calibration"):
        qport.quantize(fx / "models/ppocr-cls.onnx", calib=fx / "datasets/ppocr-lines",
                       preprocess="ppocr", calibration="nope")
