"""Text-line crops of a scanned page (scikit-image's page.png).

page.png is a 384x191 grayscale photo of a book page with uneven lighting.
Lines are found by a horizontal projection of "dark" pixels, where dark is
judged against a local background estimate (a 15x15 maximum filter, then a
box blur) so the shadowed corners do not read as ink. Each line is cropped
with a small margin and, when it is wider than the classifier's 4:1 input,
split into chunks of about four line-heights, cutting at the column with the
least ink near the target width (usually a gap between words).

The crops are upright text (label 0, "0 degrees"); the same crops rotated by
180 degrees are label 1 ("180 degrees").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

DARK_DELTA = 50          # grey levels below the local background that count as ink
ROW_INK_FRACTION = 0.10  # a row is text when it has >= this fraction of the busiest row's ink
MIN_LINE_HEIGHT = 6      # bands thinner than this are rules or noise
MARGIN_Y = 3
MARGIN_X = 2
CHUNK_RATIO = 4.0        # target chunk width in line heights (the model's 192/48)
MIN_CHUNK_INK = 0.03     # drop chunks whose dark-pixel fraction is below this


@dataclass(frozen=True)
class LineCrop:
    """One crop: which line and chunk, and its box (left, top, right, bottom)."""

    line: int
    chunk: int
    box: tuple[int, int, int, int]

    @property
    def stem(self) -> str:
        """File-name stem, e.g. ``line03_chunk01``."""
        return f"line{self.line:02d}_chunk{self.chunk:02d}"


def ink_mask(gray: Image.Image) -> np.ndarray:
    """Boolean mask of pixels noticeably darker than their local background."""
    gray = gray.convert("L")
    background = gray.filter(ImageFilter.MaxFilter(15)).filter(ImageFilter.BoxBlur(7))
    g = np.asarray(gray, dtype=np.int32)
    b = np.asarray(background, dtype=np.int32)
    return (b - g) > DARK_DELTA


def find_line_bands(mask: np.ndarray) -> list[tuple[int, int]]:
    """Row bands [top, bottom) that hold a line of text."""
    rows = mask.sum(axis=1)
    is_text = rows >= ROW_INK_FRACTION * rows.max()
    bands, start = [], None
    for y, t in enumerate(list(is_text) + [False]):
        if t and start is None:
            start = y
        elif not t and start is not None:
            if y - start >= MIN_LINE_HEIGHT:
                bands.append((start, y))
            start = None
    return bands


def _split_columns(col_ink: np.ndarray, x0: int, x1: int, height: int) -> list[tuple[int, int]]:
    """Split columns [x0, x1) into chunks of about CHUNK_RATIO * height."""
    target = int(round(CHUNK_RATIO * height))
    chunks, start = [], x0
    while x1 - start > int(1.25 * target):
        lo, hi = start + int(0.75 * target), min(x1, start + int(1.25 * target))
        window = col_ink[lo:hi].astype(np.float64)
        # least ink wins; ties go to the column closest to the target width
        penalty = np.abs(np.arange(lo, hi) - (start + target)) / (10.0 * target)
        cut = lo + int(np.argmin(window + penalty))
        chunks.append((start, cut))
        start = cut
    chunks.append((start, x1))
    return chunks


def find_line_crops(page: Image.Image) -> list[LineCrop]:
    """All text-line chunk boxes of ``page``, top to bottom, left to right."""
    mask = ink_mask(page)
    h_img, w_img = mask.shape
    crops: list[LineCrop] = []
    for line, (top, bottom) in enumerate(find_line_bands(mask)):
        band = mask[top:bottom]
        col_ink = band.sum(axis=0)
        cols = np.nonzero(col_ink)[0]
        if cols.size == 0:
            continue
        t, b = max(0, top - MARGIN_Y), min(h_img, bottom + MARGIN_Y)
        chunk_no = 0
        for c0, c1 in _split_columns(col_ink, int(cols[0]), int(cols[-1]) + 1, b - t):
            if band[:, c0:c1].mean() < MIN_CHUNK_INK:
                continue
            box = (max(0, c0 - MARGIN_X), t, min(w_img, c1 + MARGIN_X), b)
            crops.append(LineCrop(line, chunk_no, box))
            chunk_no += 1
    return crops


def crop_image(page: Image.Image, crop: LineCrop, degrees: int) -> Image.Image:
    """The crop as an RGB image, rotated by 0 or 180 degrees."""
    if degrees not in (0, 180):
        raise ValueError(f"degrees must be 0 or 180, got {degrees}")
    img = page.convert("RGB").crop(crop.box)
    return img.rotate(180) if degrees == 180 else img
