#!/usr/bin/env python3
"""Prints what a PNG holds, to tell a drawn page from a blank one:
   png_stats.py FILE  ->  "width height nonwhite_fraction distinct_colors"
and how much of given colours it shows (each channel within 2):
   png_stats.py FILE --count R,G,B [R,G,B ...]  ->  the pixels of each, one a line
   png_stats.py FILE --vrun R,G,B               ->  its longest vertical run, in pixels
Decodes 8-bit RGB/RGBA/gray PNGs with the standard library only (zlib)."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = hdr
    if depth != 8 or interlace != 0 or color not in (0, 2, 4, 6):
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, color type {color}, interlace {interlace})")
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def near(px, rgb):
    return all(abs(a - b) <= 2 for a, b in zip(px, rgb))


def colours(args):
    return [tuple(int(v) for v in a.split(",")) for a in args]


def main():
    width, height, bpp, rows = decode(sys.argv[1])
    if bpp < 3 and len(sys.argv) > 2:
        raise SystemExit(f"{sys.argv[1]}: not a colour PNG")
    if len(sys.argv) > 2 and sys.argv[2] == "--count":
        want = colours(sys.argv[3:])
        counts = [0] * len(want)
        for line in rows:
            for x in range(0, len(line), bpp):
                px = tuple(line[x:x + 3])
                for i, rgb in enumerate(want):
                    if near(px, rgb):
                        counts[i] += 1
        print("\n".join(str(c) for c in counts))
        return
    if len(sys.argv) > 2 and sys.argv[2] == "--vrun":
        (rgb,) = colours(sys.argv[3:4])
        best, run = 0, [0] * width
        for line in rows:
            for i in range(width):
                run[i] = run[i] + 1 if near(tuple(line[i * bpp:i * bpp + 3]), rgb) else 0
                best = max(best, run[i])
        print(best)
        return
    nonwhite, colors = 0, set()
    for line in rows:
        for x in range(0, len(line), bpp):
            px = line[x:x + min(bpp, 3)]
            if min(px) < 245:
                nonwhite += 1
            colors.add(px)
    print(width, height, f"{nonwhite / (width * height):.4f}", len(colors))


if __name__ == "__main__":
    main()
