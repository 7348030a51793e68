"""Network allow-lists for Docker sandboxes: a bridge network plus iptables rules per container.

A sandbox whose spec gives ``network=["10.0.0.5", "pypi.internal"]`` joins the bridge
network ``rlwb-egress`` and gets, before any command runs, iptables rules keyed to its IP
address: ACCEPT to each allowed address, DROP for everything else it sends, both on the
FORWARD path (Docker's ``DOCKER-USER`` chain: other machines) and on ``INPUT`` (this host's
own addresses, the gateway included). Host names are resolved on the host when the sandbox
starts and pinned in the container's /etc/hosts. Every rule carries the comment
``rlwb:<container id>``; `remove_rules` deletes them when the sandbox closes and
`collect_rules` deletes those of containers that no longer exist.

Needs root and the ``iptables`` binary (Debian's docker.io depends on it). Not covered:
IPv6 (the network has none), port-level rules, DNS names that change address mid-episode.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess

from core.errors import SandboxUnavailable

NETWORK = "rlwb-egress"
_CHAINS = ("DOCKER-USER", "INPUT")


def resolve(hosts: tuple[str, ...]) -> dict[str, list[str]]:
    """host -> its IPv4 addresses, resolved here.

    Raises:
        SandboxUnavailable: a host does not resolve (the message names it).
    """
    out = {}
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise SandboxUnavailable(f"network allow-list: host {host!r} does not resolve here ({e})") from None
        out[host] = sorted({i[4][0] for i in infos})
    return out


def ensure_network(client) -> str:
    """The name of the bridge network for allow-listed sandboxes (created once)."""
    if not client.networks.list(names=[NETWORK]):
        client.networks.create(NETWORK, driver="bridge", labels={"rlwb.sandbox-network": "1"})
    return NETWORK


def _iptables(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("iptables") is None:
        raise SandboxUnavailable("network allow-lists need the iptables binary (apt-get install iptables) and root")
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def apply_rules(container_id: str, address: str, allowed: list[str]) -> None:
    """Allow `address` to reach only `allowed`; everything else it sends is dropped.

    Raises:
        SandboxUnavailable: iptables is missing or refuses (not root).
    """
    tag = f"rlwb:{container_id[:12]}"
    for chain in _CHAINS:
        # inserted at the top in reverse: the ACCEPTs end up above the DROP
        rules = [["-s", address, "-j", "DROP"]] + [["-s", address, "-d", ip, "-j", "ACCEPT"] for ip in allowed]
        for rule in rules:
            r = _iptables("-I", chain, "1", *rule, "-m", "comment", "--comment", tag)
            if r.returncode != 0:
                remove_rules(container_id)
                raise SandboxUnavailable(f"iptables refused the allow-list rules ({r.stderr.strip()}); run as root")


def _rules(chain: str) -> list[str]:
    r = _iptables("-S", chain)
    return r.stdout.splitlines() if r.returncode == 0 else []


def remove_rules(container_id: str | None = None, keep: set[str] | None = None) -> int:
    """Delete the rules of one container (or, with container_id None, of every container
    whose 12-character id is not in `keep`). Returns how many rules were deleted."""
    removed = 0
    for chain in _CHAINS:
        for line in _rules(chain):
            if '--comment "rlwb:' not in line and "--comment rlwb:" not in line:
                continue
            owner = line.split("rlwb:", 1)[1].split()[0].strip('"')
            if (container_id is not None and owner != container_id[:12]) or \
                    (container_id is None and owner in (keep or set())):
                continue
            spec = line.split(" ", 2)[2]  # "-A CHAIN <spec>" -> "<spec>"
            if _iptables("-D", chain, *shlex.split(spec)).returncode == 0:
                removed += 1
    return removed


def collect_rules(client, live_ids: set[str]) -> int:
    """Delete allow-list rules of containers not in `live_ids` (12-character ids); a no-op
    where no allow-listed sandbox ever ran (no `rlwb-egress` network)."""
    if shutil.which("iptables") is None or not client.networks.list(names=[NETWORK]):
        return 0
    return remove_rules(None, keep=live_ids)
