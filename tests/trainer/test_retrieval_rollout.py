"""Retrieval domains in the RL loop: the prompt carries the assembled context, each sample
keeps the retrieval record, the store round-trips it; the needle sweep and its CLI."""

import json

import pytest

from core.errors import ConfigError
from domains.long_docs.domain import Needle, needle_task
from backend.store import Store
from trainer.context_length import SweepConfig, run_sweep
from trainer.scoring import rollout
from trainer.rollout import open_engine


def test_rollout_records_retrieved_fragments_and_the_store_keeps_them(tiny_model_dir, tokenizer, tmp_path):
    task = needle_task(2, 4000, [Needle("olive safe", "60417", 30)])
    with open_engine("hf", tiny_model_dir, seed=0) as engine:
        engine.window = 2048  # the prompt is over the tiny model's 1024 positions (RoPE runs on regardless)
        samples = rollout(engine, tokenizer, [task], group_size=2, max_new_tokens=4, temperature=1.0, top_p=1.0)
    assert len(samples) == 2
    for s in samples:
        assert "The secret code for the olive safe is 60417." in s.prompt
        assert len(s.prompt_ids) <= 1536 + 200  # budget plus question, template and instruction
        assert s.retrieval["evidence_in_context"] is True and s.retrieval["fragments"]
    with Store(tmp_path / "r.db") as store:
        run_id = store.create_run("r", {}, 1)
        store.record_trajectories(run_id, 0, samples)
        row = store.trajectories(run_id)[0]
        got = store.trajectory(row["id"])
    assert got["retrieval"]["fragments"] == samples[0].retrieval["fragments"]
    assert got["retrieval"]["context_tokens"] == samples[0].retrieval["context_tokens"]


def test_needle_sweep_evidence_and_model_answers(tiny_model_dir, tokenizer):
    cfg = SweepConfig(lengths=[2_000, 8_000], depths=[0, 50, 100], haystacks=1, model_needles=1, window_tokens=1024,
                      max_new_tokens=4)
    with open_engine("hf", tiny_model_dir, seed=0) as engine:
        result = run_sweep(tokenizer, cfg, engine=engine, model_path=tiny_model_dir)
    cells = {(c["length"], c["depth"], c["mode"]): c for c in result["cells"]}
    assert len(cells) == 2 * 3 * 2
    assert all(cells[(n, d, "retrieval")]["evidence_rate"] == 1.0 for n in (2_000, 8_000) for d in (0, 50, 100))
    # an 8k-token haystack in a 1k window: the needle at the end is cut off, the one at the start is kept
    assert cells[(8_000, 0, "full")]["evidence_rate"] == 1.0 and cells[(8_000, 100, "full")]["evidence_rate"] == 0.0
    assert all(c["answered"] == 1 and c["accuracy"] in (0.0, 1.0) for c in cells.values())
    json.dumps(result)  # storable


def test_sweep_config_rejects_bad_values():
    from core.errors import ConfigError

    for bad in ({"lengths": []}, {"lengths": [10]}, {"depths": [101]}, {"depths": [5, 5]}, {"haystacks": 0},
                {"haystacks": 1, "model_needles": 2}, {"lengths": [4000, 4000]}, {"window_tokens": -100},
                {"window_tokens": 100}):
        with pytest.raises(ConfigError):
            SweepConfig(**bad)


def test_cli_context_length_bad_arguments(capsys):
    from backend.cli import main

    for argv, msg in ((["--lengths", "4q"], "not a token count"), (["--depths", "150"], "not a depth"),
                      (["--haystacks", "0"], "positive")):
        with pytest.raises(SystemExit) as exc:
            main(["eval", "context-length", "smollm2-135m", *argv])
        assert exc.value.code == 2 and msg in capsys.readouterr().err


def test_cli_context_length_evidence_only_stores_a_sweep(tiny_model_dir, tmp_path, capsys):
    from backend.cli import main

    db = tmp_path / "s.db"
    code = main(["--db", str(db), "eval", "context-length", str(tiny_model_dir), "--lengths", "2k",
                 "--depths", "0,100", "--haystacks", "1", "--evidence-only"])
    out = capsys.readouterr().out
    assert code == 0 and "lowest retrieval evidence rate over cells: 1.00" in out
    with Store(db) as store:
        [sweep] = store.context_sweeps()
    assert sweep["model"] == str(tiny_model_dir) and len(sweep["result"]["cells"]) == 4


def test_cli_retrieval_index_and_search(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from backend.cli import main

    monkeypatch.setenv("RLWB_CACHE", str(tmp_path / "cache"))
    doc = tmp_path / "notes.txt"
    doc.write_text("Weather notes. " * 50 + "The secret code for the teal gate is 31337. " + "More notes. " * 50)
    assert main(["retrieval", "index", "notes", str(doc), "--model", str(tiny_model_dir)]) == 0
    from retrieval.embeddings import embedding_dtype, model_name

    out = capsys.readouterr().out
    assert "1 document(s)" in out and f"embedded with {model_name(dtype=embedding_dtype()[0])}," in out
    assert main(["retrieval", "search", "notes", "What is the secret code for the teal gate?", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert "31337" in record["text"] and record["context_tokens"] <= 1536
    for sub in ("a", "b"):  # two files of one name are two documents
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "report.txt").write_text(f"Report {sub}: the revenue of unit {sub} grew. " * 20)
    assert main(["retrieval", "index", "two", str(tmp_path / "a" / "report.txt"), str(tmp_path / "b" / "report.txt"),
                 "--model", str(tiny_model_dir)]) == 0
    assert "2 document(s)" in capsys.readouterr().out
    (tmp_path / "bin").write_bytes(b"\x00\x01\x02")
    assert main(["retrieval", "index", "bad", str(tmp_path / "bin"), "--model", str(tiny_model_dir)]) == 2
    assert "binary" in capsys.readouterr().err
    assert not (tmp_path / "cache" / "retrieval" / "bad").exists()


def test_a_grpo_run_on_a_retrieval_domain_with_vllm_and_deepspeed(tiny_model_dir, tmp_path):
    """The tiny model's window is 1024 tokens: the run's context budget is sized to it, vLLM
    gets a window that holds the retrieval prompts, and every stored trajectory keeps its
    retrieval record."""
    from trainer.config import parse_config
    from backend.runs import run_foreground

    base = {"name": "tiny-retrieval", "model": str(tiny_model_dir), "steps": 1, "domains": ["needle_haystack"],
            "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 4, "max_new_tokens": 8,
            "eval_tasks_per_domain": 0, "vllm_compile": False, "output_dir": str(tmp_path / "out")}
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(ConfigError, match="lower context_budget_tokens to at most 504"):
            run_foreground(parse_config(base), store)  # 1536 + 512 + 8 tokens > 1024
        assert store.list_runs() == []  # refused before any run row was written
        run_id = run_foreground(parse_config({**base, "context_budget_tokens": 400}), store)
        assert store.get_run(run_id)["status"] == "completed"
        rows = store.trajectories(run_id)
    assert len(rows) == 4
    for row in rows:
        rec = row["retrieval"]
        assert rec["budget_tokens"] == 400 and rec["context_tokens"] <= 400 and rec["fragments"]
        assert row["prompt_tokens"] <= 400 + 512
