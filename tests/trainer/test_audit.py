"""The answer audit's per-step metrics on hand-made samples (`trainer.audit`)."""

import pytest

from domains.contract import CORRECT_WEIGHT, FORMAT_WEIGHT
from tests.backend.audit_runs import sample
from trainer.audit import answer_signals, audit_metrics, copied, row_of_sample
from trainer.types import Completion, Sample


def _step() -> list[Sample]:
    """Two tasks of four samples: 3 + 4 (reference 7) and 1 + 8 (reference 9)."""
    a = [sample(0, i, ans, "7", "What is 3 + 4?") for i, ans in enumerate(["7", "7", "1", None])]
    b = [sample(1, i, ans, "9", "What is 1 + 8?") for i, ans in enumerate(["1", "1", "1", "9"])]
    return a + b


def test_audit_metrics_on_hand_made_samples():
    m = audit_metrics(_step())
    d = "chain_sum"
    assert m[f"audit/distinct/{d}"] == 3  # 7, 1, 9
    assert m[f"audit/distinct_per_group/{d}"] == 2.0  # {7, 1} and {1, 9}
    assert m[f"audit/modal_share/{d}"] == pytest.approx(4 / 7)  # "1" in 4 of 7 answers
    assert m[f"audit/reference_modal_share/{d}"] == pytest.approx(4 / 7)  # "9" is the reference of 4 answers
    assert m[f"audit/diversity/{d}"] == 1.0  # the groups' modal answers, 7 and 1, are two for two references
    # the three "1" of 1 + 8 are wrong and in their prompt; the "1" of 3 + 4 is not in its prompt
    assert m[f"audit/copy_rate/{d}"] == pytest.approx(3 / 7)
    assert m[f"audit/format_reward/{d}"] == pytest.approx(FORMAT_WEIGHT * 7 / 8)
    assert m[f"audit/correct_reward/{d}"] == pytest.approx(CORRECT_WEIGHT * 3 / 8)


def test_one_answer_for_every_task_lowers_diversity():
    samples = [sample(g, i, "1", str(10 + g), f"What is {g + 5} + 5?") for g in range(4) for i in range(3)]
    sig = answer_signals(row_of_sample(s) for s in samples)
    assert (sig.modal_answer, sig.modal_share, sig.distinct_per_group) == ("1", 1.0, 1.0)
    assert sig.reference_modal_share == 0.25 and sig.distinct_references == 4
    assert sig.diversity == 0.25  # one answer stands for four tasks with four references
    assert sig.copy_rate == 0.0


def test_samples_without_an_extracted_answer_field_or_with_a_fault_are_not_audited():
    code = Sample(domain="humaneval", task_seed=0, group=0, index=0, prompt="p", prompt_ids=[1],
                  completion=Completion([2], [-0.1], "def f(): pass", "stop"), reward=1.0,
                  breakdown={"format": 1.0, "correct": 1.0, "error": None})
    faulted = sample(0, 1, "7", "7", "What is 3 + 4?")
    faulted.fault = "harness"
    assert audit_metrics([code, faulted]) == {}


def test_a_step_without_answers_records_only_the_reward_parts():
    m = audit_metrics([sample(0, i, None, "7", "What is 3 + 4?") for i in range(4)])
    assert m == {"audit/format_reward/chain_sum": 0.0, "audit/correct_reward/chain_sum": 0.0}


@pytest.mark.parametrize("answer, prompt, expected", [
    ("1", "What is 1 + 8?", True),
    ("1", "What is 12 + 8?", False),
    ("1", "Round 1.5 down", False),
    ("5", "Round 1.5 down", False),
    ("nus", 'For example, "sun" spelled backward is nus.', True),
    ("<answer>", "Give your final answer as: Answer: <answer>", True),
    ("an", "a banana", False),
])
def test_copied_means_a_whole_token_of_the_prompt(answer, prompt, expected):
    assert copied(answer, prompt) is expected


def test_rollout_metrics_carry_the_audit():
    from trainer.metrics import rollout_metrics

    m = rollout_metrics(_step())
    assert m["audit/modal_share/chain_sum"] == pytest.approx(4 / 7)
    assert m["audit/copy_rate/chain_sum"] == pytest.approx(3 / 7)


def test_the_reward_parts_split_the_verifiers_reward():
    right = sample(0, 0, "7", "7", "What is 3 + 4?")
    right.reward, right.breakdown["unpenalized_reward"] = 0.4, 1.0  # an overlong penalty took 0.6
    m = audit_metrics([right, sample(0, 1, "8", "7", "What is 3 + 4?")])
    assert m["audit/correct_reward/chain_sum"] == pytest.approx(CORRECT_WEIGHT / 2)
    assert m["audit/format_reward/chain_sum"] == pytest.approx(FORMAT_WEIGHT)  # both in the format
