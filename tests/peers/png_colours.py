"""Counts the pixels of given colours in a PNG (8-bit RGB or RGBA, as Chromium writes them),
with the standard library only: the pixel check of the HTML report's screenshot test.

usage: png_colours.py FILE.png RRGGBB...
Prints one JSON object: {"width": w, "height": h, "RRGGBB": count, ...}.
"""
import json
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"unsupported PNG: depth {depth} colour {colour}"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, rows, i = bytearray(stride), [], 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    width, height, bpp, rows = pixels(sys.argv[1])
    wanted = {c.lower(): bytes.fromhex(c) for c in sys.argv[2:]}
    counts = {c: 0 for c in wanted}
    for row in rows:
        for x in range(0, len(row), bpp):
            rgb = row[x:x + 3]
            for name, value in wanted.items():
                if rgb == value:
                    counts[name] += 1
    print(json.dumps({"width": width, "height": height, **counts}))


main()
