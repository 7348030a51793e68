"""The `Sandbox` interface every backend implements, and the parts they share.

    with DockerSandbox(SandboxSpec()) as sb:           # start() on enter, close() on exit
        sb.write_file("main.py", "print('hi')")
        r = sb.exec("python3 main.py", timeout_s=5)     # ExecResult
        snap = sb.snapshot()                            # workspace saved on the host
        sb.exec("rm -rf /workspace/*")
        sb.rollback(snap)                               # workspace back as it was
        sb.reset()                                      # clean workspace, fresh episode clock

A sandbox owns one workspace (``/workspace`` inside it, the only writable place besides
``/tmp``) and runs every command as an unprivileged user. Snapshots are tar images of the
workspace kept in host memory; `reset` rolls back to the snapshot taken at `start`, puts the
workspace directory itself back as it was at `start` (type, mode, owner, extended
attributes: a task may ``chmod 000 /workspace``), then verifies it (`WorkspaceState`: the
same directory, mode and owner, a probe file the sandbox user can create and remove, no
process left). A reset that can't be verified raises `SandboxError`, so the pool replaces
the sandbox instead of handing it to the next task.

Not covered here: how isolation is enforced (the backends), pooling and scheduling
(`sandboxes.pool`). This is not a security boundary by itself: the Docker backend is the
isolating one; `sandboxes.local_backend` is weaker and says so.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields

from core.errors import ConfigError, SandboxError, SandboxTimeout
from sandboxes.spec import WORKSPACE, ExecResult, SandboxSpec

MAX_FILE_BYTES = 16 * 1024 * 1024  # read_file / write_file cap
MAX_COMMAND_BYTES = 100_000  # the kernel refuses longer single arguments (MAX_ARG_STRLEN 128 KiB)
MAX_STDIN_BYTES = 16 * 1024 * 1024
MAX_TIMEOUT_S = 86_400.0


def check_command(cmd) -> str:
    """A shell command as given, or ConfigError naming what is wrong with it."""
    if not isinstance(cmd, str) or "\x00" in cmd:
        raise ConfigError("sandbox command must be a string without NUL bytes")
    try:
        size = len(cmd.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigError("sandbox command is not valid Unicode (lone surrogates); pass UTF-8 text") from None
    if size > MAX_COMMAND_BYTES:
        raise ConfigError(f"sandbox command is {size} bytes, over {MAX_COMMAND_BYTES}; put long input in a "
                          "file (write_file) or on stdin")
    return cmd


def check_timeout(value) -> float:
    """A timeout in seconds: a finite number in (0, MAX_TIMEOUT_S], else ConfigError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT_S:
        raise ConfigError(f"timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class FileInfo:
    """One entry of `Sandbox.list_dir`: name, kind ("file", "dir", "link", "other"), size in bytes."""

    name: str
    kind: str
    size: int


@dataclass(frozen=True)
class WorkspaceState:
    """The workspace directory itself (not its contents), as `Sandbox.reset` verifies it.

    Ids and the device are as the backend sees them (the host's for ``local``, the
    container's for ``docker``).

    Attributes:
        kind: "dir", "link", "other" or "missing" (lstat: a symlink is not followed).
        mode: permission bits with setuid/setgid/sticky (``stat.S_IMODE``).
        uid: owner's user id.
        gid: owner's group id.
        device: ``st_dev``; another file system mounted over the workspace changes it.
        xattrs: names of its extended attributes (POSIX ACLs show as ``system.posix_acl_*``).
        writable: the sandbox user created and removed a probe file in it.
        processes: processes of the sandbox still running after the kill.
    """

    kind: str
    mode: int = 0
    uid: int = -1
    gid: int = -1
    device: int = -1
    xattrs: tuple[str, ...] = ()
    writable: bool = False
    processes: int = 0

    @classmethod
    def from_dict(cls, d: dict) -> "WorkspaceState":
        """From `as_dict`'s form (the Docker agent's replies)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d} | {"xattrs": tuple(d.get("xattrs", ()))})

    def as_dict(self) -> dict:
        """JSON-ready form (xattrs as a list)."""
        return asdict(self) | {"xattrs": list(self.xattrs)}

    def problems(self, base: "WorkspaceState") -> list[str]:
        """What makes this state unusable or different from `base` (the state at start), in
        words; [] when it is fit for the next task."""
        out = []
        if self.kind != "dir":
            out.append(f"it is {'missing' if self.kind == 'missing' else 'a ' + self.kind}, not a directory")
        else:
            if self.device != base.device:
                out.append(f"another file system is mounted on it (device {self.device}, was {base.device})")
            if self.mode != base.mode:
                out.append(f"mode {self.mode:o}, was {base.mode:o}")
            if (self.uid, self.gid) != (base.uid, base.gid):
                out.append(f"owner {self.uid}:{self.gid}, was {base.uid}:{base.gid}")
            if self.xattrs != base.xattrs:
                out.append(f"extended attributes {list(self.xattrs)}, were {list(base.xattrs)}")
            if not self.writable:
                out.append("the sandbox user can't create a file in it")
        if self.processes:
            out.append(f"{self.processes} process(es) still running")
        return out


def workspace_path(path: str) -> str:
    """Absolute in-sandbox path for a workspace-relative (or absolute ``/workspace/...``) path.

    Raises:
        ConfigError: If the path is empty, has a NUL byte or leaves the workspace.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        raise ConfigError(f"sandbox path must be a non-empty string without NUL bytes, got {path!r}")
    full = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        raise ConfigError(f"sandbox path {path!r} leaves the workspace {WORKSPACE}; use a path inside it")
    return full


class Sandbox(ABC):
    """One isolated execution place. Subclasses implement the `_`-prefixed primitives.

    Attributes:
        backend: backend name ("docker", "local").
        isolation: what isolates it, in words, for the CLI and the page.
        spec: the `SandboxSpec` it was started with.
        id: backend id (container id, or a temp dir), set by `start`.
    """

    backend = "base"
    isolation = ""

    def __init__(self, spec: SandboxSpec | None = None, labels: dict[str, str] | None = None) -> None:
        self.spec = spec or SandboxSpec()
        self.labels = dict(labels or {})
        self.id: str | None = None
        self._snapshots: dict[str, bytes] = {}
        self._base_snapshot: str | None = None
        self._base_workspace: WorkspaceState | None = None
        self._episode_used = 0.0

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, spec: SandboxSpec | None = None) -> "Sandbox":
        """Create the sandbox, record its workspace directory (`WorkspaceState`) and take the
        base snapshot that `reset` returns to.

        Args:
            spec: replaces the spec given at construction, if not None.

        Raises:
            SandboxUnavailable: the backend can't run here (message says why).
            SandboxError: the backend failed to create it, or its workspace is not usable.
        """
        if self.id is not None:
            raise ConfigError(f"sandbox {self.id[:12]} is already started; close it first")
        if spec is not None:
            self.spec = spec
        self._start()
        try:
            self._base_workspace = self._workspace_state()
            self._verify(self._base_workspace)
            self._base_snapshot = self.snapshot()
        except BaseException:
            self.close()
            raise
        self._episode_used = 0.0
        return self

    def reset(self) -> None:
        """End the episode: kill every process, restore the base workspace (its files and the
        directory itself), restart the clock, then verify the workspace directory.

        Raises:
            SandboxError: the sandbox is gone, or its workspace directory could not be put
                back as it was at `start` (the pool replaces it in both cases).
        """
        try:
            state = self._clean_slate(self._snapshots[self._base_snapshot])
        except OSError as e:  # a host-side failure of the harness, not the task's
            raise SandboxError(f"sandbox {self.id}: reset failed ({e}); it must be replaced") from None
        for sid in [s for s in self._snapshots if s != self._base_snapshot]:
            del self._snapshots[sid]
        self._episode_used = 0.0
        self._verify(state)

    def _verify(self, state: WorkspaceState) -> None:
        """Raise SandboxError unless `state` matches the workspace recorded at `start`."""
        problems = state.problems(self._base_workspace)
        if problems:
            raise SandboxError(f"sandbox {self.id}: its workspace directory is not as it was at start "
                               f"({'; '.join(problems)}); it must be replaced")

    def close(self) -> None:
        """Remove the sandbox and everything in it. Safe to call twice."""
        self._snapshots.clear()
        self._close()

    def __enter__(self) -> "Sandbox":
        return self if self.id is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- commands ----------------------------------------------------------------------
    def episode_time_left(self) -> float:
        """Seconds left of the per-episode budget (may be negative). The budget counts the
        wall-clock time of the episode's commands, not the time between them (a model
        thinking about its next command spends none of it)."""
        return self.spec.episode_timeout_s - self._episode_used

    def exec(self, cmd: str, timeout_s: float | None = None, stdin: str | bytes | None = None,
             budget: bool = True) -> ExecResult:
        """Run a shell command (``bash -c``) in the workspace as the unprivileged user.

        Args:
            cmd: the command line.
            timeout_s: wall-clock limit in seconds (default: spec.command_timeout_s), capped
                by what is left of the episode budget. At the limit the command's whole
                process group is killed with SIGKILL (trapping SIGTERM does not help).
            stdin: bytes (or UTF-8 text) fed to the command's standard input.
            budget: count against (and stop at) the per-episode budget; False for the
                harness's own commands after an episode (a checker must run even then).

        Returns:
            The `ExecResult`; a program's failure (non-zero exit, timeout, OOM) is a
            result, not an exception.

        Raises:
            SandboxTimeout: the episode budget is already spent.
            SandboxError: the harness failed (engine error, sandbox gone).
            ConfigError: cmd is not a string, has NUL bytes or is over MAX_COMMAND_BYTES;
                the timeout is not a finite positive number; stdin is too large.
        """
        check_command(cmd)
        timeout = check_timeout(timeout_s if timeout_s is not None else self.spec.command_timeout_s)
        if budget:
            left = self.episode_time_left()
            if left <= 0:
                raise SandboxTimeout(f"episode budget of {self.spec.episode_timeout_s:g} s is spent; reset the sandbox")
            timeout = min(timeout, left)
        t0 = time.monotonic()
        try:
            return self._exec(cmd, timeout, stdin_bytes(stdin))
        finally:
            if budget:
                self._episode_used += time.monotonic() - t0

    def run_fresh(self, cmd: str, files: dict[str, str] | None = None, timeout_s: float | None = None,
                  stdin: str | bytes | None = None) -> ExecResult:
        """One self-contained job: reset to the base workspace, write `files`, run `cmd`,
        then kill every process it left behind. Backends may do this in one round trip.

        Args:
            cmd, timeout_s, stdin: as for `exec`.
            files: workspace-relative path -> text, written before the command.

        Raises:
            SandboxError, ConfigError: as for `exec` and `write_file`.
        """
        files = check_files(files)
        self.reset()
        for path, text in files.items():
            self.write_file(path, text)
        try:
            return self.exec(cmd, timeout_s=timeout_s, stdin=stdin)
        finally:
            self._kill_all()

    # -- files -------------------------------------------------------------------------
    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        """Write a file in the workspace (parent directories are created).

        Raises:
            ConfigError: bad path or data over MAX_FILE_BYTES.
            SandboxError: the write failed (e.g. the workspace is full).
        """
        blob = data.encode() if isinstance(data, str) else bytes(data)
        if len(blob) > MAX_FILE_BYTES:
            raise ConfigError(f"file of {len(blob)} bytes is over the {MAX_FILE_BYTES}-byte limit")
        self._write(workspace_path(path), blob, mode)

    def read_file(self, path: str) -> bytes:
        """Contents of a workspace file.

        Raises:
            ConfigError: bad path. SandboxError: no such file, or it is over MAX_FILE_BYTES.
        """
        return self._read(workspace_path(path))

    def list_dir(self, path: str = ".") -> list[FileInfo]:
        """Entries of a workspace directory, sorted by name.

        Raises:
            ConfigError: bad path. SandboxError: not a directory.
        """
        return sorted(self._list(workspace_path(path)), key=lambda f: f.name)

    # -- snapshots ---------------------------------------------------------------------
    def snapshot(self) -> str:
        """Save the workspace; returns the snapshot id for `rollback`."""
        sid = uuid.uuid4().hex[:12]
        self._snapshots[sid] = self._save_workspace()
        return sid

    def rollback(self, snapshot_id: str) -> None:
        """Restore the workspace saved by `snapshot`; the directory itself gets its type, mode
        and owner of `start` back (running processes are not touched).

        Raises:
            ConfigError: unknown snapshot id.
        """
        if snapshot_id not in self._snapshots:
            raise ConfigError(f"unknown snapshot {snapshot_id!r}; known: {sorted(self._snapshots)}")
        self._restore_workspace(self._snapshots[snapshot_id])

    # -- backend primitives ------------------------------------------------------------
    @abstractmethod
    def _start(self) -> None: ...

    @abstractmethod
    def _close(self) -> None: ...

    @abstractmethod
    def _exec(self, cmd: str, timeout_s: float, stdin: bytes | None) -> ExecResult: ...

    def _clean_slate(self, base_archive: bytes) -> WorkspaceState:
        """Kill every process, restore the base workspace, and return the workspace's state
        for `reset` to verify (backends may do more, or do it in one round trip)."""
        self._kill_all()
        self._restore_workspace(base_archive)
        return self._workspace_state()

    @abstractmethod
    def _kill_all(self) -> None:
        """Kill every process the sandbox user runs."""

    @abstractmethod
    def _write(self, path: str, data: bytes, mode: int) -> None: ...

    @abstractmethod
    def _read(self, path: str) -> bytes: ...

    @abstractmethod
    def _list(self, path: str) -> list[FileInfo]: ...

    @abstractmethod
    def _save_workspace(self) -> bytes:
        """The workspace as an uncompressed tar archive."""

    @abstractmethod
    def _restore_workspace(self, archive: bytes) -> None:
        """Empty the workspace, unpack `archive` into it, and give the directory itself the
        type, mode, owner and extended attributes of `self._base_workspace` back."""

    @abstractmethod
    def _workspace_state(self) -> WorkspaceState:
        """The workspace directory as it is now, probe write by the sandbox user included."""


def check_files(files) -> dict[str, str]:
    """Job files: workspace-relative path -> text; ConfigError on anything else."""
    if files is None:
        return {}
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ConfigError("files must map workspace paths (str) to text contents (str)")
    for path in files:
        workspace_path(path)
    return files


def stdin_bytes(stdin) -> bytes | None:
    """stdin as bytes (None stays None); ConfigError for other types, bad Unicode or over MAX_STDIN_BYTES."""
    if stdin is None:
        return None
    if isinstance(stdin, str):
        try:
            stdin = stdin.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError("stdin is not valid Unicode (lone surrogates); pass bytes or UTF-8 text") from None
    if not isinstance(stdin, (bytes, bytearray)):
        raise ConfigError(f"stdin must be text or bytes, got {type(stdin).__name__}")
    if len(stdin) > MAX_STDIN_BYTES:
        raise ConfigError(f"stdin of {len(stdin)} bytes is over the {MAX_STDIN_BYTES}-byte limit; use a file")
    return bytes(stdin)


def require(condition: bool, message: str) -> None:
    """Raise SandboxError(message) unless condition holds (harness-side checks)."""
    if not condition:
        raise SandboxError(message)
