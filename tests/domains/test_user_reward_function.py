"""A user's own Python reward function, run in real Docker sandboxes (never in the trainer):
a sound one passes validation; a deliberately hackable one (any reply with a digit gets 1)
is flagged by the reward audit; one that raises, hangs, returns NaN or 7, prints megabytes
or looks for the host's files scores 0 with the reason, and bad source is refused up front."""

import pytest

from core.errors import ConfigError
from domains.user.library import prepare
from tests.domains.user_domains_helpers import validate_unsaved
from sandboxes.pool import SandboxPool, Scheduler
from sandboxes.spec import SandboxSpec

ROWS = [{"q": f"What is {i} times 3?", "a": str(3 * i)} for i in range(1, 41)]
SOUND = '''
def reward(reply, answer, row):
    got = row["extracted"]
    if got is None:
        return 0.0
    try:
        return (1.0 if float(got) == float(answer) else 0.0), {"got": got}
    except ValueError:
        return 0.0
'''
HACKABLE = '''
def reward(reply, answer, row):
    return 1.0 if any(ch.isdigit() for ch in reply) else 0.0
'''


def _definition(name: str, source: str, **verifier) -> dict:
    return {"name": name, "columns": {"prompt": "q", "answer": "a"},
            "verifier": {"kind": "python", "source": source, **verifier}, "heldout_fraction": 0.25}


@pytest.fixture(scope="module")
def pool(docker_engine):
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=120), size=2,
                     labels={"rlwb.test": "user-reward"}, gc_interval_s=0) as p:
        yield p


def test_the_audit_flags_a_hackable_reward_and_passes_a_sound_one(docker_engine):
    sound, hackable = validate_unsaved([_definition("sound_reward", SOUND), _definition("hackable_reward", HACKABLE)],
                                       ROWS)
    assert sound["passed"], sound["reasons"]
    assert not hackable["passed"]
    reasons = " ".join(hackable["reasons"])
    assert "rewards the answer followed by junk" in reasons
    assert "rewards a reply that holds no answer" in reasons
    assert "gives full marks to another row's answer" in reasons


@pytest.mark.parametrize("body,why", [
    ("raise ValueError('bad row')", "raised ValueError: bad row"),
    ("import time\n    time.sleep(30)", "ran past 2 s"),
    ("return float('nan')", "not a number in [0, 1]"),
    ("return 7", "not a number in [0, 1]"),
    ("return 'yes'", "not a number in [0, 1]"),
    ("import os\n    os._exit(0)", "gave no result"),
    ("print('x' * 5_000_000)\n    return 1.0", None),  # what it prints is kept off the result line
    ("import os\n    return 1.0 if os.path.exists(HOST) else 0.0", None),  # the host's files are not there
])
def test_a_misbehaving_reward_function_scores_0_with_the_reason(pool, tmp_path, body, why):
    host_file = tmp_path / "host-secret.txt"
    host_file.write_text("secret")
    source = f"HOST = {str(host_file)!r}\n\ndef reward(reply, answer, row):\n    {body}\n"
    d = prepare(_definition("bad_reward", source, timeout_s=2), rows=ROWS)
    task = d.make_task(0, 1)
    sched = Scheduler(pool)
    try:
        [res] = sched.run([d.verification_job(task, d.reference_completion(task))])
    finally:
        sched.close()
    reward, b = d.score_result(task, d.reference_completion(task), res)
    if why is None:
        assert "verifier_error" not in b, b
        assert reward == (1.0 if "print" in body else 0.0)
    else:
        assert reward == 0.0 and why in b["verifier_error"], b


@pytest.mark.parametrize("verifier,match", [
    ({"kind": "python"}, "needs 'source'"),
    ({"kind": "python", "source": "def reward(reply, answer, row)\n    return 1"}, "does not compile"),
    ({"kind": "python", "source": "x = 1", "timeout_s": 600}, "timeout_s"),
])
def test_bad_reward_source_is_refused_before_anything_runs(verifier, match):
    with pytest.raises(ConfigError, match=match):
        prepare({"name": "r", "columns": {"prompt": "q", "answer": "a"}, "verifier": verifier}, rows=ROWS)
