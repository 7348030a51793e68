"""Bad documents get a clear DocumentError; odd encodings are decoded."""

import pytest

from core.errors import DocumentError
from retrieval.documents import read_document


def test_utf8_latin1_utf16_and_control_characters():
    assert read_document("café\r\nnext".encode()) == "café\nnext"
    assert read_document("\ufeffhello".encode()) == "hello"
    latin = ("Le café coûte trois euros à la gare de Lyon, déjà payé. " * 20).encode("latin-1")
    assert "café" in read_document(latin)
    assert read_document("naïve text".encode("utf-16")) == "naïve text"
    assert read_document("a\x00b\x07c\tz") == "abc\tz"
    assert read_document("lone \ud800 surrogate") == "lone \ufffd surrogate"


@pytest.mark.parametrize("data, match", [
    (b"", "empty"), (b"   \n\t ", "empty"), ("", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "binary"),
])
def test_empty_and_binary_documents_are_refused(data, match):
    with pytest.raises(DocumentError, match=match):
        read_document(data, name="upload.bin")


def test_size_limit_names_the_limit_and_the_fix():
    with pytest.raises(DocumentError, match=r"over the 1 MiB limit; split it"):
        read_document(b"x" * (2 * 2**20), max_bytes=2**20)


def test_a_50_mb_text_is_read_whole():
    data = ("All work and no play makes Jack a dull boy. " * 1_200_000).encode()
    assert len(data) > 50 * 10**6
    assert len(read_document(data)) == len(data)


@pytest.mark.parametrize("text, encoding", [
    ("Résumé: the café served crème brûlée", "cp1252"), ("Ørsted årsrapport for året", "latin-1"),
    ("Señor, el año pasado", "latin-1"), ("これは日本語のテキストです。東京は大きい都市です。" * 5, "shift_jis"),
])
def test_legacy_encodings_decode_to_the_original_text(text, encoding):
    assert read_document(text.encode(encoding)) == text
