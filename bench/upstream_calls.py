"""Cost of a time-limited upstream call: a persistent worker process vs in-process vs a fork per call.

    python bench/upstream_calls.py            # 2,000 scored answers per way (fork: 100), 3 repeats
    python bench/upstream_calls.py --quick    # 500 (fork: 30), 3 repeats: < 1 minute

Workload: `Domain.score` of the quickstart's kind (a chain_sum level 2 task, a reply ending
in its `Answer:` line), the call a rollout makes hundreds of times per step. Three ways to
run reasoning-gym's `score_answer` under a time limit:

* in-process: the previous path, `score_answer` in the calling thread under a SIGALRM timer
  (`signal.setitimer`), stdout captured, its own decimal context. Holds on the main thread
  only (the reason it was replaced); the baseline for cost.
* worker: the current `Domain.score`, which sends the call to a persistent worker process
  (`domains.upstream.WorkerPool`) and waits on its socket with the limit.
* fork: a fresh `os.fork()` per call that scores and writes the result to a pipe, waited
  for with the limit. Its cost grows with the parent's memory (page tables): this process
  imports torch first, as a trainer has, but holds no model.

Prints microseconds per scored answer for each way (median over ``--repeats``), the extra
cost per step of 512 answers, and, as its last line, ``ratio: X.XX`` = fork / worker time
per answer. A benchmark, not a test: figures depend on the machine and what else runs.
"""

from __future__ import annotations

import argparse
import contextlib
import decimal
import io
import os
import pickle
import select
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import load_average  # noqa: E402


def _in_process(d, task, completion: str) -> float:
    """The previous path: extract, then score_answer under SIGALRM in this thread."""
    from domains.reasoning_gym.domain import SCORE_TIMEOUT_S
    from domains.answers import extract_answer

    def expired(signum, frame):
        raise TimeoutError

    answer = extract_answer(completion)
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, SCORE_TIMEOUT_S)
    try:
        with contextlib.redirect_stdout(io.StringIO()), decimal.localcontext():
            return d.verify(task.difficulty, answer, task.raw_entry)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _forked(d, task, completion: str) -> float:
    """score_answer in a fresh fork, its result through a pipe, waited for with the limit."""
    from domains.reasoning_gym.domain import SCORE_TIMEOUT_S
    from domains.answers import extract_answer

    answer = extract_answer(completion)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: score, write, leave at once
        os.close(r)
        os.write(w, pickle.dumps(d.verify(task.difficulty, answer, task.raw_entry)))
        os._exit(0)
    os.close(w)
    try:
        if not select.select([r], [], [], SCORE_TIMEOUT_S)[0]:
            os.kill(pid, signal.SIGKILL)
            raise TimeoutError
        return pickle.loads(os.read(r, 1 << 16))
    finally:
        os.close(r)
        os.waitpid(pid, 0)


def _per_call(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000, help="scored answers per way and repeat")
    ap.add_argument("--fork-calls", type=int, default=100, help="scored answers per repeat, fork per call")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="500 answers (fork: 30)")
    args = ap.parse_args()
    if args.quick:
        args.calls, args.fork_calls = 500, 30
    import torch  # noqa: F401 - a trainer's memory map, for the fork figure

    from domains.reasoning_gym.domain import UPSTREAM
    from domains.registry import get_domain

    d = get_domain("chain_sum")
    task = d.make_task(12345, 2)
    completion = f"Adding the numbers step by step.\nAnswer: {task.answer}"
    ways = {
        "in-process (SIGALRM, main thread only)": (lambda: _in_process(d, task, completion), args.calls),
        "worker process (Domain.score)": (lambda: d.score(task, completion)[0], args.calls),
        "fork per call": (lambda: _forked(d, task, completion), args.fork_calls),
    }
    for fn, _ in ways.values():  # warm up: the worker starts and builds the dataset once
        assert fn() == 1.0
    print(load_average())
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.repeats):  # the ways alternate, so drifting load hits each alike
        for name, (fn, n) in ways.items():
            times[name].append(_per_call(fn, n))
    median = {k: statistics.median(v) for k, v in times.items()}
    base = median["in-process (SIGALRM, main thread only)"]
    for name, t in median.items():
        print(f"{name:40s} {t * 1e6:9.1f} us/answer   +{(t - base) * 512 * 1e3:8.1f} ms per 512-answer step")
    print(f"workers started: {len(UPSTREAM.pids())}")
    print(load_average())
    print(f"ratio: {median['fork per call'] / median['worker process (Domain.score)']:.2f}")


if __name__ == "__main__":
    main()
