"""What a sandbox is asked for (`SandboxSpec`) and what one command gives back (`ExecResult`).

    spec = SandboxSpec(memory_mb=256, network="none", command_timeout_s=10)
    with open_sandbox("docker", spec) as sb:
        r = sb.exec("python3 -c 'print(6*7)'")      # ExecResult(exit_code=0, stdout="42\\n", ...)

A spec is validated on construction (pydantic) with errors that name the field; every
backend reads the same spec. Not covered: how a backend enforces it (see
`sandboxes.docker_backend` and `sandboxes.local_backend`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_IMAGE = "rlwb-sandbox:latest"
WORKSPACE = "/workspace"
_HOST_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SandboxSpec(BaseModel):
    """Resources and policy of one sandbox. Units are in the field names.

    Attributes:
        image: container image (Docker backend); built by `rlwb sandbox build-image`.
        cpus: CPU share (1.0 = one core).
        memory_mb: memory limit in MiB (swap disabled); exceeding it OOM-kills the program.
        pids: maximum number of processes and threads (a fork bomb hits this).
        workspace_mb: size of the writable workspace in MiB.
        network: "none" (default, no interface but loopback) or a list of host names or IPs
            the sandbox may reach (everything else is dropped).
        env: environment variables for every command.
        command_timeout_s: default wall-clock limit of one `exec`, in seconds.
        episode_timeout_s: budget of one episode (from `start`/`reset`): the summed wall-clock
            time of its commands, seconds.
        output_limit_bytes: stdout and stderr are each cut to this many bytes; the rest is
            counted in `ExecResult.truncated_bytes`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    image: str = Field(DEFAULT_IMAGE, min_length=1, max_length=200)
    cpus: float = Field(1.0, gt=0, le=64)
    memory_mb: int = Field(512, ge=16, le=65536)
    pids: int = Field(128, ge=8, le=32768)
    workspace_mb: int = Field(64, ge=1, le=16384)
    network: Literal["none"] | tuple[str, ...] = "none"
    env: dict[str, str] = Field(default_factory=dict)
    command_timeout_s: float = Field(10.0, gt=0, le=3600)
    episode_timeout_s: float = Field(300.0, gt=0, le=86400)
    output_limit_bytes: int = Field(65536, ge=1, le=64 * 1024 * 1024)

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value):
        if value == "none" or value is None:
            return "none"
        if isinstance(value, str) or not all(isinstance(h, str) and _HOST_RE.match(h) for h in value):
            raise ValueError("network must be 'none' or a list of host names/IPs to allow, e.g. ['10.0.0.5']")
        if not value:
            raise ValueError("network allow-list is empty; use network='none' to block everything")
        return tuple(value)

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            if not _ENV_KEY_RE.match(k) or "\x00" in v:
                raise ValueError(f"env: {k!r} is not a valid variable (NAME=[A-Za-z_][A-Za-z0-9_]*, no NUL in value)")
        return value


@dataclass
class ExecResult:
    """Outcome of one command in a sandbox.

    Attributes:
        exit_code: the command's exit status (128 + signal when killed; -1 when the
            harness could not tell).
        stdout: standard output, decoded as UTF-8 with replacement, cut to the spec's
            output limit.
        stderr: standard error, likewise.
        duration_ms: wall-clock time of the command in milliseconds (host side).
        timed_out: the command hit its timeout and its whole process group was killed.
        oom_killed: the kernel killed a process of the command for exceeding the memory limit.
        truncated_bytes: bytes of stdout + stderr dropped by the output limit.
    """

    exit_code: int
    stdout: str
    stderr: str
    duration_ms: float
    timed_out: bool = False
    oom_killed: bool = False
    truncated_bytes: int = 0

    @property
    def ok(self) -> bool:
        """Exit code 0 and neither timed out nor OOM-killed."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @property
    def outcome(self) -> str:
        """One word for the page and the metrics: ok, error, timeout or oom."""
        if self.timed_out:
            return "timeout"
        if self.oom_killed:
            return "oom"
        return "ok" if self.exit_code == 0 else "error"

    def to_dict(self) -> dict:
        return asdict(self)


class OutputCap:
    """Keeps the first `limit` bytes of a stream and counts the rest.

    Args:
        limit: bytes to keep.
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.kept, self.dropped = limit, bytearray(), 0

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")
