"""The HumanEval test runner that runs INSIDE a sandbox (standard library only).

    python3 -I runner.py < request.json      # request: {"nonce", "prompt", "test", "entry_point"}

Two processes, so the model's code never runs where the verdict is decided:

* the *judge* (this script, ``judge`` role) reads the request from stdin, marks itself
  non-dumpable (no ptrace, no /proc/<pid>/mem for same-uid processes), executes the
  problem's prompt and tests (trusted, from the dataset), and calls ``check(candidate)``
  where ``candidate`` is a proxy;
* the *solver* (``solver`` role, a fresh interpreter without the request) executes the
  model's ``solution.py`` and answers the proxy's calls over a private pipe pair. Arguments
  and results cross as ``repr`` text parsed with ``ast.literal_eval``: only plain Python
  values (numbers, strings, lists, tuples, dicts, sets, None, booleans) come back, so an
  object that "equals everything" can't pass an ``assert``.

The judge prints the nonce as its last stdout line only when ``check`` returned, and exits
0; the solver's own output goes to stderr. ``sys.exit``/``os._exit`` in the model's code end
only the solver (its calls then fail). Failures print a traceback whose last line names
the kind (SyntaxError, AssertionError, ...). Not covered: tests that need the candidate's
identity or side effects (none of HumanEval's 164 does).
"""

import ast
import ctypes
import json
import math
import os
import subprocess
import sys
import traceback

PR_SET_DUMPABLE = 4


class SolverError(Exception):
    """The model's code failed (or died) while answering a call."""


def _encode(value):
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
            return {"float": text}
        raise TypeError(f"not a plain value: {type(value).__name__}") from None
    return {"repr": text}


def _decode(obj):
    if "float" in obj:
        return float(obj["float"])
    return ast.literal_eval(obj["repr"])


def solver(read_fd: int, write_fd: int) -> None:
    """Load solution.py, then answer calls: {"args": [...]} -> {"ok": value} or {"error": text}."""
    inp, out = os.fdopen(read_fd, "r"), os.fdopen(write_fd, "w")
    entry = inp.readline().strip()
    namespace = {"__name__": "solution"}
    try:
        with open("solution.py") as f:
            exec(compile(f.read(), "solution.py", "exec"), namespace)
        fn = namespace[entry]
    except BaseException:  # noqa: BLE001 - report whatever the model's code did
        out.write(json.dumps({"error": traceback.format_exc(limit=5)}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in inp:
        try:
            args = [_decode(a) for a in json.loads(line)["args"]]
            reply = {"ok": _encode(fn(*args))}
        except BaseException:  # noqa: BLE001
            reply = {"error": traceback.format_exc(limit=5)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


class Proxy:
    """Calls the model's function in the solver process."""

    def __init__(self, entry: str) -> None:
        to_solver, self._w = os.pipe()
        self._r, from_solver = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "solver", str(to_solver), str(from_solver)],
            stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(),
            pass_fds=(to_solver, from_solver))
        os.close(to_solver)
        os.close(from_solver)
        self._in, self._out = os.fdopen(self._r, "r"), os.fdopen(self._w, "w")
        self._out.write(entry + "\n")
        self._out.flush()
        first = self._receive()
        if "error" in first:
            raise SolverError(first["error"])

    def _receive(self) -> dict:
        line = self._in.readline()
        if not line:
            raise SolverError(f"the solution's process ended (exit code {self.proc.wait()})")
        return json.loads(line)

    def __call__(self, *args):
        self._out.write(json.dumps({"args": [_encode(a) for a in args]}) + "\n")
        self._out.flush()
        reply = self._receive()
        if "error" in reply:
            raise SolverError(reply["error"])
        return _decode(reply["ok"])


def judge() -> int:
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    request = json.loads(sys.stdin.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    namespace = {"__name__": "__main__"}
    try:
        candidate = Proxy(request["entry_point"])
        exec(compile(request["prompt"], "prompt.py", "exec"), namespace)
        namespace[request["entry_point"]] = candidate
        exec(compile(request["test"], "test.py", "exec"), namespace)
        namespace["check"](candidate)
    except SolverError as e:
        sys.stderr.write(str(e) + "\n")
        return 1
    except BaseException:  # noqa: BLE001 - a failed check (AssertionError, ...) is the verdict
        traceback.print_exc()
        return 1
    sys.stdout.write("\n" + request["nonce"] + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["solver"]:
        solver(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(judge())
