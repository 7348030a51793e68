"""Reading user documents for retrieval: bytes -> text, or a clear `DocumentError`.

    from retrieval.documents import read_document
    text = read_document(Path("report.txt").read_bytes(), name="report.txt")

Accepts text in UTF-8 (with or without a BOM), UTF-16 with a BOM, or any encoding
charset-normalizer can identify (Shift-JIS, ...); when several code pages fit equally well,
as they do for short Western texts, Windows-1252 / Latin-1 wins.
Refuses, with a message that names the problem and the fix: empty or whitespace-only
documents, binary files (NUL bytes or no plausible text encoding), documents over the
size limit. Line endings become "\\n"; control characters other than tab/newline/form
feed are dropped.

Not covered: PDF/DOCX parsing (convert to text first), OCR.
"""

from __future__ import annotations

import re

from core.errors import DocumentError

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # 64 MiB of text ~ 16M tokens
PREFERRED_ENCODINGS = ("cp1252", "latin_1", "iso8859_15")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def read_document(data: bytes | str, name: str = "document", max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """Decode and clean a document.

    Args:
        data: The raw bytes (an upload, a file's content) or already decoded text.
        name: Shown in error messages.
        max_bytes: Size limit in bytes (after encoding as UTF-8 when `data` is a str).

    Returns:
        The text, with "\\n" line endings and without control characters.

    Raises:
        DocumentError: empty, binary, undecodable or over `max_bytes`.
    """
    size = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    if size > max_bytes:
        raise DocumentError(f"{name} is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB limit; "
                            "split it into several documents of one collection")
    text = data if isinstance(data, str) else _decode(data, name)
    text = re.sub(r"[\ud800-\udfff]", "\ufffd", text)  # lone surrogates -> U+FFFD
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    if not text.strip():
        raise DocumentError(f"{name} is empty (no text after decoding); give a document with some text")
    return text


def _decode(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    if b"\x00" in data[:65536]:
        raise DocumentError(f"{name} looks binary (it holds NUL bytes); give a plain-text document "
                            "(convert PDF or Word files to text first)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data[: 4 * 2**20]))
    if not matches or min(m.chaos for m in matches) > 0.3:
        raise DocumentError(f"{name} is not UTF-8 and its encoding could not be recognised; "
                            "save it as UTF-8 text and try again")
    # short Western texts fit many code pages equally well (chaos 0 for cp1250, cp1252, ...);
    # among the equally good ones prefer the common Western ones
    least = min(m.chaos for m in matches)
    tied = [m.encoding for m in matches if m.chaos <= least + 0.01]
    encoding = next((e for e in PREFERRED_ENCODINGS if e in tied), tied[0])
    return data.decode(encoding, errors="replace")
