"""A small PNG decoder (8-bit RGB/RGBA, not interlaced) on zlib and NumPy, for screenshot checks."""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _unfilter_slow(kind: int, line: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    """Average (3) and Paeth (4) filters: each byte depends on the decoded byte to its left."""
    raw, up = line.tolist(), prev.tolist()
    out = [0] * len(raw)
    for i, x in enumerate(raw):
        a = out[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            out[i] = (x + ((a + b) >> 1)) & 0xFF
            continue
        c = up[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        out[i] = (x + (a if pa <= pb and pa <= pc else (b if pb <= pc else c))) & 0xFF
    return np.asarray(out, dtype=np.uint8)


def decode_png(data: bytes) -> np.ndarray:
    """Pixels as a uint8 array [height, width, channels]; raises ValueError on other formats."""
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG file")
    pos, idat, header = 8, [], None
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or interlace != 0 or colour not in (2, 6):
        raise ValueError(
            f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}"
        )
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    rows = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(
        height, stride + 1
    )
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = int(rows[y, 0]), rows[y, 1:]
        if kind == 0:
            cur = line.copy()
        elif kind == 1:
            cur = (
                (line.reshape(width, bpp).astype(np.int64).cumsum(axis=0) % 256)
                .astype(np.uint8)
                .ravel()
            )
        elif kind == 2:
            cur = line + prev  # uint8 arithmetic wraps modulo 256
        elif kind in (3, 4):
            cur = _unfilter_slow(kind, line, prev, bpp)
        else:
            raise ValueError(f"bad PNG filter type {kind} in row {y}")
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)
