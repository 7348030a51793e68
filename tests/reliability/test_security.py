"""Security: the page listens on localhost by default; any other interface needs an access
token, which the page asks for; sandboxes never mount the Docker socket or the user's home
(and a sandbox image that asks for a volume is refused); secrets in the environment never
reach the store or the logs."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.store import Store

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> list[str]:
    import psutil

    return sorted({c.laddr.ip for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN
                   and c.laddr.port == port})


def _non_loopback_ip() -> str | None:
    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def _serve(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    out = open(log, "w")
    return subprocess.Popen([sys.executable, "-m", "backend.cli", *args], cwd=ROOT, env=env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the streamlit server it became
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"rlwb ui exited {proc.returncode}: {log.read_text()[-2000:]}")
        found = _listening(port)
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"nothing listened on {port}: {log.read_text()[-2000:]}")


def test_the_page_listens_on_localhost_only_by_default(fault, tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "RLWB_UI_TOKEN"}
    log = tmp_path / "ui.log"
    proc = _serve(["--db", str(tmp_path / "wb.db"), "ui", "--port", str(port)], env, log)
    try:
        addresses = _wait_listening(port, proc, log)
        assert addresses == ["127.0.0.1"], addresses
        other = _non_loopback_ip()
        fault.inject(f"a connection to the page from another interface ({other or 'none here'})")
        if other is not None:  # the machine's own outside address: refused
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=5).close()
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        _stop(proc)


def test_binding_another_interface_needs_an_access_token(fault, tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "RLWB_UI_TOKEN"}
    refused = []
    for extra, env_token in ((["--host", "0.0.0.0"], None), (["--host", "0.0.0.0", "--token", "short"], None),
                             (["--host", "::"], None), (["--host", "evil host;rm -rf /"], None)):
        res = subprocess.run([sys.executable, "-m", "backend.cli", "ui", "--port", str(port), *extra], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=60)
        refused.append(res.returncode)
        assert res.returncode == 2 and res.stderr.startswith("error: "), (extra, res.stderr)
        assert "Traceback" not in res.stderr
    fault.inject("rlwb ui on 0.0.0.0 and :: without a token, with a short token, and with a junk host", times=4)
    assert _listening(port) == []  # none of them started a server
    token = secrets.token_urlsafe(24)
    log = tmp_path / "ui.log"
    proc = _serve(["--db", str(tmp_path / "wb.db"), "ui", "--host", "0.0.0.0", "--port", str(port)],
                  {**env, "RLWB_UI_TOKEN": token}, log)
    try:
        assert _wait_listening(port, proc, log) == ["0.0.0.0"]
        import psutil

        cmdline = " ".join(psutil.Process(proc.pid).cmdline())
        assert token not in cmdline  # handed over in the environment, not visible in ps
    finally:
        _stop(proc)
    assert token not in log.read_text()  # nor in the server's output


def test_the_page_shows_nothing_without_the_right_token(fault, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    token = secrets.token_urlsafe(24)
    db = tmp_path / "wb.db"
    with Store(db) as store:
        store.create_run("private-run-name", {}, 1)
    monkeypatch.setenv("RLWB_DB", str(db))
    monkeypatch.setenv("RLWB_UI_TOKEN", token)

    def page(query: dict | None = None) -> AppTest:
        at = AppTest.from_file(MAIN, default_timeout=60)
        for k, v in (query or {}).items():
            at.query_params[k] = v
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    def content(at: AppTest) -> str:
        return "\n".join([m.value for m in at.markdown] + [t.value for t in at.title] + [str(m.value) for m in at.metric]
                         + [c.value for c in at.caption])

    attempts = [None, {"token": "wrong"}, {"token": token[:-1]}, {"token": token + " "}, {"token": ""}]
    for query in attempts:
        at = page(query)
        assert at.text_input(key="auth_token").label == "Access token"
        assert "private-run-name" not in content(at) and "Store:" not in content(at)
        assert not at.metric  # no Home page behind the gate
        if query:
            assert "not right" in "\n".join(e.value for e in at.error)
            assert "token" not in at.query_params  # never left in the address bar
    at = page()
    at.text_input(key="auth_token").input("guess")
    at.button[0].click().run()
    assert "not right" in "\n".join(e.value for e in at.error) and not at.metric
    fault.inject("visitors without the token, with wrong, truncated, padded and empty tokens, and a guess in the "
                 "form", times=len(attempts) + 1)
    at = page({"token": token})  # the right token opens the page and leaves the address bar
    assert "token" not in at.query_params
    assert at.metric and "Store:" in content(at)
    at = page()  # a fresh session with the right token typed in
    at.text_input(key="auth_token").input(token)
    at.button[0].click().run()
    assert not at.exception and at.metric


def test_sandboxes_never_mount_the_docker_socket_or_the_home_directory(fault, tmp_path):
    from core.errors import SandboxError
    from sandboxes import backend_status, open_sandbox
    from sandboxes.spec import SandboxSpec

    status = backend_status()
    home = Path.home()
    home_entries = sorted(p.name for p in home.iterdir())
    checked = []
    for backend in ("docker", "local"):
        if not status[backend]["available"]:
            continue
        try:
            sb = open_sandbox(backend, SandboxSpec())
        except SandboxError as e:
            if backend == "docker" and "image" in str(e):
                continue
            raise
        with sb:
            sock = sb.exec("ls -l /var/run/docker.sock /run/docker.sock")
            listing = sb.exec(f"ls -A {home}")
            mounts = sb.exec("cat /proc/mounts").stdout.splitlines()
            env_home = sb.exec("echo $HOME").stdout.strip()
            if backend == "docker":
                from sandboxes.docker_backend import docker_client, host_mounts

                assert host_mounts(docker_client().api.inspect_container(sb.id)) == []
        assert sock.exit_code != 0 and sock.stderr.count("No such file or directory") == 2, (backend, sock)
        seen = set(listing.stdout.split())
        assert not seen & set(home_entries), f"{backend}: the host's home is visible: {seen & set(home_entries)}"
        mount_points = [m.split()[1] for m in mounts if len(m.split()) > 1]
        assert str(home) not in mount_points and not any("docker.sock" in m for m in mount_points), mount_points
        assert env_home == "/workspace"
        checked.append(backend)
    if not checked:
        pytest.skip("no sandbox backend can run here")
    fault.inject(f"sandboxes ({', '.join(checked)}) probed for the Docker socket, the host's home and mounts")
    if "docker" in checked:  # an image that declares a VOLUME is refused before it starts
        import docker

        client = docker.from_env()
        tag = f"rlwb-volume-test:{secrets.token_hex(4)}"
        (tmp_path / "Dockerfile").write_text("FROM rlwb-sandbox:latest\nVOLUME /data\n")
        client.images.build(path=str(tmp_path), tag=tag, rm=True)
        try:
            before = {c.id for c in client.containers.list(all=True)}
            with pytest.raises(SandboxError, match="host mounts"):
                open_sandbox("docker", SandboxSpec(image=tag))
            assert {c.id for c in client.containers.list(all=True)} <= before  # nothing left behind
        finally:
            client.images.remove(tag, force=True)
        fault.inject("a sandbox image that declares a VOLUME")


def test_secrets_in_the_environment_never_reach_the_store_or_the_logs(fault, tiny_model_dir, tmp_path):
    secret = "rlwb-secret-" + secrets.token_hex(12)
    names = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "RLWB_UI_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY",
             "WANDB_API_KEY")
    env = {**os.environ, **{n: secret for n in names}}
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"name: secrets\nmodel: {tiny_model_dir}\nsteps: 2\ndomains: [chain_sum]\nprompts_per_step: 2\n"
                   "group_size: 2\nmicro_batch_size: 2\nmax_new_tokens: 8\ncheckpoint_every: 1\nvllm_compile: false\n"
                   f"vllm_memory_fraction: 0.05\noutput_dir: {tmp_path / 'out'}\n")
    db = tmp_path / "wb.db"
    res = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(db), "run", str(cfg), "--detach"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    fault.inject(f"secrets in {len(names)} environment variables of a background run ({', '.join(names)})")
    with Store(db) as store:
        run_id = store.list_runs()[0]["id"]
        deadline = time.monotonic() + 400
        while store.get_run(run_id)["status"] in ("pending", "running") and time.monotonic() < deadline:
            time.sleep(0.5)
        run = store.get_run(run_id)
        assert run["status"] == "completed", run["error"]
        shown = subprocess.run([sys.executable, "-m", "backend.cli", "--db", str(db), "runs", "show", run_id, "--json"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        from backend.runs import log_path

        log = log_path(store, run_id)
    files = [p for p in [db, *tmp_path.glob("wb.db-*"), log, *(tmp_path / "out").rglob("*")] if p.is_file()]
    assert log in files and len(files) > 3
    leaks = [str(p) for p in files if secret.encode() in p.read_bytes()]
    leaks += [name for name, text in (("CLI output", res.stdout + res.stderr), ("runs show", shown.stdout + shown.stderr))
              if secret in text]
    assert leaks == [], f"the secret was written to {leaks}"
