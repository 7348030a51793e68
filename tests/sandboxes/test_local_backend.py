"""The bubblewrap fallback backend: same interface, weaker isolation, said out loud."""

import shutil
import subprocess
import sys

import pytest

from sandboxes.local_backend import LocalSandbox
from sandboxes.spec import SandboxSpec

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
SPEC = SandboxSpec(memory_mb=256, command_timeout_s=2)


def test_exec_files_snapshot_and_reset():
    with LocalSandbox(SPEC) as sb:
        sb.write_file("d/a.txt", "one")
        assert sb.exec("cat d/a.txt; id -u; pwd").stdout == "one1000\n/workspace\n"
        snap = sb.snapshot()
        sb.exec("rm -rf /workspace/d; echo two > b.txt")
        assert [f.name for f in sb.list_dir()] == ["b.txt"]
        sb.rollback(snap)
        assert sb.read_file("d/a.txt") == b"one" and [f.name for f in sb.list_dir()] == ["d"]
        sb.reset()
        assert sb.list_dir() == []


def test_timeout_kills_the_group_and_the_network_is_absent():
    with LocalSandbox(SPEC) as sb:
        r = sb.exec("trap '' TERM; sleep 30", timeout_s=0.5)
        assert r.timed_out and r.exit_code == 137
        net = sb.exec("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=1)\"")
        assert net.exit_code != 0 and ("unreachable" in net.stderr or "Errno" in net.stderr)
        ro = sb.exec("echo x > /usr/x")
        assert ro.exit_code != 0


def test_the_cli_says_the_isolation_is_weaker():
    out = subprocess.run([sys.executable, "-m", "backend.cli", "sandbox", "exec", "--backend", "local", "echo hi"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "hi\n"
    assert "WEAKER" in out.stderr


def test_docker_is_never_silently_replaced(monkeypatch):
    from core.errors import SandboxUnavailable
    from sandboxes import docker_backend, open_sandbox

    def no_engine():
        raise SandboxUnavailable("no Docker engine answers (test)")

    monkeypatch.setattr(docker_backend, "docker_client", no_engine)
    with pytest.raises(SandboxUnavailable, match="no Docker engine"):
        open_sandbox("docker", SPEC)


def test_cli_exec_exits_with_the_commands_status():
    run = [sys.executable, "-m", "backend.cli", "sandbox", "exec", "--backend", "local"]
    assert subprocess.run([*run, "exit 3"], capture_output=True).returncode == 3
    timed = subprocess.run([*run, "--timeout", "1", "sleep 30"], capture_output=True, text=True)
    assert timed.returncode == 124 and "[timeout]" in timed.stderr


_LOCKED_WORKSPACE = """
import glob, sys
from sandboxes.pool import SandboxPool
from sandboxes.spec import SandboxSpec
before = set(glob.glob('/tmp/rlwb-local-sandbox-*'))
with SandboxPool('local', SandboxSpec(memory_mb=256, command_timeout_s=5), size=1, gc_interval_s=0) as pool:
    with pool.lease() as sb:
        print(sb.exec('mkdir -p d/e && touch a d/e/x && chmod 000 d/e d . && ls 2>&1; echo $?').stdout.split()[-1])
    with pool.lease() as sb:
        r = sb.exec("echo ok > f && cat f && stat -c %a /workspace")
    print(r.exit_code, r.stdout.split(), pool.state()['replaced'])
    with pool.lease() as sb:  # a tree it locked at start stays locked after each reset, and is cleaned
        sb.exec('mkdir -p k/l && chmod 000 k/l k')
    print(sb.list_dir() == [])
print(sorted(set(glob.glob('/tmp/rlwb-local-sandbox-*')) - before))
"""


def test_an_ordinary_users_workspace_locked_by_a_task_is_reset():
    """As an ordinary user (the usual reason to fall back to bubblewrap) rm -rf can't enter
    what a task locked with chmod 000; the reset still brings the workspace back."""
    import os

    argv = [sys.executable, "-c", _LOCKED_WORKSPACE]
    if os.geteuid() == 0:  # become nobody (setpriv: subprocess's user= can't exec this venv's python here)
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv(1) to run as an ordinary user")
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {**os.environ, "HOME": "/tmp", "PYTHONPATH": os.getcwd()}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/")
    if "ModuleNotFoundError" in out.stderr or ("PermissionError" in out.stderr and "sandboxes" not in out.stderr):
        pytest.skip(f"this checkout is not readable by the unprivileged user: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["2", "0 ['ok', '700'] 0", "True", "[]"]  # ls refused; written; no temp dir left


@pytest.mark.parametrize("damage", ["chmod 000", "symlink", "removed"])
def test_a_workspace_the_reset_cannot_restore_is_replaced(tmp_path, damage):
    """Whatever the reset could not undo (here: its repair is disabled), the verification
    sees and the pool replaces the sandbox: the next task gets a clean, writable one."""
    import os

    from sandboxes.pool import SandboxPool

    decoy = tmp_path / "decoy"
    decoy.mkdir()
    os.chown(decoy, 65534, 65534) if os.geteuid() == 0 else None
    with SandboxPool("local", SPEC, size=1, gc_interval_s=0) as pool:
        with pool.lease() as sb:
            if damage == "chmod 000":
                assert sb.exec("chmod 000 /workspace").exit_code == 0
            else:  # done on the host's side: no task can replace its bind mount from inside
                subprocess.run(["rm", "-rf", str(sb._ws)], check=True)
                if damage == "symlink":
                    sb._ws.symlink_to(decoy)
            sb._restore_workspace = lambda archive: None
        with pool.lease() as fresh:
            r = fresh.exec("echo ok > f && cat f")
        assert fresh is not sb and (r.exit_code, r.stdout, r.stderr) == (0, "ok\n", "")
        assert pool.state()["replaced"] == 1
    assert list(decoy.iterdir()) == []  # nothing was written through the link
