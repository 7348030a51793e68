"""A task's workspace files from a directory or an archive named in a data row.

    files = read_task_files("tasks/fix-042.tar.gz", base_dir=Path("data"), where="row 42")
    # {"src/app.py": "...", "tests/test_app.py": "..."}: path -> text, as a files column holds

A row's files column holds either a JSON object of path -> text or the path of a directory,
a tar archive (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz) or a .zip, relative to the data
file's folder. Archives are read with the standard `tarfile` and `zipfile` modules, member
by member, never extracted to disk: absolute paths, "..", links and devices are refused,
and the sizes are checked against the limits before anything is read. Files must be UTF-8
text (the workspace files are stored with the rows, as text).

Not covered: binary files (a picture, a compiled program).
"""

from __future__ import annotations

import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from core.errors import ConfigError

MAX_TASK_FILES = 500
MAX_TASK_BYTES = 5 * 1024 * 1024  # all of one task's files together
MAX_ARCHIVE_MEMBERS = 5_000  # directories included: an archive of empty folders is refused before it is walked
ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def _clean(name: str, where: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
    if not name or path.is_absolute() or ".." in path.parts or str(path) == ".":
        raise ConfigError(f"{where}: the archive holds {name[:80]!r}, which leaves the workspace (absolute, '..' or "
                          "the workspace itself)")
    return str(path)


def check_workspace_files(files: dict, where: str) -> dict[str, str]:
    """`files` (path -> text) as a workspace can hold them: relative paths inside it, none
    twice (after "./a" is read as "a"), none both a file and a folder ("a" and "a/b"), at
    most MAX_TASK_FILES files and MAX_TASK_BYTES bytes. Returns them with clean paths.

    Raises:
        ConfigError: naming the path and `where`.
    """
    out: dict[str, str] = {}
    for name, text in files.items():
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or str(path) == ".":
            raise ConfigError(f"{where}: file path {name[:80]!r} must stay inside the workspace (relative, no '..')")
        if str(path) in out:
            raise ConfigError(f"{where}: file {str(path)[:80]!r} appears twice")
        out[str(path)] = text
    folders = {str(parent) for p in out for parent in PurePosixPath(p).parents}
    clash = sorted(folders & set(out))
    if clash:
        raise ConfigError(f"{where}: {clash[0][:80]!r} is both a file and a folder of other files")
    _budget([len(t.encode("utf-8", "replace")) for t in out.values()], where)
    return out


def _text(data: bytes, name: str, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: file {name[:80]!r} is not UTF-8 text; task files are text") from None


def _budget(sizes: list[int], where: str) -> None:
    if len(sizes) > MAX_TASK_FILES:
        raise ConfigError(f"{where}: {len(sizes)} files, over the limit of {MAX_TASK_FILES} per task")
    if sum(sizes) > MAX_TASK_BYTES:
        raise ConfigError(f"{where}: {sum(sizes):,} bytes of files, over the limit of {MAX_TASK_BYTES:,} per task")


def _from_directory(root: Path, where: str) -> dict[str, str]:
    entries = sorted(p for p in root.rglob("*") if p.is_symlink() or not p.is_dir())  # a linked folder is a link
    links = [p for p in entries if p.is_symlink() or not p.is_file()]
    if links:
        raise ConfigError(f"{where}: {links[0].relative_to(root)} is a link or special file; task files are "
                          "regular files")
    _budget([p.stat().st_size for p in entries], where)
    return {p.relative_to(root).as_posix(): _text(p.read_bytes(), p.name, where) for p in entries}


def _from_tar(path: Path, where: str) -> dict[str, str]:
    with tarfile.open(path) as tar:
        members = []
        for m in tar:  # counted as they are read: a huge index is refused before it is all walked
            members.append(m)
            if len(members) > MAX_ARCHIVE_MEMBERS:
                raise ConfigError(f"{where}: the archive has over {MAX_ARCHIVE_MEMBERS} entries")
        members = [m for m in members if not m.isdir()]
        odd = [m for m in members if not m.isfile()]
        if odd:
            raise ConfigError(f"{where}: {odd[0].name[:80]!r} in the archive is a link or special file; task "
                              "files are regular files")
        _budget([m.size for m in members], where)
        return _unique([(_clean(m.name, where), _text(tar.extractfile(m).read(), m.name, where)) for m in members],
                       where)


def _from_zip(path: Path, where: str) -> dict[str, str]:
    with zipfile.ZipFile(path) as z:
        if len(z.infolist()) > MAX_ARCHIVE_MEMBERS:
            raise ConfigError(f"{where}: the archive has over {MAX_ARCHIVE_MEMBERS} entries")
        members = [m for m in z.infolist() if not m.is_dir()]
        links = [m for m in members if (m.external_attr >> 16) & 0o170000 == 0o120000]
        if links:
            raise ConfigError(f"{where}: {links[0].filename[:80]!r} in the archive is a link; task files are "
                              "regular files")
        _budget([m.file_size for m in members], where)
        out = []
        for m in members:
            with z.open(m) as f:
                data = f.read(MAX_TASK_BYTES + 1)  # the header's size may lie
            if len(data) > m.file_size:
                raise ConfigError(f"{where}: {m.filename[:80]!r} is larger than the archive says")
            out.append((_clean(m.filename, where), _text(data, m.filename, where)))
        return _unique(out, where)


def _unique(pairs: list[tuple[str, str]], where: str) -> dict[str, str]:
    """The archive's (path, text) pairs as a dict, refusing a path that appears twice."""
    out: dict[str, str] = {}
    for name, text in pairs:
        if name in out:
            raise ConfigError(f"{where}: the archive holds {name[:80]!r} twice")
        out[name] = text
    return out


def read_task_files(ref: str, base_dir: Path | None, where: str) -> dict[str, str]:
    """The files of a directory or archive as path -> text (paths relative to its root).

    Args:
        ref: The directory's or archive's path; relative ones are taken from `base_dir`.
        base_dir: The data file's folder (None: the working directory).
        where: What the error messages name ("row 7: column 'files'").

    Raises:
        ConfigError: no such directory or archive, an unknown archive type, a member that
            leaves the workspace or is a link, a file that is not UTF-8, over
            MAX_TASK_FILES files or MAX_TASK_BYTES bytes, a corrupt archive.
    """
    path = Path(ref.strip()).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    name = path.name.lower()
    try:
        if path.is_dir():
            return check_workspace_files(_from_directory(path, where), where)
        if not path.is_file():
            raise ConfigError(f"{where}: {ref[:120]!r} is not a JSON object of files, nor a directory or archive "
                              f"that exists (relative paths start at {base_dir or Path.cwd()})")
        if name.endswith(".zip"):
            return check_workspace_files(_from_zip(path, where), where)
        if name.endswith(ARCHIVES):
            return check_workspace_files(_from_tar(path, where), where)
    except ConfigError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError,
            ValueError) as e:  # zipfile: RuntimeError (encrypted), NotImplementedError (deflate64), zlib.error
        raise ConfigError(f"{where}: can't read {path.name!r} ({type(e).__name__}: {str(e)[:160]})") from None
    raise ConfigError(f"{where}: {path.name!r} is not a directory or an archive ({', '.join(ARCHIVES)})")
