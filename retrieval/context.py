"""Context assembly: a global summary plus the best fragments, fitted to a token budget.

    from retrieval.context import summarize, assemble
    summary = summarize(documents, tokenizer, max_tokens=160)
    ctx = assemble(summary, ranked_hits, tokenizer, budget_tokens=1536, order="document")
    ctx.text, ctx.tokens, ctx.fragments   # fragments: what went in, with scores and location

The summary is extractive and cheap: the document title, its table of contents (markdown
headings) and the opening sentences, cut to `max_tokens`. Fragments are taken in fine-rank
order while they fit the remaining budget (a fragment that doesn't fit is skipped, a
smaller one after it may still go in); each carries a label with its document, section and
token position. `order="document"` prints them in document order; `order="edges"` puts the
strongest first and last and the weakest in the middle, against the "lost in the middle"
effect (Liu et al. 2023, "Lost in the Middle: How Language Models Use Long Contexts").

Token counts use the policy's tokenizer; the label and separators are counted too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.errors import ConfigError
from retrieval.chunking import count_tokens

ORDERS = ("document", "edges")
#: The default context budget (summary + fragments, policy tokens; SmolLM2's window is 8192): the one owner
#: that run configs, the long-document domains, evaluations, the needle sweep and the CLI read.
DEFAULT_BUDGET_TOKENS = 1536
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)
_FIRST_SENTENCE = re.compile(r"\S.*?(?:[.!?](?=\s)|$)", re.DOTALL)


@dataclass
class Context:
    """An assembled context.

    Attributes:
        text: What goes into the prompt before the question.
        tokens: Its length in policy tokens.
        budget_tokens: The budget it was fitted to.
        summary: The global summary at its top ("" when none fitted).
        fragments: One dict per included fragment: chunk_id, doc_id, section, start_token,
            n_tokens, depth (start_token / document tokens, 0..1), rank (fine rank, 0 = best)
            and the scores (dense, bm25, fused, fine).
        dropped: Fine-ranked fragments that did not fit.
        document_tokens: Length of the documents behind it (policy tokens), when known.
        evidence_in_context: Whether every known evidence sentence is in `text` (None when
            the task names no evidence).
    """

    text: str
    tokens: int
    budget_tokens: int
    summary: str = ""
    fragments: list[dict] = field(default_factory=list)
    dropped: int = 0
    document_tokens: int = 0
    evidence_in_context: bool | None = None

    def record(self) -> dict:
        """What a trajectory stores: sizes, fragments (without their text), evidence flag."""
        return {"context_tokens": self.tokens, "budget_tokens": self.budget_tokens,
                "document_tokens": self.document_tokens, "evidence_in_context": self.evidence_in_context,
                "dropped": self.dropped, "fragments": self.fragments}


def summarize(documents: dict[str, str], tokenizer, max_tokens: int = 160, sizes: dict[str, int] | None = None) -> str:
    """An extractive global summary: titles, headings (table of contents), first sentences.

    Args:
        documents: doc_id -> text.
        tokenizer: Policy tokenizer (the budget is in its tokens).
        max_tokens: Budget in tokens; 0 gives "".
        sizes: doc_id -> length in tokens, when `documents` holds only outlines.

    Returns:
        The summary, at most `max_tokens` tokens.
    """
    if max_tokens <= 0:
        return ""
    lines = []
    for doc_id, text in documents.items():
        headings = [(len(m.group(1)), m.group(2)) for m in _HEADING.finditer(text)]
        body = _HEADING.sub("", text).strip()
        first = _FIRST_SENTENCE.match(body)
        size = f"{sizes[doc_id]:,} tokens" if sizes and doc_id in sizes else f"{len(text):,} characters"
        lines.append(f"Document {doc_id}: {size}, {len(headings)} headings.")
        if headings:
            top = min(level for level, _ in headings)
            toc = [h for level, h in headings if level <= top + 1]
            lines.append("Contents: " + "; ".join(dict.fromkeys(toc)))
        if first:
            lines.append("Opening: " + " ".join(first.group(0).split())[:400])
    out = []
    for line in lines:
        candidate = "\n".join(out + [line])
        if count_tokens(tokenizer, [candidate])[0] > max_tokens:
            words = line.split()
            while words and count_tokens(tokenizer, ["\n".join(out + [" ".join(words) + " ..."])])[0] > max_tokens:
                words = words[: max(0, len(words) - max(1, len(words) // 4))]
            if words:
                out.append(" ".join(words) + " ...")
            break
        out.append(line)
    return "\n".join(out)


def _label(hit: dict) -> str:
    section = f" | section: {hit['section']}" if hit.get("section") else ""
    return f"[Fragment from {hit['doc_id']}{section} | tokens {hit['start_token']:,}-" \
           f"{hit['start_token'] + hit['n_tokens']:,} ({hit['depth']:.0%} into the document)]"


def _edges(items: list) -> list:
    """Best at both ends, weakest in the middle: ranks 0,2,4,... then ...,5,3,1."""
    return items[0::2] + items[1::2][::-1]


def assemble(summary: str, ranked: list[dict], tokenizer, budget_tokens: int, order: str = "document") -> Context:
    """Fit the summary and fragments into `budget_tokens`.

    Args:
        summary: From `summarize` ("" for none); dropped if it alone exceeds the budget.
        ranked: Hits best first, each a dict with text, chunk_id, doc_id, section,
            start_token, n_tokens, depth and scores (see `Context.fragments`).
        tokenizer: Policy tokenizer.
        budget_tokens: Maximum tokens of the assembled text, > 0.
        order: "document" or "edges" (see the module docstring).

    Raises:
        ConfigError: bad budget (or one too small for the header) or order.
    """
    if not isinstance(budget_tokens, int) or budget_tokens <= 0:
        raise ConfigError(f"budget_tokens must be a positive int, got {budget_tokens!r}")
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    head = f"Document summary:\n{summary}\n\nRelevant fragments:" if summary else "Relevant fragments:"
    used = count_tokens(tokenizer, [head])[0]
    if used > budget_tokens:
        head, summary = "Relevant fragments:", ""
        used = count_tokens(tokenizer, [head])[0]
        if used > budget_tokens:
            raise ConfigError(f"budget_tokens {budget_tokens} is below the {used} tokens of the context's own "
                              "header; give a budget of at least 64 tokens")
    blocks = [f"\n\n{_label(h)}\n{h['text']}" for h in ranked]
    sizes = count_tokens(tokenizer, blocks) if blocks else []
    chosen = []
    for rank, (hit, block, size) in enumerate(zip(ranked, blocks, sizes)):
        if used + size <= budget_tokens:
            chosen.append((rank, hit, block))
            used += size
    if order == "document":
        chosen.sort(key=lambda c: (c[1]["doc_id"], c[1]["start_token"]))
    else:
        chosen = _edges(chosen)
    text = head + "".join(block for _, _, block in chosen)
    while chosen and count_tokens(tokenizer, [text])[0] > budget_tokens:  # merges at block edges
        chosen.remove(max(chosen, key=lambda c: c[0]))
        text = head + "".join(block for _, _, block in chosen)
    fragments = [{k: v for k, v in hit.items() if k != "text"} | {"rank": rank} for rank, hit, _ in chosen]
    return Context(text, count_tokens(tokenizer, [text])[0], budget_tokens, summary, fragments,
                   dropped=len(ranked) - len(chosen))
