"""Evaluation tasks are never training tasks: seeds and, for domains that draw from a
finite set of items, the items themselves.

The training side is drawn through the real sampler (`trainer.groups.sample_tasks`, full
tasks, no shortcut); the evaluation side is what `trainer.evaluate.evaluate` builds, with
its rollout replaced by one that records the tasks. Finite-item domains: the pooled
reasoning-gym generators (acre, list_functions, word_ladder), humaneval (164 problems) and
the CAD domains (parameter grids of 1,000 to a few hundred thousand parts) and products level
1 (the times table from 2 to 12, 66 facts, about half held out by fact). Before the
split, about 40% of the training draws of acre, list_functions and word_ladder were
evaluation tasks.

Runtime: ~20 s on the 2-core machine, most of it generating the 10,000 training tasks and
splitting the word_ladder pools (each pool is generated whole once, 1-4 s per level).

Not covered: reasoning-gym's Random(seed) generators (basic_arithmetic, chain_sum, ...) are
checked for seeds only; at low levels their task spaces are small enough that a held-out
seed can still generate a question some training seed also generates.
"""

import random

import pytest

from domains.reasoning_gym import domain as rg
from domains.reasoning_gym import hand_made
from domains import registry
from domains import splits
from trainer.config import RunConfig
from core.errors import ConfigError

# domain -> highest level in the training mix (levels 1..highest, equal weights)
FINITE = {"acre": 1, "list_functions": 1, "word_ladder": 2, "humaneval": 3,
          "cad_bracket": 3, "cad_shaft": 3, "cad_table": 3, "products": 1,
          "whole_number_arithmetic": 2}
ORDINARY = {"basic_arithmetic": 3, "chain_sum": 3, "largest_number": 3}  # Random(seed) generators: seeds are checked
N_TRAIN = 10_000
N_EVAL = 200  # held-out tasks per domain and level: more than any pool's held-out side


def _mix() -> RunConfig:
    spec = {name: {"weight": 1.0, "levels": [1, top]} for name, top in {**FINITE, **ORDINARY}.items()}
    return RunConfig(mix="heldout-separation", mix_spec={"name": "heldout-separation", "version": 1,
                                                         "domains": spec})


def _evaluation_tasks(monkeypatch, domain: str, level: int, n: int) -> list:
    """The tasks `trainer.evaluate.evaluate` scores for `domain` at `level` (n per domain)."""
    import trainer.evaluate
    from trainer.evaluate import evaluate

    seen = []

    def record(engine, tokenizer, tasks, *args, **kwargs):
        seen.extend(tasks)
        return []

    monkeypatch.setattr(trainer.evaluate, "rollout", record)
    evaluate(None, None, [domain], n, difficulty={domain: level})
    return seen


@pytest.fixture(scope="module")
def training_tasks():
    from trainer.groups import sample_tasks

    return sample_tasks(_mix(), random.Random(20240611), N_TRAIN)


def test_training_sampler_never_draws_an_evaluation_seed_or_item(training_tasks, monkeypatch):
    tasks = training_tasks
    assert len(tasks) == N_TRAIN
    per_domain = {name: sum(t.domain == name for t in tasks) for name in {**FINITE, **ORDINARY}}
    assert min(per_domain.values()) > N_TRAIN / len(per_domain) / 2, per_domain  # every domain was drawn
    assert all(1 <= t.difficulty <= {**FINITE, **ORDINARY}[t.domain] for t in tasks)
    lo, hi = splits.TRAIN_SEED_RANGE
    assert all(lo <= t.seed < hi and not splits.is_heldout(t.seed) for t in tasks)

    for name, top in FINITE.items():
        held = {t.question for level in range(1, top + 1) for t in _evaluation_tasks(monkeypatch, name, level, N_EVAL)}
        drawn = [t.question for t in tasks if t.domain == name]
        leaked = [q for q in drawn if q in held]
        assert not leaked, (f"{name}: {len(leaked)} of {len(drawn)} training tasks are evaluation tasks, "
                            f"e.g. {leaked[0][:200]!r}")


def test_evaluation_uses_only_heldout_seeds(monkeypatch):
    lo, hi = splits.HELDOUT_SEED_RANGE
    t_lo, t_hi = splits.TRAIN_SEED_RANGE
    assert t_hi <= lo or hi <= t_lo  # the ranges are disjoint
    for n, offset in [(1, 0), (200, 0), (50, 12_345), (3, hi - lo - 3)]:
        seeds = splits.heldout_seeds(n, offset)
        assert len(seeds) == n and all(splits.is_heldout(s) and not t_lo <= s < t_hi for s in seeds)
    rng = random.Random(7)
    assert not any(splits.is_heldout(splits.train_seed(rng)) for _ in range(10_000))
    # what the evaluation actually builds: held-out seeds, and finite-pool items of the held-out side
    for name in ("acre", "basic_arithmetic", "cad_shaft", "humaneval"):
        tasks = _evaluation_tasks(monkeypatch, name, 1, 40)
        seeds = [t.seed for t in tasks]  # the held-out seeds in order, a repeated question passed over
        assert seeds == sorted(set(seeds)) and set(seeds) <= set(splits.heldout_seeds(4 * 40))
        assert len({t.question for t in tasks}) == len(tasks) and 0 < len(tasks) <= 40
        assert all(splits.is_heldout(t.seed) and not t_lo <= t.seed < t_hi for t in tasks)
    for name in ("acre", "cad_shaft"):  # split by the question's hash
        assert all(splits.heldout_item(t.question) for t in _evaluation_tasks(monkeypatch, name, 1, 40))


@pytest.mark.parametrize("name,level", [("acre", 1), ("word_ladder", 1), ("cad_shaft", 1)])
def test_pool_sides_are_disjoint_and_heldout_tasks_are_stable(name, level):
    d = registry.get_domain(name)
    held_seeds = splits.heldout_seeds(150)
    first = [d.make_task(s, level) for s in held_seeds]
    rg.reset_caches()  # a fresh generator instance (and, for pools, a fresh split), in the workers too
    assert [d.make_task(s, level) for s in held_seeds] == first  # same seed, same task

    n_train = 600 if d.pooled else 5000  # more seeds than the training side of a 500-item pool
    train = {d.make_task(s, level).question for s in range(n_train)}
    held = {t.question for t in first}
    assert train and held and not train & held
    if d.pooled:  # the sides cover the pool: the split drops nothing and holds out about 1 in 5
        ds = rg._dataset(d, level)
        pool = {ds[i]["question"] for i in range(len(ds))}
        assert train | held == pool
        assert 0.1 < len(held) / len(pool) < 0.3
    else:  # cad_shaft level 1 has 1,000 parts: training seeds reach all of their side
        assert 700 <= len(train) <= 900


def test_the_split_is_by_question_and_drops_duplicates():
    texts = [f"question {i}" for i in range(400)]
    train, held = splits.split_pool(texts + ["question 3", "question 0"])
    assert set(train) | set(held) == set(range(400))  # the repeated questions keep their first index
    assert not set(train) & set(held)
    assert all(splits.heldout_item(texts[i]) for i in held) and not any(splits.heldout_item(texts[i]) for i in train)
    assert 40 < len(held) < 120  # 1 in POOL_HELDOUT_EVERY (5), give or take
    assert splits.split_pool(texts) == (train, held)  # deterministic


def test_draw_on_side_keeps_each_seed_on_its_side():
    texts = [f"part {i}" for i in range(50)]
    held_text = next(t for t in texts if splits.heldout_item(t))
    train_text = next(t for t in texts if not splits.heldout_item(t))
    assert splits.draw_on_side(splits.heldout_seeds(1)[0], lambda a: texts[a], str) == held_text
    assert splits.draw_on_side(0, lambda a: texts[a], str) == train_text
    with pytest.raises(ConfigError, match="no held-out item"):
        splits.draw_on_side(splits.heldout_seeds(1)[0], lambda a: train_text, str)


def test_heldout_tasks_are_distinct_questions_and_the_same_every_time():
    tasks = registry.heldout_tasks("products", [1], 200)
    questions = [t.question for t in tasks]
    assert len(set(questions)) == len(questions)
    assert 50 <= len(tasks) <= 80  # 121 questions (66 facts), about one fact in 2 held out: fewer than asked for
    assert all(splits.is_heldout(t.seed) for t in tasks)
    assert [t.seed for t in registry.heldout_tasks("products", [1], 200)] == [t.seed for t in tasks]

    chain = registry.heldout_tasks("chain_sum", [1], 200)  # 2-3 one-digit terms: repeats among 200 seeds
    assert len(chain) == 200 and len({t.question for t in chain}) == 200
    assert chain[-1].seed > splits.heldout_seeds(200)[-1]  # repeated questions were passed over
    cycled = registry.heldout_tasks("chain_sum", [1, 2], 6, offset=3)
    assert [t.seed for t in cycled] == splits.heldout_seeds(6, 3) and [t.difficulty for t in cycled] == [1, 2] * 3
    with pytest.raises(ConfigError):
        registry.heldout_tasks("chain_sum", [1], 2, offset=splits.HELDOUT_SEED_RANGE[1] - splits.HELDOUT_SEED_RANGE[0] - 1)
    # a game's opening is the same for every seed; its hidden number is not, so tasks still differ
    guesses = registry.heldout_tasks("play_guess_the_number", [1], 20)
    assert len(guesses) == 20 and len({t.question for t in guesses}) == 1 and len({t.answer for t in guesses}) == 20


def test_products_holds_out_facts_not_just_questions():
    """Level 1 splits by fact: "4 * 3" is held out exactly when "3 * 4" is."""
    d = registry.get_domain("products")
    held = {hand_made._times_table_fact(t.entry) for t in registry.heldout_tasks("products", [1], 200)}
    trained = {hand_made._times_table_fact(d.make_task(seed, 1).entry) for seed in range(300)}
    assert held and trained and not held & trained
    assert len(held | trained) == 66 and len(held) == 35  # every fact of 2..12 x 2..12 is on one side


def test_whole_number_arithmetic_holds_out_facts_and_has_only_whole_results():
    """Level 1 splits by fact ("34 + 47" is held out exactly when "47 + 34" is); every result is
    a whole number (a difference is 1 or more, a quotient exact) and the reference scores 1."""
    d = registry.get_domain("whole_number_arithmetic")
    held_tasks = registry.heldout_tasks("whole_number_arithmetic", [1], 300)
    held = {hand_made._whole_number_fact(t.entry) for t in held_tasks}
    trained_tasks = [d.make_task(seed, 1) for seed in range(3000)]
    trained = {hand_made._whole_number_fact(t.entry) for t in trained_tasks}
    assert held and trained and not held & trained
    small = {f for f in held | trained if f.split(" ")[2] in "*/"}  # one-digit products and quotients
    assert 95 <= len(small) <= 100  # of the 36 + 64 facts, nearly all are reached from one side or the other
    assert len(held_tasks) == 300  # distinct held-out questions: enough for an interval
    for t in held_tasks + trained_tasks[:200]:
        a, op, b = t.entry["metadata"]["expression"].split(" ")
        assert int(t.answer) >= 1 and int(t.answer) == {"+": int(a) + int(b), "-": int(a) - int(b),
                                                        "*": int(a) * int(b), "/": int(a) / int(b)}[op]
    t = held_tasks[0]
    assert d.score(t, f"Answer: {t.answer}")[1]["correct"] == 1.0
    assert d.score(t, f"Answer: {int(t.answer) + 1}")[1]["correct"] == 0.0
    common = max(sum(u.answer == v.answer for u in held_tasks) for v in held_tasks)
    assert common / len(held_tasks) < 0.15  # no constant answer wins


def test_largest_number_holds_out_sets_of_numbers_and_no_constant_or_copy_wins():
    """A held-out set of numbers is never trained in another order; the reference is the
    largest, and neither one answer nor the first or last number of the question wins."""
    d = registry.get_domain("largest_number")
    key = lambda t: tuple(sorted(t.entry["metadata"]["numbers"]))  # noqa: E731
    held_tasks = registry.heldout_tasks("largest_number", [1], 300)
    trained = {key(d.make_task(seed, 1)) for seed in range(3000)}
    assert len(held_tasks) == 300 and not {key(t) for t in held_tasks} & trained
    for t in held_tasks:
        numbers = t.entry["metadata"]["numbers"]
        assert len(numbers) == len(set(numbers)) == 3 and t.answer == str(max(numbers))
        assert t.question.endswith(f"{', '.join(map(str, numbers))}?")
    t = held_tasks[0]
    assert d.score(t, f"Answer: {t.answer}")[1]["correct"] == 1.0
    assert d.score(t, f"Answer: {min(t.entry['metadata']['numbers'])}")[1]["correct"] == 0.0
    common = max(sum(u.answer == v.answer for u in held_tasks) for v in held_tasks)
    assert common / len(held_tasks) < 0.1  # the max of three leans high: "99" is right on about 7%
    first = sum(t.entry["metadata"]["numbers"][0] == int(t.answer) for t in held_tasks) / len(held_tasks)
    last = sum(t.entry["metadata"]["numbers"][-1] == int(t.answer) for t in held_tasks) / len(held_tasks)
    assert 0.2 < first < 0.45 and 0.2 < last < 0.45  # the order is random: copying a position is a 1-in-3 guess
