"""A real GRPO run of the tiny model whose mix has sandboxed domains (humaneval and a
terminal task): vLLM rollouts, rewards from Docker sandboxes, DeepSpeed updates, SQLite."""

from trainer.config import parse_config
from backend.runs import run_foreground
from backend.store import Store
from sandboxes.owners import owner_tag

STEPS = 2


def test_run_with_humaneval_and_terminal_in_the_mix(tiny_model_2k_dir, docker_engine, tmp_path):
    cfg = parse_config({  # humaneval's prompts need more than the tiny model's 1024 positions
        "name": "tiny-sandbox", "model": str(tiny_model_2k_dir), "steps": STEPS, "seed": 1,
        "domains": {"humaneval": 1.0, "terminal_count_matches": 1.0},
        "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 2, "max_new_tokens": 24,
        "max_turns": 2, "max_episode_tokens": 512, "learning_rate": 1e-3, "vllm_compile": False,
        "sandbox_pool_size": 2, "command_timeout_s": 5, "eval_tasks_per_domain": 1, "eval_max_new_tokens": 16,
        "output_dir": str(tmp_path / "out"),
    })
    with Store(tmp_path / "run.db") as store:
        run_id = run_foreground(cfg, store)
        run = store.get_run(run_id)
        assert run["status"] == "completed", run["error"]
        rows = store.trajectories(run_id, limit=100)
        assert len(rows) == STEPS * 2 * 2
        domains = {r["domain"] for r in rows}
        assert domains == {"humaneval", "terminal_count_matches"}
        for r in rows:
            assert r["fault"] is None and r["reward"] in (0.0, 1.0)
            if r["domain"] == "humaneval":  # verified by running the tests in a sandbox
                assert r["breakdown"]["error"] in (None, "syntax_error", "assertion", "timeout", "oom", "crash")
                assert "exit_code" in r["breakdown"]
            else:  # a 2-turn episode, judged by the checker in the sandbox
                assert 1 <= len(r["turns"]) <= 2 and r["breakdown"]["check"].startswith(("PASS", "FAIL"))
                assert r["completion_tokens"] > 0
        names = {m["name"] for m in store.run_metrics(run_id)}
        assert {"reward/humaneval", "reward/terminal_count_matches", "sandbox/latency_p50_ms", "kl",
                "sandbox/failures/harness", "turns/terminal_count_matches"} <= names
        execs = store.sandbox_executions(run_id=run_id)
        assert any(e["kind"] == "humaneval" for e in execs)  # one verification job per humaneval sample
        assert {e["backend"] for e in execs} == {"docker"}
        evals = store.evaluations(run_id)
        assert {(e["phase"], e["domain"]) for e in evals} == {
            (p, d) for p in ("before", "after") for d in ("humaneval", "terminal_count_matches")}
    left = [c for c in docker_engine.containers.list(all=True, filters={"label": "rlwb.sandbox"})
            if c.labels.get("rlwb.owner") == owner_tag() and "rlwb.test" not in c.labels]
    assert left == []  # the run closed its pool


def test_run_on_a_user_tool_domain(tiny_model_2k_dir, docker_engine, tmp_path):
    """A stored user domain with the user's own tools (a command and a Python function) in a
    real run: episodes in Docker sandboxes, the tools' contracts in every prompt, each
    sample scored by the domain's verifier with its call statistics."""
    from domains import registry
    from domains.user import library
    from tests.domains.test_user_tool_domain import DEFINITION, _rows

    with Store(tmp_path / "run.db") as store:
        try:
            library.add_domain(store, DEFINITION, rows=_rows())  # stored and registered: the config may name it
            cfg = parse_config({
                "name": "tiny-user-tools", "model": str(tiny_model_2k_dir), "steps": 1, "seed": 2,
                "domains": {"stock_value": 1.0}, "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 2,
                "max_new_tokens": 24, "max_turns": 2, "max_episode_tokens": 1280, "vllm_compile": False,
                "sandbox_pool_size": 2, "command_timeout_s": 5, "eval_tasks_per_domain": 2,
                "eval_max_new_tokens": 16, "output_dir": str(tmp_path / "out")})
            run_id = run_foreground(cfg, store)
            run = store.get_run(run_id)
            assert run["status"] == "completed", run["error"]
            assert run["config"]["user_domains"] == {"stock_value": 1}
            rows = store.trajectories(run_id, limit=100)
            assert len(rows) == 2 * 2 and {r["domain"] for r in rows} == {"stock_value"}
            for r in rows:
                assert r["fault"] is None and "unit_price" in r["prompt"] and "stock" in r["prompt"]
                assert 1 <= len(r["turns"]) <= 2 and "calls" in r["breakdown"], r["breakdown"]
        finally:
            registry.unregister("stock_value")
