"""A real background run of the tiny model on a user domain: the run pins the version it
was launched with, its own process loads exactly that version from the store (a newer one
saved meanwhile changes nothing), and its trajectories and held-out evaluation are the
domain's rows."""

from __future__ import annotations

import os
import signal

from backend.store import Store
from domains import registry
from domains.user import library
from tests.backend.test_runs import _wait


def _rows(offset: int) -> list[dict]:
    return [{"id": f"r{i}", "question": f"What is {i} plus {offset}?", "answer": str(i + offset)} for i in range(80)]


def test_a_background_run_trains_on_the_pinned_version_of_a_user_domain(tiny_model_dir, tmp_path):
    from backend.runs import launch, process_alive
    from trainer.config import parse_config

    definition = {"name": "plus_k", "columns": {"prompt": "question", "answer": "answer", "id": "id"},
                  "verifier": {"kind": "numeric"}}
    with Store(tmp_path / "wb.db") as store:
        try:
            library.add_domain(store, definition, rows=_rows(3))
            library.add_domain(store, definition, rows=_rows(5), new=False)  # version 2: "... plus 5?"
            cfg = parse_config({
                "name": "user-domain", "model": str(tiny_model_dir), "steps": 2, "domains": ["plus_k"],
                "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 2, "max_new_tokens": 8,
                "eval_tasks_per_domain": 4, "eval_max_new_tokens": 8, "vllm_compile": False,
                "output_dir": str(tmp_path / "out")})
            run_id = launch(cfg, store)
            assert store.get_run(run_id)["config"]["user_domains"] == {"plus_k": 2}
            library.add_domain(store, definition, rows=_rows(9), new=False)  # version 3, after the launch
            try:
                done = _wait(store, run_id, lambda r: r["status"] in ("completed", "failed", "stopped"), "completion")
            finally:
                pid = store.get_run(run_id)["pid"]
                if pid and pid != os.getpid() and process_alive(pid):
                    os.kill(pid, signal.SIGKILL)
            assert done["status"] == "completed", done["error"]
            rows = store.trajectories(run_id, limit=100)
            assert len(rows) == 2 * 2 * 2 and {r["domain"] for r in rows} == {"plus_k"}
            assert all(r["prompt"] and "plus 5?" in r["prompt"] for r in rows), rows[0]["prompt"]  # version 2's rows
            held = [e for e in store.list_evals(run_id=run_id, in_run=True)]
            assert held, "the run's held-out evaluation is missing"
            samples = store.eval_samples(held[0]["id"])
            assert samples and {s["domain"] for s in samples} == {"plus_k"}
            d2 = library.load_user_domain(store, "plus_k", 2)
            held_ids = {d2.rows[i].id for i in d2.sides[(1, True)]}
            assert {d2.make_task(s["task_seed"], s["level"]).entry["id"] for s in samples} <= held_ids
        finally:
            registry.unregister("plus_k")
