#!/usr/bin/env python3
"""Opens a training report (report.html) in headless Chromium and checks the curves are drawn.

The page is rendered to a PNG screenshot; the test decodes it (zlib and struct only) and counts
the pixels of the two splits' colours: each must cover a good part of the page, which only
happens when the browser drew the SVG polylines.
usage: report_browser.py REPORT_DEMO CHROMIUM WORK_DIR
"""
import struct
import subprocess
import sys
import zlib
from pathlib import Path

demo, chromium, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
work.mkdir(parents=True, exist_ok=True)
run_dir = work / "run"
subprocess.run([demo, str(run_dir)], check=True, stdout=subprocess.DEVNULL)
shot = work / "report.png"
shot.unlink(missing_ok=True)
subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--hide-scrollbars", f"--user-data-dir={work / 'profile'}",
                "--window-size=900,1700", f"--screenshot={shot}",
                (run_dir / "report.html").resolve().as_uri()],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def decode_png(data):
    """(width, height, rows of RGB(A) tuples) of an 8-bit non-interlaced RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
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


width, height, bpp, rows = decode_png(shot.read_bytes())
targets = {"train": (0x1F, 0x77, 0xB4), "valid": (0xFF, 0x7F, 0x0E)}
counts = dict.fromkeys(targets, 0)
for row in rows:
    for x in range(0, width * bpp, bpp):
        px = row[x:x + 3]
        for name, (r, g, b) in targets.items():
            if abs(px[0] - r) < 40 and abs(px[1] - g) < 40 and abs(px[2] - b) < 40:
                counts[name] += 1
print(f"report_browser: {width}x{height} screenshot; pixels of the curves: {counts}")
# Two charts, each with a thick line of means (3 px) across ~670 px, dots, and the thin lines.
ok = all(n > 1500 for n in counts.values())
sys.exit(0 if ok else 1)
