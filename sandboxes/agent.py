"""The in-container agent of the Docker backend (standard library only; runs INSIDE the sandbox).

The Docker backend starts each container as ``tini -- python3 -c <this file>``: the agent
runs as root in the container (whose capabilities, memory, pids and network the engine
limits) and serves one JSON request per line on stdin, one JSON reply per line on stdout,
over a single ``docker attach`` stream. Commands run as uid 1000 in their own session;
output is capped and counted here; at a timeout the whole session is SIGKILLed. When a
command ends (or is killed), every other process of the container (bar tini and the agent)
is killed until none is left, so SIGTERM traps, ``setsid``, background jobs and fork bombs
never outlive the command that started them. One round trip per
command replaces ``docker exec``'s ~100 ms runc set-up.

When stdin closes (the orchestrator died or detached) the agent exits, tini exits, and the
container stops; the host's garbage collector removes it.

Requests: {"op": "run", "cmd", "timeout", "limit", "stdin" (b64), "fresh", "files", "workspace"},
{"op": "write", "path", "data" (b64), "mode"}, {"op": "read", "path", "limit"},
{"op": "list", "path"}, {"op": "save", "limit"}, {"op": "restore", "data" (b64), "workspace"},
{"op": "reset", "data" (b64 or null), "workspace"}, {"op": "state"}, {"op": "kill"}.
"workspace" is the workspace directory's state at start (`sandboxes.base.WorkspaceState`
as a dict): restore and reset give the directory itself that mode, owner and extended
attributes back (a task may have run ``chmod 000 /workspace``); reset and state reply with
the directory's state now (probe write as uid 1000 included); a fresh run whose state
differs from it does not run the command and replies "refused": true with the state.
Errors the request caused (a bad path, not a regular file) come back with "user": true.
Replies carry "ok": true plus the op's fields, or "ok": false and "error".

Not covered: being a security boundary on its own (the container is); anything outside
``/workspace`` (paths are resolved and must stay inside it).
"""

import base64
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import time

WS = "/workspace"
UID = 1000
GRACE_S = 0.05  # after the command exits, how long to drain output its children still hold


def oom_kills():
    """OOM kills so far in this container's memory cgroup (v1 or v2), -1 if unknown."""
    for path, key in (("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
                      ("/sys/fs/cgroup/memory.events", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key + " "):
                        return int(line.split()[1])
        except OSError:
            pass
    return -1


def others():
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def kill_all():
    """SIGKILL every process but tini (PID 1) and the agent, until none is left."""
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        if not others():
            return
        time.sleep(0.005)


def inside(path):
    """Resolved path, refused unless it stays inside the workspace."""
    real = os.path.realpath(path)
    if real != WS and not real.startswith(WS + "/"):
        raise ValueError(f"{path} leaves the workspace")
    return real


def wipe(path=WS):
    """Empty a directory; rm(1) handles trees of any depth (shutil.rmtree recurses in Python)."""
    names = os.listdir(path)
    if names:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", *(os.path.join(path, n) for n in names)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def clean_slate():
    """Kill every process, then empty /tmp and /dev/shm and remove SysV IPC objects, so
    nothing of one task (files, shared memory, the memory they hold) reaches the next."""
    kill_all()
    for path in ("/tmp", "/dev/shm"):
        if os.path.isdir(path):
            wipe(path)
    # as uid 1000, their owner: the agent's root has no CAP_SYS_ADMIN to remove them
    subprocess.run(["ipcrm", "--all"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, preexec_fn=_as_sandbox_user)


class UserError(Exception):
    """A request the caller got wrong (bad path, not a regular file): not a harness fault."""


def write(path, data, mode=0o644):
    parent = os.path.dirname(path)
    os.makedirs(inside(parent), exist_ok=True)
    for d in _dirs_between(WS, parent):
        os.chown(d, UID, UID)
    inside(path)
    # O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of hanging the agent
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, mode & 0o777)
    with os.fdopen(fd, "wb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{path} is not a regular file")
        f.truncate(0)
        f.write(data)
    os.chown(path, UID, UID)
    os.chmod(path, mode & 0o777)


def _dirs_between(top, path):
    out = []
    while path != top and path.startswith(top + "/"):
        out.append(path)
        path = os.path.dirname(path)
    return out


def _as_sandbox_user():
    os.setgroups([])
    os.setgid(UID)
    os.setuid(UID)


def demote():
    """preexec_fn: own session, first in line for the OOM killer, then uid 1000."""
    os.setsid()
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    os.setgroups([])
    os.setgid(UID)
    os.setuid(UID)


def spawn(cmd, stdin):
    """Start `bash -c cmd` as uid 1000; if the pids limit is hit, clear stragglers and retry once."""
    for attempt in (0, 1):
        try:
            return subprocess.Popen(["bash", "-c", cmd], stdin=stdin, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=WS, preexec_fn=demote, close_fds=True)
        except BlockingIOError:
            if attempt:
                raise
            kill_all()


class Cap:
    def __init__(self, limit):
        self.limit, self.data, self.dropped = limit, bytearray(), 0

    def feed(self, chunk):
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))


def run(req):
    t0 = time.monotonic()
    before = oom_kills()
    if req.get("fresh"):
        clean_slate()
        restore(None, req["workspace"])
        state = workspace_state()
        if state != req["workspace"]:
            return {"refused": True, "workspace": state}
        for path, text in req.get("files", {}).items():
            write(path, text.encode())
    stdin_path = "/rlwb/stdin"
    with open(stdin_path, "wb") as f:
        f.write(base64.b64decode(req.get("stdin", "")))
    caps = {}
    with open(stdin_path, "rb") as stdin:
        proc = spawn(req["cmd"], stdin)
    sel = selectors.DefaultSelector()
    for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        os.set_blocking(pipe.fileno(), False)
        caps[name] = Cap(req["limit"])
        sel.register(pipe, selectors.EVENT_READ, caps[name])
    deadline, timed_out, drain_until = t0 + req["timeout"], False, None
    while sel.get_map():
        now = time.monotonic()
        if drain_until is None and proc.poll() is not None:
            drain_until = now + GRACE_S
        end = min(deadline, drain_until) if drain_until else deadline
        if now >= end:
            timed_out = drain_until is None
            break
        for key, _ in sel.select(timeout=min(end - now, 0.05)):
            chunk = key.fileobj.read(1 << 16)
            if chunk:
                key.data.feed(chunk)
            elif chunk is not None:
                sel.unregister(key.fileobj)
    if not timed_out:  # output closed or drained; the command itself may still be running
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    kill_all()  # whatever the command left running (background jobs, setsid, fork bombs)
    after = oom_kills()
    return {"exit_code": code if code >= 0 else 128 - code, "timed_out": timed_out,
            "oom_killed": after > before >= 0, "duration_ms": (time.monotonic() - t0) * 1000,
            "stdout": base64.b64encode(caps["stdout"].data).decode(),
            "stderr": base64.b64encode(caps["stderr"].data).decode(),
            "truncated_bytes": caps["stdout"].dropped + caps["stderr"].dropped}


def save(limit):
    """The workspace as a tar archive (GNU tar: any depth, sparse files stay small)."""
    proc = subprocess.Popen(["tar", "-C", WS, "--sparse", "--numeric-owner", "-cf", "-", "."],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    data = proc.stdout.read(limit + 1)
    if len(data) > limit:
        proc.kill()
        proc.wait()
        raise UserError(f"the workspace archive is over {limit} bytes; it can't be snapshotted")
    err = proc.stderr.read()
    if proc.wait() != 0:
        raise UserError(f"snapshot failed: {err.decode(errors='replace')[-300:]}")
    return {"data": base64.b64encode(data).decode()}


def restore(data, base):
    """Empty the workspace, unpack an archive made by `save` (owners kept; None: leave it
    empty), and give the directory itself its state of `base` back."""
    wipe()
    if data:
        proc = subprocess.run(["tar", "-C", WS, "--numeric-owner", "-xpf", "-"], input=base64.b64decode(data),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise UserError(f"rollback failed: {proc.stderr.decode(errors='replace')[-300:]}")
    restore_dir(base)
    return {}


def restore_dir(base):
    """Give the workspace directory itself the owner, mode and extended attributes of `base`
    back. A directory mounted over or replaced can't be put back from in here (no
    CAP_SYS_ADMIN); `workspace_state` shows it and the host replaces the sandbox."""
    try:
        if not stat.S_ISDIR(os.lstat(WS).st_mode):
            return
        names = os.listxattr(WS, follow_symlinks=False)
    except OSError:
        names = []
    for name in set(names) - set(base["xattrs"]):
        try:
            os.removexattr(WS, name, follow_symlinks=False)
        except OSError:
            pass
    try:
        os.chown(WS, base["uid"], base["gid"], follow_symlinks=False)  # first: chown clears setuid/setgid
        os.chmod(WS, base["mode"])
    except OSError:
        pass


def probe():
    """Whether uid 1000 can create and remove a file in the workspace (a forked child tries)."""
    pid = os.fork()
    if pid == 0:
        try:
            _as_sandbox_user()
            name = f"{WS}/.rlwb-probe-{os.getpid()}"
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            os.unlink(name)
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def workspace_state():
    """The workspace directory itself now: `sandboxes.base.WorkspaceState`'s fields."""
    processes = len(others())
    try:
        st = os.lstat(WS)
    except FileNotFoundError:
        return {"kind": "missing", "processes": processes}
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "other"
    try:
        xattrs = sorted(os.listxattr(WS, follow_symlinks=False))
    except OSError:
        xattrs = []
    return {"kind": kind, "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
            "device": st.st_dev, "xattrs": xattrs, "writable": kind == "dir" and probe(), "processes": processes}


def read(path, limit):
    # O_NONBLOCK + a regular-file check: a FIFO or device can't hang or flood the agent
    fd = os.open(inside(path), os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{path} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{path} is over {limit} bytes")
    return {"data": base64.b64encode(data).decode()}


def listing(path):
    kinds = {True: "dir", False: "file"}
    out = []
    for entry in os.scandir(inside(path)):
        kind = "link" if entry.is_symlink() else kinds[entry.is_dir()] if entry.is_dir() or entry.is_file() else "other"
        out.append([entry.name, kind, entry.stat(follow_symlinks=False).st_size])
    return {"entries": out}


def handle(req):
    op = req.get("op")
    if op == "run":
        return run(req)
    if op == "write":
        write(inside(os.path.dirname(req["path"])) + "/" + os.path.basename(req["path"]),
              base64.b64decode(req["data"]), req.get("mode", 0o644))
        return {}
    if op == "read":
        return read(req["path"], req["limit"])
    if op == "list":
        return listing(req["path"])
    if op == "save":
        return save(req["limit"])
    if op == "restore":
        return restore(req["data"], req["workspace"])
    if op == "reset":  # a new episode: clean slate, then the base workspace (empty if none)
        clean_slate()
        restore(req.get("data"), req["workspace"])
        return {"workspace": workspace_state()}
    if op == "state":
        return {"workspace": workspace_state()}
    if op == "kill":
        kill_all()
        return {}
    raise ValueError(f"unknown op {op!r}")


def main():
    os.makedirs("/rlwb", mode=0o700, exist_ok=True)
    out = sys.stdout.buffer
    out.write(json.dumps({"ok": True, "ready": True, "pid": os.getpid()}).encode() + b"\n")
    out.flush()
    for line in sys.stdin.buffer:
        req = {}
        try:
            req = json.loads(line)
            reply = {"ok": True, **handle(req)}
        except UserError as e:
            reply = {"ok": False, "user": True, "error": str(e)}
        except (OSError, ValueError) as e:  # a file operation's bad path or file: the request's fault
            reply = {"ok": False, "user": req.get("op") not in ("run", "reset", "kill"),
                     "error": f"{e.__class__.__name__}: {e}"}
        except Exception as e:  # every failure becomes a reply; the agent keeps serving
            reply = {"ok": False, "error": f"{e.__class__.__name__}: {e}"}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
