"""What the report tests share: headless Chromium (the DOM after the page's script ran, a screenshot), a small
PNG decoder, and a small DOM built from HTML with the standard library's parser."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from .programs import program

CHROMIUM_FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
)
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


def chromium() -> str:
    """The browser (Debian's chromium, or another distribution's chromium-browser); see ``programs``."""
    return program("chromium", "chromium-browser")


def _browse(page: Path, fragment: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tempfile.mkdtemp(prefix="otel-responses-chromium-")
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium will not start its sandbox as root
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    try:
        return subprocess.run(
            [chromium(), *flags, *extra, url], capture_output=True, text=True, timeout=120, check=True
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def dump_dom(page: Path, fragment: str = "") -> str:
    """The DOM as serialised after the page loaded (its script has run)."""
    return _browse(page, fragment, "--dump-dom").stdout


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 2000) -> Path:
    _browse(page, "", f"--screenshot={out}", f"--window-size={width},{height}")
    assert out.exists(), "no screenshot was written"
    return out


# -- PNG ----------------------------------------------------------------------------------------------------------


def png_colours(path: Path, rows: int | None = None) -> tuple[int, int, set[bytes]]:
    """(width, height, the distinct colours of every fourth pixel of the first ``rows`` rows) of an 8-bit RGB(A),
    non-interlaced PNG, as Chromium writes them."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks = 8, []
    width = height = colour_type = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, interlace) == (8, 0), (depth, interlace)
            assert colour_type in (2, 6), colour_type
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    pixel = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * pixel
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(min(height, rows or height)):
        start = y * (stride + 1)
        filter_type, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if filter_type == 1:
            for i in range(pixel, stride):
                line[i] = (line[i] + line[i - pixel]) & 255
        elif filter_type == 2:
            for i in range(stride):
                line[i] = (line[i] + previous[i]) & 255
        elif filter_type == 3:
            for i in range(stride):
                left = line[i - pixel] if i >= pixel else 0
                line[i] = (line[i] + (left + previous[i]) // 2) & 255
        elif filter_type == 4:
            for i in range(stride):
                left = line[i - pixel] if i >= pixel else 0
                up, corner = previous[i], previous[i - pixel] if i >= pixel else 0
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        colours.update(bytes(line[i : i + 3]) for i in range(0, stride, pixel * 4))
        previous = line
    return width, height, colours


# -- a small DOM --------------------------------------------------------------------------------------------------


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str, **attrs: str) -> list[Element]:
        """Descendants (and self) with the tag (``*`` any) whose attributes equal ``attrs``; ``class_`` matches one
        class among the element's."""
        found = []
        for element in self.iter():
            if tag != "*" and element.tag != tag:
                continue
            ok = True
            for key, value in attrs.items():
                if key == "class_":
                    ok = ok and value in element.attrs.get("class", "").split()
                else:
                    ok = ok and element.attrs.get(key.replace("_", "-")) == value
            if ok:
                found.append(element)
        return found

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    @property
    def hidden(self) -> bool:
        return "hidden" in self.attrs


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


@dataclass(frozen=True)
class Turn:
    """A call of a conversation as the page shows it."""

    turn: str
    inferred: bool
    span: str
    signals: tuple[str, ...]
    severities: tuple[str, ...]


def conversations(root: Element) -> dict[str, list[Turn]]:
    """Each conversation section's calls in page order, by the conversation's key (and ``#run``, for one of the
    runs a lineage id was split into)."""
    found: dict[str, list[Turn]] = {}
    for section in root.find_all("section", class_="conv"):
        calls = []
        for body in section.find_all("tbody", class_="call"):
            items = [li for li in body.find_all("li") if "data-signal" in li.attrs]
            calls.append(
                Turn(
                    body.attrs["data-turn"],
                    "data-inferred" in body.attrs,
                    body.attrs["data-span"],
                    tuple(li.attrs["data-signal"] for li in items),
                    tuple(li.attrs["data-severity"] for li in items),
                )
            )
        run = section.attrs.get("data-run")
        found[section.attrs["data-key"] + (f"#{run}" if run else "")] = calls
    return found


def visible_sections(root: Element) -> list[str]:
    return [s.attrs["data-key"] for s in root.find_all("section", class_="conv") if not s.hidden]
