"""`rlwb runs export/import` carry a run's own held-out evaluations (every completion), so
an imported run shows the same held-out figures and answers as the original."""

import gzip
import json

from backend.heldout import run_heldout, task_pairs
from backend.store import Store
from backend.store_export import export_run, import_run
from tests.backend.heldout_runs import heldout_store


def test_an_imported_run_keeps_its_held_out_evaluations(tmp_path):
    rid, ids = heldout_store(tmp_path / "a.db", tasks=4)
    path = tmp_path / "run.rlwb.jsonl.gz"
    with Store(tmp_path / "a.db") as store:
        store.create_eval("m", "/m", {}, {"domains": {}}, run_id=rid, step=4)  # an `rlwb eval`: not exported
        counts = export_run(store, rid, path)
        want = run_heldout(store, rid)["rows"]
        answers = task_pairs(store, ids["after"], "chain_sum", vs=ids["before"])
    assert counts["eval_runs"] == 3 and counts["eval_samples"] == 3 * 2 * 4
    with Store(tmp_path / "b.db") as store:
        target, got = import_run(store, path)
        assert got == counts
        figures = run_heldout(store, target)
        assert figures is not None and figures["rows"] == want
        a, b = figures["ids"]
        assert task_pairs(store, b, "chain_sum", vs=a) == answers
    with Store(tmp_path / "a.db") as store:  # the same file again, as a copy: fresh evaluation ids
        copy, _ = import_run(store, path, new_id=True)
        assert run_heldout(store, copy)["rows"] == want
        assert set(run_heldout(store, copy)["ids"]).isdisjoint(ids.values())
        assert run_heldout(store, rid)["ids"] == [ids["before"], ids["after"]]


def test_a_file_exported_before_held_out_evaluations_were_still_imports(tmp_path):
    rid, _ = heldout_store(tmp_path / "a.db", tasks=4)
    path, old = tmp_path / "run.rlwb.jsonl.gz", tmp_path / "old.rlwb.jsonl.gz"
    with Store(tmp_path / "a.db") as store:
        export_run(store, rid, path)
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).splitlines()]
    kept = [x for x in lines if x.get("table") not in ("eval_runs", "eval_samples") and "end" not in x]
    rows = {k: v for k, v in lines[-1]["end"]["rows"].items() if not k.startswith("eval_")}
    old.write_bytes(gzip.compress(b"".join(json.dumps(x).encode() + b"\n" for x in [*kept, {"end": {"rows": rows}}])))
    with Store(tmp_path / "b.db") as store:
        target, got = import_run(store, old)
        assert got["eval_runs"] == 0 and run_heldout(store, target) is None
        assert len(store.evaluations(target)) == 3 * 2
