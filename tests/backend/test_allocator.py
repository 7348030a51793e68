"""TCMalloc for runs and evaluations (`core.allocator`): the restart that preloads it, the
environment of the processes `launch` and the page start, the notice without it, and the
release of its free pages between phases."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.system import system_status
from core import allocator
from core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
LIB = allocator.find_library()
# make setup installs it as root (the Makefile's `allocator`); CI sets RLWB_REQUIRE_TCMALLOC=1, so they fail there
needs_tcmalloc = pytest.mark.skipif(LIB is None and os.environ.get("RLWB_REQUIRE_TCMALLOC") != "1",
                                    reason=f"TCMalloc is not installed ({allocator.INSTALL_HINT})")


@pytest.fixture
def no_tcmalloc_here(monkeypatch):
    """This process as if it ran with the C library's malloc (pytest itself may run under TCMalloc)."""
    monkeypatch.setattr(allocator, "loaded", lambda: None)
    monkeypatch.delenv("LD_PRELOAD", raising=False)


def _python(code: str, env: dict | None = None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k != "LD_PRELOAD"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


def test_environment_puts_tcmalloc_first_once_and_keeps_other_preloads(monkeypatch):
    monkeypatch.delenv("RLWB_ALLOCATOR", raising=False)
    monkeypatch.setattr(allocator, "find_library", lambda: Path("/lib/libtcmalloc_minimal.so.4"))
    env = allocator.environment({"LD_PRELOAD": "/x/libiomp5.so", "A": "1"})
    assert env["LD_PRELOAD"] == "/lib/libtcmalloc_minimal.so.4 /x/libiomp5.so"
    assert env["A"] == "1" and int(env["TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"]) >= 1 << 40
    assert allocator.environment(env)["LD_PRELOAD"] == env["LD_PRELOAD"]  # not twice


def test_environment_is_unchanged_with_the_system_choice_or_without_the_library(monkeypatch, no_tcmalloc_here):
    monkeypatch.setattr(allocator, "find_library", lambda: Path("/lib/libtcmalloc_minimal.so.4"))
    monkeypatch.setenv("RLWB_ALLOCATOR", "system")
    assert allocator.environment({"A": "1"}) == {"A": "1"}
    monkeypatch.setenv("RLWB_ALLOCATOR", "TCMalloc")  # any case
    monkeypatch.setattr(allocator, "find_library", lambda: None)
    assert allocator.environment({"A": "1"}) == {"A": "1"}
    assert "not installed" in allocator.fallback_reason() and "libtcmalloc-minimal4" in allocator.fallback_reason()


def test_a_bad_choice_names_the_variable_and_its_values(monkeypatch, no_tcmalloc_here):
    monkeypatch.setenv("RLWB_ALLOCATOR", "jemalloc")
    with pytest.raises(ConfigError, match=r"RLWB_ALLOCATOR='jemalloc': use one of tcmalloc, system"):
        allocator.environment({})
    ok, detail = allocator.status()  # the page's table never raises
    assert not ok and "RLWB_ALLOCATOR='jemalloc'" in detail


@needs_tcmalloc
def test_reexec_restarts_with_tcmalloc_keeping_the_command_line():
    code = ("import sys; from core import allocator; print('start', flush=True); allocator.reexec(); "
            "print(allocator.loaded(), sys.argv[1:], allocator.fallback_reason())")
    out = _python(code, None, "a b", "--x")
    assert out.returncode == 0, out.stderr
    start, last = out.stdout.splitlines()[0], out.stdout.splitlines()[-1]
    assert start == "start" and out.stdout.count("start") == 2  # it ran again from the top
    assert last == f"{LIB.resolve()} ['a b', '--x'] None"  # the maps name the file the link points to


@needs_tcmalloc
def test_reexec_keeps_malloc_with_the_system_choice_and_says_so():
    code = "from core import allocator; allocator.reexec(); allocator.notice(__import__('sys').stdout)"
    out = _python(code, {**os.environ, "RLWB_ALLOCATOR": "system"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "note: memory allocator: the C library's malloc (RLWB_ALLOCATOR=system)"


@needs_tcmalloc
def test_the_cli_restarts_a_foreground_run_with_tcmalloc_and_refuses_a_bad_choice(tmp_path):
    """`rlwb run` from the shell: with TCMalloc no allocator note (the config error comes from
    the restarted process); RLWB_ALLOCATOR=system gets the note; a bad value exits 2 naming it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 0\n")
    cmd = [sys.executable, "-m", "backend.cli", "--db", str(tmp_path / "s.db"), "run", str(bad)]
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    runs = {choice: subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300,
                                   env={**base, "RLWB_ALLOCATOR": choice})
            for choice in ("tcmalloc", "system", "bogus")}
    for choice in ("tcmalloc", "system"):
        assert runs[choice].returncode == 2 and "steps" in runs[choice].stderr, runs[choice].stderr
    assert "memory allocator" not in runs["tcmalloc"].stderr
    assert "note: memory allocator: the C library's malloc (RLWB_ALLOCATOR=system)" in runs["system"].stderr
    assert runs["bogus"].returncode == 2
    assert "RLWB_ALLOCATOR='bogus': use one of tcmalloc, system" in runs["bogus"].stderr


@needs_tcmalloc
def test_release_free_memory_hands_tcmallocs_free_pages_back():
    """TCMalloc keeps freed 8 MiB blocks (glibc unmaps them at once), so the RSS drop comes
    from the release itself."""
    code = ("import sys; from core import allocator; allocator.reexec()\n"
            "from trainer.metrics import release_free_memory, resident_gb\n"
            "blocks = [bytearray(8 << 20) for _ in range(40)]\n"  # 320 MiB, touched (zero-filled)
            "peak = resident_gb(); del blocks\n"
            "kept = resident_gb(); ran = release_free_memory()\n"
            "print(allocator.loaded() is not None, peak, kept, resident_gb(), ran)")
    out = _python(code)
    assert out.returncode == 0, out.stderr
    tcmalloc, peak, kept, after, ran = out.stdout.split()
    assert tcmalloc == "True" and ran == "True"
    assert float(kept) > float(peak) - 0.05, out.stdout  # freed, still held by TCMalloc
    assert float(after) < float(kept) - 0.25, out.stdout  # the 320 MiB went back to the system


def test_launch_and_the_page_eval_jobs_start_their_process_with_the_allocators_environment(monkeypatch, tmp_path):
    from backend import eval_jobs, runs
    from backend.store import Store

    monkeypatch.delenv("RLWB_ALLOCATOR", raising=False)
    monkeypatch.setattr(allocator, "find_library", lambda: Path("/lib/libtcmalloc_minimal.so.4"))
    seen = []

    class Proc:
        pid = 123

        def __init__(self, cmd, **kw):
            seen.append((cmd, kw["env"]))

        def wait(self):
            return 0

    monkeypatch.setattr(runs.subprocess, "Popen", Proc)
    monkeypatch.setattr(eval_jobs.subprocess, "Popen", Proc)
    monkeypatch.setattr("trainer.loop.check_model_fits", lambda cfg: None)
    monkeypatch.setattr(eval_jobs, "resolve_eval_model", lambda store, ref: (tmp_path, None, None))
    monkeypatch.setattr(eval_jobs, "eval_config", lambda *a: None)
    with Store(tmp_path / "s.db") as store:
        run_id = store.create_run("t", {"steps": 1}, 1)
        runs._spawn(store, run_id, resume=False, env=runs.worker_env(store))
        eval_jobs.start(store, "smollm2-135m", eval_jobs.EvalSettings(domains=["chain_sum"]))
    assert [cmd[2] for cmd, _ in seen] == ["backend.runs", "backend.eval_jobs"]
    for _, env in seen:
        assert env["LD_PRELOAD"].split()[0] == "/lib/libtcmalloc_minimal.so.4"


def test_the_system_table_has_the_allocator_row(monkeypatch, no_tcmalloc_here):
    monkeypatch.setattr(allocator, "find_library", lambda: None)
    monkeypatch.delenv("RLWB_ALLOCATOR", raising=False)
    row = next(r for r in system_status() if r["part"].startswith("TCMalloc"))
    assert row["available"] is False and "not installed" in row["detail"]


def test_a_bad_choice_stops_a_launch_before_the_run_row_exists(monkeypatch, tmp_path, tiny_model_dir):
    from backend import runs
    from backend.store import Store
    from trainer.config import parse_config

    monkeypatch.setenv("RLWB_ALLOCATOR", "glibc")
    monkeypatch.setattr(runs, "_spawn", lambda *a, **k: pytest.fail("no worker may start"))
    cfg = parse_config({"name": "x", "model": str(tiny_model_dir), "domains": ["chain_sum"], "group_size": 2,
                        "micro_batch_size": 2})
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(ConfigError, match="RLWB_ALLOCATOR='glibc'"):
            runs.launch(cfg, store)
        assert store.list_runs() == []


def test_a_refused_preload_is_named_in_the_notice(monkeypatch, no_tcmalloc_here):
    monkeypatch.delenv("RLWB_ALLOCATOR", raising=False)
    monkeypatch.setenv("LD_PRELOAD", "/nowhere/libtcmalloc_minimal.so.4")
    assert allocator.fallback_reason() == ("the C library's malloc: the loader did not preload "
                                           "/nowhere/libtcmalloc_minimal.so.4")


def test_a_bad_choice_stops_a_background_resume_before_the_claim(monkeypatch, tmp_path):
    """Refused before the run is claimed and its later rows removed: the run stays stopped,
    with its rows, and no process of the page is left holding it."""
    from backend import runs
    from backend.store import Store
    from tests.backend.test_runs import record_checkpoint

    monkeypatch.setenv("RLWB_ALLOCATOR", "glibc")
    monkeypatch.setattr(runs, "_spawn", lambda *a, **k: pytest.fail("no worker may start"))
    with Store(tmp_path / "s.db") as store:
        rid = store.create_run("x", {"model": "tiny"}, total_steps=5)
        record_checkpoint(store, rid, tmp_path, 1)
        store.record_metrics(rid, 2, {"kl": 0.1})
        store.set_status(rid, "stopped")
        with pytest.raises(ConfigError, match="RLWB_ALLOCATOR='glibc'"):
            runs.resume(store, rid)
        run = store.get_run(rid)
        assert run["status"] == "stopped" and run["pid"] != os.getpid()
        assert [m["step"] for m in store.run_metrics(rid)] == [2]


def test_a_library_the_loader_refuses_is_named_and_not_retried(tmp_path):
    """A file by TCMalloc's name that is no shared library: the loader skips it, the process
    restarts once at most, keeps malloc, and the notice names the file."""
    fake = tmp_path / "libtcmalloc_minimal.so.4"
    fake.write_text("not a library")
    code = ("import sys; from core import allocator; print('start', flush=True); allocator.reexec(); "
            "allocator.notice(sys.stdout)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "LD_PRELOAD": str(fake)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["start", f"note: memory allocator: the C library's malloc: the loader did not "
                                                f"preload {fake}"]
