"""Checker scripts for terminal tasks: stdlib-only python3 programs run inside the sandbox.

A checker decides whether a terminal task (see domains/terminal/tasks.py) was solved. It is
the text of a python3 script that uses only the standard library; the sandbox writes it
outside /workspace (e.g. /tmp/checker.py) and runs it with cwd=/workspace after the episode.
It prints one line, `PASS: ...` or `FAIL: ...`, and exits 0 iff the task is solved.
A script is PREAMBLE (helpers done/read/answer/lines/compare_files) + the task's constants
as Python literals + a body that defines check() + EPILOGUE (calls check(); an unexpected
exception becomes a FAIL line, never a pass).

    from domains.terminal.checkers import LINES_BODY, checker, number_checker
    number_checker("answer.txt", 42)                           # answer.txt must hold 42
    checker(LINES_BODY, PATH="out.txt", EXPECTED=["a", "b"])   # out.txt must be these lines

Bodies and the constants they read: NUMBER_BODY (PATH, EXPECTED, TOLERANCE), TEXT_BODY
(PATH, EXPECTED, NORMALISE_PATH), LINES_BODY (PATH, EXPECTED), TREE_BODY (ROOT, EXPECTED),
TAR_BODY (PATH, EXPECTED), BUGFIX_BODY (TEST, TEST_SHA256, PROBE, HIDDEN_EXPECTED) and
GIT_BODY (REPO, MESSAGES, SNAPSHOTS).

Not covered here: this module runs nothing; it only builds script text. Which checker a
task gets, and with which expected values, is decided by the templates in
domains/terminal/tasks.py; running the script and turning its exit code into a reward is
the sandbox's and the domain's job. Checkers trust the sandbox's isolation: they verify the
result but are not a security boundary and are not hardened against a model that rewrites
their environment (e.g. shadows python3 or git on PATH).
"""

from __future__ import annotations

PREAMBLE = '''\
import ctypes, hashlib, json, os, subprocess, sys

# The model's code runs in child processes of this checker (the fixed module, git): they
# must not read this script (stdin) or this process (ptrace, /proc/<pid>/mem, environ).
try:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
except (OSError, AttributeError):
    pass
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)

def done(ok, reason):
    print(("PASS: " if ok else "FAIL: ") + " ".join(str(reason).split())[:300])
    sys.exit(0 if ok else 1)

def read(path):
    if not os.path.isfile(path):
        done(False, f"{path} does not exist")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()

def answer(path):
    return read(path).strip()

def lines(path):
    return [line.rstrip() for line in read(path).rstrip().splitlines()]

def compare_files(got, want, where):
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if missing or extra:
        done(False, f"{where}: missing {missing[:3]}, unexpected {extra[:3]}")
    changed = sorted(p for p in want if got[p] != want[p])
    if changed:
        done(False, f"{where}: wrong content in {changed[:3]}")
'''
EPILOGUE = '''

try:
    check()
except SystemExit:
    raise
except Exception as exc:
    done(False, f"checker error: {exc!r}")
'''

NUMBER_BODY = '''
def check():
    got = answer(PATH)
    try:
        value = float(got)
    except ValueError:
        done(False, f"{PATH} does not hold a number: {got[:40]!r}")
    if not abs(value - EXPECTED) <= TOLERANCE:
        done(False, f"{PATH} holds {got[:40]!r}, which is not the expected value")
    done(True, f"{PATH} holds the expected value {got}")
'''

TEXT_BODY = '''
def check():
    got = answer(PATH)
    if NORMALISE_PATH and got:
        got = os.path.relpath(got) if os.path.isabs(got) else os.path.normpath(got)
    if got != EXPECTED:
        done(False, f"{PATH} holds {got[:60]!r}, which is not the expected answer")
    done(True, f"{PATH} holds the expected answer")
'''

LINES_BODY = '''
def check():
    got = lines(PATH)
    if got != EXPECTED:
        n = min(len(got), len(EXPECTED))
        first = next((i for i in range(n) if got[i] != EXPECTED[i]), n)
        done(False, f"{PATH} has {len(got)} lines (expected {len(EXPECTED)}); "
                    f"first difference at line {first + 1}")
    done(True, f"{PATH} has the expected {len(EXPECTED)} lines")
'''

TREE_BODY = '''
def check():
    got = {}
    for folder, _, names in os.walk(ROOT):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                got[os.path.relpath(path)] = f.read()
    compare_files(got, EXPECTED, ROOT)
    done(True, f"{ROOT} holds exactly the expected {len(EXPECTED)} files")
'''

TAR_BODY = '''
import tarfile

def check():
    if not os.path.isfile(PATH):
        done(False, f"{PATH} does not exist")
    got = {}
    try:
        with tarfile.open(PATH, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    data = tar.extractfile(member).read()
                    got[os.path.normpath(member.name)] = data.decode("utf-8", "replace")
    except (tarfile.TarError, OSError, EOFError) as exc:
        done(False, f"{PATH} is not a readable .tar.gz: {exc}")
    compare_files(got, EXPECTED, PATH)
    done(True, f"{PATH} holds exactly the expected {len(EXPECTED)} files")
'''

BUGFIX_BODY = '''
import tempfile

def python(*args):  # a fresh bytecode cache: a stale src/__pycache__ must not hide the fix
    env = dict(os.environ, PYTHONPYCACHEPREFIX=tempfile.mkdtemp(), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)

def check():
    if not os.path.isfile(TEST):
        done(False, f"{TEST} does not exist")
    with open(TEST, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != TEST_SHA256:
            done(False, f"{TEST} was modified; only the code under src/ may change")
    run = python(TEST)
    if run.returncode != 0:
        tail = (run.stdout + run.stderr).strip().splitlines()[-1:] or ["no output"]
        done(False, f"python3 {TEST} fails: {tail[0]}")
    probe = python("-c", PROBE)
    out = probe.stdout.strip().splitlines()
    if probe.returncode != 0 or not out:
        done(False, "the functions crash on further inputs")
    if json.loads(out[-1]) != HIDDEN_EXPECTED:
        done(False, f"{TEST} passes but the functions are wrong on further inputs")
    done(True, f"python3 {TEST} passes and the functions are correct")
'''

GIT_BODY = '''
# Settings that would let the repository run commands or hide changes are overridden, and
# the repository's own config may only hold plain core and user settings.
SAFE = ["-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
        "-c", "core.untrackedCache=false", "-c", "status.showUntrackedFiles=all", "-c", "core.pager=cat"]
ALLOWED_CONFIG = {"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
                  "core.ignorecase", "core.precomposeunicode", "user.name", "user.email"}
GIT_ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")

def git(*args):
    cmd = ["git", *SAFE, "-C", REPO, *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=GIT_ENV, stdin=subprocess.DEVNULL)
    return run.returncode, run.stdout

def config_keys():
    run = subprocess.run(["git", "config", "--file", os.path.join(REPO, ".git", "config"), "--list", "--name-only"],
                         capture_output=True, text=True, timeout=30, env=GIT_ENV, stdin=subprocess.DEVNULL)
    return run.stdout.split()

def check():
    if not os.path.isdir(os.path.join(REPO, ".git")):
        done(False, f"{REPO} is not a git repository (no {REPO}/.git)")
    extra = sorted(set(config_keys()) - ALLOWED_CONFIG)
    if extra:
        done(False, f"{REPO}/.git/config sets {extra[:3]}; only core and user settings are allowed")
    code, out = git("log", "--format=%s")
    if code != 0:
        done(False, f"{REPO} has no commits")
    if out.splitlines() != MESSAGES:
        done(False, f"commit subjects (newest first) {out.splitlines()[:4]} are not {MESSAGES}")
    for rev, files in SNAPSHOTS:
        code, out = git("ls-tree", "-r", "--name-only", rev)
        wrong = sorted(set(out.splitlines()) ^ set(files))
        if wrong:
            done(False, f"commit {rev} tracks the wrong files: {wrong[:3]}")
        for path, text in files.items():
            code, out = git("show", f"{rev}:{path}")
            if text is not None and out.rstrip("\\n") != text.rstrip("\\n"):
                done(False, f"{path} has the wrong content in commit {rev}")
    code, out = git("status", "--porcelain")
    if code != 0 or out.strip():
        done(False, f"working tree of {REPO} is not clean: {out.strip()[:80]!r}")
    done(True, f"{REPO} has the expected commits and a clean working tree")
'''


def checker(body: str, **constants: object) -> str:
    """Assemble a checker script; constants become module-level Python literals.

    Args:
        body: One of the *_BODY sources; it defines check() and reads the constants.
        **constants: NAME=value pairs written as `NAME = repr(value)` lines, so values
            must be plain literals (str, int, float, bool, None, list, dict, tuple).

    Returns:
        The script text: PREAMBLE + constants + body + EPILOGUE.
    """
    header = "".join(f"{name} = {value!r}\n" for name, value in constants.items())
    return PREAMBLE + header + body + EPILOGUE


def number_checker(path: str, expected: float, tolerance: float = 0.0) -> str:
    """A checker that passes iff `path` holds one number within `tolerance` of `expected`."""
    return checker(NUMBER_BODY, PATH=path, EXPECTED=expected, TOLERANCE=tolerance + 1e-9)
