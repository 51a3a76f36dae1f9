"""Real files for tests: folders of text pages and PDFs made with fpdf2."""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` under ``root`` and return ``root``."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def make_pdf(path: Path, pages: list[str], title: str = "") -> Path:
    """A real PDF with one page per text (an empty text makes a page without text)."""
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.cell(text=text)
    pdf.output(str(path))
    return path
