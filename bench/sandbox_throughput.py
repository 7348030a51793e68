"""Sandbox throughput: the warm pool against `docker run` per task, on HumanEval test runs.

    python bench/sandbox_throughput.py            # 200 HumanEval reference solutions each way
    python bench/sandbox_throughput.py --quick    # 60 through the pool, 12 through docker run: < 1 minute

Both sides run the same programs (a problem's reference solution, its tests and
``check(...)``) with the same limits (network none, memory, pids, --init) and the same
concurrency. The pool side submits `SandboxJob`s to a `Scheduler` over `--pool` warm
containers (each job: reset to a clean workspace, write the file, run, clean up, in one
round trip to the in-container agent). The baseline starts a fresh container per task
(``docker run --rm`` through the SDK). Prints executions per second and p50/p99 latency for
each side, the p50 of a short command (``true``) on a warm sandbox, and as its last line
``ratio: X.X`` = pool executions/s / docker-run executions/s. A benchmark, not a test:
numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

MEMORY_MB, PIDS = 512, 128


def programs(count: int) -> list[str]:
    """`count` HumanEval test programs (reference solutions), cycling over the 164 problems."""
    from domains.code.humaneval import problems

    probs = problems()
    out = []
    for i in range(count):
        p = probs[i % len(probs)]
        out.append(f"{p['prompt']}{p['canonical_solution']}\n\n{p['test']}\n\ncheck({p['entry_point']})\n")
    return out


def run_pool(progs: list[str], pool_size: int, concurrency: int) -> tuple[float, list[float], float]:
    """(executions/s, latencies in ms, p50 of `true` in ms) through a warm pool."""
    from sandboxes.pool import SandboxJob, SandboxPool, Scheduler
    from sandboxes.spec import SandboxSpec

    spec = SandboxSpec(memory_mb=MEMORY_MB, pids=PIDS, command_timeout_s=20)
    with SandboxPool("docker", spec, size=pool_size, gc_interval_s=0) as pool:
        sched = Scheduler(pool, concurrency=concurrency)
        sched.run([SandboxJob("true") for _ in range(pool_size)])  # warm-up
        jobs = [SandboxJob("python3 -I solution.py", files={"solution.py": p}) for p in progs]
        t0 = time.perf_counter()
        results = sched.run(jobs)
        wall = time.perf_counter() - t0
        bad = [r for r in results if r.result is None or r.result.exit_code != 0]
        if bad:
            raise SystemExit(f"pool: {len(bad)} executions failed, e.g. {bad[0]}")
        with pool.lease() as sb:
            short = []
            for _ in range(30):
                t = time.perf_counter()
                sb.exec("true")
                short.append((time.perf_counter() - t) * 1000)
        sched.close()
    return len(progs) / wall, [r.latency_ms for r in results], statistics.median(short)


def run_per_task(progs: list[str], concurrency: int) -> tuple[float, list[float]]:
    """(executions/s, latencies in ms) starting a fresh container per task."""
    from sandboxes.docker_backend import docker_client
    from sandboxes.spec import DEFAULT_IMAGE

    client = docker_client()

    def one(program: str) -> float:
        t = time.perf_counter()
        client.containers.run(DEFAULT_IMAGE, ["python3", "-I", "-c", program], remove=True, init=True,
                              network_mode="none", mem_limit=f"{MEMORY_MB}m", memswap_limit=f"{MEMORY_MB}m",
                              pids_limit=PIDS, labels={"rlwb.bench": "1"})
        return (time.perf_counter() - t) * 1000

    one(progs[0])  # warm-up
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        latencies = list(ex.map(one, progs))
    return len(progs) / (time.perf_counter() - t0), latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="60 pool / 12 docker-run executions (< 1 minute)")
    ap.add_argument("--tasks", type=int, default=200, help="executions per side (default 200)")
    ap.add_argument("--pool", type=int, default=4, help="warm sandboxes (default 4)")
    ap.add_argument("--concurrency", type=int, default=4, help="tasks in flight on each side (default 4)")
    args = ap.parse_args()
    n_pool, n_run = (60, 12) if args.quick else (args.tasks, args.tasks)

    pool_rate, pool_lat, short_p50 = run_pool(programs(n_pool), args.pool, args.concurrency)
    run_rate, run_lat = run_per_task(programs(n_run), args.concurrency)
    for name, rate, lat, n in (("warm pool", pool_rate, pool_lat, n_pool), ("docker run per task", run_rate, run_lat,
                                                                            n_run)):
        print(f"{name:>20}: {n} HumanEval executions, {rate:6.1f} exec/s, p50 {np.percentile(lat, 50):7.1f} ms, "
              f"p99 {np.percentile(lat, 99):7.1f} ms")
    print(f"short command (`true`) on a warm sandbox: p50 {short_p50:.1f} ms")
    print(f"ratio: {pool_rate / run_rate:.1f}")


if __name__ == "__main__":
    main()
