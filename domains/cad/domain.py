"""The `cad` domains: the model builds a described part through a modeling API exposed as
tools, in the sandbox, over several dependent steps; the verifier measures the exported
solid against the spec.

    d = get_domain("cad_bracket")
    task = d.make_task(seed=4, difficulty=2)      # entry: the spec and the reference tool sequence
    env = d.make_env(sandbox, max_turns=8)          # a ToolEnv whose tools run domains/cad/kernel.py

Tools (contracts in `CAD_TOOLS`): cad_box, cad_cylinder, cad_translate, cad_rotate,
cad_boolean (union / difference / intersection; the tool body is consumed), cad_delete,
cad_list, cad_inspect, cad_export, and `rollback`. Each modeling call runs the kernel in the
sandbox (manifold3d solids stored in the workspace); before each call that changes the
model, the workspace is snapshotted (`Sandbox.snapshot`), and `rollback` restores the
snapshot taken before the last change (up to `MAX_UNDO` steps back). The breakdown counts
rollbacks and failed modeling calls (retries).

Domains (millimetres; the part sits at the origin as the task says):
- `cad_bracket`: level 1 a plate with two vertical through-holes; level 2 an L-bracket
  (plate + upright flange) with two holes in the base; level 3 adds a horizontal hole
  through the flange.
- `cad_shaft`: coaxial cylinders stacked along +z (2 steps, 3 steps, 3 steps and an axial
  bore).
- `cad_table`: a top on four legs (square legs, round legs, square legs and a lower shelf).

Verifier (`check_geometry`): the exported solid's volume within `VOLUME_TOL` of the spec's
exact volume (true circles; the 48-gon cylinders are within 0.3 %), its bounding box within
`BBOX_TOL_MM`, watertight, one body, and probe points: inside the solid where there must be
material, outside where a hole or a gap must be (a hole gets probes at its centre, at 0.85 r
on a diagonal, which must be empty, and at 1.15 r, which must be material: a square or a
smaller hole fails). Reward = 0.2 (something was exported) + 0.8 x the fraction of checks
passed, that fraction counting only when the volume is within `PLAUSIBLE_VOLUME` of the
spec's (a token 1 mm cube passes watertight and one-body, and earns nothing for them);
correct = every check passed. The breakdown names each
failing check with its expected and measured values.

Splits: a level has only 1,000 (cad_shaft level 1) to a few hundred thousand distinct
parts, so distinct seeds do not make distinct parts. Parts are split by a hash of their
question (`domains.splits.draw_on_side`, one in `POOL_HELDOUT_EVERY` held out): a training
seed redraws (attempt 1, 2, ...) until its part is on the training side, a held-out seed
until it is on the held-out side.
"""

from __future__ import annotations

import json
import math
import random
import shlex
from dataclasses import dataclass, field
from typing import ClassVar
from pathlib import Path

from core.errors import ConfigError, SandboxError
from domains.tools.contract import call_text, scripted_tool_turns, ToolSpec
from domains.contract import as_int, check_difficulty, CORRECT_WEIGHT, FORMAT_WEIGHT, Task, ToolUseDomain
from domains.splits import draw_on_side
from domains.tools.env import CONTRACT_ERRORS, tool_prompt, TOOL_SYSTEM_PROMPT, ToolEnv
from domains.tools.toolbox import ToolContext, ToolFailure, ToolRunner

KERNEL = (Path(__file__).with_name("kernel.py")).read_text()
VOLUME_TOL = 0.01  # relative
BBOX_TOL_MM = 0.5
MAX_UNDO = 16
KERNEL_TIMEOUT_S = 20.0
PLAUSIBLE_VOLUME = 0.25  # checks earn partial credit only when the volume is within 25 % of the spec's
MAX_MESH_TRIANGLES = 20_000

_NUM = {"type": "number", "minimum": -1e5, "maximum": 1e5}
_POS = {"type": "number", "exclusiveMinimum": 0, "maximum": 1e5}
_VEC = {"type": "array", "items": _NUM, "minItems": 3, "maxItems": 3}
_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$"}
_AXIS = {"type": "string", "enum": ["x", "y", "z"]}
_KERNEL_ERRORS = {"no_such_body": "no body of that name", "body_exists": "a body of that name exists",
                  "empty_result": "the operation would leave an empty body (nothing changed)",
                  "bad_argument": "an argument the kernel refused", "missing_library": "the sandbox lacks the CAD "
                  "libraries (rebuild the image)"}


def _obj(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _spec(name, description, props, required, output="the body's name, volume (mm^3), bounding box and body count"):
    return ToolSpec(name, description, _obj(props, required), output=output, errors=_KERNEL_ERRORS)


CAD_TOOLS: dict[str, ToolSpec] = {t.name: t for t in (
    _spec("cad_box", "Create a box body with its minimum corner at `at` (default the origin).",
          {"name": _NAME, "size": {**_VEC, "items": _POS}, "at": _VEC}, ["name", "size"]),
    _spec("cad_cylinder", "Create a cylinder: base centre at `at`, extending `height` along +axis (default z).",
          {"name": _NAME, "radius": _POS, "height": _POS, "at": _VEC, "axis": _AXIS,
           "segments": {"type": "integer", "minimum": 8, "maximum": 256}}, ["name", "radius", "height"]),
    _spec("cad_translate", "Move a body by `offset`.", {"name": _NAME, "offset": _VEC}, ["name", "offset"]),
    _spec("cad_rotate", "Rotate a body about the x, y or z axis through the origin.",
          {"name": _NAME, "axis": _AXIS, "degrees": {"type": "number", "minimum": -3600, "maximum": 3600}},
          ["name", "axis", "degrees"]),
    _spec("cad_boolean", "Combine two bodies: union, difference (target minus tool) or intersection. The tool "
          "body is consumed; the result replaces the target unless `result` names a new body.",
          {"op": {"type": "string", "enum": ["union", "difference", "intersection"]}, "target": _NAME,
           "tool": _NAME, "result": _NAME}, ["op", "target", "tool"]),
    _spec("cad_delete", "Delete a body.", {"name": _NAME}, ["name"], output="the remaining body names"),
    _spec("cad_list", "List the bodies.", {}, [], output="each body's volume, bounding box and body count"),
    _spec("cad_inspect", "Measure a body.", {"name": _NAME}, ["name"],
          output="volume (mm^3), bounding box, body count and genus (number of through-holes)"),
    _spec("cad_export", "Export the finished body as the model to be checked.", {"name": _NAME}, ["name"]),
    ToolSpec("rollback", "Undo the last modeling step (restores the sandbox snapshot taken before it).",
             _obj({}, []), output="which step was undone and how many more can be",
             errors={"nothing_to_undo": "no modeling step to undo"}),
)}
_CHANGES = {"cad_box", "cad_cylinder", "cad_translate", "cad_rotate", "cad_boolean", "cad_delete", "cad_export"}


def run_kernel(sandbox, op: str, args: dict, timeout_s: float = KERNEL_TIMEOUT_S, budget: bool = True) -> dict:
    """Run one kernel operation in `sandbox` and return its JSON result (`ok` False with a
    `code` for a refused operation).

    Raises:
        SandboxError: the sandbox failed (harness fault), or the kernel printed no JSON.
    """
    res = sandbox.exec(f"python3 -I - {shlex.quote(json.dumps({**args, '_op': op}))}", timeout_s=timeout_s,
                       stdin=KERNEL, budget=budget)
    if res.timed_out:
        return {"ok": False, "code": "timeout", "message": f"the CAD kernel ran past {timeout_s:g} s"}
    lines = res.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SandboxError(f"CAD kernel gave no result (exit {res.exit_code}): {res.stderr[-300:]}") from None


def _cad_tool(name: str):
    def impl(args: dict, ctx, timeout_s: float) -> str:
        if ctx.sandbox is None:
            raise ToolFailure("tool_error", "this task has no sandbox")
        state = ctx.state.setdefault("cad", {"undo": [], "rollbacks": 0, "failed_ops": 0, "steps": 0})
        if name == "rollback":
            if not state["undo"]:
                raise ToolFailure("nothing_to_undo", "no modeling step to undo")
            label, snap = state["undo"].pop()
            ctx.sandbox.rollback(snap)
            state["rollbacks"] += 1
            return json.dumps({"undone": label, "can_undo": len(state["undo"])})
        snap = ctx.sandbox.snapshot() if name in _CHANGES else None
        out = run_kernel(ctx.sandbox, name.removeprefix("cad_"), args, timeout_s=timeout_s)
        if not out.pop("ok"):
            state["failed_ops"] += 1
            raise ToolFailure(out.get("code", "tool_error"), out.get("message", "failed"))
        if snap is not None:
            state["steps"] += 1
            state["undo"] = [*state["undo"], (f"step {state['steps']}: {name}", snap)][-MAX_UNDO:]
        return json.dumps(out)

    return impl


CAD_IMPLEMENTATIONS = {n: _cad_tool(n) for n in CAD_TOOLS}


# ---- tasks --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CadSpec:
    """What the verifier checks: `volume` (mm^3, exact), `bbox` ([min xyz], [max xyz]),
    `solid` (points that must lie in the material), `empty` (points that must not: holes,
    gaps), with a name for each probe."""

    volume: float
    bbox: tuple
    solid: tuple = ()
    empty: tuple = ()


@dataclass(frozen=True)
class CadTask:
    question: str
    spec: CadSpec
    reference: tuple = field(default=())  # (tool, arguments) pairs


def _rng(name: str, seed: int, level: int, attempt: int) -> random.Random:
    """The generator of a task's dimensions (attempt 0 keeps the seeds' original tasks)."""
    return random.Random(f"{name}:{seed}:{level}" + (f":{attempt}" if attempt else ""))


def _r(rng: random.Random, lo: int, hi: int, step: int = 1) -> int:
    return rng.randrange(lo, hi + 1, step)


def _hole_wall(r: float) -> tuple[float, float]:
    """Offsets (along x and y alike: a 45 degree diagonal) of two probes around a hole of
    radius r: at 0.85 r (must be empty: the hole is not smaller) and at 1.15 r (must be
    material: the hole is round and not larger; a square hole of side 2r reaches 1.41 r)."""
    return 0.85 * r / math.sqrt(2), 1.15 * r / math.sqrt(2)


def make_bracket(seed: int, level: int, attempt: int = 0) -> CadTask:
    """A `cad_bracket` task (see the module docstring); `attempt` > 0 draws another one."""
    rng = _rng("cad_bracket", seed, level, attempt)
    L, W, T = _r(rng, 60, 100, 5), _r(rng, 30, 50, 2), _r(rng, 4, 8)
    d = _r(rng, 4, 8)
    r = d / 2
    H = _r(rng, 30, 50, 5) if level >= 2 else T
    flange = T if level >= 2 else 0
    a = _r(rng, 10, 15)
    x1, x2, yc = flange + a, L - a, W / 2
    ref = [("cad_box", {"name": "base", "size": [L, W, T]})]
    parts = [f"a {L} x {W} x {T} mm plate (x from 0 to {L}, y from 0 to {W}, z from 0 to {T})"]
    volume = L * W * T
    if level >= 2:
        ref += [("cad_box", {"name": "flange", "size": [T, W, H - T], "at": [0, 0, T]}),
                ("cad_boolean", {"op": "union", "target": "base", "tool": "flange"})]
        parts.append(f"with an upright flange {T} mm thick along the x = 0 edge, reaching z = {H}")
        volume += T * W * (H - T)
    for i, x in enumerate((x1, x2), 1):
        ref += [("cad_cylinder", {"name": f"hole{i}", "radius": r, "height": T + 2, "at": [x, yc, -1]}),
                ("cad_boolean", {"op": "difference", "target": "base", "tool": f"hole{i}"})]
    volume -= 2 * math.pi * r * r * T
    holes = f"two vertical through-holes of diameter {d} mm in the plate, centred at (x={x1}, y={yc:g}) and " \
            f"(x={x2}, y={yc:g})"
    solid = [(L / 2, yc, T / 2), (x1 + r + 1.5, yc, T / 2), (x2 - r - 1.5, yc, T / 2)]
    empty = [(x1, yc, T / 2), (x2, yc, T / 2)]
    for x in (x1, x2):
        inner, outer = _hole_wall(r)
        empty.append((x + inner, yc + inner, T / 2))
        solid.append((x + outer, yc + outer, T / 2))
    if level >= 2:
        solid.append((T / 2, yc + W / 4, (T + H) / 2))
        empty.append((T + 2, yc, H - 1))  # in front of the flange, above the plate
    if level == 3:
        zf = (T + H) / 2
        ref += [("cad_cylinder", {"name": "hole3", "radius": r, "height": T + 2, "at": [-1, yc, zf], "axis": "x"}),
                ("cad_boolean", {"op": "difference", "target": "base", "tool": "hole3"})]
        holes += f", and a horizontal through-hole of diameter {d} mm through the flange along x, centred at " \
                 f"(y={yc:g}, z={zf:g})"
        volume -= math.pi * r * r * T
        empty.append((T / 2, yc, zf))
        inner, outer = _hole_wall(r)
        empty.append((T / 2, yc + inner, zf + inner))
        solid.append((T / 2, yc + outer, zf + outer))
    ref.append(("cad_export", {"name": "base"}))
    question = (f"Model a bracket: {', '.join(parts)}; {holes}. Build it from primitives and boolean operations "
                "with the cad tools, then export the finished body with cad_export. Dimensions are in mm.")
    return CadTask(question, CadSpec(volume, ((0, 0, 0), (L, W, H)), tuple(solid), tuple(empty)), tuple(ref))


def make_shaft(seed: int, level: int, attempt: int = 0) -> CadTask:
    """A `cad_shaft` task (see the module docstring); `attempt` > 0 draws another one."""
    rng = _rng("cad_shaft", seed, level, attempt)
    n = 2 if level == 1 else 3
    radii = sorted(rng.sample(range(6, 21, 3), n), reverse=True)
    lengths = [_r(rng, 15, 60, 5) for _ in range(n)]
    ref, z, volume, solid, empty, desc = [], 0, 0.0, [], [], []
    for i, (rad, ln) in enumerate(zip(radii, lengths), 1):
        ref.append(("cad_cylinder", {"name": f"step{i}", "radius": rad, "height": ln, "at": [0, 0, z]}))
        if i > 1:
            ref.append(("cad_boolean", {"op": "union", "target": "step1", "tool": f"step{i}"}))
        desc.append(f"diameter {2 * rad} mm from z = {z} to z = {z + ln}")
        volume += math.pi * rad * rad * ln
        solid.append((rad - 1.5, 0, z + ln / 2))
        if i > 1:
            empty.append((radii[i - 2] - 1.5, 0, z + ln / 2))  # outside the smaller step
        z += ln
    text = (f"Model a stepped shaft along the z axis, centred on it, made of {n} coaxial cylindrical steps: "
            f"{'; '.join(desc)}")
    if level == 3:
        bore = _r(rng, 2, min(4, radii[-1] - 3))
        ref += [("cad_cylinder", {"name": "bore", "radius": bore, "height": z + 2, "at": [0, 0, -1]}),
                ("cad_boolean", {"op": "difference", "target": "step1", "tool": "bore"})]
        volume -= math.pi * bore * bore * z
        solid[-1] = (radii[-1] - 1.0, 0, z - lengths[-1] / 2)
        inner, outer = _hole_wall(bore)
        empty += [(0, 0, z / 2), (inner, inner, z / 2)]
        solid.append((outer, outer, z / 2))
        text += f"; with an axial bore of diameter {2 * bore} mm through its whole length"
    ref.append(("cad_export", {"name": "step1"}))
    question = (f"{text}. Build it with the cad tools and export the finished body with cad_export. "
                "Dimensions are in mm.")
    r0 = radii[0]
    return CadTask(question, CadSpec(volume, ((-r0, -r0, 0), (r0, r0, z)), tuple(solid), tuple(empty)), tuple(ref))


def make_table(seed: int, level: int, attempt: int = 0) -> CadTask:
    """A `cad_table` task (see the module docstring); `attempt` > 0 draws another one."""
    rng = _rng("cad_table", seed, level, attempt)
    L, W, H, t = _r(rng, 60, 120, 10), _r(rng, 40, 80, 10), _r(rng, 40, 80, 5), _r(rng, 3, 6)
    s, e = _r(rng, 4, 8), _r(rng, 2, 6)
    leg_h = H - t
    ref = [("cad_box", {"name": "top", "size": [L, W, t], "at": [0, 0, leg_h]})]
    volume = L * W * t
    corners = [(e, e), (L - e - s, e), (e, W - e - s), (L - e - s, W - e - s)]
    round_legs = level == 2
    for i, (x, y) in enumerate(corners, 1):
        if round_legs:
            ref.append(("cad_cylinder", {"name": f"leg{i}", "radius": s / 2, "height": leg_h,
                                         "at": [x + s / 2, y + s / 2, 0]}))
            volume += math.pi * (s / 2) ** 2 * leg_h
        else:
            ref.append(("cad_box", {"name": f"leg{i}", "size": [s, s, leg_h], "at": [x, y, 0]}))
            volume += s * s * leg_h
        ref.append(("cad_boolean", {"op": "union", "target": "top", "tool": f"leg{i}"}))
    legs = (f"four round legs of diameter {s} mm" if round_legs else f"four square legs of {s} x {s} mm")
    text = (f"Model a table: a top of {L} x {W} x {t} mm whose upper face is at z = {H} (x from 0 to {L}, y from 0 "
            f"to {W}), on {legs} standing on z = 0; each leg's outer faces are inset {e} mm from the top's edges")
    solid = [(L / 2, W / 2, H - t / 2), (e + s / 2, e + s / 2, leg_h / 2), (L - e - s / 2, W - e - s / 2, 2)]
    empty = [(L / 2, W / 2, leg_h / 2)]
    if level == 3:
        hs, ts = _r(rng, 8, max(9, leg_h // 3)), 3
        ref += [("cad_box", {"name": "shelf", "size": [L - 2 * e, W - 2 * e, ts], "at": [e, e, hs]}),
                ("cad_boolean", {"op": "union", "target": "top", "tool": "shelf"})]
        volume += (L - 2 * e) * (W - 2 * e) * ts - 4 * s * s * ts
        solid.append((L / 2, W / 2, hs + ts / 2))
        empty = [(L / 2, W / 2, (hs + ts + leg_h) / 2), (L / 2, W / 2, hs / 2)]
        text += (f"; and a lower shelf {ts} mm thick from z = {hs} to z = {hs + ts}, spanning between the legs' "
                 f"outer faces (x from {e} to {L - e}, y from {e} to {W - e})")
    ref.append(("cad_export", {"name": "top"}))
    question = (f"{text}. The table must be one solid body. Build it with the cad tools and export it with "
                "cad_export. Dimensions are in mm.")
    return CadTask(question, CadSpec(volume, ((0, 0, 0), (L, W, H)), tuple(solid), tuple(empty)), tuple(ref))


MAKERS = {"cad_bracket": make_bracket, "cad_shaft": make_shaft, "cad_table": make_table}


# ---- verification ---------------------------------------------------------------------------------

def check_geometry(spec: dict, measured: dict) -> list[dict]:
    """Compare a measured export (`cad_kernel` measure) with a spec (`CadSpec` as a dict).

    Returns:
        One record per check: name, passed, expected, measured.
    """
    checks = []
    vol = measured["volume"]
    checks.append({"name": "volume", "passed": abs(vol - spec["volume"]) <= VOLUME_TOL * spec["volume"],
                   "expected": round(spec["volume"], 1), "measured": vol})
    (lo, hi), (mlo, mhi) = spec["bbox"], measured["bbox"]
    off = max(abs(a - b) for a, b in zip([*lo, *hi], [*mlo, *mhi]))
    checks.append({"name": "bounding_box", "passed": off <= BBOX_TOL_MM, "expected": [list(lo), list(hi)],
                   "measured": [mlo, mhi]})
    checks.append({"name": "watertight", "passed": measured.get("watertight") is True, "expected": True,
                   "measured": measured.get("watertight")})
    checks.append({"name": "one_body", "passed": measured["bodies"] == 1, "expected": 1,
                   "measured": measured["bodies"]})
    probes = measured["probes"]
    n_solid = len(spec["solid"])
    bad_solid = [p for p, inside in zip(spec["solid"], probes[:n_solid]) if not inside]
    bad_empty = [p for p, inside in zip(spec["empty"], probes[n_solid:]) if inside]
    checks.append({"name": "material", "passed": not bad_solid, "expected": "material at every solid probe",
                   "measured": f"missing at {bad_solid}" if bad_solid else "ok"})
    checks.append({"name": "holes_and_gaps", "passed": not bad_empty, "expected": "no material at hole/gap probes",
                   "measured": f"material at {bad_empty}" if bad_empty else "ok"})
    return checks


def spec_dict(spec: CadSpec) -> dict:
    return {"volume": spec.volume, "bbox": [list(spec.bbox[0]), list(spec.bbox[1])],
            "solid": [list(p) for p in spec.solid], "empty": [list(p) for p in spec.empty]}


@dataclass(frozen=True, eq=False)
class CadDomain(ToolUseDomain):
    """A `cad` domain (kind multi_turn): tasks from `MAKERS[name]`, played in a ToolEnv whose
    tools run the CAD kernel in the sandbox."""

    name: str
    description: str
    level_notes: dict
    family: str = "cad"
    kind: str = "multi_turn"
    needs_sandbox: bool = True
    source: str = "generated by domains.cad.domain; geometry by manifold3d and trimesh"
    license: str = "Apache-2.0"
    answer_format: str = "line"
    pooled: bool = False
    multiple_answers: bool = False
    levels = {1: {}, 2: {}, 3: {}}
    reward_rule: ClassVar[str] = ("0.2 x exported + 0.8 x the share of geometry checks passed (0 unless the volume "
                                  "is plausible)")

    @property
    def environment(self) -> dict:
        return {"runtime": "sandbox (Docker image with numpy, trimesh, manifold3d)", "gymnasium": "ToolEnv",
                "verifier": "volume, bounding box, watertight, one body, material/hole probes of the export",
                "undo": "rollback restores the snapshot before the last modeling step"}

    def make_task(self, seed: int, difficulty: int = 1):
        """The registry `Task`: question, spec (entry["spec"]) and reference tool sequence.

        Raises:
            ConfigError: bad seed or difficulty.
        """

        level = check_difficulty(difficulty, self.levels)
        index = as_int(seed)
        if index is None or index < 0:
            raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
        # parts are split, not only seeds (see "Splits" in the module docstring)
        t = draw_on_side(index, lambda attempt: MAKERS[self.name](index, level, attempt), lambda t: t.question)
        entry = {"question": t.question, "spec": spec_dict(t.spec), "tools": list(CAD_TOOLS),
                 "reference_calls": [[n, a] for n, a in t.reference]}
        return Task(self.name, index, t.question, f"volume {t.spec.volume:.1f} mm^3", level, entry)

    def tool_specs(self, task) -> list[ToolSpec]:
        return list(CAD_TOOLS.values())

    def opening(self, task) -> list[dict]:
        return [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                {"role": "user", "content": f"{task.question}\nWhen the part is exported, reply DONE without a "
                                            "tool call."}]

    def messages(self, task) -> list[dict]:
        return tool_prompt(None, self.opening(task), self.tool_specs(task))[0]

    def make_env(self, sandbox=None, max_turns: int = 8, timeout_s: float = KERNEL_TIMEOUT_S):
        return ToolEnv(self, sandbox, max_turns=max_turns, timeout_s=max(timeout_s, KERNEL_TIMEOUT_S), max_calls=8)

    def tool_runner(self, task, sandbox, timeout_s: float = KERNEL_TIMEOUT_S, max_calls: int = 8):
        return ToolRunner(list(CAD_TOOLS), ToolContext(sandbox=sandbox), timeout_s=timeout_s, max_calls=max_calls,
                          implementations=CAD_IMPLEMENTATIONS, specs=CAD_TOOLS, in_caller=set(CAD_TOOLS))

    def score_episode(self, task, final_text: str, results: list, sandbox=None) -> tuple[float, dict]:
        """Measure the export in the sandbox and check it (see the module docstring).

        Raises:
            SandboxError: the sandbox failed (harness fault).
        """

        spec = task.entry["spec"]
        out = run_kernel(sandbox, "measure", {"probes": [*spec["solid"], *spec["empty"]]}, budget=False)

        ran = [r for r in results if r.name in CAD_TOOLS and r.name != "rollback" and r.error not in CONTRACT_ERRORS]
        retries = {"rollbacks": sum(r.name == "rollback" and r.error is None for r in results),
                   "failed_ops": sum(r.error is not None for r in ran)}
        if not out.get("ok"):
            failing = "exported" if out.get("code") == "not_exported" else f"measure: {out.get('message')}"
            return 0.0, {"format": 0.0, "correct": 0.0, "checks": [], "failing": [failing], **retries}
        checks = check_geometry(spec, out)
        passed = sum(c["passed"] for c in checks)
        plausible = abs(out["volume"] - spec["volume"]) <= PLAUSIBLE_VOLUME * spec["volume"]
        breakdown = {"format": 1.0, "correct": float(passed == len(checks)), "checks": checks,
                     "failing": [c["name"] for c in checks if not c["passed"]], "checks_passed": passed,
                     "plausible": plausible, "volume": out["volume"], "bbox": out["bbox"], **retries}
        mesh = _read_mesh(sandbox, out.get("mesh_file"))
        if mesh is not None:
            breakdown["mesh"] = mesh
        credit = passed / len(checks) if plausible else 0.0
        return min(1.0, FORMAT_WEIGHT + CORRECT_WEIGHT * credit), breakdown

    def reference_turns(self, task) -> list[str]:
        """The reference tool sequence, a few calls per turn (dependent steps in order), then DONE."""
        return _turns(task.entry["reference_calls"])

    def reference_completion(self, task) -> str:
        return "\n".join(self.reference_turns(task))

    def scripted_turns(self, text: str) -> list[str]:
        return scripted_tool_turns(text)

    def wrong_turns(self, task) -> list[str]:
        """The reference with one wrong dimension (the first primitive 3 mm larger)."""
        calls = [list(c) for c in task.entry["reference_calls"]]
        name, args = calls[0]
        args = dict(args)
        if "size" in args:
            args["size"] = [args["size"][0] + 3, *args["size"][1:]]
        else:
            args["radius"] = args["radius"] + 3
        calls[0] = [name, args]
        return _turns(calls)

    def wrap_answer(self, answer: str) -> str:
        return "DONE"


def _read_mesh(sandbox, path: str | None) -> dict | None:
    """The exported mesh the kernel wrote (None when missing, unreadable or over
    `MAX_MESH_TRIANGLES`, which the page would not draw)."""
    if not path:
        return None
    try:
        mesh = json.loads(sandbox.read_file(path))
    except (ConfigError, SandboxError, ValueError):
        return None
    return mesh if len(mesh.get("triangles", [])) <= MAX_MESH_TRIANGLES else None


def _turns(calls, per_turn: int = 4) -> list[str]:
    """(tool, arguments) pairs written as turns of `per_turn` calls each, then DONE."""

    texts = [call_text(n, a) for n, a in calls]
    return ["".join(texts[i : i + per_turn]) for i in range(0, len(texts), per_turn)] + ["DONE"]


def cad_domains() -> dict[str, CadDomain]:
    """The cad domains by name."""
    made = [
        CadDomain("cad_bracket", "Model a drilled plate or L-bracket from boxes and cylinders with boolean "
                  "operations; the geometry is measured against the spec.",
                  {1: "plate, two holes", 2: "L-bracket, two holes", 3: "L-bracket, three holes (one horizontal)"}),
        CadDomain("cad_shaft", "Model a stepped shaft from coaxial cylinders; the geometry is measured.",
                  {1: "two steps", 2: "three steps", 3: "three steps and an axial bore"}),
        CadDomain("cad_table", "Model a table from a top and four legs (one body); the geometry is measured.",
                  {1: "square legs", 2: "round legs", 3: "square legs and a lower shelf"}),
    ]
    return {d.name: d for d in made}
