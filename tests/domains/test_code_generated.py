"""Code writing from generated specifications: the hidden tests pass the reference, fail
every other variant's solution, stay out of the prompt, and run for real in a sandbox."""

import pytest

from domains.code.generated import CODE_TEMPLATES, generated_code_domains
from domains.conformance import check_domain
from domains.registry import registry

DOMAINS = generated_code_domains()


def _passes(task, code: str) -> bool:
    ns: dict = {}
    exec(task.entry["prompt"] + "\n" + code, ns)
    exec(task.entry["test"], ns)
    try:
        ns["check"](ns[task.entry["entry_point"]])
    except AssertionError:
        return False
    return True


def test_registered_in_their_family_and_keep_the_contract():
    assert {n for n, d in registry().items() if d.family == "code_writing"} == {t.name for t in CODE_TEMPLATES}
    for d in DOMAINS.values():
        check_domain(d, seeds=(0, 5))


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_hidden_tests_pass_the_reference_and_fail_other_variants(name):
    d = DOMAINS[name]
    for level in (1, 2, 3):
        tasks = [d.make_task(s, level) for s in range(10)]
        for t in tasks:
            assert _passes(t, t.answer)
            assert t.entry["test"] not in t.question and "check(" not in t.question
            assert t.entry["test"].count("assert") >= {1: 6, 2: 12, 3: 20}[level]
            others = {o.answer for o in tasks if o.answer != t.answer and o.entry["entry_point"] == t.entry["entry_point"]}
            assert not [o for o in others if _passes(t, o)]
    variants = {d.make_task(s, 1).answer for s in range(20)}
    assert len(variants) >= 2  # the parameters change per seed


def test_references_and_wrong_solutions_in_a_real_sandbox(docker_engine):
    from sandboxes.pool import SandboxPool, Scheduler
    from sandboxes.spec import SandboxSpec

    cases = []
    for d in DOMAINS.values():
        t = d.make_task(3, 2)
        ep = t.entry["entry_point"]  # the reference, its result wrapped in a list: always wrong
        broken = f"{t.answer}\n_right = {ep}\n\ndef {ep}(*args):\n    return [_right(*args)]\n"
        cases += [(d, t, d.reference_completion(t), 1.0), (d, t, f"```python\n{broken}```", 0.0), (d, t, "", 0.0)]
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=120), size=2,
                     labels={"rlwb.test": "code-generated"}, gc_interval_s=0) as pool:
        sched = Scheduler(pool)
        results = sched.run([d.verification_job(t, c) for d, t, c, _ in cases])
        sched.close()
    got = [d.score_result(t, c, r)[0] for (d, t, c, _), r in zip(cases, results)]
    assert got == [want for *_, want in cases]


def test_plausible_wrong_solutions_fail_on_every_seed():
    """Near misses a model might write (found by trying to break the family): keep the first
    copy when the last is asked for, ignore frequency, break ties by first appearance,
    return one word too many."""
    dedupe, top = DOMAINS["code_dedupe"], DOMAINS["code_top_words"]
    for seed in range(60):
        t = dedupe.make_task(seed, 1)
        if t.entry["entry_point"] == "keep_last_copies":
            assert not _passes(t, "def keep_last_copies(xs):\n    return list(dict.fromkeys(xs))\n")
        t = top.make_task(seed, 1)
        k = int(t.answer.split("[:")[1].split("]")[0])
        for wrong in ("def top_words(text):\n    return sorted(set(text.lower().split()))[:K]\n",
                      "from collections import Counter\ndef top_words(text):\n"
                      "    return [w for w, _ in Counter(text.lower().split()).most_common(K)]\n",
                      "def top_words(text):\n    c = {}\n    for w in text.lower().split():\n        c[w] = c.get(w, 0) + 1\n"
                      "    return sorted(c, key=lambda w: (-c[w], w))[:K + 1]\n"):
            assert not _passes(t, wrong.replace("K", str(k))), (seed, wrong)
