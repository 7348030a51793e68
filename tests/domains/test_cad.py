"""The cad family: the kernel (on the host, then in real Docker sandboxes), the geometry
checks, every task's reference tool sequence (reward 1), wrong dimensions (below 1, the
failing check named), rollback to the snapshot before the last step, and failures as codes."""

import json
import subprocess
import sys

import pytest

from domains.cad.domain import CAD_TOOLS, KERNEL, MAKERS, check_geometry
from domains.registry import get_domain
from domains.tools.contract import call_text
from domains.validation import play_turns
from sandboxes.pool import SandboxPool
from sandboxes.spec import SandboxSpec

SEEDS = (0, 1)


def _kernel(cwd, _op, **args):
    out = subprocess.run([sys.executable, "-I", "-", json.dumps({**args, "_op": _op})], input=KERNEL, text=True,
                         capture_output=True, cwd=cwd, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kernel_builds_measures_and_refuses_with_codes(tmp_path):
    assert _kernel(tmp_path, "box", name="plate", size=[40, 20, 5])["volume"] == pytest.approx(4000)
    hole = _kernel(tmp_path, "cylinder", name="h", radius=3, height=7, at=[10, 10, -1])
    assert hole["bbox"] == [[7, 7, -1], [13, 13, 6]]
    cut = _kernel(tmp_path, "boolean", op="difference", target="plate", tool="h")
    assert cut["volume"] == pytest.approx(4000 - 3.14159 * 9 * 5, rel=0.01) and cut["bodies"] == 1
    assert _kernel(tmp_path, "inspect", name="plate")["genus"] == 1
    assert _kernel(tmp_path, "list")["bodies"].keys() == {"plate"}  # the tool body was consumed
    assert _kernel(tmp_path, "measure")["code"] == "not_exported"
    _kernel(tmp_path, "export", name="plate")
    m = _kernel(tmp_path, "measure", probes=[[10, 10, 2.5], [20, 10, 2.5], [50, 10, 2.5]])
    assert m["probes"] == [False, True, False] and m["watertight"] is True and m["bodies"] == 1
    assert len(json.loads((tmp_path / m["mesh_file"]).read_text())["triangles"]) > 12
    # failures: a code, a message, nothing written
    assert _kernel(tmp_path, "translate", name="nope", offset=[1, 0, 0])["code"] == "no_such_body"
    assert _kernel(tmp_path, "box", name="plate", size=[1, 1, 1])["code"] == "body_exists"
    assert _kernel(tmp_path, "box", name="Bad Name", size=[1, 1, 1])["code"] == "bad_argument"
    assert _kernel(tmp_path, "box", name="z", size=[1, -1, 1])["code"] == "bad_argument"
    _kernel(tmp_path, "box", name="far", size=[1, 1, 1], at=[500, 0, 0])
    empty = _kernel(tmp_path, "boolean", op="intersection", target="plate", tool="far")
    assert empty["code"] == "empty_result"
    assert _kernel(tmp_path, "inspect", name="plate")["volume"] == pytest.approx(cut["volume"])
    assert _kernel(tmp_path, "nonsense")["ok"] is False


def test_geometry_checks_name_what_is_wrong():
    spec = {"volume": 1000.0, "bbox": [[0, 0, 0], [10, 10, 10]], "solid": [[5, 5, 5]], "empty": [[1, 1, 1]]}
    good = {"volume": 1004.0, "bbox": [[0, 0, 0], [10, 10, 10.2]], "watertight": True, "bodies": 1,
            "probes": [True, False]}
    assert all(c["passed"] for c in check_geometry(spec, good))
    bad = {**good, "volume": 1100.0, "bodies": 2, "probes": [False, True], "bbox": [[0, 0, 0], [11, 10, 10]]}
    failing = {c["name"] for c in check_geometry(spec, bad) if not c["passed"]}
    assert failing == {"volume", "one_body", "material", "holes_and_gaps", "bounding_box"}


def test_tool_contracts_are_valid_and_cover_the_kernel():
    from domains.cad.kernel import OPS

    ops = {n.removeprefix("cad_") for n in CAD_TOOLS if n.startswith("cad_")}
    assert ops <= set(OPS) and "rollback" in CAD_TOOLS
    for name in MAKERS:
        for level in (1, 2, 3):
            task = get_domain(name).make_task(0, level)
            assert [n for n, _ in task.entry["reference_calls"]][-1] == "cad_export"
            for n, a in task.entry["reference_calls"]:  # every reference call meets its schema
                from domains.tools.contract import ToolCall, check_call

                assert check_call(ToolCall(n, a, "", 0), CAD_TOOLS) is None, (n, a)


@pytest.fixture(scope="module")
def pool(docker_engine):
    with SandboxPool("docker", SandboxSpec(memory_mb=512, episode_timeout_s=300), size=1,
                     labels={"rlwb.test": "cad"}, gc_interval_s=0) as p:
        yield p


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_every_reference_sequence_scores_1_and_a_wrong_dimension_is_named(pool, name):
    d = get_domain(name)
    with pool.lease() as sb:
        for level in (1, 2, 3):
            for seed in SEEDS:
                task = d.make_task(seed, level)
                reward, b, turns = play_turns(d, task, d.reference_turns(task), sb)
                assert reward == 1.0 and b["failing"] == [] and b["correct"] == 1.0, (name, level, seed, b)
                assert all(c["error"] is None for t in turns for c in t["calls"])
                assert b["mesh"]["triangles"] and b["rollbacks"] == 0
                if seed != SEEDS[0]:
                    continue
                reward, b, _ = play_turns(d, task, d.wrong_turns(task), sb)
                assert 0.2 <= reward < 1.0 and b["correct"] == 0.0 and b["failing"], (name, level, seed)
                assert {"volume", "bounding_box"} & set(b["failing"])


def test_rollback_restores_the_step_before_and_retries_are_counted(pool):
    d = get_domain("cad_bracket")
    task = d.make_task(3, 1)
    calls = [(n, a) for n, a in task.entry["reference_calls"]]
    (n0, a0), rest = calls[0], calls[1:]
    wrong = {**a0, "size": [a0["size"][0], a0["size"][1], a0["size"][2] + 4]}  # too thick
    turns = [call_text(n0, wrong),
             call_text("rollback", {}) + call_text("rollback", {}),  # the second has nothing to undo
             call_text("cad_translate", {"name": "ghost", "offset": [1, 0, 0]}),  # fails: no such body
             "".join(call_text(n, a) for n, a in calls[:4]),
             "".join(call_text(n, a) for n, a in rest[3:]), "DONE"]
    with pool.lease() as sb:
        reward, b, records = play_turns(d, task, turns, sb)
    assert reward == 1.0, b
    assert json.loads(records[1]["calls"][0]["observation"])["undone"] == "step 1: cad_box"
    assert records[1]["calls"][1]["error"] == "nothing_to_undo"
    assert records[2]["calls"][0]["error"] == "no_such_body"
    assert b["rollbacks"] == 1 and b["failed_ops"] == 1 and b["calls"] == 4 + len(calls)


def test_no_export_scores_0_and_a_second_body_fails_one_body(pool):
    d = get_domain("cad_table")
    task = d.make_task(0, 1)
    with pool.lease() as sb:
        assert play_turns(d, task, ["DONE"], sb)[:2][0] == 0.0
        calls = [(n, a) for n, a in task.entry["reference_calls"] if not (n == "cad_boolean" and a["tool"] == "leg4")]
        calls.insert(-1, ("cad_boolean", {"op": "union", "target": "top", "tool": "leg4"}))
        # move one leg away first: union leaves two separate solids
        calls.insert(-2, ("cad_translate", {"name": "leg4", "offset": [0, 0, -200]}))
        turns = ["".join(call_text(n, a) for n, a in calls[i:i + 8]) for i in range(0, len(calls), 8)] + ["DONE"]
        reward, b, _ = play_turns(d, task, turns, sb)
    assert reward < 1.0 and "one_body" in b["failing"], b["failing"]


def test_a_cad_run_on_the_local_fallback_is_refused_up_front():
    from trainer.config import load_config, parse_config
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="sandbox_backend: docker"):
        parse_config({"model": "smollm2-135m", "domains": {"cad_shaft": 1.0}, "sandbox_backend": "local"})
    cfg = load_config("configs/cad.yaml")
    assert cfg.needs_sandbox and {get_domain(d).family for d in cfg.domain_list} == {"cad", "tool_use"}


def test_near_misses_and_hacks_do_not_pass(pool):
    """Square holes (same volume within 1 %) fail on the hole-wall probes; a token cube earns
    only the export credit; a fine mesh (256 segments) is still measured and stored."""
    from domains.cad.domain import _turns

    d = get_domain("cad_bracket")
    task = d.make_task(5, 1)
    square = []
    for n, a in task.entry["reference_calls"]:
        if n == "cad_cylinder":
            r, (x, y, z) = a["radius"], a["at"]
            n, a = "cad_box", {"name": a["name"], "size": [2 * r, 2 * r, a["height"]], "at": [x - r, y - r, z]}
        square.append((n, a))
    shaft = get_domain("cad_shaft")
    fine = [(n, {**a, "segments": 256} if n == "cad_cylinder" else a)
            for n, a in shaft.make_task(2, 3).entry["reference_calls"]]
    with pool.lease() as sb:
        reward, b, _ = play_turns(d, task, _turns(square), sb)
        assert reward < 1.0 and b["failing"] == ["material"], b["failing"]
        reward, b, _ = play_turns(d, task, _turns([("cad_box", {"name": "export", "size": [1, 1, 1]})]), sb)
        assert reward == pytest.approx(0.2) and not b["plausible"]
        reward, b, _ = play_turns(shaft, shaft.make_task(2, 3), _turns(fine), sb)
        assert reward == 1.0 and len(b["mesh"]["triangles"]) > 2000  # over 64 KiB: read from a file


def test_kernel_refuses_non_finite_numbers(tmp_path):
    assert _kernel(tmp_path, "box", name="a", size=[1, 1, float("nan")])["code"] == "bad_argument"
    assert _kernel(tmp_path, "cylinder", name="c", radius=float("inf"), height=1)["code"] == "bad_argument"
    _kernel(tmp_path, "box", name="a", size=[1, 1, 1])
    assert _kernel(tmp_path, "rotate", name="a", axis="x", degrees=float("nan"))["code"] == "bad_argument"
