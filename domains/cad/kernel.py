"""The CAD kernel that runs inside the sandbox: one modeling operation per invocation.

    python3 -I - '{"_op": "box", "name": "plate", "size": [80, 40, 6]}'   < kernel.py

It is sent on stdin by `domains.cad.domain` (so it never sits in the workspace) and works
on bodies stored under ``/workspace/cad/<name>.npz`` (float32 vertices, uint32 triangles of a
manifold3d `Manifold`); a failed operation writes nothing. It prints one JSON object:
``{"ok": true, ...}`` or ``{"ok": false, "code": CODE, "message": ...}`` with CODE one of
``bad_argument``, ``no_such_body``, ``body_exists``, ``empty_result``, ``not_exported``,
``missing_library``.

Operations (the "_op" key; lengths in millimetres, angles in degrees):
- box: name, size [x, y, z] (> 0), at [x, y, z] (the minimum corner, default origin)
- cylinder: name, radius, height, at (centre of the base), axis "x" | "y" | "z", segments
- translate: name, offset [x, y, z]; rotate: name, axis, degrees (about the origin)
- boolean: op "union" | "difference" | "intersection", target, tool, result (default target);
  the tool body is consumed
- delete: name; list: names with volumes; inspect: name -> volume, bbox, bodies, watertight
- export: name -> ``cad/export.npz`` and ``cad/export.stl`` (the model to be verified)
- measure: probes [[x, y, z], ...] -> the export's volume (mm^3), area (mm^2), bbox,
  watertight, bodies (connected solids), genus, whether each probe point lies in the solid;
  its mesh (vertices, triangles) goes to ``cad/export_mesh.json`` (`mesh_file`)

Only numpy, manifold3d and (for watertightness and STL) trimesh are imported; the sandbox
image carries them (`sandboxes.image.WHEELS`).
"""

import json
import math
import os
import re
import sys

CAD_DIR = "cad"
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_SEGMENTS = 256
PROBE_SIZE = 0.05  # mm: a probe point is "in the solid" when a cube of this edge around it is


class KernelError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _libs():
    try:
        import manifold3d
        import numpy
    except ImportError as e:
        raise KernelError("missing_library", f"{e}; the sandbox image needs numpy and manifold3d "
                                             "(rebuild it: rlwb sandbox build-image)") from None
    return numpy, manifold3d


def _path(name):
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise KernelError("bad_argument", f"body name must match [a-z][a-z0-9_]{{0,31}}, got {name!r}")
    return os.path.join(CAD_DIR, name + ".npz")


def _load(name):
    np, m = _libs()
    path = _path(name)
    if not os.path.exists(path):
        raise KernelError("no_such_body", f"no body named {name!r}; bodies: {', '.join(_names()) or 'none'}")
    with np.load(path) as data:
        mesh = m.Mesh(vert_properties=data["verts"].astype(np.float32), tri_verts=data["tris"].astype(np.uint32))
    return m.Manifold(mesh)


def _save(name, body):
    np, _ = _libs()
    if body.is_empty() or body.volume() <= 0:
        raise KernelError("empty_result", "the operation leaves an empty body; nothing was changed")
    mesh = body.to_mesh()
    os.makedirs(CAD_DIR, exist_ok=True)
    tmp = _path(name) + ".tmp.npz"
    np.savez(tmp, verts=np.asarray(mesh.vert_properties)[:, :3].astype(np.float32),
             tris=np.asarray(mesh.tri_verts).astype(np.uint32))
    os.replace(tmp, _path(name))


def _names():
    if not os.path.isdir(CAD_DIR):
        return []
    return sorted(f[:-4] for f in os.listdir(CAD_DIR) if f.endswith(".npz") and NAME.fullmatch(f[:-4]))


def _vec(value, what, positive=False):
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                                and math.isfinite(v) for v in value)):
        raise KernelError("bad_argument", f"{what} must be a list of 3 finite numbers, got {value!r:.200}")
    if any(abs(v) > 1e5 for v in value) or (positive and any(v <= 0 for v in value)):
        raise KernelError("bad_argument", f"{what} must be {'positive ' if positive else ''}numbers up to 1e5 mm")
    return [float(v) for v in value]


def _positive(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= 1e5:
        raise KernelError("bad_argument", f"{what} must be a number in (0, 1e5], got {value!r}")
    return float(value)


def _new(args):
    if os.path.exists(_path(args.get("name"))):
        raise KernelError("body_exists", f"a body named {args['name']!r} exists; pick another name or delete it")
    return args["name"]


def _summary(body):
    lo_hi = body.bounding_box()
    return {"volume": round(body.volume(), 3), "bbox": [[round(v, 3) for v in lo_hi[:3]],
                                                        [round(v, 3) for v in lo_hi[3:]]],
            "bodies": len(body.decompose())}


def op_box(args):
    _, m = _libs()
    name = _new(args)
    body = m.Manifold.cube(_vec(args.get("size"), "size", positive=True)).translate(
        _vec(args.get("at", [0, 0, 0]), "at"))
    _save(name, body)
    return {"created": name, **_summary(body)}


_AXES = {"x": [0.0, 90.0, 0.0], "y": [-90.0, 0.0, 0.0], "z": [0.0, 0.0, 0.0]}


def op_cylinder(args):
    _, m = _libs()
    name = _new(args)
    radius, height = _positive(args.get("radius"), "radius"), _positive(args.get("height"), "height")
    axis = args.get("axis", "z")
    if axis not in _AXES:
        raise KernelError("bad_argument", f"axis must be 'x', 'y' or 'z', got {axis!r}")
    segments = args.get("segments", 48)
    if isinstance(segments, bool) or not isinstance(segments, int) or not 8 <= segments <= MAX_SEGMENTS:
        raise KernelError("bad_argument", f"segments must be an int in 8..{MAX_SEGMENTS}, got {segments!r}")
    body = m.Manifold.cylinder(height, radius, radius, segments).rotate(_AXES[axis])
    body = body.translate(_vec(args.get("at", [0, 0, 0]), "at"))
    _save(name, body)
    return {"created": name, **_summary(body)}


def op_translate(args):
    body = _load(args.get("name")).translate(_vec(args.get("offset"), "offset"))
    _save(args["name"], body)
    return {"moved": args["name"], **_summary(body)}


def op_rotate(args):
    axis, degrees = args.get("axis"), args.get("degrees")
    if axis not in _AXES:
        raise KernelError("bad_argument", f"axis must be 'x', 'y' or 'z', got {axis!r}")
    if isinstance(degrees, bool) or not isinstance(degrees, (int, float)) or not math.isfinite(degrees) \
            or abs(degrees) > 3600:
        raise KernelError("bad_argument", f"degrees must be a number in [-3600, 3600], got {degrees!r}")
    angles = [float(degrees) if a == axis else 0.0 for a in "xyz"]
    body = _load(args.get("name")).rotate(angles)
    _save(args["name"], body)
    return {"rotated": args["name"], **_summary(body)}


def op_boolean(args):
    kind = args.get("op")
    target, tool = _load(args.get("target")), _load(args.get("tool"))
    if args.get("target") == args.get("tool"):
        raise KernelError("bad_argument", "target and tool must be different bodies")
    if kind == "union":
        body = target + tool
    elif kind == "difference":
        body = target - tool
    elif kind == "intersection":
        body = target ^ tool
    else:
        raise KernelError("bad_argument", f"op must be union, difference or intersection, got {kind!r}")
    result = args.get("result", args["target"])
    if result not in (args["target"], args["tool"]) and os.path.exists(_path(result)):
        raise KernelError("body_exists", f"a body named {result!r} exists; pick another result name")
    _save(result, body)
    for name in {args["target"], args["tool"]} - {result}:
        os.remove(_path(name))
    return {"result": result, **_summary(body)}


def op_delete(args):
    _load(args.get("name"))
    os.remove(_path(args["name"]))
    return {"deleted": args["name"], "bodies": _names()}


def op_list(args):
    return {"bodies": {n: _summary(_load(n)) for n in _names()}}


def op_inspect(args):
    body = _load(args.get("name"))
    return {"name": args["name"], **_summary(body), "genus": body.genus()}


def op_export(args):
    body = _load(args.get("name"))
    _save("export", body) if args["name"] != "export" else None
    try:
        import trimesh

        mesh = body.to_mesh()
        trimesh.Trimesh(mesh.vert_properties[:, :3], mesh.tri_verts).export(os.path.join(CAD_DIR, "export.stl"))
    except ImportError:
        pass
    return {"exported": args["name"], **_summary(body)}


def op_measure(args):
    np, m = _libs()
    if not os.path.exists(_path("export")):
        raise KernelError("not_exported", "nothing was exported (call cad_export with the finished body)")
    body = _load("export")
    out = _summary(body)
    mesh = body.to_mesh()
    verts, tris = np.asarray(mesh.vert_properties)[:, :3], np.asarray(mesh.tri_verts)
    try:
        import trimesh

        out["watertight"] = bool(trimesh.Trimesh(verts, tris, process=True).is_watertight)
    except ImportError:
        out["watertight"] = None
    out.update(area=round(body.surface_area(), 3), genus=body.genus())
    probes = []
    for p in args.get("probes", []):
        cube = m.Manifold.cube([PROBE_SIZE] * 3, center=True).translate(_vec(p, "probe"))
        probes.append((body ^ cube).volume() > 0.5 * PROBE_SIZE ** 3)
    out["probes"] = probes
    mesh_path = os.path.join(CAD_DIR, "export_mesh.json")  # the mesh can be large: a file, not stdout
    with open(mesh_path, "w") as f:
        json.dump({"vertices": np.round(verts.astype(np.float64), 3).tolist(), "triangles": tris.tolist()}, f)
    out["mesh_file"] = mesh_path
    return out


OPS = {name[3:]: fn for name, fn in globals().items() if name.startswith("op_")}


def main(argv):
    try:
        args = json.loads(argv[1]) if len(argv) > 1 else {}
        if not isinstance(args, dict) or args.get("_op") not in OPS:
            raise KernelError("bad_argument", f"_op must be one of {sorted(OPS)}")
        result = {"ok": True, **OPS[args["_op"]](args)}
    except KernelError as e:
        result = {"ok": False, "code": e.code, "message": str(e)}
    except Exception as e:  # noqa: BLE001 - a library failure is reported, not a traceback
        result = {"ok": False, "code": "bad_argument", "message": f"{type(e).__name__}: {e}"[:500]}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
