"""Bad input: each bad config exits non-zero with one clear message naming the field, and
leaves no run behind (so none can be left marked running)."""

from pathlib import Path

import pytest

from backend.cli import main
from trainer.config import load_config
from core.errors import ConfigError
from backend.store import Store


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cfg.yaml"
    p.write_text(text)
    return p


def _run_cli(tmp_path, cfg_path, capsys) -> tuple[int, str]:
    db = tmp_path / "wb.db"
    code = main(["--db", str(db), "run", str(cfg_path)])
    err = capsys.readouterr().err.strip()
    assert Store(db).list_runs() == [], "a rejected config must not create a run"
    return code, err


@pytest.mark.parametrize(
    "body, field, hint",
    [
        ("domains: [basic_arithmetic, no_such_domain]", "domains", "list them with `rlwb domains list`"),
        ("group_size: 1", "group_size", "group_size: 8"),
        ("model: /definitely/not/a/model", "model", "/definitely/not/a/model"),
        ("steps: -3", "steps", "greater than or equal to 1"),
        ("learning_rat: 0.1", "learning_rat", "valid fields"),
        ("prompts_per_step: 3\ngroup_size: 4\nmicro_batch_size: 8", "micro_batch_size", "must divide"),
        ("max_new_tokens: 5000", "max_new_tokens", "less than or equal to 768"),
        ("seed: 99999999999999999999999", "seed", "less than or equal to"),
        ("domains: {basic_arithmetic: .inf}", "domains.basic_arithmetic", "finite"),
        ("domains: [[a, b], [c]]", "domains", "must be domain names"),
        ("output_dir: /etc/hostname/checkpoints", "output_dir", "writable"),
        ('name: "evil\\x1b[31mred"', "name", "printable"),
    ],
)
def test_bad_field_exits_nonzero_naming_the_field(tmp_path, capsys, tiny_model_dir, body, field, hint):
    cfg = _write(tmp_path, f"model: {tiny_model_dir}\n{body}\n")
    code, err = _run_cli(tmp_path, cfg, capsys)
    assert code == 2
    assert err.count("\n") == 0, f"expected one line, got: {err}"
    assert f"field '{field}'" in err and hint in err


def test_dtype_auto_is_named_on_stderr_before_anything_starts(tmp_path, capsys, tiny_model_dir, monkeypatch):
    import trainer.precision

    monkeypatch.setattr(trainer.precision, "auto_dtype", lambda lora=False: ("bfloat16", "the reason"))
    # refused after validation: the episode budget is over the tiny model's window
    cfg = _write(tmp_path, f"model: {tiny_model_dir}\ndomains: [tool_calc]\nmax_episode_tokens: 4096\ndtype: auto\n")
    code, err = _run_cli(tmp_path, cfg, capsys)
    assert code == 2
    lines = err.splitlines()  # the note, the progress bar, the problem
    assert lines[0] == "note: dtype: auto -> bfloat16: the reason"
    assert "field 'max_episode_tokens'" in lines[-1]


def test_malformed_yaml(tmp_path, capsys):
    cfg = _write(tmp_path, "name: x\ndomains: [basic_arithmetic\nsteps: 3\n")
    code, err = _run_cli(tmp_path, cfg, capsys)
    assert code == 2
    assert "malformed YAML at line" in err and err.count("\n") == 0


def test_missing_file_and_non_mapping(tmp_path, capsys):
    code, err = _run_cli(tmp_path, tmp_path / "nope.yaml", capsys)
    assert code == 2 and "not found" in err
    code, err = _run_cli(tmp_path, _write(tmp_path, "- a\n- b\n"), capsys)
    assert code == 2 and "expected a mapping" in err


@pytest.mark.parametrize("body, key", [("?\n", "None"), ("1: x\n", "1"), ("true: 1\n", "True")])
def test_a_key_that_is_no_field_name(tmp_path, capsys, body, key):
    """YAML's `?` (an empty key), a number or a boolean as a key: a config error, not a TypeError."""
    code, err = _run_cli(tmp_path, _write(tmp_path, body), capsys)
    assert code == 2 and f"field names must be text (name: value), got {key}" in err and err.count("\n") == 0


def test_model_with_broken_config_json(tmp_path, capsys):
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text("{not json")
    code, err = _run_cli(tmp_path, _write(tmp_path, f"model: {model}\n"), capsys)
    assert code == 2 and "field 'model'" in err and "config.json" in err


def test_model_without_a_chat_template(tmp_path, capsys, tiny_model_dir):
    import shutil

    model = tmp_path / "base-model"
    shutil.copytree(tiny_model_dir, model)
    templates = [p for p in model.iterdir() if p.name == "chat_template.jinja"]
    assert templates or "chat_template" in (model / "tokenizer_config.json").read_text()
    for p in templates:
        p.unlink()
    config = model / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"chat_template"', '"unused_template"'))
    code, err = _run_cli(tmp_path, _write(tmp_path, f"model: {model}\nsteps: 1\n"), capsys)
    assert code == 2 and "field 'model'" in err.splitlines()[-1] and "no chat template" in err
    db = tmp_path / "wb.db"
    assert main(["--db", str(db), "eval", str(model), "--domains", "chain_sum", "--tasks", "2"]) == 2
    assert "no chat template" in capsys.readouterr().err
    assert Store(db).list_evals() == []


def test_a_tokenizer_that_renders_chats_without_a_template_is_used_as_it_is():
    """mistral-common's tokenizer has chat_template None and renders chats itself: only a
    tokenizer that can't render one is refused."""
    from trainer.prompts import chat_text

    class Native:  # the shape of transformers' MistralCommonBackend
        chat_template = None
        name_or_path = "mistral-dir"

        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            return "".join(f"[INST]{m['content']}[/INST]" for m in messages)

    class Base(Native):
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            raise ValueError("Cannot use chat template functions because tokenizer.chat_template is not set")

    messages = [{"role": "user", "content": "2+2?"}]
    assert chat_text(Native(), messages, add_generation_prompt=True) == "[INST]2+2?[/INST]"
    with pytest.raises(ConfigError, match="field 'model': mistral-dir has no chat template"):
        chat_text(Base(), messages, add_generation_prompt=True)


def test_model_with_weights_cut_short(tmp_path, capsys, tiny_model_dir):
    import shutil

    model = tmp_path / "cut-model"
    shutil.copytree(tiny_model_dir, model)
    [weights] = model.glob("*.safetensors")
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a copy that stopped half-way
    code, err = _run_cli(tmp_path, _write(tmp_path, f"model: {model}\nsteps: 1\n"), capsys)
    assert code == 2 and "field 'model'" in err and "cut short or corrupt" in err and err.count("\n") == 0
    db = tmp_path / "wb.db"
    assert main(["--db", str(db), "eval", str(model), "--domains", "chain_sum", "--tasks", "2"]) == 2
    assert "cut short or corrupt" in capsys.readouterr().err
    assert Store(db).list_evals() == []


def test_empty_config_is_rejected(tmp_path, capsys):
    code, err = _run_cli(tmp_path, _write(tmp_path, "# nothing here\n"), capsys)
    assert code == 2 and "empty" in err


def test_list_of_domains_means_equal_weights(tiny_model_dir, tmp_path):
    cfg = load_config(_write(tmp_path, f"model: {tiny_model_dir}\ndomains: [chain_sum, spell_backward]\n"))
    assert cfg.domains == {"chain_sum": 1.0, "spell_backward": 1.0}


def test_unknown_model_name_says_how_to_fetch(tmp_path):
    with pytest.raises(ConfigError, match="field 'model'"):
        load_config(_write(tmp_path, "model: not-a-known-model\n"))


def test_runs_show_unknown_id(tmp_path, capsys):
    assert main(["--db", str(tmp_path / "wb.db"), "runs", "show", "r-nope"]) == 2
    assert "not found" in capsys.readouterr().err


def test_db_that_is_not_sqlite(tmp_path, capsys):
    junk = tmp_path / "notes.txt"
    junk.write_text("this is not a database\n" * 100)
    assert main(["--db", str(junk), "runs", "list"]) == 2
    err = capsys.readouterr().err
    assert "not a database" in err and "--db" in err and err.count("\n") == 1
    assert junk.read_text().startswith("this is not a database")  # nothing overwritten


def test_relative_paths_are_stored_absolute(tiny_model_dir, tmp_path, monkeypatch):
    """A run's checkpoints and log are found again from another directory (the page,
    `rlwb runs resume` run elsewhere) when the config named them relative to this one."""
    import os

    monkeypatch.chdir(tmp_path)
    cfg = load_config(_write(tmp_path, f"model: {os.path.relpath(tiny_model_dir, tmp_path)}\n"
                                       "domains: [chain_sum]\noutput_dir: out/runs\n"))
    assert cfg.output_dir == str(tmp_path / "out" / "runs")
    assert cfg.model == str(tiny_model_dir)


def test_the_page_server_starts_without_a_file_watcher(monkeypatch, tmp_path):
    """`rlwb ui` becomes `streamlit run` with the file watcher off (it floods the terminal
    with a traceback per transformers model module it walks)."""
    import os

    from backend import cli

    seen = {}

    def fake_execve(path, argv, env):
        seen.update(argv=argv, env=env)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execve", fake_execve)
    with pytest.raises(SystemExit):
        cli.main(["--db", str(tmp_path / "wb.db"), "ui", "--port", "8599"])
    argv = seen["argv"]
    assert argv[argv.index("--server.fileWatcherType") + 1] == "none"
    assert argv[argv.index("--server.port") + 1] == "8599"
