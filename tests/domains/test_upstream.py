"""Time limits on upstream generators and verifiers (domains/upstream.py) hold on any
thread: a call past its limit is abandoned, its worker replaced, and the caller gets
GenerationTimeout; generation in a worker gives the in-process task. No model."""

import dataclasses
import os
import threading
import time

import pytest

from domains import contract
from domains.reasoning_gym import domain as rg
from domains import registry
from domains import splits
from core.errors import GenerationTimeout

HANG_S = 60.0  # what a hanging call would take if nothing cut it off


@dataclasses.dataclass(frozen=True, eq=False)
class HangingVerifier(rg.ReasoningGymDomain):
    """basic_arithmetic whose verifier never returns for the answer "hang"."""

    def verify(self, difficulty, answer, raw_entry):
        if answer == "hang":
            time.sleep(HANG_S)
        return super().verify(difficulty, answer, raw_entry)


def hanging_verifier() -> HangingVerifier:
    base = registry.get_domain("basic_arithmetic")
    return HangingVerifier(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})


def _item_or_hang(ds, seed, level):
    if seed == 13:
        time.sleep(HANG_S)
    return ds[seed]


def _on_a_thread(fn):
    """fn() on a thread that is not the main one: (its value, the exception it raised)."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=body, name="rollout-test")
    t.start()
    t.join()
    return out.get("value"), out.get("error")


def _exit_now():
    os._exit(3)


def test_a_call_past_its_limit_on_a_thread_is_cut_off_and_its_worker_replaced():
    from core.errors import UpstreamCrash
    from domains.upstream import WorkerPool

    pool = WorkerPool()
    try:
        first = pool.call(os.getpid, seconds=30, what="asking the pid")
        _, error = _on_a_thread(lambda: pool.call(time.sleep, HANG_S, seconds=0.5, what="sleeping"))
        assert isinstance(error, GenerationTimeout) and str(error) == "sleeping took over 0.5 s"
        assert first not in pool.pids()  # the hung worker was killed, not handed out again
        second, error = _on_a_thread(lambda: pool.call(os.getpid, seconds=30, what="asking the pid"))
        assert error is None and second != first and pool.pids() == [second]
        # an upstream exception comes back as itself and leaves the worker usable
        with pytest.raises(ZeroDivisionError):
            pool.call(divmod, 1, 0, seconds=30, what="dividing")
        assert pool.call(os.getpid, seconds=30, what="asking the pid") == second
        with pytest.raises(UpstreamCrash):  # a worker that dies is reported and replaced
            pool.call(_exit_now, seconds=30, what="exiting")
        assert second not in pool.pids()
    finally:
        pool.close()


def test_scoring_on_a_thread_is_cut_off_at_the_limit_and_scores_zero(monkeypatch):
    monkeypatch.setattr(rg, "SCORE_TIMEOUT_S", 0.5)
    d = hanging_verifier()
    task = d.make_task(5, 1)
    reward, br = _on_a_thread(lambda: d.score(task, "Answer: hang"))[0]
    assert br["verifier_error"] == "GenerationTimeout: scoring a basic_arithmetic answer took over 0.5 s"
    assert (reward, br["format"], br["correct"], br["score"]) == (contract.FORMAT_WEIGHT, 1.0, 0.0, 0.0)
    # the next answer is scored by a fresh worker
    reward, br = _on_a_thread(lambda: d.score(task, f"Answer: {task.answer}"))[0]
    assert reward == 1.0 and "verifier_error" not in br


def test_generation_on_a_thread_is_cut_off_at_the_limit(monkeypatch):
    monkeypatch.setattr(rg, "GENERATION_TIMEOUT_S", 0.5)
    base = registry.get_domain("basic_arithmetic")
    d = dataclasses.replace(base, generate=_item_or_hang)
    _, error = _on_a_thread(lambda: d.make_task(13, 1))
    assert isinstance(error, GenerationTimeout)
    assert str(error) == "generating basic_arithmetic level 1 seed 13 took over 0.5 s"
    task, error = _on_a_thread(lambda: d.make_task(14, 1))
    assert error is None and task == base.make_task(14, 1)


@pytest.mark.parametrize("name,level", [("basic_arithmetic", 2), ("gsm_symbolic", 3), ("acre", 1),
                                        ("arc_1d", 1), ("fraction_simplification", 2)])
def test_a_worker_generates_the_in_process_task(name, level):
    d = registry.get_domain(name)
    for seed in (0, 7, splits.heldout_seeds(1)[0]):
        task = d.make_task(seed, level)
        raw = d.generate_entry(seed, level)  # in this process, no worker
        assert task.raw_entry == raw and task.question == raw["question"] and task.answer == str(raw["answer"])


def _built_levels() -> list:
    return sorted(rg._DATASETS)


def _dataset_id(name, level) -> int:
    return id(rg._DATASETS[(name, level)])


def test_a_worker_keeps_its_built_generators_between_calls():
    d = registry.get_domain("chain_sum")
    d.make_task(1, 2)
    built = rg.UPSTREAM.call(_dataset_id, "chain_sum", 2, seconds=30, what="looking")
    d.make_task(2, 2)
    d.score(d.make_task(3, 2), "Answer: 5")
    assert rg.UPSTREAM.call(_dataset_id, "chain_sum", 2, seconds=30, what="looking") == built
    rg.reset_caches()  # validation's fresh start reaches the workers
    assert ("chain_sum", 2) not in rg.UPSTREAM.call(_built_levels, seconds=30, what="looking")
    assert d.make_task(1, 2).question  # and they build it again
