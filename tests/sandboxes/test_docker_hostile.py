"""Hostile programs against the real Docker backend.

Each ends within its timeout + 1 s with the right tag, a neighbouring sandbox and the host
keep working, and no container of the test is left over. The timeout bound is the
behaviour under test (the limit is enforced), not a speed measurement.
"""

import subprocess
import time

import pytest

from sandboxes.docker_backend import DockerSandbox
from sandboxes.spec import SandboxSpec
from tests.sandboxes.conftest import containers_with

TIMEOUT_S = 2.0
SPEC = SandboxSpec(memory_mb=128, pids=64, workspace_mb=16, command_timeout_s=TIMEOUT_S,
                   output_limit_bytes=64 * 1024)


@pytest.fixture(scope="module")
def neighbour(docker_engine):
    sb = DockerSandbox(SPEC, {"rlwb.test": "neighbour"}).start()
    sb.write_file("keep.txt", "still here")
    yield sb
    sb.close()


def _hostile(docker_engine, neighbour, label, cmd, **kw):
    """Run cmd in a fresh sandbox; return (result, host-measured seconds, sandbox still usable?)."""
    sb = DockerSandbox(SPEC, label).start()
    try:
        t0 = time.monotonic()
        r = sb.exec(cmd, **kw)
        elapsed = time.monotonic() - t0
        after = sb.exec("echo alive")
    finally:
        sb.close()
    # the neighbour, the host and the engine are unharmed; nothing of this test remains
    assert neighbour.exec("cat keep.txt").stdout == "still here"
    assert subprocess.run(["true"]).returncode == 0
    assert containers_with(docker_engine, label) == []
    assert elapsed <= TIMEOUT_S + 1.0, f"took {elapsed:.2f} s"
    return r, after


def test_infinite_loop_is_killed_at_the_timeout(docker_engine, neighbour, test_label):
    r, after = _hostile(docker_engine, neighbour, test_label, "python3 -c 'while True: pass'")
    assert r.timed_out and r.outcome == "timeout" and r.exit_code == 137
    assert after.stdout == "alive\n"


def test_fork_bomb_hits_the_pids_limit_and_is_cleared(docker_engine, neighbour, test_label):
    r, after = _hostile(docker_engine, neighbour, test_label, "bomb() { bomb | bomb & }; bomb; sleep 60")
    assert r.timed_out
    assert after.stdout == "alive\n"  # every bomb process is gone: a new command can fork


def test_memory_hog_is_oom_killed(docker_engine, neighbour, test_label):
    r, after = _hostile(docker_engine, neighbour, test_label, "python3 -c 'b = bytearray(1 << 30); print(len(b))'")
    assert r.oom_killed and r.outcome == "oom" and not r.timed_out
    assert r.stdout == ""
    assert after.stdout == "alive\n"


def test_100_mb_of_stdout_is_cut_and_counted(docker_engine, neighbour, test_label):
    r, _ = _hostile(docker_engine, neighbour, test_label, "head -c 100000000 /dev/zero | tr '\\0' x")
    assert r.exit_code == 0 and not r.timed_out
    assert len(r.stdout) == SPEC.output_limit_bytes
    assert r.truncated_bytes == 100_000_000 - SPEC.output_limit_bytes


def test_writing_outside_the_workspace_fails(docker_engine, neighbour, test_label):
    cmd = "for p in /etc/passwd /usr/bin/x /root/x /x; do echo pwned > $p && echo WROTE $p; done; touch /tmp/ok"
    r, _ = _hostile(docker_engine, neighbour, test_label, cmd)
    assert "WROTE" not in r.stdout
    assert "Read-only file system" in r.stderr or "Permission denied" in r.stderr


def test_the_network_is_unreachable(docker_engine, neighbour, test_label):
    code = ("import socket\n"
            "for host in [('1.1.1.1', 53), ('deb.debian.org', 80), ('172.17.0.1', 2375)]:\n"
            "    try:\n"
            "        socket.create_connection(host, timeout=1); print('CONNECTED', host)\n"
            "    except OSError as e:\n"
            "        print('blocked', host, e.__class__.__name__)\n"
            "print(open('/proc/net/dev').read())\n")
    r, _ = _hostile(docker_engine, neighbour, test_label, "python3 -", stdin=code)
    assert "CONNECTED" not in r.stdout and r.stdout.count("blocked") == 3
    interfaces = [ln.split(":")[0].strip() for ln in r.stdout.splitlines() if ":" in ln and "|" not in ln]
    assert interfaces == ["lo"]


def test_ignoring_sigterm_does_not_survive_the_timeout(docker_engine, neighbour, test_label):
    r, after = _hostile(docker_engine, neighbour, test_label, "trap '' TERM INT HUP; while :; do sleep 0.1; done")
    assert r.timed_out and r.exit_code == 137
    assert after.stdout == "alive\n"


def test_deleting_the_workspace_is_undone_by_reset(docker_engine, neighbour, test_label):
    sb = DockerSandbox(SPEC, test_label).start()
    try:
        sb.write_file("data.txt", "x")
        base = sb.snapshot()
        r = sb.exec("rm -rf /workspace/* /workspace/.[!.]* ; rm -rf /workspace; ls -A /workspace | wc -l")
        assert r.stdout.strip() == "0"
        sb.rollback(base)
        assert sb.read_file("data.txt") == b"x"
        sb.reset()  # back to the empty workspace of start()
        assert sb.list_dir() == []
        assert sb.exec("touch new && ls").stdout == "new\n"
    finally:
        sb.close()
    assert neighbour.exec("cat keep.txt").stdout == "still here"
    assert containers_with(docker_engine, test_label) == []


def test_sleeping_past_the_timeout_is_cut(docker_engine, neighbour, test_label):
    r, _ = _hostile(docker_engine, neighbour, test_label, "sleep 30; echo woke")
    assert r.timed_out and "woke" not in r.stdout


def test_processes_escaping_the_session_are_killed(docker_engine, neighbour, test_label):
    with DockerSandbox(SPEC, test_label) as sb:
        r = sb.exec("setsid bash -c 'trap \"\" TERM; sleep 100' & nohup sleep 100 >/dev/null 2>&1 & echo started")
        left = sb.exec("python3 -c \"import glob; print(sum(open(p, 'rb').read() == b'sleep\\0' + b'100\\0' "
                       "for p in glob.glob('/proc/[0-9]*/cmdline')))\"")
    assert r.stdout == "started\n" and r.exit_code == 0
    assert left.stdout.strip() == "0"  # nothing the command started outlives it
    assert containers_with(docker_engine, test_label) == []


def test_container_runs_as_unprivileged_user_without_host_mounts(docker_engine, test_label):
    with DockerSandbox(SPEC, test_label) as sb:
        r = sb.exec("id -u; cat /proc/self/status | grep CapEff; cat /proc/mounts")
        info = docker_engine.api.inspect_container(sb.id)
    uid, cap, *mounts = r.stdout.splitlines()
    assert uid == "1000" and cap.split()[1] == "0000000000000000"
    assert not any("docker.sock" in m for m in mounts)
    assert info["Mounts"] == [] and info["HostConfig"]["Binds"] in (None, [])
    assert info["HostConfig"]["NetworkMode"] == "none" and info["HostConfig"]["ReadonlyRootfs"]
    assert info["HostConfig"]["Init"] is True


def test_closing_stdout_does_not_escape_the_timeout(docker_engine, neighbour, test_label):
    r, after = _hostile(docker_engine, neighbour, test_label, "exec >/dev/null 2>&1; sleep 30")
    assert r.timed_out and r.exit_code == 137
    assert after.stdout == "alive\n"  # the next reply is this command's, not a stale one


def test_nothing_of_a_job_survives_into_the_next(docker_engine, test_label):
    from sandboxes.pool import SandboxJob, SandboxPool, Scheduler

    with SandboxPool("docker", SPEC, size=1, labels=test_label, gc_interval_s=0) as pool:
        sched = Scheduler(pool)
        first = sched.run([SandboxJob("echo secret > /tmp/x; echo secret > /dev/shm/y; ipcmk -M 4000000 >/dev/null; "
                                      "ipcs -m | grep -c '^0x'")])[0]
        second = sched.run([SandboxJob("ls -A /tmp /dev/shm; ipcs -m | grep -c '^0x'")])[0]
        sched.close()
    assert first.result.stdout.strip() == "1"
    assert second.result.stdout.split() == ["/dev/shm:", "/tmp:", "0"]


def test_deep_trees_fifos_and_sparse_files_do_not_break_the_sandbox(docker_engine, test_label):
    from core.errors import ConfigError

    with DockerSandbox(SPEC, test_label) as sb:
        sb.exec("mkfifo pipe; truncate -s 200M sparse; echo x > plain")
        with pytest.raises(ConfigError, match="not a regular file"):
            sb.read_file("pipe")
        with pytest.raises(ConfigError):
            sb.write_file("pipe", "x")
        snap = sb.snapshot()  # tar(1): the sparse file stays small, the FIFO is kept
        assert len(sb._snapshots[snap]) < 1024 * 1024
        sb.exec("rm -rf /workspace/*")
        sb.rollback(snap)
        assert {f.name: f.kind for f in sb.list_dir()} == {"pipe": "other", "plain": "file", "sparse": "file"}
        # a tree deeper than Python's recursion limit (and PATH_MAX): snapshot and reset still work
        sb.exec("python3 -c \"import os\nfor i in range(3000):\n    os.mkdir('d'); os.chdir('d')\"")
        sb.snapshot()
        sb.reset()
        assert sb.list_dir() == [] and sb.exec("echo ok").stdout == "ok\n"


def test_api_misuse_gets_clear_errors(docker_engine, test_label):
    from core.errors import ConfigError, SandboxError

    sb = DockerSandbox(SPEC, test_label).start()
    try:
        with pytest.raises(ConfigError, match="already started"):
            sb.start()
        for bad in (True, 0, -1, float("nan"), float("inf")):
            with pytest.raises(ConfigError, match="timeout_s"):
                sb.exec("true", timeout_s=bad)
        with pytest.raises(ConfigError, match="Unicode"):
            sb.exec("echo \udcff")
        with pytest.raises(ConfigError, match="over"):
            sb.exec("echo " + "x" * 200_000)
        with pytest.raises(ConfigError):
            sb.read_file("missing.txt")  # the caller's mistake, not a broken sandbox
        sb.exec("ln -s /etc/passwd link; ln -s /rlwb/stdin secret")
        for path in ("link", "secret"):
            with pytest.raises(ConfigError, match="leaves the workspace"):
                sb.read_file(path)
        assert sb.exec("echo fine").stdout == "fine\n"  # none of that broke it
    finally:
        sb.close()
    with pytest.raises(SandboxError):
        sb.exec("true")
    assert containers_with(docker_engine, test_label) == []


def _in_mount_namespace(docker_engine, sb, *argv):
    """Run argv (host root) in the container's mount and PID namespaces: the damage no task
    of uid 1000 can do, so the reset can't undo it either."""
    import os
    import shutil

    if os.geteuid() != 0 or shutil.which("nsenter") is None:
        pytest.skip("needs root and nsenter(1) on the host to change the container's mounts")
    pid = str(docker_engine.api.inspect_container(sb.id)["State"]["Pid"])
    subprocess.run(["nsenter", "-t", pid, "-m", "-p", *argv], check=True, capture_output=True)


@pytest.mark.parametrize("damage", [["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", "/workspace"],
                                    ["umount", "-l", "/workspace"]], ids=["mounted-over", "removed"])
def test_a_workspace_the_reset_cannot_restore_is_replaced(docker_engine, test_label, damage):
    from sandboxes.pool import SandboxJob, SandboxPool, Scheduler

    with SandboxPool("docker", SPEC, size=1, labels=test_label, gc_interval_s=0) as pool:
        with pool.lease() as sb:
            _in_mount_namespace(docker_engine, sb, *damage)
        with pool.lease() as fresh:  # the failed verification replaced it at release
            r = fresh.exec("echo ok > f && cat f")
        assert fresh is not sb and (r.exit_code, r.stdout, r.stderr) == (0, "ok\n", "")
        assert pool.state()["replaced"] == 1

        sched = Scheduler(pool, max_retries=1)  # a job's own reset (run_fresh) verifies too
        _in_mount_namespace(docker_engine, fresh, *damage)
        [job] = sched.run([SandboxJob("echo ok > f && cat f")])
        sched.close()
        assert job.fault is None and job.result.stdout == "ok\n" and job.attempts == 2
        assert "workspace directory is not as it was at start" in job.error, job.error
        assert pool.state()["replaced"] == 2
    assert containers_with(docker_engine, test_label) == []
