"""Domain validation: is a domain's reward automatic, its environment stable, its tasks diverse?

`validate(names)` checks each domain at every difficulty level and returns one report
per domain (stored by `rlwb domains validate`; a domain whose latest report failed can't
join a mix). Per level:

- **generation**: `n_tasks` tasks from consecutive training seeds; mean generation time
  per task in CPU seconds of the validating thread, so load from other processes doesn't
  count (a level slower than `MAX_GEN_S_PER_TASK` fails: it can't feed rollouts).
- **diversity**: distinct tasks per 100 (question, answer and environment such as a
  terminal task's files; fails below `MIN_DISTINCT_PER_100`), distinct prompts per 100,
  and the prompt-length distribution in characters (min, p10, p50, p90, max).
- **determinism**: the first seeds regenerated from a fresh generator give the same tasks;
  `validate` also regenerates them in a child process with another PYTHONHASHSEED (set
  iteration order differs there), so hidden dependence on hash order is caught. Generators
  that run in the upstream workers (`domains.upstream`: reasoning-gym, reasoning-core,
  mathematics-dataset) hash strings with the workers' fixed seed in every process, so
  for them the child checks a fresh process; the in-process families are checked under
  the child's own seed.
- **verifier** on `n_verify` tasks: the reference answer, written in the domain's answer
  format, must pass (correct = 1, reward = 1); wrong answers (other tasks' reference
  answers that differ) must not pass; blank answers ("", "Answer:", empty tags) and
  malformed ones (no answer marker, control characters, over-long text, None) must get
  reward 0; the verifier must never raise (a raising verifier is counted). A correct
  answer followed by junk (" zzz 12345") is tried too and reported as `junk_accepted`
  (a lenient parser, not a failure: the answer it finds is still the right one).

Sandboxed domains (humaneval, terminal_*) are verified in a sandbox pool of the requested
backend: reference solutions must pass, empty and wrong ones fail. Without a sandbox
backend they fail validation with that reason (they can't be trained here either).

    reports = validate(["chain_sum", "maze"], n_tasks=100)
    reports[0]["passed"], reports[0]["reasons"]      # True, []

A fresh install reads the reports shipped with the built-in domains
(`domains.shipped_validations`, refreshed with `rlwb domains validate --all --ship`) until
the user validates a domain here (`current_validations`, `validation_report`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from domains.answers import MAX_COMPLETION_CHARS
from domains.contract import Task, play_turns
from domains.registry import (generator_version, get_domain, is_built_in, register_definitions, registry,
                              reset_generator_caches, upstream_cpu_time, user_domain_definitions)
from domains.shipped_validations import shipped_report
from core.errors import WorkbenchError

MIN_DISTINCT_PER_100 = 20  # fewer distinct prompts per 100 tasks is too little diversity
MAX_GEN_S_PER_TASK = 1.0  # CPU seconds; slower generation can't keep up with rollouts
LEVEL_TIME_BUDGET_S = 30.0  # stop generating a level's tasks after this long (report what was made)
DETERMINISM_SEEDS = (0, 1, 2)


def task_digest(task: Task) -> str:
    """SHA-256 (hex, 16 chars) of a task's question, answer and entry."""
    blob = json.dumps([task.question, task.answer, task.entry], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def task_digests(names: list[str], seeds: tuple[int, ...] = DETERMINISM_SEEDS) -> dict[str, dict[str, list[str]]]:
    """{domain: {level: [digest of each seed]}}; errors are recorded as "error: ..."."""
    out: dict[str, dict[str, list[str]]] = {}
    for name in names:
        d = get_domain(name)
        out[name] = {}
        for level in d.levels:
            try:
                out[name][str(level)] = [task_digest(d.make_task(s, level)) for s in seeds]
            except Exception as e:  # noqa: BLE001 - reported, compared as a mismatch
                out[name][str(level)] = [f"error: {type(e).__name__}"]
    return out


def cross_process_digests(names: list[str], timeout_s: float = 900.0) -> dict | None:
    """`task_digests` computed in a child interpreter with a different PYTHONHASHSEED.

    Returns:
        The child's digests, or None if it failed (the reports then say so).
    """
    env = {**os.environ, "PYTHONHASHSEED": str(int.from_bytes(os.urandom(2), "big") + 1)}
    user = user_domain_definitions(names)  # the child registers these first (it has no store)
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as defs:
        json.dump(user, defs)
        defs.flush()
        try:
            proc = subprocess.run([sys.executable, "-m", "domains.validation", "--user-domains", defs.name, *names],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _quantiles(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    qs = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else [values[0]] * 9
    return {"min": min(values), "p10": qs[0], "p50": statistics.median(values), "p90": qs[8], "max": max(values),
            "mean": round(statistics.fmean(values), 1)}


def _blank_and_malformed(domain, task: Task) -> tuple[list[str], list[Any]]:
    answer = task.answer
    blank = ["", "Answer:", "<answer></answer>", "<answer>   </answer>"]
    malformed = [
        None,
        # no answer marker (a game's marker is the brackets around each move)
        re.sub(r"[\[\]]", " ", answer) if domain.answer_format == "move" else f"the result is {answer}",
        f"Answer: {answer}\x00",  # control character
        f"<answer>{answer}\x07</answer>",
        "Answer: \ud800",  # lone surrogate
        "x" * (MAX_COMPLETION_CHARS + 1) + domain.wrap_answer(answer),  # over-long
    ]
    return blank, malformed


def _corrupt(answer: str) -> str:
    """The answer with its first letter or digit changed (digit + 1, letter shifted by one):
    a near miss that must not pass."""
    for i, ch in enumerate(answer):
        if ch.isdigit():
            return answer[:i] + str((int(ch) + 1) % 10) + answer[i + 1:]
        if ch.isalpha() and ch.isascii():
            nxt = "a" if ch == "z" else "A" if ch == "Z" else chr(ord(ch) + 1)
            return answer[:i] + nxt + answer[i + 1:]
    return answer + " 0"


def _numerically_close(a: str, b: str, rel: float = 1e-3) -> bool:
    """True if both parse as numbers within `rel` relative difference (verifiers accept a
    tolerance, so such an answer is not a wrong one)."""
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= rel * max(abs(x), abs(y), 1e-12)


def _check_rg_level(domain, tasks: list[Task], n_verify: int) -> dict:
    """Verifier checks of an in-process domain on the first n_verify tasks."""
    ref_pass = wrong_rejected = wrong_n = blank_zero = blank_n = bad_zero = bad_n = errors = 0
    junk_accepted = junk_n = 0
    partial: list[float] = []
    problems: list[str] = []  # failures beyond the counted reference and wrong-answer checks
    examples: list[str] = []  # which reference or wrong answers misbehaved
    answers = [t.answer for t in tasks]
    for task in tasks[:n_verify]:
        if domain.answer_format == "line" and "\n" in task.answer.strip():
            problems.append(f"seed {task.seed}: the reference answer spans lines but the domain asks for one line")
        reward, b = domain.score(task, domain.reference_completion(task))
        errors += "verifier_error" in b
        problems += failed_reference_calls(task, b)
        if reward == 1.0 and b.get("correct") == 1.0:
            ref_pass += 1
        elif len(examples) < 5:
            examples.append(f"seed {task.seed}: reference answer {task.answer[:60]!r} scored {b.get('score', 0):.2f}")
        others = [] if domain.multiple_answers else answers
        near = domain.near_miss(task) or _corrupt(task.answer)
        wrong = [a for a in dict.fromkeys([*others, near])
                 if a.strip() and a.strip() != task.answer.strip() and not _numerically_close(a, task.answer)][-3:]
        for a in wrong:
            reward, b = domain.score(task, domain.wrap_answer(a))
            errors += "verifier_error" in b
            wrong_n += 1
            partial.append(float(b.get("score", 0.0)))
            if b.get("correct") == 0.0:
                wrong_rejected += 1
            elif len(examples) < 5:
                examples.append(f"seed {task.seed}: wrong answer {a[:40]!r} passed (reference {task.answer[:40]!r})")
        for junk in (" zzz 12345", ", zzz"):  # a correct answer followed by junk: lenient, reported
            junk_n += 1
            junk_accepted += domain.score(task, domain.wrap_answer(task.answer + junk))[1].get("correct") == 1.0
        blank, malformed = _blank_and_malformed(domain, task)
        for text in blank:
            blank_n += 1
            blank_zero += domain.score(task, text)[0] == 0.0
        for text in malformed:
            bad_n += 1
            bad_zero += domain.score(task, text)[0] == 0.0
    n = min(n_verify, len(tasks))
    if blank_zero < blank_n:
        problems.append(f"{blank_n - blank_zero} of {blank_n} blank answers got a reward above 0")
    if bad_zero < bad_n:
        problems.append(f"{bad_n - bad_zero} of {bad_n} malformed answers got a reward above 0")
    if wrong_n == 0 and n:
        problems.append("no wrong answer to try: every task has the same reference answer")
    return {"reference_pass": ref_pass, "reference_n": n, "wrong_rejected": wrong_rejected, "wrong_n": wrong_n,
            "wrong_partial_score_mean": round(statistics.fmean(partial), 3) if partial else None,
            "blank_zero": blank_zero, "blank_n": blank_n, "malformed_zero": bad_zero, "malformed_n": bad_n,
            "junk_accepted": junk_accepted, "junk_n": junk_n, "verifier_errors": errors, "problems": problems,
            "examples": examples}


def reward_audit(scored: list[tuple[str, Task, float, dict]]) -> list[str]:
    """What a user's verifier rewards that it shouldn't, from probe replies already scored
    as (kind, task, reward, breakdown) (`SandboxDomain.probe_replies`): an empty reply above
    0, the reference followed by junk as high as the reference, a reply without an answer
    or with only the format above 0, another row's answer at full marks, the same reply
    scored differently, the verifier raising. One line per finding; [] if none fired."""
    by_kind: dict[str, list] = {}
    for kind, task, reward, b in scored:
        if not b.get("fault"):
            by_kind.setdefault(kind, []).append((task.seed, reward, b))
    out = []
    ref = {seed: r for seed, r, _ in by_kind.get("reference", [])}
    if (empty := [r for _, r, _ in by_kind.get("blank", []) if r > 0]):
        out.append(f"gives {max(empty):.2f} to an empty reply")
    if (junk := [s for s, r, _ in by_kind.get("junk_after", []) if s in ref and ref[s] > 0 and r >= ref[s]]):
        out.append(f"rewards the answer followed by junk as much as the answer ({len(junk)} of "
                   f"{len(by_kind['junk_after'])} rows)")
    for kind, what in (("no_answer", "a reply that holds no answer"), ("format_only", "the answer format alone")):
        if (high := [r for _, r, _ in by_kind.get(kind, []) if r > 0]):
            out.append(f"rewards {what} (up to {max(high):.2f})")
    wrong = by_kind.get("wrong", [])
    if (full := [s for s, r, _ in wrong if r >= 1.0]) and "junk_after" in by_kind:
        out.append(f"gives full marks to another row's answer on {len(full)} of {len(wrong)} rows")
    again = {s: r for s, r, _ in by_kind.get("reference_again", [])}
    if (differ := [s for s in again if s in ref and again[s] != ref[s]]):
        out.append(f"non-deterministic: the same reply scored {ref[differ[0]]:.3f} and {again[differ[0]]:.3f}")
    probes = [b for rows in by_kind.values() for _, _, b in rows]
    if (errors := [b["verifier_error"] for b in probes if b.get("verifier_error")]):
        out.append(f"raises or fails on {len(errors)} of {len(probes)} replies ({100 * len(errors) / len(probes):.0f}%), "
                   f"e.g. {errors[0][:120]}")
    return out


BROKEN_TOOL_CODES = frozenset({"invalid_json", "bad_call_shape", "unknown_tool", "schema_violation",
                               "too_many_calls", "unclosed_call", "tool_error", "timeout"})


def failed_reference_calls(task: Task, breakdown: dict, records: list | None = None) -> list[str]:
    """A problem when a reference episode's tool calls did not work: a contract error, a
    crash ("tool_error") or a timeout (a tool's own declared code is the tool working as
    declared). A tool that fails on the domain's own reference calls is broken, whatever the
    final answer scores. Names the first failing call's tool, code and what it said."""
    codes = breakdown.get("error_codes") or {}
    broken = sum(n for code, n in codes.items() if code in BROKEN_TOOL_CODES)
    if not broken:
        return []
    failed = [c for r in records or [] for c in r.get("calls", []) if c.get("error") in BROKEN_TOOL_CODES]
    said = (f": {failed[0]['name'] or 'a call'} gave {failed[0]['error']} ({str(failed[0]['observation'])[:120]})"
            if failed else f": {', '.join(sorted(c for c in codes if c in BROKEN_TOOL_CODES))}")
    return [f"{task.entry.get('task_id', task.seed)}: {broken} of {breakdown.get('calls', broken)} reference tool "
            f"calls failed{said}"]


def _check_sandbox_level(domain, tasks: list[Task], n_verify: int, pool) -> dict:
    """Verifier checks of a sandboxed domain (humaneval or terminal_*) in `pool`."""
    from collections import Counter

    tally: Counter = Counter()
    problems: list[str] = []
    sample = tasks[:n_verify]

    def count(kind: str, reward: float) -> None:
        """reference must score 1, wrong answers below 1 (tool domains keep their format
        credit), blank and malformed answers 0."""
        group = "reference" if kind == "reference" else "wrong" if kind == "wrong" else "blank"
        tally[f"{group}_n"] += 1
        tally[group] += reward == 1.0 if kind == "reference" else reward < 1.0 if kind == "wrong" else reward == 0.0

    if domain.kind == "multi_turn":
        with pool.lease() as sb:
            for task in sample:
                cases = {"reference": domain.reference_turns(task), "wrong": domain.wrong_turns(task),
                         "blank": [""], "malformed": ["I would do it like this, but I won't."]}
                for kind, turns in cases.items():
                    reward, breakdown, records = play_turns(domain, task, turns, sb)
                    count(kind, reward)
                    if kind == "reference":
                        problems += failed_reference_calls(task, breakdown, records)
    else:
        # on first use: it pulls in numpy, pydantic
        from sandboxes.pool import Scheduler

        cases = []
        for task in sample:
            other = next((o for o in tasks if o.entry["task_id"] != task.entry["task_id"]
                          and o.answer != task.answer), None)
            probes = domain.probe_replies(task, other)
            cases += [(kind, task, text) for kind, text in probes.items()]
            if "junk_after" in probes:  # a user's verifier: scored twice, it must agree with itself
                cases.append(("reference_again", task, probes["reference"]))
        sched = Scheduler(pool)
        try:
            results = sched.run([domain.verification_job(t, c) for _, t, c in cases])
        finally:
            sched.close()
        scored = [(kind, task, *domain.score_result(task, completion, res))
                  for (kind, task, completion), res in zip(cases, results)]
        for kind, task, reward, b in scored:
            if b.get("fault"):
                problems.append(f"harness fault on {task.entry['task_id']}: {b.get('error', '')[:100]}")
            elif kind in ("reference", "blank", "malformed", "wrong"):
                count(kind, reward)
        problems += reward_audit(scored)
    n = len(sample)
    if tally["blank"] < tally["blank_n"]:
        problems.append(f"{tally['blank_n'] - tally['blank']} of {tally['blank_n']} empty or malformed answers "
                        "got a reward above 0")
    return {"reference_pass": tally["reference"], "reference_n": n, "wrong_rejected": tally["wrong"],
            "wrong_n": tally["wrong_n"], "blank_zero": tally["blank"], "blank_n": tally["blank_n"],
            "malformed_zero": 0, "malformed_n": 0, "verifier_errors": 0, "problems": problems}


def validate_domain(name: str, n_tasks: int = 100, n_verify: int = 5, pool=None,
                    sandbox_note: str = "") -> dict:
    """Validate one domain at every level (see the module docstring).

    Args:
        name: A registered domain.
        n_tasks: Tasks generated per level for diversity and prompt lengths (>= 2).
        n_verify: Tasks per level whose verifier is exercised.
        pool: A `sandboxes.pool.SandboxPool` for sandboxed domains (None: they fail with
            `sandbox_note` as the reason).

    Returns:
        The report: {"domain", "passed", "reasons": [str], "levels": [per-level dicts],
        "duration_s", "reasoning_gym", "n_tasks", "kind", "family", "task_digests" (level ->
        digests of the first seeds, compared with a second process by `validate`)}.

    Raises:
        DomainNotFound: unknown name.
    """
    domain = get_domain(name)
    t0 = time.perf_counter()
    reasons: list[str] = []
    levels = []
    digests: dict[str, list[str]] = {}  # level -> digests of DETERMINISM_SEEDS, as `task_digests` gives
    for level in domain.levels:
        row, problems, digests[str(level)] = _validate_level(domain, level, n_tasks, n_verify, pool, sandbox_note)
        reasons += [f"level {level}: {p}" for p in problems]
        levels.append(row)
    return {"domain": name, "domain_version": domain.version_key, "family": domain.family, "kind": domain.kind,
            "passed": not reasons, "reasons": list(dict.fromkeys(reasons)), "levels": levels, "n_tasks": n_tasks,
            "duration_s": round(time.perf_counter() - t0, 2), "reasoning_gym": generator_version(),
            "task_digests": digests}


def _validate_level(domain, level: int, n_tasks: int, n_verify: int, pool,
                    sandbox_note: str) -> tuple[dict, list[str], list[str]]:
    """One level of `validate_domain`: (its report row, its problems, the digests of the
    first seeds from fresh generators, as `task_digests` records them)."""
    row: dict[str, Any] = {"level": level}
    reasons: list[str] = []
    tasks: list[Task] = []
    start, cpu_start = time.perf_counter(), upstream_cpu_time()
    try:
        for seed in range(n_tasks):
            tasks.append(domain.make_task(seed, level))
            if time.perf_counter() - start > LEVEL_TIME_BUDGET_S and len(tasks) >= 2:
                break
    except Exception as e:  # noqa: BLE001 - any generator failure is the finding
        row["error"] = f"{type(e).__name__}: {e}"[:300]
        # what `task_digests` records for the level, so the cross-process check compares alike
        digests = ([task_digest(t) for t in tasks[: len(DETERMINISM_SEEDS)]]
                   if len(tasks) >= len(DETERMINISM_SEEDS) else [f"error: {type(e).__name__}"])
        return row, [f"generation failed at seed {len(tasks)}: {type(e).__name__}: {e}"[:290]], digests
    # CPU time of this thread and of the upstream workers it called: other work on a
    # shared machine doesn't inflate it
    gen_s = (upstream_cpu_time() - cpu_start) / max(len(tasks), 1)
    prompts = [t.question for t in tasks]
    row.update(n=len(tasks), gen_ms_per_task=round(gen_s * 1000, 2),
               distinct_per_100=round(100 * len({task_digest(t) for t in tasks}) / len(tasks), 1),
               distinct_prompts_per_100=round(100 * len(set(prompts)) / len(prompts), 1),
               prompt_chars=_quantiles([len(p) for p in prompts]))
    if gen_s > MAX_GEN_S_PER_TASK:
        reasons.append(f"generation takes {gen_s:.2f} s per task (limit {MAX_GEN_S_PER_TASK} s)")
    if row["distinct_per_100"] < MIN_DISTINCT_PER_100 and len(tasks) >= 20:
        reasons.append(f"only {row['distinct_per_100']:.0f} distinct tasks per 100 (need {MIN_DISTINCT_PER_100})")
    reset_generator_caches()
    try:  # the first seeds again, from fresh generator instances
        again = [task_digest(domain.make_task(s, level)) for s in DETERMINISM_SEEDS]
    except Exception as e:  # noqa: BLE001
        again = [f"error: {type(e).__name__}"]
    first = [task_digest(t) for t in tasks[: len(DETERMINISM_SEEDS)]]
    row["deterministic"] = again[: len(first)] == first
    if not row["deterministic"]:
        reasons.append("the same seed gave different tasks after a fresh start")
    if domain.needs_sandbox and pool is None:
        row["verifier"] = "not run"
        return row, reasons + [f"verifier not exercised: {sandbox_note or 'no sandbox backend'}"], again
    checks = (_check_sandbox_level(domain, tasks, n_verify, pool) if domain.needs_sandbox
              else _check_rg_level(domain, tasks, n_verify))
    row.update(checks)
    if checks["reference_pass"] < checks["reference_n"]:
        reasons.append(f"{checks['reference_n'] - checks['reference_pass']} of {checks['reference_n']} "
                       "reference answers did not pass")
    if checks["wrong_rejected"] < checks["wrong_n"]:
        reasons.append(f"{checks['wrong_n'] - checks['wrong_rejected']} of {checks['wrong_n']} wrong answers passed")
    return row, reasons + checks["problems"], again


def validate(names: list[str], n_tasks: int = 100, n_verify: int = 5, sandbox_backend: str | None = "docker",
             cross_process: bool = True, progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Validate several domains; see `validate_domain`.

    Args:
        sandbox_backend: "docker" or "local" for sandboxed domains; None skips them.
        cross_process: Also compare task digests with a child process that uses another
            PYTHONHASHSEED (one child for all names).
        progress: Called with each report as it is finished.

    Returns:
        One report per name, in order; each also has "cross_process_deterministic"
        (True/False, or None when not checked).

    Raises:
        DomainNotFound: an unknown name (before anything runs).
    """
    for n in names:
        get_domain(n)
    with ThreadPoolExecutor(1) as ex:  # the child process works while this one validates
        pending = ex.submit(cross_process_digests, names) if cross_process else None
        reports = _validate_all(names, n_tasks, n_verify, sandbox_backend, progress)
        child = pending.result() if pending is not None else None
    for r in reports:
        if not cross_process:
            r["cross_process_deterministic"] = None
            continue
        if child is None:
            r["cross_process_deterministic"] = None
            r["reasons"].append("cross-process determinism check did not complete")
            r["passed"] = False
            continue
        same = child.get(r["domain"]) == r["task_digests"]
        r["cross_process_deterministic"] = same
        if not same:
            r["reasons"].append("tasks differ between processes with different PYTHONHASHSEED (hash-order dependence)")
            r["passed"] = False
    return reports


def _validate_all(names, n_tasks, n_verify, sandbox_backend, progress) -> list[dict]:
    needs_pool = any(get_domain(n).needs_sandbox for n in names)
    pool, note = None, ""
    if needs_pool and sandbox_backend:
        pool, note = _open_pool(sandbox_backend)
    elif needs_pool:
        note = "validation run without a sandbox backend"
    reports = []
    try:
        for n in names:
            network = get_domain(n).sandbox_network
            if network != "none" and sandbox_backend:  # its own pool, with its allow-list
                own, own_note = _open_pool(sandbox_backend, network)
                try:
                    r = validate_domain(n, n_tasks=n_tasks, n_verify=n_verify, pool=own, sandbox_note=own_note)
                finally:
                    if own is not None:
                        own.close()
            else:
                r = validate_domain(n, n_tasks=n_tasks, n_verify=n_verify, pool=pool, sandbox_note=note)
            reports.append(r)
            if progress:
                progress(r)
    finally:
        if pool is not None:
            pool.close()
    return reports


def _open_pool(backend: str, network: str | tuple[str, ...] = "none"):
    """(pool, "") or (None, why) for the sandboxed domains' verifier checks, its sandboxes on
    `network` ("none" or an allow-list)."""
    # on first use: it pulls in numpy, pydantic
    from sandboxes.pool import SandboxPool
    # on first use: it pulls in pydantic
    from sandboxes.spec import SandboxSpec

    try:
        pool = SandboxPool(backend, SandboxSpec(memory_mb=256, episode_timeout_s=120, network=network), size=2,
                           labels={"rlwb.purpose": "validation"}).start()
        return pool, ""
    except WorkbenchError as e:
        return None, f"sandbox backend {backend!r} unavailable: {e}"


def try_verifier(task: Task, text: str, sandbox_backend: str = "docker") -> tuple[float, dict]:
    """Score a hand-written answer for a task, as training would (the page's
    try-the-verifier box).

    Args:
        task: A task of any registered domain.
        text: For single-turn domains the completion (e.g. "Answer: 7"); for humaneval the
            code; for terminal domains shell commands, one turn per line (the episode
            then ends with DONE); for sandboxed tool and cad domains one turn of tool calls
            per line (DONE is added when the last line has calls).
        sandbox_backend: Where sandboxed domains run ("docker" or "local").

    Returns:
        (reward, breakdown); for terminal domains breakdown has "check" (the checker's
        verdict) and "turns".

    Raises:
        SandboxUnavailable: a sandboxed domain and no usable backend.
    """
    domain = get_domain(task.domain)
    if not domain.needs_sandbox:
        return domain.score(task, text)
    # on first use: it pulls in numpy, pydantic
    from sandboxes.pool import SandboxPool, Scheduler
    # on first use: it pulls in pydantic
    from sandboxes.spec import SandboxSpec

    spec = SandboxSpec(memory_mb=256, episode_timeout_s=60, network=domain.sandbox_network)
    with SandboxPool(sandbox_backend, spec, size=1, labels={"rlwb.purpose": "try-verifier"}, gc_interval_s=0) as pool:
        if domain.kind != "multi_turn":
            sched = Scheduler(pool)
            try:
                [res] = sched.run([domain.verification_job(task, text)])
            finally:
                sched.close()
            return domain.score_result(task, text, res)
        with pool.lease() as sb:
            reward, breakdown, turns_played = play_turns(domain, task, domain.scripted_turns(text), sb)
            return reward, {**breakdown, "turns": turns_played}


def current_validations(store) -> dict[str, dict]:
    """The newest validation of every domain that has one: `store.latest_validations()`
    without the reports of another version of a domain (a user domain updated, or removed
    and added again, since it was validated: the newest version counts as not validated
    until it is validated itself), and, for a built-in domain the store has no report of,
    its shipped report (`domains.shipped_validations`; "shipped": True) if that is of the
    installed version."""
    latest = store.latest_validations()
    names = registry()
    out = {n: v for n, v in latest.items()
           if n not in names or v.get("domain_version", "") == names[n].version_key}
    for n, d in names.items():
        if n not in out and is_built_in(n) and (r := shipped_report(d)) is not None:
            out[n] = {"passed": r["passed"], "reasons": r.get("reasons", []), "created_at": r["created_at"],
                      "domain_version": "", "shipped": True}
    return out


def validation_report(store, name: str) -> dict | None:
    """The newest full report of a domain: the store's, else the shipped one of a built-in
    domain (as `current_validations` picks them); None if it has neither.

    Raises:
        DomainNotFound: unknown name.
    """
    domain = get_domain(name)
    report = store.validation_report(name)
    if report is not None and report.get("domain_version", "") == domain.version_key:
        return report
    return shipped_report(domain) if is_built_in(name) else None


def _child(argv: list[str]) -> dict:
    """The child of `cross_process_digests`: register the user domains of `--user-domains
    FILE` (if given), then the digests of the named domains."""
    if argv[:1] == ["--user-domains"]:
        register_definitions(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
        argv = argv[2:]
    return task_digests(argv)


if __name__ == "__main__":  # child of cross_process_digests: print digests as one JSON line
    print(json.dumps(_child(sys.argv[1:])))
