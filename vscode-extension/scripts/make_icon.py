#!/usr/bin/env python3
"""Draw the extension's icons (images/icon.png 256x256, images/file-icon.png 32x32) with PIL.

The picture: a grid of expert slots, some lit (resident on the GPU), one arriving (prefetch),
the rest dim (offloaded), on a rounded dark tile. Run once; the PNGs are committed.
"""

from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parent.parent / "images"

BG_TOP = (36, 41, 86)
BG_BOTTOM = (17, 19, 43)
LIT = (255, 183, 3)
ARRIVING = (80, 200, 255)
DIM = (70, 78, 120)
#: 4 x 4 grid: L = lit (cached), A = arriving (prefetched), . = offloaded
GRID = ["L.L.",
        ".LA.",
        "L..L",
        ".A.L"]


def draw(size: int, grid=GRID, radius_frac=0.2, scale=4) -> Image.Image:
    big = size * scale                       # draw large, downsample: smooth edges
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    bg = Image.new("RGBA", (big, big))
    px = bg.load()
    for y in range(big):
        t = y / (big - 1)
        c = tuple(int(BG_TOP[i] * (1 - t) + BG_BOTTOM[i] * t) for i in range(3)) + (255,)
        for x in range(big):
            px[x, y] = c
    mask = Image.new("L", (big, big), 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, big - 1, big - 1), radius=int(big * radius_frac), fill=255)
    img.paste(bg, (0, 0), mask)
    d = ImageDraw.Draw(img)
    n = len(grid)
    margin = big * 0.16
    gap = big * 0.05
    cell = (big - 2 * margin - (n - 1) * gap) / n
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            x0 = margin + c * (cell + gap)
            y0 = margin + r * (cell + gap)
            box = (x0, y0, x0 + cell, y0 + cell)
            rad = int(cell * 0.22)
            if ch == "L":
                d.rounded_rectangle(box, radius=rad, fill=LIT)
            elif ch == "A":
                d.rounded_rectangle(box, radius=rad, outline=ARRIVING, width=max(2, int(cell * 0.14)))
            else:
                d.rounded_rectangle(box, radius=rad, fill=DIM)
    return img.resize((size, size), Image.LANCZOS)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    draw(256).save(OUT / "icon.png", optimize=True)
    draw(32, grid=["L.", "AL"], radius_frac=0.18).save(OUT / "file-icon.png", optimize=True)
    print("wrote", OUT / "icon.png", OUT / "file-icon.png")


if __name__ == "__main__":
    main()
