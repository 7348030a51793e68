"""Validation reports shipped with the built-in domains (domains/validations.json): a fresh
store shows them, a report made here replaces them, another version of a domain doesn't
get them, and the shipped file itself is of the installed domains."""

import json
from dataclasses import replace

import pytest

from backend.cli import main
from backend.store import Store
from backend.views import domains_frame, family_overview
from domains import registry
from domains import shipped_validations as sv
from domains.validation import current_validations, validate, validation_report


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A shipped file holding fresh reports of chain_sum (passes) and boxnet (fails)."""
    path = tmp_path / "validations.json"
    reports = validate(["chain_sum", "boxnet"], n_tasks=10, cross_process=False)
    built_in = {n: registry.get_domain(n) for n in ("chain_sum", "boxnet")}
    assert sv.ship(reports, built_in, path) == 2
    monkeypatch.setenv(sv.ENV, str(path))
    return path


def test_a_fresh_store_shows_the_shipped_reports(shipped, tmp_path, capsys):
    with Store(tmp_path / "fresh.db") as store:
        latest = current_validations(store)
        assert latest["chain_sum"]["passed"] is True and latest["chain_sum"]["shipped"] is True
        assert latest["boxnet"]["passed"] is False and latest["boxnet"]["reasons"]
        assert "maze" not in latest
        report = validation_report(store, "chain_sum")
        assert report["shipped"] and report["levels"] and "task_digests" not in report
        frame = domains_frame(store)
        row = frame.set_index("name").loc["chain_sum"]
        assert row["validation"] == "passed" and row["source"] == "reasoning-gym" and row["gen_ms"] > 0
        overview = family_overview(frame).set_index("family")
        assert overview.loc["arithmetic", "passed"] >= 1 and overview["domains"].sum() == len(frame)
    db = str(tmp_path / "fresh.db")
    assert main(["--db", db, "domains", "list", "--json", "--family", "arithmetic"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["chain_sum"]["validated"] is True and rows["basic_arithmetic"]["validated"] is None
    assert main(["--db", db, "domains", "show", "chain_sum", "--examples", "0"]) == 0
    assert "the report shipped with the workbench" in capsys.readouterr().out
    assert main(["--db", db, "domains", "families"]) == 0
    assert "families," in capsys.readouterr().out


def test_a_report_made_here_replaces_the_shipped_one(shipped, tmp_path):
    with Store(tmp_path / "s.db") as store:
        [mine] = validate(["boxnet"], n_tasks=10, cross_process=False)
        mine = {**mine, "passed": True, "reasons": []}  # a made-up verdict, to tell the two apart
        store.record_validation(mine)
        assert current_validations(store)["boxnet"]["passed"] is True
        assert "shipped" not in current_validations(store)["boxnet"]


def test_another_version_of_a_domain_gets_no_shipped_report(shipped, tmp_path, monkeypatch):
    chain = registry.get_domain("chain_sum")
    upgraded = replace(chain, source=chain.source.replace("reasoning-gym ", "reasoning-gym 9."))
    assert sv.shipped_report(chain) is not None and sv.shipped_report(upgraded) is None
    monkeypatch.setenv(sv.ENV, "none")
    assert sv.shipped_report(chain) is None


def test_ship_keeps_other_reports_and_writes_atomically(shipped, monkeypatch):
    before = json.loads(shipped.read_text())["reports"]
    [again] = validate(["chain_sum"], n_tasks=5, cross_process=False)
    assert sv.ship([again], {"chain_sum": registry.get_domain("chain_sum")}, shipped) == 2
    after = json.loads(shipped.read_text())["reports"]
    assert after["boxnet"] == before["boxnet"] and after["chain_sum"]["n_tasks"] == 5
    assert not list(shipped.parent.glob(".validations.*"))


def test_the_shipped_file_is_of_the_installed_domains(monkeypatch):
    """Every report in domains/validations.json names a built-in domain of the version
    installed (a package upgrade without `rlwb domains validate --all --ship` fails here)."""
    reports = json.loads(sv.SHIPPED_PATH.read_text())["reports"]
    stale = {n: r["version"] for n, r in reports.items()
             if n not in registry.registry() or r["version"] != sv.report_version(registry.get_domain(n))}
    assert not stale
    built_in = [n for n in registry.domain_names() if registry.is_built_in(n)]
    assert set(built_in) <= set(reports), f"no shipped report of {sorted(set(built_in) - set(reports))[:10]}"


@pytest.mark.slow
def test_validating_every_domain_gives_the_shipped_verdicts(docker_engine):
    """The full `rlwb domains validate --all` (about an hour on 2 cores): at least 300
    built-in domains pass, and every verdict equals the shipped one (a generator whose
    behaviour changed since the file was made fails here)."""
    names = [n for n in registry.domain_names() if registry.is_built_in(n)]
    reports = validate(names)
    passed = [r["domain"] for r in reports if r["passed"]]
    assert len(passed) >= 300, f"{len(passed)} of {len(names)} passed"
    shipped = json.loads(sv.SHIPPED_PATH.read_text())["reports"]
    changed = {r["domain"]: r["reasons"][:2] for r in reports if r["passed"] != shipped[r["domain"]]["passed"]}
    assert not changed


@pytest.mark.parametrize("content", ["{bad", "{}", "[]", '{"reports": []}', '{"reports": {"chain_sum": 5}}', None])
def test_a_broken_or_missing_shipped_file_is_a_clear_error(tmp_path, monkeypatch, capsys, content):
    path = tmp_path / "v.json"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv(sv.ENV, str(path))
    assert main(["--db", str(tmp_path / "s.db"), "domains", "list"]) == 2
    err = capsys.readouterr().err
    assert f"{sv.ENV}={path}" in err and "Traceback" not in err and "set RLWB_SHIPPED_VALIDATIONS=none" in err
