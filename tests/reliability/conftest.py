"""The reliability suite's fault ledger: each test injects one real fault, records it with
the `fault` fixture, and counts any records it finds lost; the session ends with the tally
(faults injected, survived, records lost) on the terminal and in
``test-artifacts/reliability.json``.

    def test_something(fault):
        fault.inject("kill -9 of the training process mid-checkpoint")
        ...
        fault.lost(expected_rows - found_rows)   # before asserting it is zero
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

_LEDGER: dict[str, "FaultRecord"] = {}


@dataclass
class FaultRecord:
    """One test's fault: what was injected (how many times), records lost, and the outcome."""

    test: str
    injected: list[str] = field(default_factory=list)
    records_lost: int = 0
    outcome: str = "not run"

    def inject(self, what: str, times: int = 1) -> None:
        """Note that the fault `what` was really injected (`times` injections, e.g. fuzz inputs)."""
        self.injected.extend([what] if times == 1 else [f"{what} (x{times})"])

    def lost(self, n: int) -> None:
        """Add `n` records (rows, steps, bytes of a checkpoint...) that should have survived but did not."""
        self.records_lost += max(int(n), 0)


@pytest.fixture
def fault(request) -> FaultRecord:
    record = FaultRecord(request.node.nodeid)
    _LEDGER[request.node.nodeid] = record
    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    record = _LEDGER.get(item.nodeid)
    if record is not None and (report.when == "call" or report.outcome != "passed"):
        if report.when == "call" or record.outcome == "not run":
            record.outcome = "xfailed (known bug)" if hasattr(report, "wasxfail") else report.outcome
    return report


def pytest_terminal_summary(terminalreporter):
    records = [r for r in _LEDGER.values() if r.injected]
    if not records:
        return
    survived = [r for r in records if r.outcome == "passed"]
    lost = sum(r.records_lost for r in records)
    tr = terminalreporter
    tr.section("reliability: faults injected / survived / data lost")
    for r in records:
        tr.write_line(f"{'SURVIVED' if r.outcome == 'passed' else r.outcome.upper():>8}  lost={r.records_lost:<3} "
                      f"{r.test.split('::')[-1]}: {'; '.join(r.injected)}")
    tr.write_line(f"faults injected: {len(records)}, survived: {len(survived)}, data lost: {lost} records")
    out = Path(__file__).resolve().parents[2] / "test-artifacts" / "reliability.json"
    try:
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"injected": len(records), "survived": len(survived), "records_lost": lost,
                                   "faults": [asdict(r) for r in records]}, indent=1))
    except OSError:  # a read-only checkout: the terminal has it
        pass


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of `size` (e.g. "16m") mounted at `where` for the block (needs root and
    mount rights; else the test is skipped); unmounted afterwards."""
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                         text=True)
    if res.returncode != 0:
        pytest.skip(f"can't mount a small tmpfs here ({res.stderr.strip()}); run as root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
