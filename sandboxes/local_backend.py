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
cgroup), and the workspace size is only enforced per file. It is never chosen silently when Docker was asked for.

A reset deletes the workspace directory and makes it anew with the mode and owner it had at
start, so a task that locked it (``chmod 000 /workspace``, unreadable subdirectories: an
ordinary user's ``rm -rf`` can't enter them) does not lock out the next one; the probe of
`Sandbox.reset` writes as the user bwrap runs as.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from core.errors import ConfigError, SandboxError, SandboxUnavailable
from sandboxes.base import MAX_FILE_BYTES, FileInfo, Sandbox, WorkspaceState, require
from sandboxes.spec import WORKSPACE, ExecResult, OutputCap

_KINDS = {True: "dir", False: "file"}
BWRAP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # the environment bwrap itself starts with


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
        self._ws.mkdir(mode=0o700)  # only its owner (nobody, when we are root) and root enter
        if os.geteuid() == 0:
            self._dir.chmod(0o711)  # traversable, not listable, so bwrap (as nobody) reaches the workspace
        _own(self._ws)
        self.id = str(self._dir)

    def _close(self) -> None:
        d = getattr(self, "_dir", None)
        if d is not None:
            self._kill_all()
            _rm_tree(d)
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
        if os.geteuid() == 0:  # never run bwrap as host root: files it makes are then nobody's
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

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
                # bwrap gets no host environment either (the command's is --clearenv'd): an LD_PRELOAD
                # the host set (vLLM's CPU build preloads torch's libgomp) in a checkout nobody can read
                # (a 0700 home) made the loader print an error into every command's stderr
                proc = subprocess.Popen(self._argv(cmd), stdin=subprocess.PIPE if stdin is not None else
                                        subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True,
                                        preexec_fn=self._limits, env=BWRAP_ENV)
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
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # reaped, so `_workspace_state` counts only what survived

    def _write(self, path: str, data: bytes, mode: int) -> None:
        host = self._host(path)
        try:
            host.parent.mkdir(parents=True, exist_ok=True)
            # O_NONBLOCK: a FIFO without a reader fails instead of blocking this thread
            fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, mode & 0o777)
            with os.fdopen(fd, "wb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ConfigError(f"write_file {path}: not a regular file")
                f.truncate(0)
                f.write(data)
            os.chmod(host, mode & 0o777)
        except OSError as e:
            raise ConfigError(f"write_file {path}: {e.strerror}") from None
        for p in [host, *host.parents]:
            if p == self._ws:
                break
            _own(p)

    def _read(self, path: str) -> bytes:
        host = self._host(path)
        try:
            fd = os.open(host, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            raise ConfigError(f"read_file {path}: {e.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(f"read_file {path}: not a regular file")
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError(f"read_file {path}: over {MAX_FILE_BYTES} bytes")
        return data

    def _list(self, path: str) -> list[FileInfo]:
        host = self._host(path)
        if not host.is_dir():
            raise ConfigError(f"list_dir {path}: not a directory")
        return [FileInfo(p.name, "link" if p.is_symlink() else _KINDS[p.is_dir()], p.lstat().st_size)
                for p in host.iterdir()]

    def _host(self, path: str) -> Path:
        """Host path of an in-sandbox workspace path; symlinks may not lead out."""
        host = (self._ws / os.path.relpath(path, WORKSPACE)).resolve()
        if host != self._ws.resolve() and self._ws.resolve() not in host.parents:
            raise ConfigError(f"{path} leaves the workspace")
        return host

    def _save_workspace(self) -> bytes:
        # GNU tar: trees of any depth, sparse files stay small, FIFOs and hard links kept
        limit = (self.spec.workspace_mb + 16) * 1024 * 1024
        proc = subprocess.run(["tar", "-C", str(self._ws), "--sparse", "-cf", "-", "."], capture_output=True)
        require(proc.returncode == 0, f"snapshot failed: {proc.stderr.decode(errors='replace')[-300:]}")
        if len(proc.stdout) > limit:
            raise ConfigError(f"the workspace archive is over {limit} bytes; it can't be snapshotted")
        return proc.stdout

    def _restore_workspace(self, archive: bytes) -> None:
        _rm_tree(self._ws)
        require(not os.path.lexists(self._ws), f"could not remove the workspace {self._ws}")
        self._ws.mkdir(mode=0o700)
        proc = subprocess.run(["tar", "-C", str(self._ws), "-xpf", "-"], input=archive, capture_output=True)
        require(proc.returncode == 0, f"rollback failed: {proc.stderr.decode(errors='replace')[-300:]}")
        _own(self._ws, recursive=True)
        base = self._base_workspace  # the directory itself as at start (tar's "./" entry may differ)
        if os.geteuid() == 0:
            os.lchown(self._ws, base.uid, base.gid)
        os.chmod(self._ws, base.mode)

    def _workspace_state(self) -> WorkspaceState:
        live = sum(proc.poll() is None for proc in list(getattr(self, "_procs", ())))
        try:
            st = os.lstat(self._ws)
        except FileNotFoundError:
            return WorkspaceState("missing", processes=live)
        kind = "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "other"
        try:
            xattrs = tuple(sorted(os.listxattr(self._ws, follow_symlinks=False)))
        except OSError:  # a file system without extended attributes
            xattrs = ()
        return WorkspaceState(kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_dev, xattrs,
                              kind == "dir" and _probe(self._ws), live)


NOBODY = 65534


def _own(path: Path, recursive: bool = False) -> None:
    """Hand a workspace path to the unprivileged user bwrap runs as (when we are root)."""
    if os.geteuid() != 0:
        return
    if recursive:  # chown(1) walks trees of any depth
        subprocess.run(["chown", "-hR", f"{NOBODY}:{NOBODY}", str(path)], check=False, capture_output=True)
    else:
        os.lchown(path, NOBODY, NOBODY)


def _probe(ws: Path) -> bool:
    """Whether the user bwrap runs as (nobody when we are root, else us) can create and
    remove a file in `ws`."""
    root = os.geteuid() == 0
    proc = subprocess.run(["sh", "-c", 'f=$(mktemp -p "$1" .rlwb-probe.XXXXXX) && rm -f -- "$f"', "probe", str(ws)],
                          user=NOBODY if root else None, group=NOBODY if root else None,
                          extra_groups=[] if root else None, cwd="/", capture_output=True)
    return proc.returncode == 0


def _rm_tree(path: Path) -> None:
    """rm -rf (handles trees of any depth, unlike shutil.rmtree). An ordinary user's rm can't
    enter the directories a task made unreadable (``chmod 000``): their owner gets rwx back
    first (chmod -R never follows symlinks met inside the tree)."""
    rm = ["rm", "-rf", "--one-file-system", "--", str(path)]
    subprocess.run(rm, check=False, capture_output=True)
    if os.path.lexists(path) and not os.path.islink(path):
        subprocess.run(["chmod", "-R", "u+rwx", "--", str(path)], check=False, capture_output=True)
        subprocess.run(rm, check=False, capture_output=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
