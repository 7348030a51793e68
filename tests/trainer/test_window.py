"""The engine's context window (issue 21, item 1): prompt lengths per domain level in the
policy's tokens, the pre-launch refusal of prompts a model can't hold, the window raised
where the model allows it, prompts over the window at run time recorded as a "context"
fault (never sent, never trained on), and episodes that stop before the window."""

import json

import pytest

from trainer.config import parse_config
from domains.registry import get_domain
from core.errors import ConfigError
from backend.store import Store
from tests.backend.test_runs import record_checkpoint
from trainer.groups import collect_groups
from trainer.metrics import rollout_metrics
from trainer.scoring import rollout
from trainer.tiny import with_window
from trainer.window import (DEFAULT_WINDOW_TOKENS, PROMPT_SAMPLE_TASKS, prompt_lengths, prompt_token_counts,
                            run_sizes, run_window)

# with the tiny model's ~1000-token vocabulary: level 1 prompts fit its 1024 positions, level 2's don't
LONG = "rotate_matrix"


def _cfg(model, domains, difficulty=1, **kw):
    return parse_config({"name": "window", "model": str(model), "domains": domains, "difficulty": difficulty,
                         "steps": 1, "prompts_per_step": 2, "group_size": 2, **kw})


def test_prompt_lengths_are_measured_in_the_policys_tokens(tokenizer):
    q = prompt_lengths(tokenizer, "chain_sum", 1)
    counts = prompt_token_counts(tokenizer, "chain_sum", 1)
    assert q["n"] == len(counts) == PROMPT_SAMPLE_TASKS and q["min"] <= q["p50"] <= q["p90"] <= q["max"] == max(counts)
    task = get_domain("chain_sum").make_task(0, 1)
    text = tokenizer.apply_chat_template([{"role": "system", "content": "x"}], tokenize=False)
    assert q["min"] > len(tokenizer(task.question)["input_ids"]) > 0 and text  # template + instruction counted
    assert prompt_lengths(tokenizer, LONG, 2)["max"] > prompt_lengths(tokenizer, LONG, 1)["max"]


def test_a_launch_whose_prompts_cant_fit_is_refused_before_a_run_row_exists(tiny_model_dir, tmp_path):
    from backend.runs import launch

    cfg = _cfg(tiny_model_dir, [LONG, "chain_sum"], difficulty=2)
    longest = prompt_lengths(__import__("transformers").AutoTokenizer.from_pretrained(tiny_model_dir), LONG, 2)["max"]
    with Store(tmp_path / "t.db") as store:
        with pytest.raises(ConfigError) as e:
            launch(cfg, store)
        assert store.list_runs() == []
    msg = str(e.value)
    assert f"{LONG} level 2" in msg and "window of 1024 tokens" in msg and f"up to {int(longest)} tokens" in msg
    assert "field 'domains'" in msg and f"leave {LONG} out of the mix" in msg


def test_the_cli_refuses_the_run_and_names_the_domain_level(tiny_model_dir, tmp_path, capsys):
    from backend.cli import main

    config = tmp_path / "long.yaml"
    config.write_text(f"name: long\nmodel: {tiny_model_dir}\ndomains: [{LONG}]\ndifficulty: 2\nsteps: 1\n")
    db = tmp_path / "t.db"
    assert main(["--db", str(db), "run", str(config)]) == 2
    assert f"{LONG} level 2 needs" in capsys.readouterr().err
    with Store(db) as store:
        assert store.list_runs() == []


def test_the_window_is_raised_where_the_model_allows_it(tiny_model_dir, tokenizer, tmp_path):
    wide = with_window(tiny_model_dir, tmp_path / "tiny-8192", 8192)
    short = run_window(_cfg(wide, ["chain_sum"]), wide, tokenizer)
    assert short == DEFAULT_WINDOW_TOKENS  # prompts that fit keep the window runs always had
    cfg = _cfg(wide, [LONG], difficulty=2, max_new_tokens=64)
    window = run_window(cfg, wide, tokenizer)
    longest = max(prompt_token_counts(tokenizer, LONG, 2))
    assert longest + 64 <= window <= 8192 and window > DEFAULT_WINDOW_TOKENS and window % 256 == 0


def test_the_kv_cache_is_sized_to_the_runs_sequences_not_its_window(tiny_model_dir, tokenizer):
    from trainer.loop import engine_options
    from trainer.rollout.base import KV_FLOOR_TOKENS

    small = _cfg(tiny_model_dir, ["chain_sum"], max_new_tokens=32, eval_max_new_tokens=32)
    window, sequence = run_sizes(small, tiny_model_dir, tokenizer)
    longest = max(prompt_token_counts(tokenizer, "chain_sum", 1)) + 32
    assert longest <= sequence < window == DEFAULT_WINDOW_TOKENS and sequence % 32 == 0
    assert engine_options(small, tiny_model_dir, tokenizer)["kv_cache_tokens"] == KV_FLOOR_TOKENS  # 4 sequences
    big = _cfg(tiny_model_dir, ["chain_sum"], max_new_tokens=32, eval_max_new_tokens=32, prompts_per_step=16,
               group_size=8)
    tokens = engine_options(big, tiny_model_dir, tokenizer)["kv_cache_tokens"]
    assert tokens == 128 * sequence < 128 * window  # a step's sequences at their length, not the window's


def test_episode_budget_over_the_model_window_is_refused(tiny_model_dir, tokenizer):
    cfg = _cfg(tiny_model_dir, ["tool_calc"], max_episode_tokens=4096)
    with pytest.raises(ConfigError, match="field 'max_episode_tokens'.*tool_calc level 1.*4096"):
        run_window(cfg, tiny_model_dir, tokenizer)


def test_a_prompt_over_the_engines_window_is_a_context_fault_not_a_crash(tiny_model_dir, tokenizer):
    from trainer.rollout import open_engine

    engine = open_engine("hf", tiny_model_dir, seed=0)
    try:
        short, long_ = get_domain("chain_sum").make_task(1, 1), get_domain(LONG).make_task(1, 2)
        engine.window = 400  # the long prompt can't fit, the short one with 16 new tokens can
        samples = rollout(engine, tokenizer, [short, long_], 2, 16, temperature=1.0, top_p=1.0)
    finally:
        engine.close()
    ok, over = samples[:2], samples[2:]
    assert all(s.fault is None and s.completion.token_ids for s in ok)
    assert all(s.fault == "context" and s.completion.token_ids == [] for s in over)
    assert "exceed the engine's window of 400 tokens" in over[0].breakdown["truncated"]
    assert len(over[0].prompt_ids) > 400
    m = rollout_metrics(samples)
    assert m["context/over_window"] == 2 and m["sandbox/harness_faults"] == 0
    cfg = _cfg(tiny_model_dir, ["chain_sum"], group_size=2, prompts_per_step=2)
    got = collect_groups(cfg, __import__("random").Random(0), lambda tasks: samples)
    assert got.batch == ok  # nothing of the faulted group reaches the learner


def test_an_episode_stops_cleanly_before_the_engines_window(tokenizer):
    from trainer.episodes import rollout_episodes

    from tests.trainer.test_episodes import ScriptedEngine

    task = get_domain("tool_sql").make_task(5, 2)

    def play(window):
        engine = ScriptedEngine(tokenizer, [["<tool_call>{oops</tool_call> " * 40] * 4])
        engine.window = window
        [s] = rollout_episodes(engine, tokenizer, [task], 1, None, max_turns=4, max_new_tokens=300,
                               max_episode_tokens=4096, temperature=1.0, top_p=1.0, command_timeout_s=5.0)
        return engine, s

    _, free = play(None)
    used = len(free.prompt_ids) + len(free.completion.token_ids)
    engine, s = play(used - 50)  # the same episode no longer fits: it must end before the window
    assert len(free.turns) > 1 and free.breakdown.get("truncated") != s.breakdown["truncated"]
    assert all(len(c) < engine.window for call in engine.contexts for c in call)
    assert len(s.prompt_ids) + len(s.completion.token_ids) <= engine.window
    assert s.completion.finish_reason == "length" and s.breakdown["truncated"].startswith("context window")
    assert s.fault is None


def test_domains_show_json_reports_each_levels_prompt_tokens(tiny_model_dir, tmp_path, capsys):
    from backend.cli import main

    assert main(["--db", str(tmp_path / "t.db"), "domains", "show", "chain_sum", "--json",
                 "--model", str(tiny_model_dir)]) == 0
    out = json.loads(capsys.readouterr().out)
    levels = out["prompt_tokens"]
    assert set(levels) == {"model", "1", "2", "3"} and levels["model"] == str(tiny_model_dir)
    assert all(levels[k]["p50"] <= levels[k]["max"] for k in ("1", "2", "3"))
    assert levels["3"]["p50"] > levels["1"]["p50"]  # longer chains, longer prompts


def test_prompts_over_the_window_are_not_counted_as_truncated_completions():
    # A prompt never sent has no completion to cut: truncated_frac (completions that hit
    # max_new_tokens) is over the generated samples; context/over_window counts the others.
    from trainer.types import Completion, Sample

    def sample(i, finish, fault=None):
        ids = [] if fault else [5, 6]
        return Sample("chain_sum", 1, i // 2, i % 2, "p", [1, 2], Completion(ids, [-0.1] * len(ids), "x", finish),
                      reward=0.0, breakdown={"correct": 0.0, "format": 0.0}, fault=fault)

    samples = [sample(0, "stop"), sample(1, "length"), sample(2, "length", "context"), sample(3, "length", "context")]
    m = rollout_metrics(samples)
    assert m["context/over_window"] == 2 and m["truncated_frac"] == 0.5
    assert rollout_metrics(samples[2:])["truncated_frac"] == 0.0


def test_the_refusal_names_a_range_of_levels_that_fits_and_how_to_pin_it(tiny_model_dir, tokenizer, monkeypatch):
    # Prompt lengths need not grow with the level (rotate_matrix's level 4 is shorter than its
    # level 3 here): levels 1 and 3 fit, 2 doesn't, so "levels 1-3" would name one that can't.
    # A curriculum over `domains` climbs to the hardest level: only a mix can pin the range.
    from trainer.window import Need

    needs = [Need(LONG, 1, 500, 436, "p"), Need(LONG, 2, 5000, 4936, "p"), Need(LONG, 3, 900, 836, "p"),
             Need(LONG, 4, 3000, 2936, "p")]
    monkeypatch.setattr("trainer.window.level_needs", lambda *a: needs)
    with pytest.raises(ConfigError) as e:
        run_window(_cfg(tiny_model_dir, [LONG]), tiny_model_dir, tokenizer)
    assert f"keep {LONG} at levels 1-1," in str(e.value) and "mix create" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        run_window(_cfg(tiny_model_dir, [LONG], curriculum=True), tiny_model_dir, tokenizer)
    assert f"`rlwb mix create NAME {LONG}:1:1-1`" in str(e.value) and "curriculum: false" in str(e.value)


def test_a_resume_whose_prompts_no_longer_fit_is_refused_before_the_run_is_claimed(tiny_model_dir, tmp_path):
    from backend.runs import resume

    cfg = _cfg(tiny_model_dir, [LONG], difficulty=2, micro_batch_size=4)
    with Store(tmp_path / "t.db") as store:
        rid = store.create_run("x", cfg.model_dump(mode="json"), total_steps=3)
        record_checkpoint(store, rid, tmp_path, 1)
        store.set_status(rid, "failed")
        with pytest.raises(ConfigError, match=f"{LONG} level 2 needs"):
            resume(store, rid, background=False)
        assert store.get_run(rid)["status"] == "failed"  # not claimed, nothing removed
        assert [c["step"] for c in store.checkpoints(rid)] == [1]
