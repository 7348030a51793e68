"""Token-aware chunking: a document -> overlapping chunks measured in the policy's tokens.

    from retrieval.chunking import chunk_document
    chunks = chunk_document(text, tokenizer, doc_id="report", chunk_tokens=256, overlap_tokens=32)
    chunks[3].text, chunks[3].start_token, chunks[3].n_tokens, chunks[3].section

The document is cut into sentences (paragraph breaks kept); sentences are packed greedily
into chunks of at most `chunk_tokens` tokens of `tokenizer` (the policy model's, so that
budgets downstream are in the model's tokens); each chunk starts with the last whole
sentences of the previous one, up to `overlap_tokens` (none when the last sentence alone is
longer). A markdown heading (`#`, `##`, ...) always
starts a new chunk and names the `section` of the chunks under it, so a change inside one
section leaves the chunks of every other section identical (their embeddings are then
reused from the cache). A sentence longer than a chunk is cut at token boundaries.

Token offsets add up the token counts of sentences encoded one by one; across sentence
boundaries this can differ by a token or so from encoding the whole document at once.

Not covered: layout-aware parsing (PDF columns, tables as cells); chunks are text spans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import ConfigError

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")
_HEADING = re.compile(r"#{1,6}[ \t]+\S")  # used with match(text, pos, endpos)
# id(tokenizer) -> (tokenizer, {text: count}); the tokenizer is held so its id can't be reused
_TOKEN_CACHES: dict[int, tuple[object, dict[str, int]]] = {}
_TOKEN_CACHE_MAX = 500_000  # texts per tokenizer
_TOKENIZERS_MAX = 8


@dataclass(frozen=True)
class Chunk:
    """A contiguous span of one document.

    Attributes:
        doc_id: Document the chunk comes from.
        index: Position among the document's chunks (0-based).
        text: The chunk's text, exactly `document[start_char:end_char]`.
        start_char: Offset of its first character in the document (characters).
        end_char: Offset one past its last character (characters).
        start_token: Offset of its first token in the document (policy tokens).
        n_tokens: Its length in policy tokens.
        section: Text of the nearest markdown heading above it ("" if none).
    """

    doc_id: str
    index: int
    text: str
    start_char: int
    end_char: int
    start_token: int
    n_tokens: int
    section: str = ""

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.index}"


@dataclass
class _Unit:
    start: int
    end: int
    tokens: int
    heading: bool


def count_tokens(tokenizer, texts: list[str]) -> list[int]:
    """Token counts of `texts` under `tokenizer` (no special tokens), memoised per text.

    Returns:
        One count (tokens) per text.
    """
    entry = _TOKEN_CACHES.get(id(tokenizer))
    if entry is None:
        if len(_TOKEN_CACHES) >= _TOKENIZERS_MAX:
            _TOKEN_CACHES.pop(next(iter(_TOKEN_CACHES)))
        entry = _TOKEN_CACHES[id(tokenizer)] = (tokenizer, {})
    cache = entry[1]
    missing = list(dict.fromkeys(t for t in texts if t not in cache))
    if missing:
        if len(cache) + len(missing) > _TOKEN_CACHE_MAX:
            cache.clear()
        ids = tokenizer(missing, add_special_tokens=False, verbose=False)["input_ids"]  # counting only
        cache.update(zip(missing, map(len, ids)))
    return [cache[t] for t in texts]


def _sentences(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, is_heading) spans of the sentences of `text`; a heading line is one span."""
    spans = []
    for para in re.finditer(r"(?:(?!\n[ \t]*\n).)+", text, re.DOTALL):  # paragraphs: runs between blank lines
        pos, end = para.start(), para.end()
        while pos < end:
            pos += len(text[pos:end]) - len(text[pos:end].lstrip())  # blank lines, indentation
            if pos >= end:
                break
            line_end = text.find("\n", pos, end)
            line_end = end if line_end < 0 else line_end
            lead = pos + len(text[pos:line_end]) - len(text[pos:line_end].lstrip())
            if _HEADING.match(text, lead, line_end):  # a heading line, then the rest of the paragraph
                stop = lead + len(text[lead:line_end].rstrip())
                spans.append((lead, stop, True))
                pos = line_end + 1
                continue
            cuts = [pos] + [m.end() for m in _SENTENCE_END.finditer(text, pos, end)] + [end]
            for a, b in zip(cuts, cuts[1:]):
                a += len(text[a:b]) - len(text[a:b].lstrip())
                b = a + len(text[a:b].rstrip())
                if b > a:
                    spans.append((a, b, False))
            break
    return spans


def _split_long(text: str, start: int, end: int, tokenizer, limit: int) -> list[tuple[int, int]]:
    """Cut text[start:end] into pieces of at most `limit` tokens at token boundaries."""
    enc = tokenizer(text[start:end], add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = enc["offset_mapping"]
    pieces = []
    for i in range(0, len(offsets), limit):
        a = offsets[i][0]
        b = offsets[min(i + limit, len(offsets)) - 1][1]
        if b > a:
            pieces.append((start + a, start + b))
    return pieces or [(start, end)]


def chunk_document(text: str, tokenizer, doc_id: str = "doc", chunk_tokens: int = 256,
                   overlap_tokens: int = 32) -> list[Chunk]:
    """Split a document into overlapping, token-bounded chunks (see the module docstring).

    Args:
        text: The document (already decoded, see `retrieval.documents.read_document`).
        tokenizer: A Hugging Face fast tokenizer (the policy model's).
        doc_id: Identifier stored in each chunk.
        chunk_tokens: Maximum chunk length in tokens, >= 16.
        overlap_tokens: Tokens of trailing sentences repeated at the start of the next
            chunk of the same section, 0 <= overlap_tokens < chunk_tokens / 2.

    Returns:
        The chunks in document order (empty for a document with no text).

    Raises:
        ConfigError: bad chunk_tokens or overlap_tokens.
    """
    if not isinstance(chunk_tokens, int) or chunk_tokens < 16:
        raise ConfigError(f"chunk_tokens must be an int >= 16, got {chunk_tokens!r}")
    if not isinstance(overlap_tokens, int) or not 0 <= overlap_tokens < chunk_tokens // 2:
        raise ConfigError(f"overlap_tokens must be in [0, chunk_tokens/2), got {overlap_tokens!r}")
    spans = _sentences(text)
    counts = count_tokens(tokenizer, [text[a:b] for a, b, _ in spans])
    units: list[_Unit] = []
    for (a, b, heading), n in zip(spans, counts):
        if n > chunk_tokens:
            pieces = _split_long(text, a, b, tokenizer, chunk_tokens)
            units += [_Unit(x, y, n_, False) for (x, y), n_ in
                      zip(pieces, count_tokens(tokenizer, [text[x:y] for x, y in pieces]))]
        else:
            units.append(_Unit(a, b, n, heading))
    return _pack(text, units, doc_id, chunk_tokens, overlap_tokens)


def _pack(text: str, units: list[_Unit], doc_id: str, chunk_tokens: int, overlap_tokens: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    offsets, total = [], 0
    for u in units:
        offsets.append(total)
        total += u.tokens
    section, current, size = "", [], 0

    def flush() -> None:
        if current:  # a heading with nothing under it is a chunk too (it holds text)
            first, last = units[current[0]], units[current[-1]]
            chunks.append(Chunk(doc_id, len(chunks), text[first.start:last.end], first.start, last.end,
                                offsets[current[0]], sum(units[i].tokens for i in current), section))

    for i, u in enumerate(units):
        if u.heading:
            flush()
            section = text[u.start:u.end].lstrip("#").strip()
            current, size = [i], u.tokens
            continue
        if current and size + u.tokens > chunk_tokens:
            flush()
            keep, kept = [], 0
            for j in reversed(current):
                if units[j].heading or kept + units[j].tokens > overlap_tokens:
                    break
                keep.insert(0, j)
                kept += units[j].tokens
            if units[current[0]].heading and size - units[current[0]].tokens < chunk_tokens // 2:
                keep = []  # don't repeat a heading-led chunk's tail when it was mostly heading
            current, size = keep, kept
        current.append(i)
        size += u.tokens
    flush()
    return chunks
