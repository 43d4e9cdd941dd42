"""A minimal PNG reader (8-bit greyscale, RGB, RGBA; no interlace) for checking screenshots."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}
"""Bytes per pixel by colour type, at 8 bits per sample."""


class PngError(ValueError):
    """Not a PNG this reader understands."""


@dataclass(frozen=True)
class Image:
    """Decoded pixels: ``rows[y]`` holds ``width * channels`` bytes."""

    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixels(self, step: int = 1) -> set[bytes]:
        """The distinct pixel values, looking at every ``step``-th pixel of every row."""
        size = self.channels
        return {row[x : x + size] for row in self.rows for x in range(0, len(row), size * step)}


def size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk."""
    if data[:8] != SIGNATURE or data[12:16] != b"IHDR":
        raise PngError("no PNG signature and IHDR chunk")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def decode(data: bytes) -> Image:
    """Check every chunk's CRC, inflate the IDAT stream and undo the scanline filters."""
    width, height = size(data)
    depth, colour, _, _, interlace = data[24:29]
    if depth != 8 or colour not in CHANNELS or interlace:
        raise PngError(
            f"unsupported: bit depth {depth}, colour type {colour}, interlace {interlace}"
        )
    channels = CHANNELS[colour]
    idat, pos = bytearray(), 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise PngError(f"bad CRC in {kind!r} chunk at byte {pos}")
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
        if kind == b"IEND":
            break
    else:
        raise PngError("no IEND chunk")
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise PngError(f"{len(raw)} bytes of image data for {width}x{height}x{channels}")
    rows, previous = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        row = _unfilter(
            raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, channels
        )
        rows.append(row)
        previous = row
    return Image(width, height, channels, rows)


def _unfilter(kind: int, line: bytearray, up: bytes, bpp: int) -> bytes:
    """Reverse one scanline's filter (None, Sub, Up, Average, Paeth)."""
    if kind == 0:
        return bytes(line)
    if kind == 2:
        return bytes((a + b) & 0xFF for a, b in zip(line, up, strict=True))
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + up[i]) >> 1)) & 0xFF
        elif kind == 4:
            corner = up[i - bpp] if i >= bpp else 0
            guess = left + up[i] - corner
            pa, pb, pc = abs(guess - left), abs(guess - up[i]), abs(guess - corner)
            pred = left if pa <= pb and pa <= pc else up[i] if pb <= pc else corner
            line[i] = (line[i] + pred) & 0xFF
        else:
            raise PngError(f"unknown filter type {kind}")
    return bytes(line)
