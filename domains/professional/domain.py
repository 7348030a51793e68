"""A professional calculation as a workbench domain: a seeded word problem whose answer a
library computes (`domains.professional.calculations`), checked within a tolerance.

    d = CalculationDomain(CALCULATIONS["fin_npv"])
    task = d.make_task(seed=7, difficulty=2)
    reward, breakdown = d.score(task, "NPV is about -1,234.57\\nAnswer: -1234.57")

The answer is the reply's last committed answer (`domains.answers.extract_answer`, an
`Answer: ...` line); its number (`domains.answers.amounts`: "-$1,234.57" is -1234.57,
"12.5%" is 12.5, "3.3e-6" is 0.0000033) is correct when it is within the calculation's
relative tolerance of the reference or within half a unit of the reference's last written
place. So a rounded "1234.6" passes for "1234.57". An answer with several different
numbers ("0 or 40502") is a hedge: format credit only. References keep 4 significant
digits (`Calculation.written`: scientific below 0.001), so "Answer: 0" never passes for a
tiny one. Units, currency and percent signs are read past, not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import ConfigError
from domains.answers import amounts, extract_answer
from domains.contract import (CORRECT_WEIGHT, FORMAT_WEIGHT, Breakdown, LineAnswerDomain, Task, check_difficulty,
                              check_seed, task_random)
from domains.professional.calculations import CALCULATIONS, Calculation
from domains.upstream import package_version

LEVELS = {1: "round inputs, common units and options", 2: "less round inputs, rarer units and options",
          3: "the rarest units, longer horizons, more cash flows, two-sided and interval questions"}


ORACLE_VERSIONS = ", ".join(f"{p} {package_version(p)}" for p in ("numpy-financial", "pint", "periodictable", "scipy"))


@dataclass(frozen=True, eq=False)
class CalculationDomain(LineAnswerDomain):
    """One `Calculation` as a single-turn domain with levels 1..3 (`LEVELS`)."""

    calculation: Calculation

    LEVEL_NOTES = LEVELS

    @property
    def name(self) -> str:
        return self.calculation.name

    @property
    def family(self) -> str:
        return self.calculation.family

    @property
    def description(self) -> str:
        return self.calculation.description

    @property
    def source(self) -> str:
        return f"rl-workbench professional calculations ({ORACLE_VERSIONS}), {self.name}"

    @property
    def environment(self) -> dict:
        return {"runtime": "in-process", "oracle": self.calculation.oracle,
                "verifier": f"last number of the answer within {self.calculation.rel_tol:.1%} or half a unit of the "
                            "reference's last place", "answer_format": self.answer_format}

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The task for (seed, difficulty): drawn from a `random.Random` seeded by (name,
        level, seed), so the same pair gives the same task in any process.

        Raises:
            ConfigError: seed is not a non-negative int or difficulty is not a level.
        """
        level, index = check_difficulty(difficulty, LEVELS), check_seed(seed)
        question, value, unit = self.calculation.draw(task_random(self.name, level, index), level)
        answer = Calculation.written(value)
        if unit:
            question += f" Give the number only{f' (in {unit})' if unit not in ('percent', 'dollars') else ''}."
        return Task(self.name, index, question, answer, level, {"question": question, "answer": answer, "unit": unit})

    def score(self, task: Task, completion: str) -> tuple[float, Breakdown]:
        """reward = FORMAT_WEIGHT * format + CORRECT_WEIGHT * correct (see the module
        docstring for what is correct); never raises on a bad reply.

        Raises:
            ConfigError: the task is another domain's.
        """
        if task.domain != self.name:
            raise ConfigError(f"task of domain {task.domain!r} given to domain {self.name!r}")
        extracted = extract_answer(completion)  # None for a non-text, over-long or malformed reply
        if extracted is None:
            return 0.0, {"format": 0.0, "correct": 0.0, "extracted": None}
        found, ref = amounts(extracted), float(task.answer)
        if len(set(found)) > 1:  # "0 or 40502", "1, 2, 40502": a hedge is not an answer
            return FORMAT_WEIGHT, {"format": 1.0, "correct": 0.0, "extracted": extracted[:200],
                                   "rejected": f"ambiguous: {len(set(found))} different numbers"}
        x = found[0] if found else None
        correct = x is not None and abs(x - ref) <= max(self.calculation.rel_tol * abs(ref),
                                                        Calculation.half_unit(task.answer)) * (1 + 1e-9)
        reward = FORMAT_WEIGHT + CORRECT_WEIGHT * correct
        return reward, {"format": 1.0, "correct": float(correct), "extracted": extracted[:200]}

def professional_domains() -> dict[str, CalculationDomain]:
    """Every calculation of `CALCULATIONS` as a domain, by name."""
    return {name: CalculationDomain(c) for name, c in CALCULATIONS.items()}
