"""A user domain's network allow-list: its sandboxes reach the listed host and nothing else,
in a run's runtime (one more pool, opened for the domain) and in validation; domains without
one stay on the run's network-less pool; a bad list is refused naming the field."""

import json
from types import SimpleNamespace

import pytest

from core.errors import ConfigError
from domains.user.build import from_json
from domains.user.library import prepare
from tests.domains.user_domains_helpers import validate_unsaved
from domains.validation import play_turns
from sandboxes import egress
from tests.sandboxes.test_egress import _gateway, server  # noqa: F401 - a fixture
from trainer.episodes import SandboxRuntime

CONNECT = "python3 -c \"import socket; socket.create_connection(('{host}', {port}), timeout=2).close()\""


def _definition(host: str, port: int, network: list[str] | None, name: str = "reach_server") -> dict:
    d = {"name": name, "columns": {"prompt": "instruction", "answer": "reference", "id": "id"},
         "verifier": {"kind": "checker", "checker": f"test -f done.txt && {CONNECT.format(host=host, port=port)}",
                      "timeout_s": 10}, "heldout_fraction": 0.3}
    return {**d, "network": network} if network else d


ROWS = [{"id": f"r{i}", "instruction": "Create done.txt.", "reference": "touch done.txt"} for i in range(12)]


def _cfg():
    return SimpleNamespace(sandbox_backend="docker", sandbox_pool_size=1, sandbox_memory_mb=256,
                           command_timeout_s=5.0, max_turns=2)


def test_the_allow_list_reaches_its_host_and_only_with_it(docker_engine, server):  # noqa: F811
    egress.ensure_network(docker_engine)
    host = _gateway(docker_engine, egress.NETWORK)
    open_domain = prepare(_definition(host, server, [host]), rows=ROWS)
    closed_domain = prepare(_definition(host, server, None, "reach_server_closed"), rows=ROWS)
    assert open_domain.sandbox_network == (host,) and closed_domain.sandbox_network == "none"
    runtime = SandboxRuntime.open(_cfg())
    try:
        assert runtime.pool_for(closed_domain) is runtime.pool
        pool = runtime.pool_for(open_domain)
        assert pool is not runtime.pool and pool.spec.network == (host,)
        assert runtime.pool_for(open_domain) is pool  # opened once
        task = open_domain.make_task(0)
        with pool.lease() as sb:
            assert play_turns(open_domain, task, open_domain.reference_turns(task), sb)[0] == 1.0
        with runtime.pool.lease() as sb:  # the same task without the allow-list can't connect
            reward, b, _ = play_turns(closed_domain, closed_domain.make_task(0), open_domain.reference_turns(task), sb)
            assert reward == 0.0, b
    finally:
        runtime.close()
    assert pool._closed.is_set() and not pool._all  # closed with the runtime


def test_validation_gives_the_domain_its_network(docker_engine, server):  # noqa: F811
    egress.ensure_network(docker_engine)
    host = _gateway(docker_engine, egress.NETWORK)
    [report] = validate_unsaved([_definition(host, server, [host], "reach_server_valid")], ROWS, n_verify=2)
    assert report["passed"], report["reasons"]


@pytest.mark.parametrize("definition,match", [
    (_definition("h", 1, ["10.0.0.5; rm -rf /"]), "network must be 'none' or a list of host names"),
    ({**_definition("h", 1, None), "network": []}, "network"),
    ({"name": "net_text", "columns": {"prompt": "instruction", "answer": "reference"}, "network": ["10.0.0.5"]},
     "network is for sandbox environments"),
])
def test_a_bad_network_is_refused_naming_the_field(definition, match):
    with pytest.raises(ConfigError, match=match):
        prepare(definition, rows=ROWS)


def test_the_definition_round_trips_with_its_network():
    d = prepare(_definition("10.0.0.5", 80, ["10.0.0.5", "pypi.internal"]), rows=ROWS)
    assert from_json(json.loads(json.dumps(d.to_json()))).sandbox_network == ("10.0.0.5", "pypi.internal")


@pytest.mark.parametrize("host", ["0.0.0.0", "localhost", "127.0.0.1", "169.254.169.254", "224.0.0.1"])
def test_hosts_a_sandbox_must_not_be_let_through_to_are_refused(host):
    with pytest.raises(ConfigError, match=f"network host '{host}'"):
        prepare(_definition(host, 1, [host]), rows=ROWS)
