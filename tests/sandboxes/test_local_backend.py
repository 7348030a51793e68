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
    from backend.errors import SandboxUnavailable
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
