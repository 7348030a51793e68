"""The coarse-to-fine retrieval pipeline over a persisted collection of documents.

    from retrieval.pipeline import Collection, Retriever, RetrievalConfig
    col = Collection.build({"report": text}, tokenizer)          # chunk, embed, index
    col.save(path); col = Collection.load(path)                  # or Collection.open(name, ...)
    r = Retriever(col)
    hits = r.search("What was 2024 revenue?", k=30)              # coarse: dense + BM25, RRF-fused
    ranked = r.rerank("What was 2024 revenue?", hits)            # fine: sentence-level scoring
    ctx = r.build_context("What was 2024 revenue?", budget_tokens=1536)  # summary + fragments

Stages (`RetrievalConfig` holds every knob):
1. **Chunking** in the policy's tokens (`retrieval.chunking`).
2. **Coarse retrieval**: the question's MiniLM vector against the FAISS index
   (`retrieval.index`, flat/HNSW/IVF by size) and BM25 (bm25s), each `candidates` deep,
   fused by reciprocal rank fusion (Cormack, Clarke & Buettcher 2009, k=60).
3. **Fine ranking** of the fused top `coarse_k`: each candidate is cut into sentences and
   scored by its best sentence's cosine to the question (a needle is one sentence in a
   chunk of filler, which dilutes the chunk vector), plus the chunk's own cosine and the
   share of the question's content words it contains:
   `fine = 0.6 * max_sentence_cos + 0.2 * chunk_cos + 0.2 * term_coverage`.
4. **Assembly** into the token budget with a global summary (`retrieval.context`).

A collection persists under `collections_dir()/<name>/` (chunks.jsonl, FAISS index with its
parameters, BM25 index, meta.json with the tokenizer, embedding model and a digest of the
documents); `Collection.open` reuses it when the digest and settings match.

Not covered: a cross-encoder reranker (none ships offline here), incremental updates of
a collection (rebuild it; unchanged chunks reuse cached embeddings).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from core.errors import ConfigError, DocumentError
from core.paths import model_cache_dir
from retrieval.chunking import Chunk, chunk_document
from retrieval.context import DEFAULT_BUDGET_TOKENS, ORDERS, Context, assemble, summarize
from retrieval.embeddings import Embedder, bundled_dtype
from retrieval.index import DenseIndex, LexicalIndex

RRF_K = 60
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w\w+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # fullmatch
_PAGE_MARK = re.compile(r"\[(?:Page|page|p\.) ?\d+\]")  # "[Page 7]" lines are not an opening
_STOP = frozenset(["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is", "are", "was", "were", "be", "been", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "does", "do", "did", "this", "that", "these", "those", "it", "its", "as", "into", "than", "then", "there", "their", "about", "according", "document", "report", "please", "answer", "give", "tell", "me", "you", "your"])


@dataclass(frozen=True)
class RetrievalConfig:
    """Knobs of the pipeline (token counts are policy tokens).

    Attributes:
        chunk_tokens: Maximum chunk length.
        overlap_tokens: Tokens repeated between consecutive chunks of a section.
        candidates: Depth of each coarse list (dense and BM25) before fusion.
        coarse_k: Fused candidates passed to fine ranking.
        budget_tokens: Default context budget (summary + fragments).
        summary_tokens: Budget of the global summary inside it.
        order: "document" or "edges" (see `retrieval.context`).
        index_kind: "auto", "flat", "hnsw" or "ivf".
    """

    chunk_tokens: int = 192
    overlap_tokens: int = 24
    candidates: int = 50
    coarse_k: int = 20
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    summary_tokens: int = 160
    order: str = "document"
    index_kind: str = "auto"

    def __post_init__(self) -> None:
        for name in ("chunk_tokens", "candidates", "coarse_k", "budget_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"retrieval {name} must be a positive int, got {value!r}")
        if not isinstance(self.overlap_tokens, int) or isinstance(self.overlap_tokens, bool) \
                or not 0 <= self.overlap_tokens < self.chunk_tokens // 2:
            raise ConfigError(f"retrieval overlap_tokens must be an int in [0, chunk_tokens/2), got {self.overlap_tokens!r}")
        if not isinstance(self.summary_tokens, int) or not 0 <= self.summary_tokens < self.budget_tokens:
            raise ConfigError(f"retrieval summary_tokens must be in [0, budget_tokens), got {self.summary_tokens!r}")
        if self.order not in ORDERS:
            raise ConfigError(f"retrieval order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.index_kind not in ("auto", "flat", "hnsw", "ivf"):
            raise ConfigError(f"retrieval index_kind must be auto, flat, hnsw or ivf, got {self.index_kind!r}")


def collections_dir() -> Path:
    """Where named collections are persisted (inside the workbench cache dir)."""
    return model_cache_dir().parent / "retrieval"


def collection_path(name: str, root: Path | None = None) -> Path:
    """Directory of the collection `name` under `root` (default `collections_dir()`).

    Raises:
        ConfigError: a name that is not 1-100 letters, digits, '_', '.', '-' starting with
            a letter or digit (so it can't leave the directory).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"collection name must be 1-100 letters, digits, '_', '.', '-' (starting with a letter "
                          f"or digit), got {name!r}")
    path = (root or collections_dir()) / name
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path} exists and is not a collection directory; pick another name")
    return path


def check_query(query) -> str:
    """The question as text: lone surrogates (undecodable command-line bytes) replaced.

    Raises:
        ConfigError: not a string, or nothing but whitespace.
    """
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"the question must be non-empty text, got {query!r:.60}")
    return re.sub(r"[\ud800-\udfff]", "\ufffd", query)


def collection_digest(documents: dict[str, str], tokenizer, cfg: RetrievalConfig, embedder_name: str) -> str:
    """32 hex digits naming what a collection is built from: the documents, the tokenizer,
    the chunking and index settings and the embedding model (same digest, same collection)."""
    h = hashlib.sha256()
    for doc_id in sorted(documents):
        h.update(doc_id.encode("utf-8", "replace") + b"\0" + documents[doc_id].encode("utf-8", "replace") + b"\0")
    h.update(json.dumps([getattr(tokenizer, "name_or_path", ""), len(tokenizer), cfg.chunk_tokens,
                         cfg.overlap_tokens, cfg.index_kind, embedder_name]).encode())
    return h.hexdigest()[:32]


class Collection:
    """Chunks of one or more documents with their dense and lexical indexes."""

    def __init__(self, chunks: list[Chunk], dense: DenseIndex, lexical: LexicalIndex, meta: dict,
                 summary_source: dict[str, str]):
        self.chunks, self.dense, self.lexical, self.meta = chunks, dense, lexical, meta
        self.summary_source = summary_source  # doc_id -> headings + opening, for summaries
        self.doc_tokens = {}
        for c in chunks:
            self.doc_tokens[c.doc_id] = max(self.doc_tokens.get(c.doc_id, 0), c.start_token + c.n_tokens)

    @classmethod
    def build(cls, documents: dict[str, str], tokenizer, cfg: RetrievalConfig | None = None,
              embedder: Embedder | None = None) -> Collection:
        """Chunk, embed and index `documents`.

        Args:
            documents: doc_id -> text (decoded; see `retrieval.documents.read_document`).
            tokenizer: The policy's tokenizer (chunk sizes and budgets in its tokens).
            cfg: Pipeline settings; default `RetrievalConfig()`.
            embedder: Default `Embedder.shared()`.

        Raises:
            DocumentError: no documents, or no text in any of them.
        """
        cfg, embedder = cfg or RetrievalConfig(), embedder or Embedder.shared()
        if not documents:
            raise DocumentError("the collection has no documents; add at least one")
        chunks = [c for doc_id, text in documents.items()
                  for c in chunk_document(text, tokenizer, doc_id, cfg.chunk_tokens, cfg.overlap_tokens)]
        if not chunks:
            raise DocumentError("the documents hold no text to index")
        vectors = embedder.encode([c.text for c in chunks])
        dense = DenseIndex.build(vectors, kind=cfg.index_kind)
        lexical = LexicalIndex.build([c.text for c in chunks])
        meta = {"digest": collection_digest(documents, tokenizer, cfg, embedder.name), "config": asdict(cfg),
                "tokenizer": str(getattr(tokenizer, "name_or_path", "")), "embedding_model": embedder.name,
                "documents": {d: len(t) for d, t in documents.items()}, "chunks": len(chunks),
                "index": dense.params}
        return cls(chunks, dense, lexical, meta, {d: _outline(t) for d, t in documents.items()})

    @classmethod
    def open(cls, name: str, documents: dict[str, str], tokenizer, cfg: RetrievalConfig | None = None,
             embedder: Embedder | None = None, root: Path | None = None) -> Collection:
        """The persisted collection `name` if it was built from the same documents and
        settings, else a fresh build saved under that name (atomically replacing the old).

        Raises:
            ConfigError: a name that is not 1-100 letters, digits, '_', '.', '-'.
            DocumentError: as `build`.
        """
        path = collection_path(name, root)
        cfg, embedder = cfg or RetrievalConfig(), embedder or Embedder.shared()
        digest = collection_digest(documents, tokenizer, cfg, embedder.name) if documents else ""
        if (path / "meta.json").is_file():
            try:
                col = cls.load(path)
                if col.meta.get("digest") == digest:
                    return col
            except DocumentError:
                pass  # damaged: rebuilt below
        col = cls.build(documents, tokenizer, cfg, embedder)
        col.save(path)
        return col

    def save(self, path: Path) -> None:
        """Write the collection to directory `path`: written aside, then swapped into place
        under a lock file, so readers and concurrent writers never see half a collection."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            tmp.chmod(0o755)
            with open(tmp / "chunks.jsonl", "w") as f:
                for c in self.chunks:
                    f.write(json.dumps(asdict(c)) + "\n")
            (tmp / "outline.json").write_text(json.dumps(self.summary_source))
            self.dense.save(tmp)
            self.lexical.save(tmp)
            (tmp / "meta.json").write_text(json.dumps(self.meta))  # last: marks it complete
            with _lock(path, fcntl.LOCK_EX):
                old = None
                if path.exists():
                    old = path.parent / f".{path.name}.old-{uuid.uuid4().hex}"
                    path.rename(old)
                tmp.rename(path)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, path: Path) -> Collection:
        """Read a collection written by `save`.

        Raises:
            DocumentError: `path` holds no complete, readable collection (the message says
                to rebuild it).
        """
        path = Path(path)
        try:
            with _lock(path, fcntl.LOCK_SH):  # not while a save swaps the directory
                return cls._read(path)
        except Exception as e:  # noqa: BLE001 - any damage (json, faiss, bm25 files) means: rebuild
            raise DocumentError(f"can't read the collection in {path} ({type(e).__name__}: {str(e)[:120]}); "
                                "rebuild it with `rlwb retrieval index NAME FILE...`") from e

    @classmethod
    def _read(cls, path: Path) -> "Collection":
        """`load` without the lock and the error translation."""
        meta = json.loads((path / "meta.json").read_text())
        with open(path / "chunks.jsonl") as f:
            chunks = [Chunk(**json.loads(line)) for line in f]
        outline = json.loads((path / "outline.json").read_text())
        dense, lexical = DenseIndex.load(path), LexicalIndex.load(path)
        if not isinstance(meta, dict) or not isinstance(outline, dict) or not chunks \
                or len(chunks) != dense.index.ntotal or len(chunks) != lexical.n:
            raise ValueError("its files don't agree with each other")
        return cls(chunks, dense, lexical, meta, outline)


@contextlib.contextmanager
def _lock(path: Path, mode: int):
    """Hold the lock file of collection directory `path` (shared for readers, exclusive
    for the swap in `save`); where it can't be created (read-only place), go without."""
    try:
        f = open(path.parent / f".{path.name}.lock", "a")
    except OSError:
        yield
        return
    with f:
        fcntl.flock(f, mode)
        yield


def _outline(text: str) -> str:
    """Headings and the first paragraph: all `summarize` needs of a document."""
    heads = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    body = next((p for p in re.split(r"\n\s*\n", text) if p.strip() and not p.lstrip().startswith("#")
                 and not _PAGE_MARK.fullmatch(p.strip())), "")
    return heads + "\n\n" + body[:2000]


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class Retriever:
    """Coarse search, fine ranking and context assembly over one `Collection`."""

    def __init__(self, collection: Collection, cfg: RetrievalConfig | None = None, embedder: Embedder | None = None):
        """Args:
            collection: The collection to search.
            cfg: Pipeline settings; default the collection's own.
            embedder: What embeds the questions and sentences; default the bundled model in the
                dtype the collection was built in (a float32 collection is searched in float32 on
                a bf16 machine too).

        Raises:
            DocumentError: `embedder` is not the model (or dtype) the collection was built with.
        """
        self.collection = collection
        self.cfg = cfg or RetrievalConfig(**collection.meta.get("config", {}))
        built = collection.meta.get("embedding_model")
        if embedder is None:
            embedder = Embedder.shared(bundled_dtype(built))
        if built and built != embedder.name:
            raise DocumentError(f"the collection was embedded with {built}, and questions would be embedded with "
                                f"{embedder.name}; rebuild it (`rlwb retrieval index NAME FILE...`) or search it "
                                "with its own model")
        self.embedder = embedder

    def _hit(self, i: int, **scores) -> dict:
        c = self.collection.chunks[i]
        total = max(1, self.collection.doc_tokens.get(c.doc_id, 1))
        return {"chunk_id": c.chunk_id, "doc_id": c.doc_id, "section": c.section, "start_token": c.start_token,
                "n_tokens": c.n_tokens, "depth": round(c.start_token / total, 4), "text": c.text, **scores}

    def search(self, query: str, k: int | None = None) -> list[dict]:
        """Coarse stage: dense and BM25 candidates fused by reciprocal rank.

        Args:
            query: The question.
            k: Fused hits to return (default `cfg.coarse_k`).

        Returns:
            Hits best first: chunk fields plus dense (cosine or None), bm25 (score or None),
            fused (RRF score).
        """
        query = check_query(query)
        k = max(1, k or self.cfg.coarse_k)
        q = self.embedder.encode([query])
        scores, ids = self.collection.dense.search(q, self.cfg.candidates)
        dense = {int(i): (r, float(s)) for r, (i, s) in enumerate(zip(ids[0], scores[0])) if i >= 0}
        lexical = {i: (r, s) for r, (i, s) in enumerate(self.collection.lexical.search(query, self.cfg.candidates))}
        fused = {i: sum(1.0 / (RRF_K + 1 + src[i][0]) for src in (dense, lexical) if i in src)
                 for i in dense.keys() | lexical.keys()}
        best = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [self._hit(i, dense=dense[i][1] if i in dense else None,
                          bm25=lexical[i][1] if i in lexical else None, fused=round(fused[i], 6)) for i in best]

    def rerank(self, query: str, hits: list[dict]) -> list[dict]:
        """Fine stage: score each coarse hit by its best sentence (see module docstring).

        Returns:
            The hits with `fine` and `best_sentence` added, best first.
        """
        query = check_query(query)
        if not hits:
            return []
        sentences = [[s for s in _SENTENCE.split(h["text"]) if len(s.strip()) > 2] or [h["text"]] for h in hits]
        flat = [s for group in sentences for s in group]
        vecs = self.embedder.encode([query] + flat + [h["text"] for h in hits])
        q, sent_vecs, chunk_vecs = vecs[0], vecs[1:1 + len(flat)], vecs[1 + len(flat):]
        sims = sent_vecs @ q
        terms = _terms(query)
        out, pos = [], 0
        for h, group, cv in zip(hits, sentences, chunk_vecs):
            local = sims[pos:pos + len(group)]
            pos += len(group)
            best = int(np.argmax(local))
            coverage = len(terms & _terms(h["text"])) / len(terms) if terms else 0.0
            fine = 0.6 * float(local[best]) + 0.2 * float(cv @ q) + 0.2 * coverage
            out.append({**h, "fine": round(fine, 6), "best_sentence": group[best][:300]})
        return sorted(out, key=lambda h: -h["fine"])

    def build_context(self, query: str, budget_tokens: int | None = None, tokenizer=None,
                      order: str | None = None) -> Context:
        """The whole pipeline: search, rerank, summary, assembly.

        Args:
            query: The question.
            budget_tokens: Context budget in policy tokens (default `cfg.budget_tokens`).
            tokenizer: The policy tokenizer the collection was chunked with.
            order: "document" or "edges" (default `cfg.order`).

        Raises:
            ConfigError: bad budget or order; no tokenizer.
        """
        if tokenizer is None:
            raise ConfigError("build_context needs the policy tokenizer the collection was chunked with")
        query = check_query(query)
        budget = budget_tokens or self.cfg.budget_tokens
        summary = summarize(self.collection.summary_source, tokenizer, min(self.cfg.summary_tokens, budget // 4),
                            sizes=self.collection.doc_tokens)
        ranked = self.rerank(query, self.search(query))
        ctx = assemble(summary, ranked, tokenizer, budget, order or self.cfg.order)
        ctx.document_tokens = sum(self.collection.doc_tokens.values())
        return ctx
