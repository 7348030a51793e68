"""Network allow-lists on the Docker backend: only the listed host is reachable, the rules
are keyed to the container and removed with it."""

import socket
import subprocess
import threading

import pytest

from sandboxes import egress
from sandboxes.docker_backend import DockerSandbox
from sandboxes.spec import SandboxSpec

PROBE = """
import socket, sys
port = int(sys.argv[1])
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        print("connected", host)
    except OSError as e:
        print("blocked", host, type(e).__name__)
"""


@pytest.fixture
def server():
    """A TCP server on every host address; yields its port."""
    srv = socket.create_server(("0.0.0.0", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                srv.accept()[0].close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    srv.close()


def _gateway(client, name):
    return client.networks.get(name).attrs["IPAM"]["Config"][0]["Gateway"]


def _docker0_address():
    """This host's address on Docker's default bridge (another host address to block)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True).stdout
    return out.split(" inet ", 1)[1].split("/", 1)[0]


def _rules_of(container_id):
    out = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if f"rlwb:{container_id[:12]}" in ln]


def test_only_the_allowed_host_is_reachable(docker_engine, server, test_label):
    egress.ensure_network(docker_engine)
    allowed, other = _gateway(docker_engine, egress.NETWORK), _docker0_address()
    with DockerSandbox(SandboxSpec(network=[allowed]), test_label) as sb:
        assert len(_rules_of(sb.id)) == 4  # ACCEPT + DROP on DOCKER-USER and INPUT
        r = sb.exec(f"python3 - {server} {allowed} {other}", stdin=PROBE)
        cid = sb.id
    assert r.stdout.splitlines()[0] == f"connected {allowed}"
    assert r.stdout.splitlines()[1].startswith(f"blocked {other}")
    assert _rules_of(cid) == []  # removed with the sandbox


def test_default_network_none_reaches_nothing(docker_engine, server, test_label):
    egress.ensure_network(docker_engine)
    gw = _gateway(docker_engine, egress.NETWORK)
    with DockerSandbox(SandboxSpec(), test_label) as sb:
        r = sb.exec(f"python3 - {server} {gw}", stdin=PROBE)
    assert r.stdout.startswith(f"blocked {gw}")


def test_unresolvable_allowed_host_is_a_clear_error(docker_engine, test_label):
    from core.errors import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="no-such-host.invalid"):
        DockerSandbox(SandboxSpec(network=["no-such-host.invalid"]), test_label).start()
