"""Tests of backend.views: the frames the pages draw."""

from datetime import datetime, timezone

import pytest

from backend import views
from backend.store import Store


@pytest.fixture
def store():
    with Store(":memory:") as s:
        yield s


def test_format_and_run_duration():
    assert [views.format_duration(s) for s in (None, 42, 185, 7860)] == ["", "42s", "3m 05s", "2h 11m"]
    run = {"started_at": "2025-01-01T00:00:00.000+00:00", "finished_at": None}
    now = datetime(2025, 1, 1, 0, 1, 30, tzinfo=timezone.utc)
    assert views.run_duration(run, now=now) == 90
    assert views.run_duration({"started_at": None}) is None


def test_runs_table(store):
    assert list(views.runs_table(store).columns) == ["id", "name", "status", "progress", "created", "duration"]
    rid = store.create_run("demo", {}, 10)
    store.heartbeat(rid, step=3)
    row = views.runs_table(store).iloc[0]
    assert (row["id"], row["progress"], row["duration"]) == (rid, "3/10", "")


def test_metric_panels_split_known_and_other(store):
    rid = store.create_run("demo", {}, 2)
    for step in (1, 2):
        store.record_metrics(rid, step, {"reward/mean": 0.1, "reward/chain_sum": 0.2, "kl": 0.0,
                                         "rollout_tokens_per_s": 9.0, "loss": 1.0})
    panels, other = views.metric_panels(views.metrics_frame(store, rid))
    assert list(panels) == ["Reward and pass rate (mean)", "KL to reference", "Throughput (tokens/s)"]
    assert panels["Reward and pass rate (mean)"]["name"].unique().tolist() == ["reward/mean"]
    assert other["name"].unique().tolist() == ["loss"]  # reward/chain_sum is in the per-domain charts
    panels, other = views.metric_panels(views.metrics_frame(store, store.create_run("e", {}, 1)))
    assert panels == {} and other.empty


def test_evaluation_table_orders_phases(store):
    rid = store.create_run("demo", {}, 2)
    assert views.evaluation_table(store, rid).empty
    for phase, acc in (("before", 0.1), ("step-10", 0.2), ("step-2", 0.15), ("after", 0.4)):
        store.record_evaluation(rid, phase, "chain_sum", 20, acc, acc, 1.0, "m")
    table = views.evaluation_table(store, rid)
    assert list(table.columns) == ["domain", "before", "step-2", "step-10", "after", "change", "n"]
    assert table.iloc[0]["change"] == pytest.approx(0.3)


def test_domain_panels_one_line_per_picked_domain(store):
    rid = store.create_run("demo", {}, 2)
    for step in (1, 2):
        store.record_metrics(rid, step, {
            "reward/mean": 0.1, "accuracy/mean": 0.2, "reward/chain_sum": 0.2, "reward/leg_counting": 0.3,
            "accuracy/chain_sum": 0.5, "zero_variance/chain_sum": 0.25, "zero_variance/groups": 0.25,
            "zero_variance_groups": 0.25, "zero_variance/skipped": 1.0, "curriculum/level/leg_counting": 2.0})
    frame = views.metrics_frame(store, rid)
    assert views.metric_domains(frame) == ["chain_sum", "leg_counting"]
    panels = views.domain_panels(frame, ["chain_sum", "leg_counting"])
    assert list(panels) == ["Reward", "Pass rate", "Zero-variance groups (share)", "Curriculum level"]
    assert panels["Reward"]["name"].tolist() == ["chain_sum"] * 2 + ["leg_counting"] * 2
    assert panels["Reward"]["step"].tolist() == [1, 2, 1, 2]
    assert list(views.domain_panels(frame, ["leg_counting"])) == ["Reward", "Curriculum level"]
    top, other = views.metric_panels(frame)
    assert top["Reward and pass rate (mean)"]["name"].unique().tolist() == ["reward/mean", "accuracy/mean"]
    assert "Zero-variance groups (share)" in top
    assert other["name"].unique().tolist() == ["zero_variance/skipped"]  # old zero_variance_groups hidden
    empty = views.metrics_frame(store, store.create_run("e", {}, 1))
    assert views.metric_domains(empty) == [] and views.domain_panels(empty, []) == {}


def test_tool_metrics_get_their_panels(store):
    rid = store.create_run("tools", {}, 2)
    for step in (1, 2):
        store.record_metrics(rid, step, {"tools/call_validity/mean": 0.3 * step, "tools/call_validity/tool_sql": 0.5,
                                         "tools/calls_per_episode/mean": 1.0, "tools/errors/invalid_json": 2.0,
                                         "tools/errors/timeout": 1.0})
    panels, other = views.metric_panels(views.metrics_frame(store, rid))
    validity = panels["Tool-call validity (valid calls / calls)"]
    assert validity["name"].unique().tolist() == ["tools/call_validity/mean", "tools/call_validity/tool_sql"]
    assert set(panels["Tool-call errors by code (count)"]["name"]) == {"tools/errors/invalid_json",
                                                                     "tools/errors/timeout"}
    assert "Tool calls per episode" in panels and other.empty


def test_calls_frame_lists_each_call_and_its_validity():
    traj = {"turns": [{"turn": 1, "action": "tool_call", "calls": [
        {"index": 0, "name": "sql", "arguments": {"query": "select 1"}, "error": None, "observation": "[[1]]",
         "duration_ms": 1.5},
        {"index": 1, "name": "sql", "arguments": {"q": 1}, "error": "schema_violation", "observation": "{}",
         "duration_ms": 0.0},
        {"index": 2, "name": "sql", "arguments": {"query": "x"}, "error": "sql_error", "observation": "{}",
         "duration_ms": 0.2}]}, {"turn": 2, "action": "answer", "calls": []}]}
    frame = views.calls_frame(traj)
    assert frame["valid"].tolist() == [True, False, True] and frame["error"].tolist() == ["", "schema_violation",
                                                                                          "sql_error"]
    turns = views.turns_frame(traj)
    assert turns["calls"].tolist() == ["sql, sql, sql", "(none)"]
    assert turns["errors"].tolist() == ["schema_violation, sql_error", ""]
    game = views.turns_frame({"turns": [{"turn": 1, "action": "move", "text": "go [up]", "move": "[up]",
                                          "observation": "You moved up."}]})
    assert game["move"].tolist() == ["[up]"] and game["action"].tolist() == ["move"]
    assert views.calls_frame({"turns": None}).empty


def test_trajectories_jsonl_and_completion_diff(store):
    import json

    from tests.backend.test_store import TERMINAL_TURNS, episode_samples

    rid = store.create_run("demo", {}, 2)
    for step in (1, 2):
        store.record_trajectories(rid, step, episode_samples(0) + episode_samples(1))
    lines = list(views.trajectories_jsonl(store, rid))
    assert len(lines) == 12 and all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    rows = [json.loads(line) for line in lines]
    assert rows == store.trajectories(rid)  # every field, in list order
    assert rows[0]["turns"] == TERMINAL_TURNS and rows[0]["breakdown"] == {"format": 1.0, "correct": 1.0}
    assert "café" in lines[0]  # written as UTF-8, not \u escapes
    assert len(list(views.trajectories_jsonl(store, rid, limit=5))) == 5
    assert [json.loads(x)["id"] for x in views.trajectories_jsonl(store, rid, query="quokka")] == \
        [r["id"] for r in rows if r["turns"] == TERMINAL_TURNS]

    frame = views.trajectories_frame(store, rid, finish_reason="length")
    assert list(frame.columns) == views.TRAJ_COLUMNS and list(frame["sample"]) == [2, 2, 2, 2]

    a, b = rows[0], rows[1]
    a["completion"], b["completion"] = "same\nleft only\nend", "same\nright only\nend"
    diff = views.completion_diff(a, b)
    assert diff.splitlines()[:2] == [f"--- #{a['id']} (sample 0)", f"+++ #{b['id']} (sample 1)"]
    assert "-left only" in diff and "+right only" in diff and " same" in diff
    assert views.completion_diff(a, a) == ""
    b["completion"] = "\n".join(["x"] * 5)
    assert views.completion_diff(a, b, max_lines=3).endswith("(only the first 3 lines of each completion compared)")

    odd = episode_samples(2)  # a command's output with a lone surrogate and control characters
    odd[0].turns = [{"action": "command", "command": "ls", "stdout": "bad \udcff name \x1b[31m\x00", "outcome": "ok"}]
    store.record_trajectories(rid, 3, odd)
    exported = [json.loads(line.encode("utf-8")) for line in views.trajectories_jsonl(store, rid, step_min=3)]
    assert exported[0]["turns"] == odd[0].turns  # lossless, and every line is UTF-8


def test_readable_prompt_labels_chatml_roles_and_leaves_other_text():
    chatml = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
              "<|im_start|>assistant\n")
    assert views.readable_prompt(chatml) == "[system] Be brief.\n\n[user] What is 2 + 3?\n\n[assistant]"
    assert views.readable_prompt("<|user|>What is 1 + 2?<|assistant|>") == "<|user|>What is 1 + 2?<|assistant|>"


def test_phase_timeline_merges_consecutive_steps_and_marks_the_live_phase():
    t = lambda s: f"2026-12-04T10:00:{s:02d}.000+00:00"  # noqa: E731
    phases = [{"phase": "engine start", "step": 0, "started_at": t(0), "ended_at": t(30)},
              {"phase": "step", "step": 1, "started_at": t(30), "ended_at": t(35)},
              {"phase": "step", "step": 2, "started_at": t(35), "ended_at": t(42)},
              {"phase": "checkpoint", "step": 2, "started_at": t(42), "ended_at": t(42)},
              {"phase": "evaluation", "step": 2, "started_at": t(42), "ended_at": t(50)},
              {"phase": "step", "step": 3, "started_at": t(50), "ended_at": None}]
    now = datetime.fromisoformat(t(59))
    timeline = views.phase_timeline(phases, 4, now=now)
    assert [(e["label"], e["seconds"], e["live"]) for e in timeline] == [
        ("starting the rollout engine", 30.0, False), ("steps 1-2 (1 checkpoint)", 12.0, False),
        ("held-out evaluation at step 2", 8.0, False), ("step 3", 9.0, True)]
    running = {"status": "running", "total_steps": 4}
    assert views.current_phase(running, phases) == "step 3 / 4"
    assert views.current_phase({**running, "status": "completed"}, phases) is None
    assert views.current_phase(running, []) is None
    # an evaluation is expected to take as long as the run's previous one
    from trainer.phases import expected_seconds

    final = phases[:5] + [{"phase": "final evaluation", "step": 4, "started_at": t(50), "ended_at": None}]
    assert expected_seconds(views.phase_timeline(final, 4, now=now)) == 8.0
    assert expected_seconds(timeline) is None  # a step: no estimate here (the ETA covers steps)


def test_readable_log_hides_the_known_harmless_lines_and_counts_them():
    log = ["(MainProcess pid=1) WARNING 12-04 10:00:00 [cpu.py:224] Triton is not installed. triton-cpu is expected",
           "(MainProcess pid=1) WARNING [cpu_worker.py:114] libtcmalloc is not found in LD_PRELOAD. For best",
           "(MainProcess pid=1) WARNING [cpu_worker.py:114] libiomp is not found in LD_PRELOAD. For best",
           "Traceback (most recent call last):",
           "RuntimeError: Triton kernels failed",  # a real error that mentions Triton stays
           "run r1 completed: 3 steps"]
    kept, hidden = views.readable_log(log)
    assert kept == log[3:]
    assert hidden == {"vLLM's CPU build runs without Triton": 1,
                      "vLLM suggests a library it can go without (runs preload TCMalloc where installed: "
                      "core/allocator.py)": 2}
    # a hidden Python warning's echoed source line goes with it
    warning = ["/x/dispatcher.py:138: FutureWarning: `torch.distributed.reduce_op` is deprecated, please use",
               '  if hasattr(value, "__dict__"):', "kept", "  an indented line after a kept one stays"]
    kept, hidden = views.readable_log(["ok"] + warning)
    assert kept == ["ok", *warning[2:]] and hidden == {"a library's notice to its own developers": 2}
