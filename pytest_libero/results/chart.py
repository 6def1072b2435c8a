"""The run folder's chart (success_rates.png): success rate per suite with its 95% interval, drawn
with Pillow.

Pillow, not matplotlib: importing matplotlib's figure module costs about 1 s of a report's process
here (0.6 s of it building its artists' docstrings at import), more than the rest of a 2,000-episode
report together; Pillow draws these few bars, whiskers and labels in milliseconds, with the
FreeType font it ships (ImageFont.load_default). The chart is derived evidence: drawing it another
way changes no record, summary or identity.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont, PngImagePlugin

BAR = (76, 114, 176)  # the bar colour the chart has always had (#4c72b0)
INK, GRID = (38, 38, 38), (225, 225, 225)
TITLE = "Success rate by suite (errored episodes excluded)"
Y_LABEL = "success rate, % (95% Wilson CI)"
HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 320, 72, 16, 34, 46  # pixels: the plot area's margins


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its label (lines), rate and interval, in percent."""

    label: str
    rate: float
    low: float
    high: float


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def draw_png(bars: Sequence[Bar], text_chunks: dict[str, str]) -> bytes:
    """The chart as PNG bytes, with `text_chunks` as PNG tEXt chunks (keyword, text)."""
    width = max(160 * len(bars) + 200, 500)
    image = Image.new("RGB", (width, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    small, label_font = _font(11), _font(12)
    x0, x1, y0, y1 = LEFT, width - RIGHT, TOP, HEIGHT - BOTTOM  # plot area; y0 is 100%, y1 is 0%

    def y_of(percent: float) -> float:
        return y1 - (y1 - y0) * min(max(percent, 0.0), 100.0) / 100.0

    for tick in range(0, 101, 20):
        y = y_of(tick)
        draw.line([(x0, y), (x1, y)], fill=GRID)
        draw.line([(x0 - 4, y), (x0, y)], fill=INK)
        draw.text((x0 - 7, y), str(tick), fill=INK, font=small, anchor="rm")
    slot = (x1 - x0) / max(len(bars), 1)
    for index, bar in enumerate(bars):
        middle = x0 + slot * (index + 0.5)
        half = slot * 0.3
        draw.rectangle([(middle - half, y_of(bar.rate)), (middle + half, y1)], fill=BAR)
        top, bottom = y_of(bar.high), y_of(bar.low)
        draw.line([(middle, top), (middle, bottom)], fill=INK, width=1)
        for y in (top, bottom):
            draw.line([(middle - 6, y), (middle + 6, y)], fill=INK, width=1)
        if top - 16 >= y0:  # the rate above the whisker, or inside a bar that reaches the top
            draw.text((middle, top - 4), f"{bar.rate:.1f}%", fill=INK, font=small, anchor="ms")
        else:
            draw.text((middle, y_of(bar.rate) + 4), f"{bar.rate:.1f}%", fill="white", font=small, anchor="ma")
        draw.multiline_text((middle, y1 + 6), bar.label, fill=INK, font=small, anchor="ma", align="center")
    draw.rectangle([(x0, y0), (x1, y1)], outline=INK)
    draw.text(((x0 + x1) / 2, y0 - 10), TITLE, fill=INK, font=label_font, anchor="ms")
    # The y axis' label, turned a quarter: drawn on its own strip, rotated, pasted left of the ticks.
    strip = Image.new("RGB", (y1 - y0, 16), "white")
    ImageDraw.Draw(strip).text(((y1 - y0) / 2, 8), Y_LABEL, fill=INK, font=small, anchor="mm")
    image.paste(strip.rotate(90, expand=True), (8, y0))
    info = PngImagePlugin.PngInfo()
    for keyword, text in text_chunks.items():
        info.add_text(keyword, text)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()
