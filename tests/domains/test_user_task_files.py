"""A task's workspace files from a directory or an archive named in the data file (relative to
its folder): read member by member, stored with the rows, written into the sandbox and used by
the checker; archives that leave the workspace, links, binary files, too many bytes and
missing paths are refused naming the row."""

import io
import json
import tarfile
import zipfile

import pytest

from core.errors import ConfigError
from domains.user import task_files
from domains.user.library import prepare
from domains.validation import play_turns
from sandboxes.pool import SandboxPool
from sandboxes.spec import SandboxSpec

DEFINITION = {"name": "fix_the_app", "columns": {"prompt": "instruction", "answer": "reference", "id": "id"},
              "verifier": {"kind": "checker", "files_column": "files", "checker": "bash app/run.sh | grep -qx 42",
                           "timeout_s": 5}, "heldout_fraction": 0.3}


def _tree(i: int) -> dict[str, str]:
    return {"app/run.sh": f"echo {i}\n", "app/README": f"task {i}: make run.sh print 42\n", "notes.txt": "x\n"}


def _write_tar(path, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _data(tmp_path, kind: str) -> str:
    """12 rows whose files are a directory, a .tar.gz or a .zip under tasks/, next to rows.jsonl."""
    (tmp_path / "tasks").mkdir()
    rows = []
    for i in range(12):
        if kind == "dir":
            for name, text in _tree(i).items():
                (tmp_path / "tasks" / f"t{i}" / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / "tasks" / f"t{i}" / name).write_text(text)
            ref = f"tasks/t{i}"
        elif kind == "tar":
            ref = f"tasks/t{i}.tar.gz"
            _write_tar(tmp_path / ref, _tree(i))
        else:
            ref = f"tasks/t{i}.zip"
            with zipfile.ZipFile(tmp_path / ref, "w") as z:
                for name, text in _tree(i).items():
                    z.writestr(name, text)
        rows.append({"id": f"t{i}", "instruction": "Make app/run.sh print 42.", "files": ref,
                     "reference": "printf 'echo 42\\n' > app/run.sh"})
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


@pytest.mark.parametrize("kind", ["dir", "tar", "zip"])
def test_files_from_a_directory_or_archive_are_stored_with_the_rows(tmp_path, kind, monkeypatch):
    data = _data(tmp_path, kind)
    monkeypatch.chdir(tmp_path.parent)  # relative paths start at the data file's folder, not the working directory
    d = prepare({**DEFINITION, "data": data})
    assert [r.files for r in d.rows] == [_tree(i) for i in range(12)]


def test_archive_files_reach_the_sandbox_and_the_checker(tmp_path, docker_engine):
    d = prepare({**DEFINITION, "data": _data(tmp_path, "tar")})
    task = d.make_task(0)
    with SandboxPool("docker", SandboxSpec(memory_mb=256, episode_timeout_s=60), size=1,
                     labels={"rlwb.test": "user-task-files"}, gc_interval_s=0) as pool, pool.lease() as sb:
        assert play_turns(d, task, d.reference_turns(task), sb)[0] == 1.0
        assert play_turns(d, task, ["```bash\ncat app/README\n```", "DONE"], sb)[0] == 0.0  # run.sh as shipped


def _one_row(tmp_path, ref: str) -> dict:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"r{i}", "instruction": "x", "reference": "true",
                                          "files": ref if i == 4 else json.dumps({"a.txt": "a"})}) for i in range(12)))
    return {**DEFINITION, "data": str(path)}


def test_bad_archives_are_refused_naming_the_row(tmp_path, monkeypatch):
    _write_tar(tmp_path / "slip.tar.gz", {"../../etc/evil": "x"})
    with pytest.raises(ConfigError, match=r"row 5: column 'files'.*'\.\./\.\./etc/evil', which leaves the workspace"):
        prepare(_one_row(tmp_path, "slip.tar.gz"))
    with tarfile.open(tmp_path / "link.tar", "w") as tar:
        info = tarfile.TarInfo("passwd")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(ConfigError, match="row 5: .*'passwd' in the archive is a link"):
        prepare(_one_row(tmp_path, "link.tar"))
    with zipfile.ZipFile(tmp_path / "bin.zip", "w") as z:
        z.writestr("a.bin", b"\xff\xfe\x00\x81")
    with pytest.raises(ConfigError, match="row 5: .*'a.bin' is not UTF-8 text"):
        prepare(_one_row(tmp_path, "bin.zip"))
    (tmp_path / "corrupt.zip").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(ConfigError, match="row 5: .*can't read 'corrupt.zip'"):
        prepare(_one_row(tmp_path, "corrupt.zip"))
    with pytest.raises(ConfigError, match="row 5: .*'nowhere/t1.tgz' is not a JSON object of files, nor a directory"):
        prepare(_one_row(tmp_path, "nowhere/t1.tgz"))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match="row 5: .*'notes.txt' is not a directory or an archive"):
        prepare(_one_row(tmp_path, "notes.txt"))
    monkeypatch.setattr(task_files, "MAX_TASK_BYTES", 10)
    _write_tar(tmp_path / "big.tar.gz", {"big.txt": "y" * 11})
    with pytest.raises(ConfigError, match="row 5: .*11 bytes of files, over the limit of 10"):
        task_files.read_task_files("big.tar.gz", tmp_path, "row 5: column 'files'")


def test_files_a_workspace_cant_hold_are_refused_naming_the_row(tmp_path, monkeypatch):
    _write_tar(tmp_path / "clash.tar.gz", {"a": "x", "a/b": "y"})
    with pytest.raises(ConfigError, match="row 5: .*'a' is both a file and a folder"):
        prepare(_one_row(tmp_path, "clash.tar.gz"))
    _write_tar(tmp_path / "twice.tar.gz", {"ok.txt": "x", "./ok.txt": "y"})
    with pytest.raises(ConfigError, match="row 5: .*'ok.txt' twice"):
        prepare(_one_row(tmp_path, "twice.tar.gz"))
    _write_tar(tmp_path / "dot.tar.gz", {".": "x"})
    with pytest.raises(ConfigError, match="row 5: .*the workspace itself"):
        prepare(_one_row(tmp_path, "dot.tar.gz"))
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "etc").symlink_to("/etc")
    with pytest.raises(ConfigError, match="row 5: .*etc is a link"):
        prepare(_one_row(tmp_path, "linked"))
    data = tmp_path / "deflated.zip"
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "hello " * 2000)
    raw = bytearray(data.read_bytes())
    raw[60:80] = b"\xff" * 20  # corrupt the compressed data
    data.write_bytes(bytes(raw))
    with pytest.raises(ConfigError, match="row 5: .*can't read 'deflated.zip'"):
        prepare(_one_row(tmp_path, "deflated.zip"))
    monkeypatch.setattr(task_files, "MAX_TASK_FILES", 3)
    many = json.dumps({f"f{i}.txt": "x" for i in range(4)})
    with pytest.raises(ConfigError, match="row 5: .*4 files, over the limit of 3"):  # a JSON object of files too
        prepare(_one_row(tmp_path, many))
    with pytest.raises(ConfigError, match="row 5: .*'a' is both a file and a folder"):
        prepare(_one_row(tmp_path, json.dumps({"a": "x", "a/b": "y"})))
