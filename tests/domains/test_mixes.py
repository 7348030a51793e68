"""Mixes (domains/mixes.py): weights, level ranges, versions, validation gate, sampling."""

import json
import random
from collections import Counter

import pytest
from scipy.stats import chisquare

from domains import mixes as M
from backend.cli import main
from trainer.config import RunConfig
from core.errors import ConfigError
from backend.store import Store


def _passing(store, *names):
    """Record a passing validation for domains (the gate reads the newest report)."""
    for n in names:
        store.record_validation({"domain": n, "passed": True, "reasons": [], "levels": []})


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "mix.db") as s:
        _passing(s, "chain_sum", "maze", "basic_arithmetic", "leg_counting")
        yield s


def test_a_mix_samples_domains_in_proportion_to_its_weights():
    weights = {"chain_sum": 5.0, "maze": 3.0, "basic_arithmetic": 1.5, "leg_counting": 0.5}
    spec = M.parse_spec({"domains": {d: {"weight": w} for d, w in weights.items()}})
    draws = M.draw(spec.as_specs(), random.Random(0), 10_000)
    counts = Counter(d for d, _ in draws)
    total = sum(weights.values())
    expected = [10_000 * weights[d] / total for d in weights]
    stat, p = chisquare([counts[d] for d in weights], expected)
    assert p > 0.001, (counts, expected, stat)  # fails for a sampler off by even ~3% of a share
    # and a clearly different sampler is rejected by the same test (the test has power)
    uniform = Counter(random.Random(1).choice(list(weights)) for _ in range(10_000))
    assert chisquare([uniform[d] for d in weights], expected)[1] < 1e-6


def test_levels_are_drawn_within_each_domains_range():
    spec = M.parse_spec({"domains": {"leg_counting": {"weight": 1, "levels": [2, 4]}, "chain_sum": {"levels": [3, 3]}}})
    draws = M.draw(spec.as_specs(), random.Random(3), 4000)
    by = {d: Counter(lvl for dd, lvl in draws if dd == d) for d in ("leg_counting", "chain_sum")}
    assert set(by["leg_counting"]) == {2, 3, 4} and set(by["chain_sum"]) == {3}
    assert M.draw(spec.as_specs(), random.Random(3), 50) == M.draw(spec.as_specs(), random.Random(3), 50)


def test_default_levels_are_the_domains_full_range_and_weight_zero_drops_a_domain():
    spec = M.parse_spec({"domains": {"leg_counting": {}, "maze": {"weight": 0}}})
    assert spec.as_specs() == {"leg_counting": (1.0, 1, 5)}


@pytest.mark.parametrize("domains, field, words", [
    ({"chain_sum": {"weight": -1}}, "domains.chain_sum.weight", ">= 0"),
    ({"chain_sum": {"weight": 0}, "maze": {"weight": 0}}, "mix", "sum to 0"),
    ({"chainsum": {}}, "domains.chainsum", "unknown domain 'chainsum'"),
    ({"chain_sum": {"levels": [1, 4]}}, "domains.chain_sum.levels", "within 1-3"),
    ({"chain_sum": {"levels": [3, 1]}}, "domains.chain_sum.levels", "within 1-3, got 3-1"),
    ({"chain_sum": {"levels": [0, 2]}}, "domains.chain_sum.levels", "within 1-3"),
    ({"chain_sum": {"weight": float("inf")}}, "domains.chain_sum.weight", ""),
    ({"chain_sum": {"weight": 1e308}, "maze": {"weight": 1e308}}, "mix", "too large"),
    ({"chain_sum": {"weight": "heavy"}}, "domains.chain_sum.weight", ""),
    ({}, "domains", "empty"),
])
def test_bad_mixes_name_the_field_and_save_nothing(store, domains, field, words):
    with pytest.raises(ConfigError) as err:
        M.save_mix(store, "bad", {"domains": domains})
    assert f"'{field}'" in str(err.value) and words in str(err.value)
    assert store.list_mixes() == []


def test_a_domain_that_failed_validation_cannot_join_a_mix(store):
    store.record_validation({"domain": "maze", "passed": False, "reasons": ["level 2: 1 of 5 wrong answers passed"],
                             "levels": []})
    with pytest.raises(ConfigError, match="maze can't join a mix: failed validation: level 2: 1 of 5 wrong"):
        M.save_mix(store, "m", {"domains": {"chain_sum": {}, "maze": {}}})
    assert store.list_mixes() == []
    # never-validated domains are validated on the spot (and their report stored)
    version = M.save_mix(store, "m", {"domains": {"chain_sum": {}, "letter_counting": {"weight": 2}}})
    assert version == 1 and store.latest_validations()["letter_counting"]["passed"] is True


def test_versions_are_immutable_and_a_run_pins_the_version_it_used(store):
    assert M.save_mix(store, "arith", {"domains": {"chain_sum": {"weight": 2, "levels": [1, 2]}}}) == 1
    assert M.save_mix(store, "arith", {"domains": {"chain_sum": {}, "maze": {"weight": 3}}}, note="more") == 2
    assert [v["version"] for v in store.mix_versions("arith")] == [1, 2]
    assert store.get_mix("arith", 1)["spec"]["domains"] == {"chain_sum": {"weight": 2.0, "levels": [1, 2]}}

    cfg = M.resolve_mix(RunConfig(mix="arith@1"), store)
    assert cfg.mix_spec == {"name": "arith", "version": 1, "domains": {"chain_sum": {"weight": 2.0, "levels": [1, 2]}}}
    assert cfg.domain_specs() == {"chain_sum": (2.0, 1, 2)} and cfg.domain_list == ["chain_sum"]
    newest = M.resolve_mix(RunConfig(mix="arith"), store)
    assert newest.mix_spec["version"] == 2 and set(newest.domain_list) == {"chain_sum", "maze"}
    # a stored run config round-trips with its pin
    again = RunConfig.model_validate(json.loads(json.dumps(cfg.model_dump(mode="json"))))
    assert again.domain_specs() == cfg.domain_specs()


def test_resolving_unknown_mixes_and_versions_fails_clearly(store):
    with pytest.raises(ConfigError, match="no mix named 'nope'"):
        M.resolve_mix(RunConfig(mix="nope"), store)
    M.save_mix(store, "a", {"domains": {"chain_sum": {}}})
    with pytest.raises(ConfigError, match="mix 'a' has no version 7"):
        M.resolve_mix(RunConfig(mix="a@7"), store)
    for ref in ("a@x", "a@", "a@0", "a@99999999999999999999", "a@\u00b2"):
        with pytest.raises(ConfigError, match="field 'mix'.*version after '@'"):
            M.resolve_mix(RunConfig(mix=ref), store)
    # a hand-written pin can't smuggle in weights or levels the stored mix doesn't have
    forged = {"name": "a", "version": 1, "domains": {"chain_sum": {"weight": 1.0, "levels": [7, 9]}}}
    with pytest.raises(ConfigError, match="field 'mix_spec': does not match"):
        M.resolve_mix(RunConfig(mix="a", mix_spec=forged), store)
    with pytest.raises(ConfigError, match="field 'mix'"):
        M.resolve_mix(RunConfig(mix="nope", mix_spec={**forged, "name": "nope"}), store)
    with pytest.raises(Exception, match="difficulty does not apply to a mix"):
        RunConfig(mix="a", difficulty=2)
    with pytest.raises(ConfigError, match="not resolved"):
        RunConfig(mix="a").domain_specs()
    with pytest.raises(Exception, match="either mix"):
        RunConfig(mix="a", domains=["chain_sum"])


def test_concurrent_saves_get_distinct_versions(tmp_path):
    import threading

    db = tmp_path / "race.db"
    with Store(db) as s:
        _passing(s, "chain_sum")
    barrier, versions, errors = threading.Barrier(6), [], []

    def save(i):
        with Store(db) as s:  # one connection per writer, as separate processes have
            barrier.wait()
            try:
                versions.append(M.save_mix(s, "race", {"domains": {"chain_sum": {"weight": i + 1}}}))
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == [] and sorted(versions) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("name", ["", "has space", "-dash", "x" * 65, "a/b", "a@1", "nl\n", "caf\u00e9"])
def test_bad_mix_names_are_refused(store, name):
    with pytest.raises(ConfigError, match="mix name"):
        M.save_mix(store, name, {"domains": {"chain_sum": {}}})


def test_cli_create_update_show_and_bad_input(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    with Store(db) as s:
        _passing(s, "chain_sum", "maze")
    assert main(["--db", db, "mix", "create", "m", "chain_sum:2:1-2", "maze"]) == 0
    assert main(["--db", db, "mix", "update", "m", "maze:3:2-3", "--note", "harder maze"]) == 0
    assert main(["--db", db, "mix", "update", "m", "--remove", "chain_sum"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "mix", "show", "m@2", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["version"] == 2 and row["spec"]["domains"]["maze"] == {"weight": 3.0, "levels": [2, 3]}
    assert row["spec"]["domains"]["chain_sum"] == {"weight": 2.0, "levels": [1, 2]}
    for argv, words in [
        (["mix", "create", "m", "chain_sum"], "exists"),
        (["mix", "create", "n", "chain_sum:-2"], "'domains.chain_sum.weight'"),
        (["mix", "create", "n", "chain_sum:0"], "sum to 0"),
        (["mix", "create", "n", "chain_sum:x"], "not a number"),
        (["mix", "create", "n", "chain_sum:1:5"], "within 1-3"),
        (["mix", "create", "n", "nope:1"], "unknown domain"),
        (["mix", "update", "m", "--remove", "chain_sum"], "not in mix"),
        (["mix", "update", "m"], "nothing to change"),
        (["mix", "create", "n", "maze:1", "maze:5"], "listed twice"),
        (["mix", "show", "m@99999999999999999999"], "version after '@'"),
    ]:
        assert main(["--db", db, *argv]) == 2, argv
        assert words in capsys.readouterr().err, argv
    with Store(db) as s:
        assert [m["name"] for m in s.list_mixes()] == ["m"] and len(s.mix_versions("m")) == 3


def test_the_example_mix_config_loads_and_resolves_after_its_mix_create_line(tmp_path):
    from pathlib import Path

    from trainer.config import load_config

    path = Path(__file__).resolve().parents[2] / "configs" / "mix_curriculum.yaml"
    create = next(line for line in path.read_text().splitlines() if "rlwb mix create" in line)
    db = str(tmp_path / "example.db")
    with Store(db) as s:
        _passing(s, "chain_sum", "basic_arithmetic", "leg_counting", "count_bits")
    assert main(["--db", db, *create.split("rlwb ", 1)[1].split()]) == 0
    cfg = load_config(path)
    with Store(db) as s:
        pinned = M.resolve_mix(cfg, s)
    assert pinned.curriculum and pinned.mix_spec["name"] == "arith-mix" and pinned.mix_spec["version"] == 1
    assert pinned.domain_specs()["chain_sum"] == (2.0, 1, 3)
