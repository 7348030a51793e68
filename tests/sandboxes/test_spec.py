"""SandboxSpec validation, the output cap and workspace paths (no engine needed)."""

import pytest
from pydantic import ValidationError

from core.errors import ConfigError
from sandboxes import open_sandbox, sandbox_class
from sandboxes.base import workspace_path
from sandboxes.spec import ExecResult, OutputCap, SandboxSpec


def test_spec_defaults_block_the_network():
    spec = SandboxSpec()
    assert spec.network == "none"
    assert spec.memory_mb > 0 and spec.pids > 0 and spec.output_limit_bytes > 0


@pytest.mark.parametrize("bad", [
    {"memory_mb": 0}, {"pids": 1}, {"cpus": 0}, {"command_timeout_s": float("inf")},
    {"network": "all"}, {"network": []}, {"network": ["bad host!"]}, {"env": {"1X": "a"}},
    {"env": {"X": "a\x00b"}}, {"unknown": 1},
])
def test_spec_rejects_bad_fields_by_name(bad):
    with pytest.raises(ValidationError) as e:
        SandboxSpec(**bad)
    assert list(bad)[0] in str(e.value)


def test_allow_list_is_normalised_to_a_tuple():
    assert SandboxSpec(network=["10.0.0.5", "example.org"]).network == ("10.0.0.5", "example.org")


def test_output_cap_keeps_the_head_and_counts_the_rest():
    cap = OutputCap(5)
    for chunk in (b"abc", b"defg", b"hij"):
        cap.feed(chunk)
    assert cap.text() == "abcde" and cap.dropped == 5


@pytest.mark.parametrize("path,full", [("a.txt", "/workspace/a.txt"), ("d/../b", "/workspace/b"),
                                       ("/workspace/x/y", "/workspace/x/y"), (".", "/workspace")])
def test_workspace_paths_resolve_inside(path, full):
    assert workspace_path(path) == full


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "", "a\x00b", "/workspace/../root"])
def test_workspace_paths_refuse_escapes(path):
    with pytest.raises(ConfigError):
        workspace_path(path)


def test_exec_result_outcome_tags():
    assert ExecResult(0, "", "", 1.0).outcome == "ok"
    assert ExecResult(1, "", "", 1.0).outcome == "error"
    assert ExecResult(137, "", "", 1.0, timed_out=True).outcome == "timeout"
    assert ExecResult(137, "", "", 1.0, oom_killed=True).outcome == "oom"


def test_unknown_backend_is_a_config_error():
    with pytest.raises(ConfigError, match="docker, local"):
        sandbox_class("podman")
    with pytest.raises(ConfigError):
        open_sandbox("vm")
