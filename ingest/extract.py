"""Extract stage (extract -> partition -> embed -> persist): files on disk to ExtractedDocuments.

Every failure is an ExtractError whose message is the human reason shown in the ingest report,
so one bad file is skipped and explained instead of aborting a whole run. Text is never silently
repaired: invalid UTF-8 or a record without text is reported, because quietly indexing mojibake
or half a file produces answers nobody can trace back.
"""

from __future__ import annotations

import contextlib
import csv
import fnmatch
import io
import json
import multiprocessing
import os
import re
import stat
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, TypeVar

from tools.documents import ExtractedDocument, Section

T = TypeVar("T")

# bump when the same file extracts to other text, so unchanged files are processed again
# (2: a JSON record's other plain fields follow its text)
EXTRACTOR_VERSION = 2


class ExtractError(Exception):
    """A file that cannot become text; the message is the reason shown to the user."""


@dataclass(frozen=True)
class ExtractOptions:
    # checked before reading, so a huge file costs nothing; for an archive format (DOCX)
    # also the limit on what it expands to, checked before anything is decompressed
    max_file_bytes: int = 20_000_000
    json_text_field: str = "text"
    json_id_field: str = "id"
    json_title_field: str = "title"


# csv.Sniffer's work grows with the square of its sample (a crafted 64 KB one took 16 s):
# a few kilobytes of whole lines tell the delimiter as well
SNIFF_CHARS = 4096
# A PDF's text is extracted in a child process, killed after this long (pypdf can spin
# for minutes on a crafted file). Not an ExtractOptions field: it changes no chunk, so
# it must not change the hash that decides what is re-embedded.
PDF_TIMEOUT_S = 60.0

_SKIP_DIRS = {"__pycache__", ".git", "node_modules", ".venv"}
# A member of an archive that expands more than this is a decompression bomb: text XML
# compresses 5-20x; the 405 KB DOCX that expanded to 150 MB did so 370x.
MAX_EXPANSION_RATIO = 100
# Nesting deeper than this in a JSON file is refused before parsing: json.loads recurses
# and 1,500 levels of '[' raised RecursionError (no real document nests 100 levels).
MAX_NESTING = 100


def discover(
    paths: Sequence[str | Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    skipped: list[dict[str, str]] | None = None,
) -> list[tuple[Path, str]]:
    """Expand files and directories into sorted (absolute path, source name) pairs.

    Source names are what citations show, so they are relative and stable across machines: a
    directory contributes ``<dir name>/<relative path>``, a file its relative path as given.
    A glob is tried against every trailing part of the source name (gitignore-like), so
    ``sub/*`` works whatever prefix the name carries, and ``*.bin`` matches the bare file name.

    A symlink inside a directory that resolves outside it, or loops, is not followed: it
    would index a file nobody asked for. It is appended to ``skipped`` with the reason.
    """
    found: dict[Path, str] = {}
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise FileNotFoundError(f"no such file or directory: {given}")
        prefix = source_root(root)
        if root.is_dir():
            pairs = [
                (f, f"{prefix}/{f.relative_to(root).as_posix()}")
                for f in _walk(root, prefix, skipped if skipped is not None else [])
            ]
        else:
            pairs = [(root, prefix)]
        for file, name in pairs:
            if _matches(name, include, default=True) and not _matches(name, exclude):
                found.setdefault(file.resolve(), name)
    return sorted(found.items(), key=lambda pair: (pair[1], pair[0]))


def source_root(path: str | Path) -> str:
    """The source name ``discover`` gives a file argument, or the prefix of all names under a
    directory, so callers can tell which stored sources a path covers (e.g. to prune deletions).

    Never absolute: an absolute name would tie citations to one machine.
    """
    path = Path(path)
    if path.is_dir():
        return path.resolve().name
    if path.is_absolute():
        cwd = Path.cwd()
        path = path.relative_to(cwd) if path.is_relative_to(cwd) else Path(path.name)
    return Path(os.path.normpath(path)).as_posix()


def _walk(root: Path, prefix: str, skipped: list[dict[str, str]]) -> list[Path]:
    files = []
    inside = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):  # never descends symlinked folders
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS]
        for name in filenames:
            file = Path(dirpath, name)
            if name.startswith("."):
                continue
            reason = _link_problem(file, inside)
            if reason:
                name = f"{prefix}/{file.relative_to(root).as_posix()}"
                skipped.append({"path": name, "reason": reason})
            else:
                files.append(file)
    return files


def _link_problem(file: Path, inside: Path) -> str | None:
    if not file.is_symlink():
        return None
    try:
        target = file.resolve(strict=True)
    except FileNotFoundError:  # dangling: extraction reports it as unreadable
        return None
    except (RuntimeError, OSError) as exc:  # a loop (a -> b -> a)
        return f"symlink loop, not followed ({exc})"
    if not target.is_relative_to(inside):
        return f"symlink to {target}, outside the ingested folder: not followed"
    return None


def _matches(name: str, patterns: Sequence[str], default: bool = False) -> bool:
    if not patterns:
        return default
    parts = name.split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(tail, pat) for pat in patterns for tail in tails)


_UNSUPPORTED = set(
    ".png .jpg .jpeg .gif .bmp .tif .tiff .webp .ico .zip .gz .tgz .bz2 .xz .7z .rar .tar "
    ".exe .dll .so .dylib .o .a .class .jar .pyc .whl .mp3 .mp4 .wav .avi .mov .mkv .woff "
    ".woff2 .ttf .otf .sqlite .db .doc .xls .xlsx .ppt .pptx .odt .iso .pkl .npy .pt .gguf "
    ".onnx .safetensors".split()
)
_CODE = ".js .ts .java .c .h .cpp .go .rs .rb .sh .toml .yaml .yml .ini .cfg .sql .css".split()
_Docs = list[ExtractedDocument]
_Loader = Callable[[bytes, Path, str, ExtractOptions], _Docs]


def extract_file(
    path: Path, source: str, options: ExtractOptions = ExtractOptions()
) -> list[ExtractedDocument]:
    """One file -> one document (JSON/JSONL: one per record), or ExtractError saying why not."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _UNSUPPORTED:
        raise ExtractError(f"unsupported file type {suffix}")
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read forever
            raise ExtractError("not a regular file (a pipe, socket or device)")
        size = info.st_size
        if size > options.max_file_bytes:
            raise ExtractError(
                f"file is {size / 1e6:.1f} MB, over the {options.max_file_bytes / 1e6:.1f} MB"
                " limit (max_file_bytes)"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise ExtractError(f"cannot read file: {exc.strerror or exc}") from exc
    if not data.strip():
        raise ExtractError("empty document")
    loader = _LOADERS.get(suffix, _load_plain)
    try:
        return [_without_nul(doc) for doc in loader(data, path, source, options)]
    except RecursionError:  # a parser recursing on some nesting not checked above
        raise ExtractError("nested too deeply to read") from None


def _without_nul(doc: ExtractedDocument) -> ExtractedDocument:
    """NUL characters (a text file's past the first 8 KiB, or a parser's) become spaces:
    they mean nothing in text, PostgreSQL's text type refuses them, and a space keeps
    every offset and line number a citation points at."""
    if not any("\0" in section.text for section in doc.sections):
        return doc
    sections = [replace(s, text=s.text.replace("\0", " ")) for s in doc.sections]
    return replace(doc, sections=sections)


def _decode(data: bytes) -> str:
    if b"\0" in data[:8192]:
        raise ExtractError("binary file (NUL bytes in first 8 KiB)")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ExtractError(f"invalid UTF-8 at byte offset {exc.start} (line {line})") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ExtractError("empty document")
    return text


_ADORN = "[-=~^\"'`#*+:.]"


def _title(text: str, kind: str, path: Path) -> str:
    match = None
    if kind == "markdown":  # the first '# ' heading outside fenced code
        unfenced = re.sub(r"(?ms)^(```|~~~).*?^\1", "", text)
        match = re.search(r"^# +(.+?)[ #]*$", unfenced, re.M)
    elif kind == "rst":  # a line underlined with ===, --- etc. (not an overline itself)
        match = re.search(rf"^(?!{_ADORN}+$)(\S.*?) *\n({_ADORN})\2+ *$", text, re.M)
    return match[1].strip() if match else path.stem


def _load_plain(
    data: bytes, path: Path, source: str, options: ExtractOptions, kind: str = "text"
) -> _Docs:
    text = _decode(data)
    return [ExtractedDocument(source, kind, [Section(text)], title=_title(text, kind, path))]


_PARAGRAPH = frozenset("p div pre section article table ul ol blockquote header footer".split())
_HEADINGS = {f"h{n}": "#" * n + " " for n in range(1, 7)}
_LINE = {"li": "\n- ", "br": "\n", "tr": "\n", "dt": "\n", "dd": "\n"}
_SKIP_TAGS = frozenset({"script", "style", "head", "noscript", "template"})


class _HTMLText(HTMLParser):
    """Readable text from HTML, keeping headings as '#' lines for structure-aware splitting."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self.h1s: list[str] = []  # the first non-empty one is the fallback title
        self._skip: str | None = None
        self._open: set[str] = set()  # title / h1 / pre currently open
        self._fresh = True  # at a line start (or after a prefix): drop leading whitespace

    def _emit(self, piece: str) -> None:
        self.out.append(piece)
        self._fresh = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._skip = None  # an omitted </head> must not swallow the page
        self._open.add(tag)
        if tag == "h1":
            self.h1s.append("")
        if tag == "title" or self._skip:
            return
        if tag in _SKIP_TAGS:
            self._skip = tag
        elif tag in _PARAGRAPH or tag in _HEADINGS:
            self._emit("\n\n" + _HEADINGS.get(tag, ""))
        elif tag in _LINE:
            self._emit(_LINE[tag])
        elif tag in ("td", "th") and not self._fresh:
            self.out[-1] = self.out[-1].rstrip(" ")
            self._emit(" | ")

    def handle_endtag(self, tag: str) -> None:
        self._open.discard(tag)
        if tag == self._skip:
            self._skip = None
        elif not self._skip and (tag in _PARAGRAPH or tag in _HEADINGS):
            self._emit("\n\n")

    def handle_data(self, data: str) -> None:
        if "title" in self._open:
            self.title += data
            return
        if self._skip:
            return
        if "pre" not in self._open:
            data = re.sub(r"\s+", " ", data)
            data = data.lstrip() if self._fresh else data
        if "h1" in self._open:
            self.h1s[-1] += data
        if data:
            self.out.append(data)
            self._fresh = False

    def text(self) -> str:
        text = "\n".join(line.rstrip() for line in "".join(self.out).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def _load_html(data: bytes, path: Path, source: str, options: ExtractOptions) -> _Docs:
    parser = _HTMLText()
    parser.feed(_decode(data))
    parser.close()
    text = parser.text()
    if not text.strip():
        raise ExtractError("empty document")
    h1 = next((h for h in parser.h1s if h.strip()), "")
    title = " ".join(parser.title.split()) or " ".join(h1.split()) or path.stem
    return [ExtractedDocument(source, "html", [Section(text)], title=title)]


def _load_pdf(data: bytes, path: Path, source: str, options: ExtractOptions) -> _Docs:
    pages, title = _in_child(_pdf_pages, data, PDF_TIMEOUT_S, "PDF")
    sections = [
        Section(text.replace("\r\n", "\n").strip(), page=number)
        for number, text in enumerate(pages, 1)
        if text.strip()
    ]
    if not sections:
        raise ExtractError("no extractable text (scanned PDF?)")
    title = title or path.stem
    return [ExtractedDocument(source, "pdf", sections, title=str(title).strip() or path.stem)]


def _pdf_pages(data: bytes) -> tuple[list[str], str | None]:
    """Each page's text and the title: run in a child process (``_in_child``)."""
    from pypdf import PdfReader  # imported lazily: only PDF ingestion pays for it

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractError("encrypted PDF (password required)")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = reader.metadata.title if reader.metadata else None
    except ExtractError:
        raise
    except Exception as exc:  # pypdf raises many types for damaged files; all mean "unreadable"
        raise ExtractError(f"unreadable PDF: {exc}") from None
    return pages, str(title) if title else None


def _in_child(work: Callable[[bytes], T], data: bytes, timeout_s: float, kind: str) -> T:
    """``work(data)`` in a separate process, killed after ``timeout_s``. Why: a parser
    (pypdf) can loop or recurse for minutes on a crafted file, and a native crash or a
    runaway allocation would take the whole ingestion down; in a child, the file is
    refused and the run goes on."""
    context = multiprocessing.get_context("spawn")  # no inherited threads or locks
    pool = context.Pool(1)
    try:
        return pool.apply_async(work, (data,)).get(timeout_s)
    except multiprocessing.TimeoutError:
        raise ExtractError(f"{kind} extraction took over {timeout_s:g} s") from None
    except ExtractError:
        raise
    except Exception as exc:  # the child died (a crash, or memory)
        raise ExtractError(f"unreadable {kind}: {type(exc).__name__}: {exc}") from None
    finally:
        pool.terminate()


def check_archive(data: bytes, max_bytes: int, kind: str) -> None:
    """Refuse a ZIP-based file (DOCX) whose members would expand past ``max_bytes`` or
    by more than MAX_EXPANSION_RATIO, from the sizes its directory declares (zipfile
    never inflates a member past its declared size, so these bound the memory used)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ExtractError(f"unreadable {kind}: {exc}") from None
    expanded = sum(m.file_size for m in members)
    if expanded > max_bytes:
        raise ExtractError(
            f"expands to {expanded / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit "
            "(max_file_bytes)"
        )
    for m in members:
        if m.file_size > MAX_EXPANSION_RATIO * max(m.compress_size, 1) and m.file_size > 1e6:
            raise ExtractError(
                f"member {m.filename!r} expands {m.file_size // max(m.compress_size, 1)}x "
                f"(over {MAX_EXPANSION_RATIO}x): a decompression bomb?"
            )


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def check_nesting(text: str, limit: int = MAX_NESTING) -> None:
    """Refuse JSON nested deeper than ``limit``: one pass over its brackets outside strings."""
    depth = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            raise ExtractError(f"nested deeper than {limit} levels")


def _load_docx(data: bytes, path: Path, source: str, options: ExtractOptions) -> _Docs:
    import docx  # imported lazily: only DOCX ingestion pays for it
    from docx.table import Table

    check_archive(data, options.max_file_bytes, "DOCX")
    try:
        document = docx.Document(io.BytesIO(data))
        lines = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                lines += [" | ".join(c.text.strip() for c in row.cells) for row in block.rows]
                continue
            style = block.style.name if block.style is not None else ""
            level = re.fullmatch(r"Heading ([1-9])", style)
            text = block.text.strip()
            lines.append(f"{'#' * int(level[1])} {text}" if level and text else text)
        title = document.core_properties.title
    except Exception as exc:  # a zip/XML error from a damaged file
        raise ExtractError(f"unreadable DOCX: {exc}") from exc
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if not text:
        raise ExtractError("empty document")
    heading = next((line[2:] for line in lines if line.startswith("# ")), "")
    return [ExtractedDocument(source, "docx", [Section(text)], title=title or heading or path.stem)]


def _load_csv(data: bytes, path: Path, source: str, options: ExtractOptions) -> _Docs:
    text = _decode(data)
    dialect: Any = csv.excel_tab if path.suffix.lower() == ".tsv" else csv.excel
    if dialect is csv.excel:  # a single column or too little to tell: keep plain commas
        with contextlib.suppress(csv.Error):
            sample = text[:SNIFF_CHARS].rsplit("\n", 1)[0]
            dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    try:
        reader = csv.reader(io.StringIO(text), dialect)
        header = [h.strip() or f"column{i}" for i, h in enumerate(next(reader), 1)]
        start_line = reader.line_num + 1  # a quoted header may span several lines
        raw = [row for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise ExtractError(f"malformed CSV at line {reader.line_num}: {exc}") from exc
    if not raw:
        raise ExtractError("CSV has a header but no data rows")
    width = max(len(header), *(len(row) for row in raw))
    columns = header + [f"column{i}" for i in range(len(header) + 1, width + 1)]
    rows = [dict(zip(columns, row + [""] * (width - len(row)), strict=True)) for row in raw]
    lines = [
        "; ".join(f"{col}: {' '.join(v.split())}" for col, v in row.items() if v.strip())
        for row in rows
    ]
    section = Section("\n".join(lines), start_line=start_line)
    metadata = {"columns": columns, "rows": rows}
    return [ExtractedDocument(source, "csv", [section], title=path.stem, metadata=metadata)]


def _load_json(data: bytes, path: Path, source: str, options: ExtractOptions) -> _Docs:
    text = _decode(data)
    check_nesting(text)
    lines_mode = path.suffix.lower() in (".jsonl", ".ndjson")
    records: list[tuple[int, Any]] = []
    whole_error = ""  # set when a .json file is read as JSON Lines
    if not lines_mode:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            whole_error = f"invalid JSON at line {exc.lineno}: {exc.msg}"
            # JSON Lines saved as .json (common for datasets): one value, then "Extra data"
            # at the start of the next line. Anything else is an error, not a guess.
            if exc.msg != "Extra data" or exc.colno != 1 or exc.lineno < 2:
                raise ExtractError(whole_error) from None
            lines_mode = True
        else:
            records = [(1, record) for record in (value if isinstance(value, list) else [value])]
    if lines_mode:
        for number, line in enumerate(text.split("\n"), 1):
            if line.strip():
                try:
                    records.append((number, json.loads(line)))
                except json.JSONDecodeError as exc:
                    reason = whole_error or f"invalid JSON on line {number}: {exc.msg}"
                    raise ExtractError(reason) from None
    if not records:
        raise ExtractError("no records")
    docs: _Docs = []
    seen: set[str] = set()  # two records sharing an id would share one doc_id
    field, id_field = options.json_text_field, options.json_id_field
    for number, (line, record) in enumerate(records, 1):
        where = f"record {number}" + (f" (line {line})" if lines_mode else "")
        if not isinstance(record, dict):
            raise ExtractError(f"{where} is not a JSON object")
        body = record.get(field)
        if not isinstance(body, str) or not body.strip():
            problem = "is empty" if isinstance(body, str) else "is missing or not a string"
            raise ExtractError(f"{where}: text field '{field}' {problem} (json_text_field)")
        record_id = record[id_field] if record.get(id_field) not in (None, "") else number
        name = f"{source}#{record_id}"
        if name in seen:
            raise ExtractError(f"{where}: duplicate id '{record_id}' ({id_field})")
        seen.add(name)
        title = record.get(options.json_title_field)
        # the record's other plain fields (author, date, price...) are part of what it says:
        # indexed and shown with the text, so a question about them can be answered
        named = (field, id_field, options.json_title_field)
        extra = [
            f"{k}: {v}"
            for k, v in record.items()
            if k not in named and isinstance(v, str | int | float | bool) and str(v).strip()
        ]
        text = "\n".join([body.rstrip(), "", *extra]) if extra else body
        title = title if isinstance(title, str) else ""
        docs.append(ExtractedDocument(name, "json", [Section(text, start_line=line)], title=title))
    return docs


# every ExtractedDocument.kind, e.g. for ``--splitter-for KIND=SPLITTER``
KINDS = ("markdown", "rst", "text", "html", "python", "code", "pdf", "docx", "csv", "json")
_KINDS = {".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".txt": "text"}
_KINDS |= {".py": "python"} | dict.fromkeys(_CODE, "code")
_LOADERS: dict[str, _Loader] = {
    ext: partial(_load_plain, kind=kind) for ext, kind in _KINDS.items()
}
_LOADERS |= {".html": _load_html, ".htm": _load_html, ".pdf": _load_pdf, ".docx": _load_docx}
_LOADERS |= {".csv": _load_csv, ".tsv": _load_csv}
_LOADERS |= dict.fromkeys((".json", ".jsonl", ".ndjson"), _load_json)
