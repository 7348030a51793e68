"""Docker backend: each sandbox is a container on the local engine, driven by the `docker` SDK.

    with DockerSandbox(SandboxSpec(memory_mb=256)) as sb:
        sb.exec("python3 -c 'print(1)'")

How the spec is enforced (by the engine, not by us):
- ``--init`` (tini as PID 1) running the in-container agent (`sandboxes.agent`, passed on
  the command line, so the image needs only python3): one ``docker attach`` stream per
  container carries JSON requests and replies, so a command costs one round trip instead
  of a ``docker exec`` (~100 ms of runc set-up here). Commands run as uid 1000; at the
  limit their session and every other process but tini and the agent get SIGKILL, so
  SIGTERM traps, ``setsid`` and fork bombs end on time. If the agent stops answering
  (limit + 2 s) the sandbox is declared broken (a harness fault) and the pool replaces it.
- read-only root file system; ``/workspace`` (``spec.workspace_mb``) and ``/tmp`` are
  tmpfs mounts: no host mounts at all, never the Docker socket (checked on the created
  container, `host_mounts`: a bind or volume refuses the sandbox).
- ``--memory`` = ``--memory-swap`` (no swap), ``--pids-limit``, ``--cpus``; all
  capabilities dropped except the few the root agent needs (uid 1000 has none),
  ``no-new-privileges``; commands are first in line for the OOM killer.
- network ``none`` (loopback only) by default; with an allow-list in the spec, a bridge
  network plus iptables rules that drop everything but the listed hosts
  (`sandboxes.egress`; needs root).

Containers carry the labels ``rlwb.sandbox=1`` and ``rlwb.owner=<host>:<pid>``. When the
owner dies the attach stream closes, the agent exits and the container stops;
`collect_garbage` removes containers whose owner is gone. This is the only module that
imports ``docker``.
"""

from __future__ import annotations

import base64
import io
import json
import os
import select
import socket
import tarfile
import threading
import time
from pathlib import Path
import docker
import docker.errors
import requests.exceptions

from core.errors import ConfigError, SandboxError, SandboxUnavailable
from sandboxes import egress
from sandboxes.owners import owner_alive, owner_tag
from sandboxes.base import (MAX_FILE_BYTES, FileInfo, Sandbox, WorkspaceState, stdin_bytes, check_command,
                            check_files, check_timeout, workspace_path)
from sandboxes.spec import WORKSPACE, ExecResult

LABEL = "rlwb.sandbox"
OWNER_LABEL = "rlwb.owner"
SANDBOX_USER = "1000:1000"
_AGENT_GRACE_S = 2.0  # how long past a command's limit the agent may take to answer
_START_TIMEOUT_S = 30.0
_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"]  # the root agent only
_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)
_AGENT_SOURCE = (Path(__file__).with_name("agent.py")).read_text()

_client_lock = threading.Lock()
_clients: dict[int, docker.DockerClient] = {}


def docker_client() -> docker.DockerClient:
    """A client for the local engine (one per process), checked with a ping.

    Raises:
        SandboxUnavailable: no engine answers; the message says how to start one.
    """
    with _client_lock:
        client = _clients.get(os.getpid())
        if client is None:
            try:
                client = docker.from_env(timeout=60)
                client.ping()
            except _ENGINE_ERRORS as e:
                raise SandboxUnavailable(
                    f"no Docker engine answers ({e.__class__.__name__}: {e}). As root: `apt-get install docker.io` "
                    "and start `dockerd &` (make setup does both), or choose sandbox backend 'local' "
                    "(weaker isolation)") from None
            _clients[os.getpid()] = client
        return client


def find_image(client: docker.DockerClient, tag: str):
    """The local image called `tag`, or None."""
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def import_image(client: docker.DockerClient, tar_path, tag: str, labels: dict[str, str]) -> str:
    """`docker import` a rootfs tar file as `tag` with labels, PATH and workdir set; returns the id."""
    repo, _, version = tag.partition(":")
    changes = [f"LABEL {k}={v}" for k, v in labels.items()] + [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8",
        f"WORKDIR {WORKSPACE}"]
    try:
        client.api.import_image(src=str(tar_path), repository=repo, tag=version or "latest", changes=changes)
        return client.images.get(tag).id
    except _ENGINE_ERRORS as e:
        raise SandboxUnavailable(f"docker import of {tag} failed: {e}") from None


def remove_image(client: docker.DockerClient, image_id: str, log=print) -> None:
    """Remove a replaced image, unless containers still use it (then say so)."""
    try:
        client.images.remove(image_id)
        log(f"removed the previous image {image_id[:19]}")
    except docker.errors.APIError as e:
        log(f"kept the previous image {image_id[:19]} ({e.explanation or e}); remove it later with "
            f"`docker rmi {image_id[7:19]}`")


def labelled_containers(client: docker.DockerClient | None = None) -> list:
    """Every container (running or not) with the ``rlwb.sandbox`` label."""
    client = client or docker_client()
    return client.containers.list(all=True, filters={"label": LABEL})


def collect_garbage(everything: bool = False) -> int:
    """Remove labelled containers whose owner process is dead (or all of them).

    Args:
        everything: remove every labelled container, owners alive or not.

    Returns:
        The number of containers removed.
    """
    client = docker_client()
    removed, live = 0, set()
    for c in labelled_containers(client):
        if everything or not owner_alive(c.labels.get(OWNER_LABEL, "")):
            try:
                c.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
        else:
            live.add(c.id[:12])
    egress.collect_rules(client, live)  # allow-list rules of containers that are gone
    return removed


class AgentChannel:
    """JSON lines to and from the in-container agent over one ``docker attach`` socket.

    The attach stream is multiplexed: 8-byte frame headers (stream id, 3 zero bytes,
    big-endian payload size). docker-py's own frame reader blocks in poll() without a
    timeout, so this one reads with select() to enforce deadlines.
    """

    def __init__(self, sock) -> None:
        self._sock = sock
        self._raw: socket.socket = getattr(sock, "_sock", sock)
        self._frames = bytearray()
        self._lines = bytearray()
        self.stderr = bytearray()  # the agent's own stderr (tracebacks), kept for errors

    def send(self, obj: dict) -> None:
        self._raw.sendall(json.dumps(obj).encode() + b"\n")

    def receive(self, deadline: float) -> dict:
        """The next reply line, parsed. Raises TimeoutError at `deadline`, EOFError at EOF."""
        while b"\n" not in self._lines:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._raw], [], [], left)[0]:
                raise TimeoutError("agent did not answer in time")
            chunk = self._raw.recv(1 << 20)
            if not chunk:
                raise EOFError("agent stream closed")
            self._frames += chunk
            while len(self._frames) >= 8:
                size = int.from_bytes(self._frames[4:8], "big")
                if len(self._frames) < 8 + size:
                    break
                target = self._lines if self._frames[0] == 1 else self.stderr
                target += self._frames[8 : 8 + size]
                del self._frames[: 8 + size]
        line, _, rest = bytes(self._lines).partition(b"\n")
        self._lines = bytearray(rest)
        return json.loads(line)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def host_mounts(attrs: dict) -> list[str]:
    """The mounts of a container (``docker inspect`` attributes) that are not tmpfs: binds
    and volumes, e.g. ``["bind /var/run/docker.sock"]``. Sandboxes must have none."""
    found = [f"{m.get('Type')} {m.get('Source') or m.get('Name')}" for m in attrs.get("Mounts") or []
             if m.get("Type") != "tmpfs"]
    host = attrs.get("HostConfig") or {}
    found += [f"bind {b}" for b in host.get("Binds") or []]
    found += [f"{m.get('Type')} {m.get('Source')}" for m in host.get("Mounts") or [] if m.get("Type") != "tmpfs"]
    return found


class DockerSandbox(Sandbox):
    """A sandbox in a container on the local Docker engine (see the module docstring)."""

    backend = "docker"
    _base_empty = False  # the workspace at `start` was empty: resets need no archive
    isolation = "container (Docker: namespaces, cgroups, read-only rootfs, no network)"

    def _start(self) -> None:
        spec = self.spec
        client = docker_client()
        net: dict = {"network_mode": "none"}
        self._allowed: list[str] | None = None
        if spec.network != "none":  # an allow-list: bridge network + iptables rules (sandboxes.egress)
            resolved = egress.resolve(spec.network)
            self._allowed = sorted({ip for ips in resolved.values() for ip in ips})
            net = {"network": egress.ensure_network(client),
                   "extra_hosts": {h: ips[0] for h, ips in resolved.items() if h not in ips}}
        if find_image(client, spec.image) is None:
            raise SandboxUnavailable(f"image {spec.image} not found; build it with `rlwb sandbox build-image`")
        labels = {LABEL: "1", OWNER_LABEL: owner_tag(), **self.labels}
        self._lock = threading.Lock()
        try:
            self._container = client.containers.create(
                spec.image, ["python3", "-I", "-u", "-c", _AGENT_SOURCE], init=True, labels=labels,
                stdin_open=True, **net, read_only=True, user="0:0", working_dir=WORKSPACE,
                tmpfs={WORKSPACE: f"size={spec.workspace_mb}m,uid=1000,gid=1000,mode=0755",
                       "/tmp": "size=64m,mode=1777", "/rlwb": "size=64m,mode=0700"},
                mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m",
                pids_limit=spec.pids, nano_cpus=int(spec.cpus * 1e9),
                cap_drop=["ALL"], cap_add=_CAPS, security_opt=["no-new-privileges"],
                environment={"HOME": WORKSPACE, **spec.env},
            )
            self.id = self._container.id
            mounts = host_mounts(self._container.attrs)
            if mounts:  # nothing of the host may reach a sandbox, whatever the image or engine adds
                raise SandboxError(f"refusing to start a sandbox with host mounts {mounts}; sandboxes get tmpfs "
                                   f"only (check the image {spec.image} for VOLUME lines)")
            sock = client.api.attach_socket(self.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self._channel = AgentChannel(sock)
            self._container.start()
            if self._allowed is not None:
                self._apply_allow_list()
            hello = self._channel.receive(time.monotonic() + _START_TIMEOUT_S)
        except (*_ENGINE_ERRORS, TimeoutError, EOFError, ValueError) as e:
            self._close()
            raise SandboxError(f"docker could not start a sandbox from {spec.image}: {e}") from None
        except SandboxError:  # SandboxUnavailable, or host mounts refused
            self._close()
            raise
        if not hello.get("ready"):
            self._close()
            raise SandboxError(f"sandbox agent did not start: {hello}")

    def _apply_allow_list(self) -> None:
        """iptables rules for this container's address, before any command can run."""
        self._container.reload()
        address = self._container.attrs["NetworkSettings"]["Networks"][egress.NETWORK]["IPAddress"]
        egress.apply_rules(self.id, address, self._allowed)

    def _close(self) -> None:
        if getattr(self, "_allowed", None) is not None and self.id:
            egress.remove_rules(self.id)
        channel, self._channel = getattr(self, "_channel", None), None
        if channel is not None:
            channel.close()
        container, self._container = getattr(self, "_container", None), None
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
            except _ENGINE_ERRORS as e:
                raise SandboxError(f"could not remove sandbox container {self.id}: {e}") from None

    def _call(self, request: dict, timeout_s: float = 60.0) -> dict:
        """One request/reply with the agent. Harness failures raise SandboxError."""
        if getattr(self, "_channel", None) is None:
            raise SandboxError("sandbox is not started, closed, or broken")
        with self._lock:
            try:
                self._channel.send(request)
                reply = self._channel.receive(time.monotonic() + timeout_s + _AGENT_GRACE_S)
            except BaseException as e:
                # a reply may still be on its way: never reuse this stream (replies would shift)
                channel, self._channel = self._channel, None
                channel.close()
                if not isinstance(e, (OSError, TimeoutError, EOFError, ValueError)):
                    raise
                tail = bytes(channel.stderr[-500:]).decode(errors="replace")
                raise SandboxError(f"sandbox {self.id[:12]} stopped answering ({e}); agent stderr: {tail!r}; "
                                   "it is broken and must be replaced") from None
        if not reply.get("ok"):
            if reply.get("user"):  # the request's fault (bad path, not a regular file, ...)
                raise ConfigError(f"sandbox: {reply.get('error')}")
            raise SandboxError(f"sandbox {self.id[:12]}: {reply.get('error')}")
        return reply

    def _exec(self, cmd: str, timeout_s: float, stdin: bytes | None) -> ExecResult:
        return self._run({"op": "run", "cmd": cmd, "timeout": timeout_s, "stdin": _b64(stdin or b"")}, timeout_s)

    def run_fresh(self, cmd: str, files: dict[str, str] | None = None, timeout_s: float | None = None,
                  stdin: str | bytes | None = None) -> ExecResult:
        """`Sandbox.run_fresh` in one round trip: the agent kills leftovers, empties the
        workspace and restores the directory itself, verifies it (refusing to run `cmd` if
        it is not as at `start`: SandboxError, the pool replaces the sandbox), writes
        `files`, runs `cmd` and kills what it left behind. Falls back to the generic path
        when the base workspace (at `start`) was not empty."""
        if not self._base_empty:
            return super().run_fresh(cmd, files, timeout_s, stdin)
        timeout = check_timeout(timeout_s if timeout_s is not None else self.spec.command_timeout_s)
        self._episode_used = 0.0
        data = stdin_bytes(stdin) or b""
        files = {workspace_path(p): t for p, t in check_files(files).items()}
        return self._run({"op": "run", "cmd": cmd, "timeout": timeout, "stdin": _b64(data), "fresh": True,
                          "files": files, "workspace": self._base_workspace.as_dict()}, timeout)

    def _run(self, request: dict, timeout_s: float) -> ExecResult:
        check_command(request["cmd"])
        r = self._call({**request, "limit": self.spec.output_limit_bytes}, timeout_s)
        if r.get("refused"):  # a fresh run whose workspace could not be restored: cmd did not run
            self._verify(WorkspaceState.from_dict(r["workspace"]))
            raise SandboxError(f"sandbox {self.id}: the agent found its workspace changed; it must be replaced")
        return ExecResult(exit_code=r["exit_code"], stdout=_text(r["stdout"]), stderr=_text(r["stderr"]),
                          duration_ms=r["duration_ms"], timed_out=r["timed_out"], oom_killed=r["oom_killed"],
                          truncated_bytes=r["truncated_bytes"])

    def _kill_all(self) -> None:
        self._call({"op": "kill"})

    def _write(self, path: str, data: bytes, mode: int) -> None:
        self._call({"op": "write", "path": path, "data": _b64(data), "mode": mode})

    def _read(self, path: str) -> bytes:
        return base64.b64decode(self._call({"op": "read", "path": path, "limit": MAX_FILE_BYTES})["data"])

    def _list(self, path: str) -> list[FileInfo]:
        return [FileInfo(n, k, int(s)) for n, k, s in self._call({"op": "list", "path": path})["entries"]]

    def _clean_slate(self, base_archive: bytes) -> WorkspaceState:
        """One round trip: every process killed, /tmp, /dev/shm and SysV IPC emptied, the
        base workspace and the directory itself restored, its state returned."""
        reply = self._call({"op": "reset", "data": None if self._base_empty else _b64(base_archive),
                            "workspace": self._base_workspace.as_dict()})
        return WorkspaceState.from_dict(reply["workspace"])

    def _workspace_state(self) -> WorkspaceState:
        return WorkspaceState.from_dict(self._call({"op": "state"})["workspace"])

    def _save_workspace(self) -> bytes:
        limit = (self.spec.workspace_mb + 16) * 1024 * 1024
        archive = base64.b64decode(self._call({"op": "save", "limit": limit})["data"])
        if self._base_snapshot is None:  # the snapshot `start` takes
            self._base_empty = _is_empty_tar(archive)
        return archive

    def _restore_workspace(self, archive: bytes) -> None:
        self._call({"op": "restore", "data": _b64(archive), "workspace": self._base_workspace.as_dict()})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode("utf-8", errors="replace")


def _is_empty_tar(archive: bytes) -> bool:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return all(m.name in (".", "./") for m in tar.getmembers())
