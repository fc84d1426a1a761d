"""Input preprocessing for the fixture models, and deterministic random crops.

All resampling is Pillow's (``Image.resize``). Pillow filters with a support
scaled to the reduction factor when it downsamples (an antialiased resize),
so a reimplementation must do the same to match these tensors bit for bit;
the tests read the stored ``.npy`` tensors, so they do not depend on it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from PIL import Image

# ---------------------------------------------------------------- EfficientNet

EFFNET_SIZE = 224
EFFNET_CROP_FRACTION = 0.875
EFFNET_RESIZE = round(EFFNET_SIZE / EFFNET_CROP_FRACTION)  # 256
EFFNET_MEAN = 127.0
EFFNET_STD = 128.0


def effnet_preprocess(img: Image.Image) -> np.ndarray:
    """EfficientNet-Lite0 input from a PIL image: float32 [1, 3, 224, 224].

    1. convert to RGB;
    2. bicubic resize so the shorter side is 256 (= 224 / 0.875), the longer
       side scaled by the same factor and rounded to the nearest pixel;
    3. centre crop 224 x 224 (offset ``(side - 224) // 2``);
    4. ``(x - 127) / 128`` per channel, HWC -> NCHW.
    """
    img = img.convert("RGB")
    w, h = img.size
    scale = EFFNET_RESIZE / min(w, h)
    nw, nh = max(EFFNET_RESIZE, round(w * scale)), max(EFFNET_RESIZE, round(h * scale))
    img = img.resize((nw, nh), Image.BICUBIC)
    left, top = (nw - EFFNET_SIZE) // 2, (nh - EFFNET_SIZE) // 2
    img = img.crop((left, top, left + EFFNET_SIZE, top + EFFNET_SIZE))
    x = (np.asarray(img, dtype=np.float32) - EFFNET_MEAN) / EFFNET_STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[np.newaxis])


@dataclass(frozen=True)
class CropSpec:
    """A crop box (left, top, right, bottom) in source pixels and a mirror flag."""

    image: str
    box: tuple[int, int, int, int]
    flip: bool

    def apply(self, img: Image.Image) -> Image.Image:
        """Crop (and mirror) a PIL image."""
        out = img.crop(self.box)
        return out.transpose(Image.FLIP_LEFT_RIGHT) if self.flip else out

    def to_json(self) -> dict:
        """A JSON-ready description."""
        d = asdict(self)
        d["box"] = list(self.box)
        return d


def random_crop_specs(images: dict[str, tuple[int, int]], count: int, seed: int,
                      min_scale: float = 0.35) -> list[CropSpec]:
    """``count`` distinct random crops over ``images`` ({name: (w, h)}).

    Images are visited round-robin in sorted-name order. Each crop has an
    area of ``min_scale``..1 of the image's largest centred square, an aspect
    ratio in 3/4..4/3, a uniform random position and a 50% horizontal flip.
    The same seed always gives the same crops.
    """
    rng = np.random.default_rng(seed)
    names = sorted(images)
    specs: list[CropSpec] = []
    seen = set()
    i = 0
    while len(specs) < count:
        name = names[i % len(names)]
        i += 1
        w, h = images[name]
        side = min(w, h)
        area = side * side * rng.uniform(min_scale, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw = min(w, max(32, round(math.sqrt(area * aspect))))
        ch = min(h, max(32, round(math.sqrt(area / aspect))))
        left = int(rng.integers(0, w - cw + 1))
        top = int(rng.integers(0, h - ch + 1))
        flip = bool(rng.integers(0, 2))
        spec = CropSpec(name, (left, top, left + cw, top + ch), flip)
        if spec not in seen:
            seen.add(spec)
            specs.append(spec)
    return specs


# ---------------------------------------------------------------- PP-OCR cls

PPOCR_HEIGHT = 48
PPOCR_WIDTH = 192


def ppocr_cls_preprocess(img: Image.Image) -> np.ndarray:
    """PP-OCR text-direction classifier input: float32 [1, 3, 48, 192].

    1. convert to RGB (a grayscale image such as page.png is replicated to
       three channels);
    2. keep the aspect ratio: height 48, width ``min(192, ceil(48 * w / h))``,
       bilinear resize;
    3. scale ``(x / 255 - 0.5) / 0.5`` (to -1..1);
    4. HWC -> CHW, pad on the right with zeros to width 192, add the batch axis.

    The zero padding is 0 after normalization (mid grey), as in PaddleOCR.
    """
    img = img.convert("RGB")
    w, h = img.size
    rw = min(PPOCR_WIDTH, int(math.ceil(PPOCR_HEIGHT * w / h)))
    img = img.resize((rw, PPOCR_HEIGHT), Image.BILINEAR)
    x = np.asarray(img, dtype=np.float32).transpose(2, 0, 1)
    x = (x / 255.0 - 0.5) / 0.5
    out = np.zeros((1, 3, PPOCR_HEIGHT, PPOCR_WIDTH), dtype=np.float32)
    out[0, :, :, :rw] = x
    return out
