"""Local fallback backend for machines without a Docker engine: bubblewrap plus rlimits.

    with LocalSandbox(SandboxSpec()) as sb:
        sb.exec("python3 -c 'print(1)'")

Each command runs under ``bwrap`` with new user, PID, network, IPC and UTS namespaces
(no network at all), only the host's ``/usr`` and ``/etc`` mounted (read-only), a private
``/tmp``, and the
sandbox's own workspace directory bound at ``/workspace``; resource limits are rlimits
(address space for memory, CPU seconds, file size for the workspace, process count) and the
timeout kills the whole process group (the PID namespace dies with it).

WEAKER ISOLATION than the Docker backend, and reported as such by the CLI and the page:
the host's /usr and /etc are readable, limits are per process rather than per sandbox (no
cgroup), the workspace size is only enforced per file, and when run as root the process
limit is not enforced. It is never chosen silently when Docker was asked for.
"""

from __future__ import annotations

import io
import os
import resource
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from backend.errors import SandboxError, SandboxUnavailable
from sandboxes.base import MAX_FILE_BYTES, FileInfo, Sandbox, require
from sandboxes.spec import WORKSPACE, ExecResult, OutputCap

_KINDS = {True: "dir", False: "file"}


def bwrap_path() -> str | None:
    """Path of the bubblewrap binary, or None."""
    return shutil.which("bwrap")


class LocalSandbox(Sandbox):
    """A sandbox made of bubblewrap namespaces and rlimits (see the module docstring)."""

    backend = "local"
    isolation = "WEAKER: bubblewrap namespaces + rlimits (host /usr and /etc readable, no cgroup limits)"

    def _start(self) -> None:
        if self.spec.network != "none":
            raise SandboxUnavailable("the local backend only supports network='none'")
        self._bwrap = bwrap_path()
        if self._bwrap is None:
            raise SandboxUnavailable("bubblewrap not found; install it with `apt-get install bubblewrap`, "
                                     "or use the Docker backend")
        self._dir = Path(tempfile.mkdtemp(prefix="rlwb-local-sandbox-"))
        self._ws = self._dir / "workspace"
        self._ws.mkdir()
        self.id = str(self._dir)

    def _close(self) -> None:
        d = getattr(self, "_dir", None)
        if d is not None:
            self._kill_all()
            shutil.rmtree(d, ignore_errors=True)
            self._dir = None

    def _limits(self) -> None:
        """preexec_fn: rlimits of one command (runs in the child before exec)."""
        mem = self.spec.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        fsize = self.spec.workspace_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NPROC, (self.spec.pids, self.spec.pids))
        cpu = int(self.spec.episode_timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

    def _argv(self, cmd: str) -> list[str]:
        env = ["--setenv", "HOME", WORKSPACE, "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"]
        for k, v in self.spec.env.items():
            env += ["--setenv", k, v]
        root = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink(f"/{link}"):
                root += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        return [self._bwrap, "--unshare-all", "--uid", "1000", "--gid", "1000", "--die-with-parent",
                "--new-session", *root, "--bind", str(self._ws), WORKSPACE, "--tmpfs", "/tmp", "--proc", "/proc",
                "--dev", "/dev", "--chdir", WORKSPACE, "--clearenv", *env, "bash", "-c", cmd]

    def _exec(self, cmd: str, timeout_s: float, stdin: bytes | None) -> ExecResult:
        require(getattr(self, "_dir", None) is not None, "sandbox is not started (or already closed)")
        t0 = time.monotonic()
        limit = self.spec.output_limit_bytes
        out, err = OutputCap(limit), OutputCap(limit)
        with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
            try:
                proc = subprocess.Popen(self._argv(cmd), stdin=subprocess.PIPE if stdin is not None else
                                        subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True,
                                        preexec_fn=self._limits)
            except OSError as e:
                raise SandboxError(f"could not start bwrap: {e}") from None
            self._procs = getattr(self, "_procs", set()) | {proc}
            timed_out = False
            try:
                proc.communicate(stdin, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
                proc.wait()
            self._procs.discard(proc)
            for f, cap in ((fo, out), (fe, err)):
                f.seek(0)
                while chunk := f.read(1 << 16):
                    cap.feed(chunk)
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return ExecResult(exit_code=code, stdout=out.text(), stderr=err.text(),
                          duration_ms=(time.monotonic() - t0) * 1000, timed_out=timed_out,
                          oom_killed="MemoryError" in err.text() and code != 0,  # RLIMIT_AS, not a cgroup
                          truncated_bytes=out.dropped + err.dropped)

    def _kill_all(self) -> None:
        for proc in list(getattr(self, "_procs", ())):
            _kill_group(proc)

    def _write(self, path: str, data: bytes, mode: int) -> None:
        host = self._host(path)
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data)
        host.chmod(mode)

    def _read(self, path: str) -> bytes:
        host = self._host(path)
        require(host.is_file(), f"read_file {path}: no such file")
        require(host.stat().st_size <= MAX_FILE_BYTES, f"read_file {path}: over {MAX_FILE_BYTES} bytes")
        return host.read_bytes()

    def _list(self, path: str) -> list[FileInfo]:
        host = self._host(path)
        require(host.is_dir(), f"list_dir {path}: not a directory")
        return [FileInfo(p.name, "link" if p.is_symlink() else _KINDS[p.is_dir()], p.lstat().st_size)
                for p in host.iterdir()]

    def _host(self, path: str) -> Path:
        """Host path of an in-sandbox workspace path; symlinks may not lead out."""
        host = (self._ws / os.path.relpath(path, WORKSPACE)).resolve()
        require(host == self._ws.resolve() or self._ws.resolve() in host.parents, f"{path} leaves the workspace")
        return host

    def _save_workspace(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(self._ws), arcname=".")
        return buf.getvalue()

    def _restore_workspace(self, archive: bytes) -> None:
        shutil.rmtree(self._ws, ignore_errors=True)
        self._ws.mkdir()
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(self._ws, filter="tar")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
