"""Document analysis as workbench domains: a generated business document (invoice,
services agreement, sales ledger, timesheet, bank statement, balance sheet) and one
question whose answer is computed from the document's facts
(`domains.documents.generators`).

    d = DocumentDomain(DOCUMENT_KINDS[0])                    # doc_invoice_total
    task = d.make_task(seed=7, difficulty=2)
    reward, breakdown = d.score(task, "Subtotal ... so the total is $1,234.50.\\nAnswer: 1234.50")

The answer is the reply's last `Answer: ...` line (`domains.answers.extract_answer`),
compared by the task's kind: an amount or ratio within half a unit of its second decimal
("$1,234.50", "1234.5" both pass for 1234.50; a reply with several different numbers is a
hedge and gets format credit only); a count exactly; a date as a calendar date (ISO
"2027-03-14", or "March 14, 2027" read by dateutil); a name from the document ignoring
case, surrounding quotes and spacing.

Determinism: a task is drawn from `random.Random` seeded from sha256(name, level, seed)
(`domains.contract.task_random`) and a `Faker` instance seeded from that; the Faker instance is per thread, so concurrent draws never
share its state. Faker is pinned (its word lists are part of the task).
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import dataclass

from core.errors import ConfigError
from domains.answers import amounts, extract_answer
from domains.contract import (CORRECT_WEIGHT, FORMAT_WEIGHT, Breakdown, LineAnswerDomain, Task, check_difficulty,
                              check_seed, task_random)
from domains.documents.generators import DOCUMENT_KINDS, DocumentKind
from domains.upstream import package_version

LEVELS = {1: "short documents, round prices, fixed terms",
          2: "longer documents, discounts and odd cents, shuffled clauses, month filters",
          3: "the longest: returned items, shipping, early-payment terms, a renewal, night shifts, status filters"}
_FAKER = threading.local()
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def _faker(seed: int):
    """This thread's `Faker("en_US")`, seeded with `seed`."""
    if not hasattr(_FAKER, "fake"):
        from faker import Faker  # on first use: ~0.15 s

        _FAKER.fake = Faker("en_US")
    _FAKER.fake.seed_instance(seed)
    return _FAKER.fake


def read_date(text: str) -> dt.date | None:
    """The calendar date in an answer: its ISO date, else the whole text read by dateutil
    ("March 14, 2027"); None if neither reads one, or if it holds two different ISO dates or
    digits beside its ISO date ("2027-09-20 or September 21, 2027": a hedge)."""
    isos = set(_ISO.findall(text))
    try:
        if len(isos) > 1 or (isos and any(ch.isdigit() for ch in _ISO.sub("", text))):
            return None
        if isos:
            return dt.date(*map(int, isos.pop()))
        if len(text) > 60:
            return None
        from dateutil import parser  # on first use

        return parser.parse(text, default=dt.datetime(1, 1, 1)).date()
    except (ValueError, OverflowError):
        return None


def _plain(text: str) -> str:
    return " ".join(text.strip().strip("\"'`*.").casefold().split())


@dataclass(frozen=True, eq=False)
class DocumentDomain(LineAnswerDomain):
    """One `DocumentKind` as a single-turn domain with levels 1..3 (`LEVELS`)."""

    document_kind: DocumentKind

    LEVEL_NOTES = LEVELS

    family = "document_analysis"

    @property
    def name(self) -> str:
        return self.document_kind.name

    @property
    def description(self) -> str:
        return self.document_kind.description

    @property
    def source(self) -> str:
        return f"rl-workbench generated documents (Faker {package_version('faker')}), {self.name}"

    @property
    def environment(self) -> dict:
        return {"runtime": "in-process", "oracle": "Decimal money (half up to the cent), datetime and "
                "dateutil.relativedelta calendar arithmetic", "verifier": "by answer kind: amount within half a "
                "cent, exact count, calendar date, name up to case and spacing", "answer_format": self.answer_format}

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The task for (seed, difficulty), the same in any process and thread.

        Raises:
            ConfigError: seed is not a non-negative int or difficulty is not a level.
        """
        level, index = check_difficulty(difficulty, LEVELS), check_seed(seed)
        rng = task_random(self.name, level, index)
        drawn = self.document_kind.draw(rng, _faker(rng.getrandbits(63)), level)
        question = f"{drawn.document}\n\n{drawn.question}"
        return Task(self.name, index, question, drawn.answer, level, {"question": question, "answer": drawn.answer,
                                                                      "kind": drawn.kind})

    def score(self, task: Task, completion: str) -> tuple[float, Breakdown]:
        """reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT * correct (the module docstring
        says what is correct per answer kind); never raises on a bad reply.

        Raises:
            ConfigError: the task is another domain's.
        """
        if task.domain != self.name:
            raise ConfigError(f"task of domain {task.domain!r} given to domain {self.name!r}")
        extracted = extract_answer(completion)  # None for a non-text, over-long or malformed reply
        if extracted is None:
            return 0.0, {"format": 0.0, "correct": 0.0, "extracted": None}
        kind = task.entry["kind"]
        shown = extracted[:200]
        if kind == "text":
            correct = _plain(extracted) == _plain(task.answer)
        elif kind == "date":
            correct = read_date(extracted) == dt.date.fromisoformat(task.answer)
        else:
            found = amounts(extracted)
            if len(set(found)) > 1:  # "12 or 13": a hedge is not an answer
                return FORMAT_WEIGHT, {"format": 1.0, "correct": 0.0, "extracted": shown,
                                       "rejected": f"ambiguous: {len(set(found))} different numbers"}
            ref = float(task.answer)
            tol = 0.0 if kind == "count" else 0.005 * (1 + 1e-9)
            correct = bool(found) and abs(found[0] - ref) <= tol
        return FORMAT_WEIGHT + CORRECT_WEIGHT * correct, {"format": 1.0, "correct": float(correct),
                                                          "extracted": shown}


def document_domains() -> dict[str, DocumentDomain]:
    """Every kind of `DOCUMENT_KINDS` as a domain, by name."""
    return {k.name: DocumentDomain(k) for k in DOCUMENT_KINDS}
