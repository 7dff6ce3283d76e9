"""One self-contained HTML page: sections of text, tables and figures, with every image inlined as a base64 PNG
(``data:image/png;base64,...``) and the style sheet in the page, so that it opens from disk with no server, no
network and no file beside it.

`Page` collects the parts in order and `Page.render` writes the page; tables come from pandas DataFrames
(``DataFrame.to_html``, escaped), figures from matplotlib Figures or PNG bytes, and every figure and table carries
a caption saying what to look for.
"""

from __future__ import annotations

import base64
import html
import io

import pandas as pd

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; padding: 0 1.5em; max-width: 70em; color: #222;
       line-height: 1.4; }
details > summary { cursor: pointer; color: #245; margin: 0.5em 0; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.05em; margin-bottom: 0.3em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.3em 0; }
th, td { border: 1px solid #ccc; padding: 0.15em 0.5em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
figure { margin: 0.8em 0; } img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .caption { font-size: 0.9em; color: #555; font-style: italic; margin: 0.2em 0 0.8em 0; }
.verdict-bad { color: #a00; font-weight: bold; } .verdict-good { color: #060; font-weight: bold; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; font-size: 0.8em; }
.scroll { overflow-x: auto; }
"""
MAX_TABLE_ROWS = 60
"""Rows of a table shown on the page; a longer table says how many it has and which file holds them all."""


def png_bytes(figure, dpi: int = 100) -> bytes:
    """The PNG of a matplotlib Figure (closed afterwards when pyplot made it, so that none accumulate)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    if getattr(figure.canvas, "manager", None) is not None:  # made by pyplot (ArviZ 0.x's plots): release it
        import matplotlib.pyplot as plt

        plt.close(figure)
    return buffer.getvalue()


class Page:
    """An HTML page built in order: ``heading``, ``text``, ``table``, ``figure``, ``preformatted``; ``render``
    returns the whole document (str)."""

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]

    def heading(self, text: str, level: int = 2) -> None:
        """A section (level 2) or sub-section (level 3) heading."""
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def text(self, text: str, css: str | None = None) -> None:
        """A paragraph of plain text (escaped); `css`: a class of `STYLE`, e.g. "verdict-bad"."""
        attr = f' class="{css}"' if css else ""
        self.parts.append(f"<p{attr}>{html.escape(text)}</p>")

    def preformatted(self, text: str) -> None:
        """Text shown as written (escaped), e.g. a Markdown summary a job wrote."""
        self.parts.append(f"<pre>{html.escape(text)}</pre>")

    def table(self, frame: pd.DataFrame, caption: str, source: str | None = None, float_format: str = "{:.4g}",
              index: bool = True, folded: str | None = None) -> None:
        """`frame` as an HTML table (the first `MAX_TABLE_ROWS` rows; numbers by `float_format`) with `caption`
        under it; `source`: the file that holds the whole table, named when rows are left out; `folded`: the line
        of an HTML ``<details>`` that holds the table closed until clicked (for long tables of detail)."""
        shown = frame.head(MAX_TABLE_ROWS)
        body = shown.to_html(float_format=float_format.format, index=index, border=0, na_rep="",
                             escape=True)
        note = ""
        if len(frame) > len(shown):
            note = f" (the first {len(shown)} of {len(frame)} rows" + (f"; all of them in {source}" if source else "") + ")"
        block = f'<div class="scroll">{body}</div><p class="caption">{html.escape(caption + note)}</p>'
        if folded:
            block = f"<details><summary>{html.escape(folded)}</summary>{block}</details>"
        self.parts.append(block)

    def figure(self, image, caption: str, alt: str) -> None:
        """A figure (a matplotlib Figure or PNG bytes) inlined as base64 PNG, with `caption` under it."""
        data = image if isinstance(image, (bytes, bytearray)) else png_bytes(image)
        encoded = base64.b64encode(bytes(data)).decode("ascii")
        self.parts.append(f'<figure><img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'
                          f"<figcaption>{html.escape(caption)}</figcaption></figure>")

    def render(self) -> str:
        """The whole HTML document."""
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(self.title)}</title><style>{STYLE}</style></head><body>\n"
                + "\n".join(self.parts) + "\n</body></html>\n")
