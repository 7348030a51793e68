"""Warm pool and scheduler on the real Docker backend: reuse, isolation between tasks,
bounded concurrency, harness-fault retries, garbage collection, metrics."""

import threading

import pytest

from sandboxes.docker_backend import LABEL, OWNER_LABEL, collect_garbage
from sandboxes.pool import SandboxJob, SandboxPool, Scheduler
from sandboxes.spec import SandboxSpec
from tests.sandboxes.conftest import containers_with

SPEC = SandboxSpec(memory_mb=128, pids=64, command_timeout_s=5)


@pytest.fixture
def pool(docker_engine, test_label):
    p = SandboxPool("docker", SPEC, size=2, labels=test_label, gc_interval_s=0).start()
    yield p
    p.close()
    assert containers_with(docker_engine, test_label) == []


def test_pool_reuses_warm_containers_and_isolates_tasks(pool):
    sched = Scheduler(pool)
    first = sched.run([SandboxJob("echo secret > leak.txt; cat leak.txt") for _ in range(4)])
    second = sched.run([SandboxJob("ls -A; cat /tmp/x 2>/dev/null; echo done") for _ in range(6)])
    sched.close()
    assert all(r.result.stdout == "secret\n" for r in first)
    assert all(r.result.stdout == "done\n" for r in second)  # no file of an earlier task is visible
    used = {r.sandbox_id for r in first + second}
    assert 1 <= len(used) <= 2  # 10 jobs ran on the 2 warm containers
    assert pool.state()["replaced"] == 0


def test_job_files_and_stdin_reach_the_command(pool):
    sched = Scheduler(pool)
    [r] = sched.run([SandboxJob("python3 src/main.py < /dev/stdin", files={"src/main.py": "print(input()[::-1])"},
                                stdin="abc\n")])
    sched.close()
    assert r.result.stdout == "cba\n" and r.fault is None


def test_concurrency_is_bounded_by_the_scheduler(pool):
    sched = Scheduler(pool, concurrency=2)
    peak, running, lock = [0], [0], threading.Lock()
    original = pool.acquire

    def counting_acquire(*a, **kw):
        sb = original(*a, **kw)
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        return sb

    original_release = pool.release

    def counting_release(sb, *a, **kw):
        with lock:
            running[0] -= 1
        original_release(sb, *a, **kw)

    pool.acquire, pool.release = counting_acquire, counting_release
    results = sched.run([SandboxJob("sleep 0.05; echo ok") for _ in range(8)])
    sched.close()
    assert [r.result.stdout for r in results] == ["ok\n"] * 8
    assert peak[0] == 2


def test_a_dead_container_is_a_retried_harness_fault(docker_engine, pool):
    sched = Scheduler(pool, max_retries=2)
    victim = pool.acquire()
    docker_engine.containers.get(victim.id).kill()  # the container dies under the job
    pool.release(victim)  # the failed reset replaces it
    [r] = sched.run([SandboxJob("echo fine")])
    assert r.result.stdout == "fine\n" and r.fault is None
    assert pool.state()["replaced"] >= 1

    sched.close()


def test_a_job_whose_container_dies_is_retried_on_a_fresh_one(docker_engine, test_label):
    with SandboxPool("docker", SPEC, size=1, labels=test_label, gc_interval_s=0) as one:
        victim = next(iter(one._all))
        docker_engine.containers.get(victim.id).kill()  # dies while idle in the pool
        sched = Scheduler(one, max_retries=2)
        [r] = sched.run([SandboxJob("echo again")])
        sched.close()
        assert r.result is not None and r.result.stdout == "again\n" and r.fault is None
        assert r.attempts == 2 and r.sandbox_id != victim.id[:12]
        assert one.state()["replaced"] == 1
    assert containers_with(docker_engine, test_label) == []


def test_persistent_harness_faults_are_tagged_not_scored(docker_engine, pool):
    sched = Scheduler(pool, max_retries=1)
    broken = {"n": 0}

    def broken_run_fresh(*a, **kw):
        from core.errors import SandboxError

        broken["n"] += 1
        raise SandboxError("engine error (injected)")

    for sb in list(pool._all):
        sb.run_fresh = broken_run_fresh
    [r] = sched.run([SandboxJob("echo never")])
    sched.close()
    assert r.result is None and r.fault == "harness" and r.outcome == "harness"
    assert r.attempts == 2 and broken["n"] == 2
    assert sched.metrics()["failures/harness"] == 1.0


def test_program_failures_are_results_with_metrics(pool):
    sched = Scheduler(pool)
    results = sched.run([SandboxJob("exit 3"), SandboxJob("sleep 5", timeout_s=0.5), SandboxJob("echo ok")])
    m = sched.metrics()
    rows = sched.drain_records()
    sched.close()
    assert [r.outcome for r in results] == ["error", "timeout", "ok"]
    assert m["jobs"] == 3 and m["failures/error"] == 1 and m["failures/timeout"] == 1 and m["failures/harness"] == 0
    assert m["latency_p99_ms"] >= m["latency_p50_ms"] > 0 and m["queue_depth"] == 0
    assert {r["outcome"] for r in rows} == {"error", "timeout", "ok"} and sched.drain_records() == []


def test_garbage_collector_removes_orphans_of_dead_owners(docker_engine, test_label):
    import socket

    dead_owner = f"{socket.gethostname()}:{2**22 + 12345}"  # above pid_max: never alive
    orphan = docker_engine.containers.create(SPEC.image, ["sleep", "60"],
                                             labels={LABEL: "1", OWNER_LABEL: dead_owner, **test_label})
    live = SandboxPool("docker", SPEC, size=1, labels=test_label, gc_interval_s=0).start()  # GC at start-up
    try:
        remaining = containers_with(docker_engine, test_label)
        assert [c.id for c in remaining] == [next(iter(live._all)).id]
        assert live.state()["orphans_collected"] >= 1
        assert collect_garbage() == 0  # live owners' containers are kept
    finally:
        live.close()
    assert orphan.id not in [c.id for c in docker_engine.containers.list(all=True)]


def test_a_malformed_job_is_answered_not_raised(pool):
    sched = Scheduler(pool)
    results = sched.run([SandboxJob("cat x", files={"../x": "evil"}), SandboxJob("echo ok", timeout_s=-1),
                         SandboxJob("echo ok")])
    m = sched.metrics()
    sched.close()
    assert [r.outcome for r in results] == ["invalid", "invalid", "ok"]
    assert results[0].attempts == 1 and "leaves the workspace" in results[0].error
    assert m["queue_depth"] == 0 and m["failures/invalid"] == 2


# a task changes the workspace directory itself, not just the files in it
_DIR_DAMAGE = ["chmod 000 /workspace", "touch a; mkdir -p d/e; chmod 000 d/e d .", "chmod -w .", "chmod 6777 .",
               "python3 -c \"import os; os.setxattr('/workspace', 'user.mark', b'1')\""]
_NEXT_TASK = ("echo ok > f && cat f && stat -c '%a %u:%g %F' /workspace && "
              "python3 -c \"import os; print(os.listxattr('/workspace'))\"")


@pytest.mark.parametrize("damage", _DIR_DAMAGE)
def test_a_task_that_changes_its_workspace_dir_does_not_poison_the_next_lease(pool, damage):
    for _ in range(pool.size):  # every warm sandbox gets the damage
        with pool.lease() as sb:
            assert sb.exec(damage).exit_code == 0
    for _ in range(pool.size):
        with pool.lease() as sb:
            r = sb.exec(_NEXT_TASK)
        assert (r.exit_code, r.stdout, r.stderr) == (0, "ok\n755 1000:1000 directory\n[]\n", "")
    assert pool.state()["replaced"] == 0  # put back in place, not replaced


@pytest.mark.parametrize("damage", _DIR_DAMAGE)
def test_a_job_that_changes_its_workspace_dir_does_not_poison_the_next_job(pool, damage):
    sched = Scheduler(pool, concurrency=1, max_retries=0)
    first = sched.run([SandboxJob(damage) for _ in range(pool.size)])
    after = sched.run([SandboxJob(_NEXT_TASK) for _ in range(pool.size)])
    sched.close()
    assert [r.result.exit_code for r in first] == [0] * pool.size
    clean = (None, "ok\n755 1000:1000 directory\n[]\n")
    assert [(r.fault, r.result and r.result.stdout) for r in after] == [clean] * pool.size
    assert pool.state()["replaced"] == 0
