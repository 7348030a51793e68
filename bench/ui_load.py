"""Page load at scale: the Trajectories list and a run's plots on stores of 10k, 100k, 1M turns.

    python bench/ui_load.py            # 10k, 100k and 1M turns (first build of 1M: a few minutes)
    python bench/ui_load.py --quick    # 10k and 100k turns, fewer repeats: < 1 minute once built
    python bench/ui_load.py --turns 10000 1000000 --repeats 7 --rebuild

Builds synthetic stores through the real `Store` (its schema, search index and triggers,
`record_trajectories` and `record_metrics`): one run of multi-turn episodes, 4 turns each
(model text with a bash block, command, ~400 characters of output), the completion holding
the whole transcript (~2 KB), groups of 8; plus the run's metrics for 1000 steps x 40
names. Built stores are kept under ``--cache-dir`` (a temp dir) and reused.

Then times, as the median of ``--repeats`` runs after a warm-up run, with the page caches
cleared:

* list: the Trajectories page's loaders (scope, count, the 500-row table, the selected
  trajectory and its group) with the default filters, a domain + reward filter, and a
  full-text search for a rare and for a common word; and the whole page in
  ``streamlit.testing.v1.AppTest`` (script run, widgets, table serialised) for each.
* plots: the Runs page's loaders (`views.metrics_frame`, `metric_panels`,
  `domain_panels`) with every Plotly figure built and serialised, and the whole Runs page
  in AppTest (reported as failed, with the error, if that page doesn't run).

Prints one table (seconds) and, as its last line, ``ratio: X.XX`` = the Trajectories page
(AppTest, default filters) at the largest size / at the smallest. The goal is at most 1 s
per render at 1M turns. A benchmark, not a test: numbers depend on the machine and on what
else runs on it. Not covered: the browser's own rendering time, and concurrent writers.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.workload import WORDS, prose  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MAIN = str(ROOT / "app" / "main.py")
TURNS_PER_EPISODE, GROUP, GROUPS_PER_STEP, METRIC_STEPS = 4, 8, 32, 1000
DOMAINS = ("terminal_files", "terminal_logs", "terminal_git", "terminal_text")
RARE, COMMON = "zanzibar", "error"  # RARE in ~1 of 1000 episodes' outputs, COMMON in most


def _pools(seed: int = 0) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {"prompt": [prose(rng, 100) for _ in range(500)], "think": [prose(rng, 30) for _ in range(1000)],
            "command": [f"{rng.choice(WORDS)} -n {rng.randint(1, 99)} {prose(rng, 3).strip()}.txt"
                        for _ in range(500)],
            "stdout": [prose(rng, 60) for _ in range(1000)]}


def _episode(rng: random.Random, pools: dict, domain: str, step: int, group: int, index: int):
    """One 4-turn terminal episode as a `Sample` (3 commands, then DONE)."""
    from trainer.types import Completion, Sample

    turns, transcript = [], []
    for t in range(1, TURNS_PER_EPISODE):
        cmd, out = rng.choice(pools["command"]), rng.choice(pools["stdout"])
        if rng.random() < 0.001:
            out += f" {RARE}"
        text = f"{rng.choice(pools['think'])}\n```bash\n{cmd}\n```"
        turns.append({"turn": t, "action": "command", "text": text, "command": cmd, "stdout": out, "stderr": "",
                      "exit_code": int(rng.random() < 0.2), "duration_ms": round(rng.uniform(5, 200), 1),
                      "timed_out": False, "oom_killed": False, "outcome": "ok"})
        transcript += [text, f"<observation>\n{out}\n</observation>"]
    turns.append({"turn": TURNS_PER_EPISODE, "action": "done", "text": "DONE"})
    transcript.append("DONE")
    reward = float(rng.random() < 0.4)
    completion = "\n".join(transcript)
    return Sample(domain=domain, task_seed=step * 1000 + group, group=group, index=index,
                  prompt=rng.choice(pools["prompt"]), prompt_ids=[0] * 180,
                  completion=Completion([0] * 500, [], completion, "stop" if rng.random() < 0.8 else "length"),
                  reward=reward, breakdown={"correct": reward, "turns": TURNS_PER_EPISODE},
                  advantage=reward - 0.4, answer="ok", turns=turns, difficulty=rng.randint(1, 3))


METRIC_NAMES = (["reward/mean", "accuracy/mean", "kl", "response_length", "zero_variance/groups",
                 "rollout_tokens_per_s", "learner_tokens_per_s", "sandbox/latency_p50_ms", "sandbox/latency_p99_ms",
                 "turns/mean", "entropy", "loss", "grad_norm", "lr", "clip_frac", "time/rollout_s", "time/learner_s",
                 "time/step_s", "tokens/prompt", "tokens/completion"]
                + [f"{kind}/{d}" for kind in ("reward", "accuracy", "response_length", "format", "turns")
                   for d in DOMAINS])


def build(path: Path, turns: int) -> str:
    """A store at `path` with `turns` turns of episodes and 1000 steps of metrics; the run id."""
    from backend.store import Store

    rng, pools = random.Random(turns), _pools()
    episodes = turns // TURNS_PER_EPISODE
    per_step = GROUP * GROUPS_PER_STEP
    with Store(path) as store:
        rid = store.create_run("ui-load", {"turns": turns}, total_steps=METRIC_STEPS)
        for step in range(1, METRIC_STEPS + 1):
            store.record_metrics(rid, step, {n: rng.random() for n in METRIC_NAMES})
        done, step = 0, 0
        while done < episodes:
            step += 1
            n = min(per_step, episodes - done)
            store.record_trajectories(rid, step, [
                _episode(rng, pools, DOMAINS[(i // GROUP) % len(DOMAINS)], step, i // GROUP, i % GROUP)
                for i in range(n)])
            done += n
        store.set_status(rid, "completed")  # marks the cached store as complete
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return rid


def cached_store(cache: Path, turns: int, rebuild: bool) -> tuple[Path, str, float | None]:
    """(path, run id, build seconds or None if reused) of the store with `turns` turns."""
    from backend.store import Store

    path = cache / f"turns{turns}-v{Store.SCHEMA_VERSION}.db"
    if path.exists() and not rebuild:
        with Store(path) as store:
            runs = store.list_runs()
        if runs and runs[0]["status"] == "completed":
            return path, runs[0]["id"], None
    for p in cache.glob(path.name + "*"):
        p.unlink()
    t0 = time.perf_counter()
    rid = build(path, turns)
    return path, rid, time.perf_counter() - t0


def median_time(fn, repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn`, after one untimed call (imports, first
    reads of the file into the OS cache)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


LIST_CASES = {"default": {}, "domain+reward": {"domain": DOMAINS[1], "reward_min": 0.5},
              f"search '{RARE}'": {"query": RARE}, f"search '{COMMON}'": {"query": COMMON}}


def list_loaders(store, rid: str, filters: dict) -> None:
    """What the Trajectories page reads on a fresh render (its caches empty)."""
    from backend import views

    store.trajectory_step_range(rid), store.trajectory_domains(rid), store.finish_reasons(rid)
    table = views.trajectories_frame(store, rid, limit=500, **filters)
    store.count_trajectories(rid, cap=100_000, **filters)
    if len(table):
        traj = store.trajectory(int(table["id"].iloc[0]))
        views.group_frame(store, traj)


def plot_loaders(store, rid: str) -> None:
    """What the Runs page reads and builds for a run's charts (the page's own figure
    functions in `app.charts`, serialised as `st.plotly_chart` does)."""
    from app.charts import facet_chart, line_chart
    from backend import views

    frame = views.metrics_frame(store, rid)
    panels, other = views.metric_panels(frame)
    charts = [*panels.items(), *views.domain_panels(frame, views.metric_domains(frame)).items()]
    for title, data in charts:
        line_chart(data, title).to_json()
    if not other.empty:
        facet_chart(other, (other["name"].nunique() + 1) // 2).to_json()


def apptest_times(db: Path, repeats: int) -> dict[str, float | str]:
    """Seconds per AppTest run of the Runs page and of the Trajectories page per list case
    (caches cleared before each run), or the error text when a page doesn't run."""
    import logging

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    # "No runtime found" each time a page defines a cached loader outside a server
    logging.getLogger("streamlit.runtime.caching.cache_data_api").disabled = True

    os.environ["RLWB_DB"] = str(db)
    out: dict[str, float | str] = {}

    def run(at):
        st.cache_data.clear()
        at.run()
        if at.exception:
            raise RuntimeError(at.exception[0].value)

    at = AppTest.from_file(MAIN, default_timeout=120)
    try:
        at.run()
        at.switch_page("screens/runs.py")
        out["runs page"] = median_time(lambda: run(at), repeats)
        if not at.get("plotly_chart"):
            raise RuntimeError("the Runs page drew no chart")
    except RuntimeError as e:
        out["runs page"] = f"failed: {e}"
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.run()
    at.switch_page("screens/trajectories.py").run()
    for case, filters in LIST_CASES.items():
        at.selectbox(key="traj_domain").select(filters.get("domain", "All domains"))
        at.slider(key="traj_reward").set_value((filters.get("reward_min", 0.0), 1.0))
        at.text_input(key="traj_search").input(filters.get("query", ""))
        try:
            out[f"list page, {case}"] = median_time(lambda: run(at), repeats)
            if not at.dataframe:
                raise RuntimeError("the Trajectories page drew no table")
        except RuntimeError as e:
            out[f"list page, {case}"] = f"failed: {e}"
    return out


def measure(db: Path, rid: str, repeats: int) -> dict[str, float | str]:
    from backend.store import Store

    out: dict[str, float | str] = {}
    with Store(db) as store:
        for case, filters in LIST_CASES.items():
            out[f"list loaders, {case}"] = median_time(lambda f=filters: list_loaders(store, rid, f), repeats)
        out["plots loaders+figures"] = median_time(lambda: plot_loaders(store, rid), repeats)
    out.update(apptest_times(db, repeats))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                    help="store sizes in trajectory turns (4 turns per episode)")
    ap.add_argument("--repeats", type=int, default=5, help="runs per measurement (the median is shown)")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "rlwb-ui-load",
                    help="where built stores are kept and reused")
    ap.add_argument("--rebuild", action="store_true", help="build the stores again")
    ap.add_argument("--quick", action="store_true", help="10k and 100k turns, 3 repeats: < 1 minute once built")
    args = ap.parse_args(argv)
    if args.quick:
        args.turns, args.repeats = [10_000, 100_000], 3
    args.cache_dir.mkdir(parents=True, exist_ok=True)

    print("load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    results = {}
    for turns in sorted(args.turns):
        db, rid, built = cached_store(args.cache_dir, turns, args.rebuild)
        size = db.stat().st_size / 2**20
        how = f"built in {built:.0f} s" if built is not None else "reused"
        print(f"{turns:>9,} turns: {db} ({size:,.0f} MiB, {how})", flush=True)
        results[turns] = measure(db, rid, args.repeats)

    sizes = sorted(results)
    print(f"\nmedian seconds of {args.repeats} renders, caches cleared (goal at 1M turns: <= 1 s)")
    print(f"{'':34s}" + "".join(f"{t:>12,}" for t in sizes))
    for name in results[sizes[0]]:
        cells = [results[t][name] for t in sizes]
        print(f"{name:34s}" + "".join(f"{c:12.3f}" if isinstance(c, float) else f"{'failed':>12s}" for c in cells))
    for name, value in results[sizes[-1]].items():
        if isinstance(value, str):
            print(f"{name}: {value[:300]}")
    print("load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    key = "list page, default"
    first, last = results[sizes[0]][key], results[sizes[-1]][key]
    if not isinstance(first, float) or not isinstance(last, float):
        key = "list loaders, default"
        first, last = results[sizes[0]][key], results[sizes[-1]][key]
    print(f"ratio: {last / first:.2f}")


if __name__ == "__main__":
    main()
