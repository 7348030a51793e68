"""Code writing from generated specifications, rewarded by hidden tests in a sandbox.

    d = get_domain("code_chunk_sums")
    task = d.make_task(seed=7, difficulty=2)
    job = d.verification_job(task, completion)      # the same judge/solver pair as humaneval
    reward, breakdown = d.score_result(task, completion, job_result)

Each `CodeTemplate` draws a small function specification from a seed: the parameters that
change what is right (a block size, a shift, which duplicate to keep, the words of a
FizzBuzz), the function's name, a docstring with two worked examples, and a reference
solution written here. The hidden tests are the reference's outputs on inputs drawn from
the same seed (edge cases first: empty input, one element, negatives), asserted in the
judge process of `domains.code.humaneval_runner` as HumanEval's are; the model never sees
them. Because the parameters change per seed, another task's solution is a wrong one, and
a solution that learned one seed's constants fails the next.

Levels: 1 a few tests on small inputs, 2 more tests and larger inputs, 3 the most tests
with the edge cases (empty, single, negative, repeated values) and a parameter variant the
examples don't show.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any, Callable

from domains.code.humaneval import INSTRUCTION, VERIFY_TIMEOUT_S, tests_job, tests_score
from domains.contract import SYSTEM_PROMPT, SandboxDomain, Task, check_difficulty, check_seed, task_random

TESTS = {1: 6, 2: 12, 3: 20}
LEVELS = {1: "a few tests on small inputs", 2: "more tests, larger inputs",
          3: "the most tests, with empty, single, negative and repeated values"}


@dataclass(frozen=True)
class Spec:
    """One drawn specification: the function's name and arguments, what it must do, its
    reference solution (a whole `def`), a function that draws test inputs, and inputs every
    task's hidden tests hold (the cases that tell this variant from its neighbours)."""

    name: str
    args: str
    doc: str
    solution: str
    inputs: Callable[[random.Random, int, bool], tuple]
    fixed: tuple[tuple, ...] = ()


def _ints(rng: random.Random, n: int, lo: int = -20, hi: int = 50) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _chunk_sums(rng: random.Random) -> Spec:
    k = rng.randint(2, 5)
    keep = rng.random() < 0.5
    tail = "a last, shorter block is summed too" if keep else "a last block with fewer than {k} numbers is dropped"
    body = (f"    return [sum(xs[i:i + {k}]) for i in range(0, len(xs), {k})"
            + ("]" if keep else f" if len(xs[i:i + {k}]) == {k}]"))
    return Spec(f"block_sums_{k}", "xs", f"Sum each consecutive block of {k} numbers of the list xs, in order; "
                + tail.format(k=k) + ".", f"def block_sums_{k}(xs):\n{body}\n",
                lambda r, n, edge: (_ints(r, 0 if edge and n % 4 == 0 else r.randint(1, 3 + n)),))


def _caesar(rng: random.Random) -> Spec:
    shift = rng.choice([s for s in range(1, 26) if s != 13])
    name = f"shift_letters_{shift}"
    sol = (f"def {name}(text):\n    out = []\n    for ch in text:\n"
           f"        if 'a' <= ch <= 'z':\n            out.append(chr((ord(ch) - 97 + {shift}) % 26 + 97))\n"
           f"        elif 'A' <= ch <= 'Z':\n            out.append(chr((ord(ch) - 65 + {shift}) % 26 + 65))\n"
           "        else:\n            out.append(ch)\n    return ''.join(out)\n")
    alphabet = string.ascii_letters + "  ,.!?0123456789"

    def inputs(r: random.Random, n: int, edge: bool) -> tuple:
        return ("".join(r.choice(alphabet) for _ in range(0 if edge and n % 5 == 0 else r.randint(1, 8 + n))),)

    return Spec(name, "text", f"Shift every ASCII letter of text {shift} places forward in the alphabet, wrapping "
                "from z to a, keeping its case; every other character stays as it is.", sol, inputs)


def _dedupe(rng: random.Random) -> Spec:
    last = rng.random() < 0.5
    name = "keep_last_copies" if last else "keep_first_copies"
    sol = (f"def {name}(xs):\n    seen = set()\n    out = []\n    for x in {'reversed(xs)' if last else 'xs'}:\n"
           "        if x not in seen:\n            seen.add(x)\n            out.append(x)\n"
           f"    return {'out[::-1]' if last else 'out'}\n")
    which = "last" if last else "first"
    return Spec(name, "xs", f"Remove repeated values from the list xs, keeping only the {which} occurrence of each "
                "value; the kept values stay in their original relative order.", sol,
                lambda r, n, edge: (_ints(r, 0 if edge and n % 4 == 0 else r.randint(1, 4 + n), 0, 6),),
                fixed=(([1, 2, 1],), ([3, 1, 3, 2, 1],)))  # first and last copies give different orders


def _fizzbuzz(rng: random.Random) -> Spec:
    a, b = rng.sample([2, 3, 4, 5, 6, 7], 2)
    w1, w2 = rng.sample(["Fizz", "Buzz", "Bang", "Pop", "Zap", "Boom"], 2)
    sol = (f"def say_numbers(n):\n    out = []\n    for i in range(1, n + 1):\n"
           f"        word = ('{w1}' if i % {a} == 0 else '') + ('{w2}' if i % {b} == 0 else '')\n"
           "        out.append(word or str(i))\n    return out\n")
    return Spec("say_numbers", "n", f"Return a list of strings for 1..n: '{w1}' for multiples of {a}, '{w2}' for "
                f"multiples of {b}, '{w1}{w2}' for multiples of both, and the number itself (as a string) "
                "otherwise. For n < 1 the list is empty.", sol,
                lambda r, n, edge: (0 if edge and n % 5 == 0 else r.randint(1, 5 + 2 * n),), fixed=((a * b,),))


def _rle(rng: random.Random) -> Spec:
    count_first = rng.random() < 0.5
    piece = "f'{count}{ch}'" if count_first else "f'{ch}{count}'"
    sol = ("def run_length(text):\n    out = []\n    i = 0\n    while i < len(text):\n        j = i\n"
           "        while j < len(text) and text[j] == text[i]:\n            j += 1\n"
           f"        ch, count = text[i], j - i\n        out.append({piece})\n        i = j\n    return ''.join(out)\n")
    form = "the count, then the character" if count_first else "the character, then the count"
    return Spec("run_length", "text", f"Run-length encode text: each run of one repeated character becomes {form} "
                "(a run of one is written with count 1); e.g. the runs of 'aab' are 'aa' and 'b'.", sol,
                lambda r, n, edge: ("".join(r.choice("aabbc") * r.randint(1, 3)
                                            for _ in range(0 if edge and n % 4 == 0 else r.randint(1, 3 + n))),))


def _merge(rng: random.Random) -> Spec:
    touching = rng.random() < 0.5
    cmp = "<=" if touching else "<"
    sol = ("def merge_ranges(ranges):\n    out = []\n    for lo, hi in sorted(ranges):\n"
           f"        if out and lo {cmp} out[-1][1]:\n            out[-1][1] = max(out[-1][1], hi)\n"
           "        else:\n            out.append([lo, hi])\n    return out\n")
    rule = ("ranges that overlap or touch (one ends where the next starts) merge" if touching
            else "ranges that overlap merge; ranges that only touch (one ends where the next starts) stay apart")

    def inputs(r: random.Random, n: int, edge: bool) -> tuple:
        count = 0 if edge and n % 5 == 0 else r.randint(1, 3 + n // 2)
        out = []
        for _ in range(count):
            lo = r.randint(0, 30)
            out.append([lo, lo + r.randint(1, 6)])  # no empty ranges: whether two equal points overlap is moot
        if out and n % 2:  # a range that starts where another ends: the touching rule decides
            end = r.choice(out)[1]
            out.insert(r.randrange(len(out) + 1), [end, end + r.randint(1, 4)])
        return (out,)

    return Spec("merge_ranges", "ranges", "ranges is a list of [start, end] pairs (start < end). Return the merged "
                f"ranges as [start, end] lists sorted by start: {rule}.", sol, inputs)


def _balanced(rng: random.Random) -> Spec:
    pairs = rng.choice(["()[]", "()[]{}", "()<>", "[]{}<>"])
    opens, closes = pairs[0::2], pairs[1::2]
    others = "".join(ch for ch in "()[]{}<>" if ch not in pairs)
    sol = (f"def brackets_balanced(text):\n    match = {dict(zip(closes, opens))!r}\n    stack = []\n"
           "    for ch in text:\n"
           f"        if ch in {opens!r}:\n            stack.append(ch)\n"
           "        elif ch in match:\n            if not stack or stack.pop() != match[ch]:\n                return False\n"
           "    return not stack\n")
    pretty = ", ".join(f"{o}{c}" for o, c in zip(opens, closes))

    def inputs(r: random.Random, n: int, edge: bool) -> tuple:
        if edge and n % 5 == 0:
            return ("",)
        text, stack = [], []
        for _ in range(r.randint(1, 4 + n)):  # mostly balanced, sometimes broken
            if stack and r.random() < 0.5:
                text.append(closes[opens.index(stack.pop())])
            else:
                o = r.choice(opens)
                stack.append(o)
                text.append(o)
        text += [closes[opens.index(o)] for o in reversed(stack)]
        if n % 2 == 0 and r.random() < 0.6:  # broken
            text[r.randrange(len(text))] = r.choice(pairs + "x")
        elif n % 2:  # balanced, with a lone bracket of another kind, which is just another character
            for _ in range(r.randint(1, 2)):
                text.insert(r.randrange(len(text) + 1), r.choice(others))
        return ("".join(text),)

    crossed = opens[0] + opens[1] + closes[0] + closes[1]  # "([)]": not properly nested
    return Spec("brackets_balanced", "text", f"Return True if the brackets {pretty} in text are balanced and properly "
                "nested, else False; other characters are ignored.", sol, inputs,
                fixed=(*((o,) for o in opens), (crossed,), (others[0] + opens[0] + closes[0],)))


def _top_words(rng: random.Random) -> Spec:
    k = rng.randint(1, 3)
    sol = (f"def top_words(text):\n    counts = {{}}\n    for w in text.lower().split():\n"
           "        counts[w] = counts.get(w, 0) + 1\n"
           f"    return sorted(counts, key=lambda w: (-counts[w], w))[:{k}]\n")
    words = ["red", "blue", "green", "Red", "BLUE", "tea", "cup", "sun"]

    def inputs(r: random.Random, n: int, edge: bool) -> tuple:
        return (" ".join(r.choice(words) for _ in range(0 if edge and n % 5 == 0 else r.randint(1, 4 + n))),)

    return Spec("top_words", "text", f"Return the {k} most frequent words of text (words are split on whitespace and "
                f"compared in lower case), most frequent first, ties in alphabetical order; fewer than {k} if "
                "there are fewer distinct words.", sol, inputs,
                # frequency against alphabetical order, a tie against first appearance, more than k words
                fixed=(("tea sun tea cup sun tea",), ("tea cup red tea cup",), ("sun tea cup red blue sun",)))


@dataclass(frozen=True)
class CodeTemplate:
    """A kind of specification: its domain name, one line for the catalogue, its drawer."""

    name: str
    description: str
    draw: Callable[[random.Random], Spec]


CODE_TEMPLATES: tuple[CodeTemplate, ...] = (
    CodeTemplate("code_chunk_sums", "Write a function that sums a list in fixed-size blocks (the block size and "
                 "the last block's rule vary).", _chunk_sums),
    CodeTemplate("code_caesar_shift", "Write a Caesar shift with a given offset that keeps case and punctuation.",
                 _caesar),
    CodeTemplate("code_dedupe", "Write a function that drops repeated values, keeping the first or the last copy.",
                 _dedupe),
    CodeTemplate("code_fizzbuzz_variant", "Write a FizzBuzz with other divisors and words.", _fizzbuzz),
    CodeTemplate("code_run_length", "Write a run-length encoder (count first or character first).", _rle),
    CodeTemplate("code_merge_ranges", "Write an interval merge (touching ranges merge or stay apart).", _merge),
    CodeTemplate("code_brackets", "Write a bracket-balance check over a given set of bracket pairs.", _balanced),
    CodeTemplate("code_top_words", "Write a top-k word count with ties in alphabetical order.", _top_words),
)


def _reference(spec: Spec) -> Callable[..., Any]:
    """The spec's reference function, compiled once per task (our own code, never the model's)."""
    namespace: dict = {}
    exec(compile(spec.solution, f"<reference {spec.name}>", "exec"), namespace)
    return namespace[spec.name]


@dataclass(frozen=True, eq=False)  # compared by identity; hashable
class GeneratedCodeDomain(SandboxDomain):
    """One `CodeTemplate` as a sandbox-verified, single-turn code domain (module docstring)."""

    template: CodeTemplate
    family: str = "code_writing"
    kind: str = "code"
    license: str = "Apache-2.0"
    needs_sandbox: bool = True
    levels = {1: {"tests": TESTS[1]}, 2: {"tests": TESTS[2]}, 3: {"tests": TESTS[3]}}
    level_notes = dict(LEVELS)

    @property
    def name(self) -> str:
        return self.template.name

    @property
    def description(self) -> str:
        return self.template.description

    @property
    def source(self) -> str:
        return f"rl-workbench generated specifications (domains/code/generated.py), {self.name}"

    @property
    def environment(self) -> dict:
        return {"runtime": "sandbox (Docker; local bubblewrap fallback)", "image": "rlwb-sandbox",
                "verifier": "hidden tests (the reference's outputs) in a judge process", "timeout_s": VERIFY_TIMEOUT_S}

    def make_task(self, seed: int, difficulty: int = 1) -> Task:
        """The task for (seed, level): a drawn specification, two worked examples in the
        docstring, hidden tests in the entry.

        Raises:
            ConfigError: seed is not a non-negative int or difficulty is not a level.
        """
        level, index = check_difficulty(difficulty, self.levels), check_seed(seed)
        rng = task_random(self.name, level, index)
        spec = self.template.draw(rng)
        reference = _reference(spec)
        inputs = [spec.inputs(rng, n + level, edge=level == 3) for n in range(2 + TESTS[level])]
        cases = [(args, reference(*args)) for args in [*inputs, *spec.fixed]]
        examples, hidden = cases[:2], cases[2:]
        shown = "\n".join(f"    >>> {spec.name}({', '.join(map(repr, a))})\n    {out!r}" for a, out in examples)
        prompt = f'def {spec.name}({spec.args}):\n    """{spec.doc}\n\n{shown}\n    """\n'
        test = "def check(candidate):\n" + "".join(
            f"    assert candidate({', '.join(map(repr, a))}) == {out!r}, {i}\n" for i, (a, out) in enumerate(hidden))
        entry = {"task_id": f"{self.name}/{level}/{index}", "prompt": prompt, "test": test, "entry_point": spec.name}
        question = f"{INSTRUCTION}\n\n```python\n{prompt}```"
        return Task(self.name, index, question, spec.solution, level, entry)

    def messages(self, task: Task) -> list[dict]:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.question}]

    def reference_completion(self, task: Task) -> str:
        """The reference solution in a ```python block."""
        return f"```python\n{task.answer}```"

    def verification_job(self, task: Task, completion: str):
        """The sandbox job that runs the completion against the hidden tests
        (`domains.code.humaneval.tests_job`)."""
        return tests_job(task, completion, kind=self.name, timeout_s=VERIFY_TIMEOUT_S)

    def score_result(self, task: Task, completion: str, job) -> tuple[float, dict]:
        """1.0 if every hidden test passed, else 0.0 (`domains.code.humaneval.tests_score`)."""
        return tests_score(completion, job)


def generated_code_domains() -> dict[str, GeneratedCodeDomain]:
    """Every template of `CODE_TEMPLATES` as a domain, by name."""
    return {t.name: GeneratedCodeDomain(t) for t in CODE_TEMPLATES}
