"""Build the `rlwb-sandbox` image without any image registry.

    rlwb sandbox build-image            # ~1 min the first time, then cached

Steps: `debootstrap --variant=minbase --include=python3,git bookworm` into a temporary
rootfs (from the Debian mirror apt already uses), add the unprivileged ``sandbox`` user
(uid 1000) and an empty ``/workspace``, install the CAD kernel's wheels (`WHEELS`: numpy,
trimesh, manifold3d for the rootfs's CPython 3.11, fetched by the host's pip from the package
index) into ``/usr/local/lib/python3.11/dist-packages``, strip docs and apt caches, then
`docker import` the tree as ``rlwb-sandbox:latest``. The image carries the label ``rlwb.recipe`` (a hash of
this recipe); a build is skipped when an image with the same recipe exists.

Not covered: images for other distributions or with extra packages (add them to
`PACKAGES` and the recipe hash changes), pushing images anywhere.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from core.errors import SandboxUnavailable
from sandboxes.spec import DEFAULT_IMAGE

SUITE = "bookworm"
PACKAGES = ("python3", "git")
SANDBOX_PYTHON = "3.11"  # bookworm's python3
WHEELS = ("numpy==2.3.5", "trimesh==5.2.0", "manifold3d==3.5.4")  # the CAD kernel (domains/cad/kernel.py)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SANDBOX_UID = 1000
_STRIP = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt/archives",
          "var/lib/apt/lists")
RECIPE = (f"debootstrap minbase {SUITE} {' '.join(PACKAGES)} uid={SANDBOX_UID} strip={','.join(_STRIP)} "
          f"wheels={','.join(WHEELS)} v2")


def recipe_hash() -> str:
    """Short hash of the image recipe; stored as the image label ``rlwb.recipe``."""
    return hashlib.sha256(RECIPE.encode()).hexdigest()[:16]


def _mirror() -> str:
    """The Debian mirror apt uses on this machine (falls back to deb.debian.org)."""
    for path in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if line.startswith("URIs:") and len(parts) > 1 and parts[1].rstrip("/").endswith("/debian"):
                    return parts[1]
                if line.startswith("deb ") and len(parts) > 1 and parts[1].rstrip("/").endswith("/debian"):
                    return parts[1]
    return DEFAULT_MIRROR


def make_rootfs(target: Path, mirror: str | None = None) -> None:
    """Debootstrap the sandbox rootfs into `target` and prepare it (user, workspace, strip).

    Raises:
        SandboxUnavailable: debootstrap is missing or fails (the message has its log tail).
    """
    if shutil.which("debootstrap") is None:
        raise SandboxUnavailable("debootstrap not found; install it with `apt-get install debootstrap` (root)")
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(target),
           mirror or _mirror()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise SandboxUnavailable(f"debootstrap failed (exit {proc.returncode}):\n{tail}")
    with open(target / "etc/passwd", "a") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/workspace:/bin/bash\n")
    with open(target / "etc/group", "a") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:\n")
    (target / "workspace").mkdir(exist_ok=True)
    install_wheels(target)
    for rel in _STRIP:
        shutil.rmtree(target / rel, ignore_errors=True)
        (target / rel).mkdir(parents=True, exist_ok=True)


def install_wheels(target: Path) -> None:
    """Install `WHEELS` (binary wheels for CPython `SANDBOX_PYTHON` on manylinux x86_64) into
    the rootfs with the host's pip (`pip install --target`); nothing is compiled.

    Raises:
        SandboxUnavailable: pip could not fetch or install them (its log tail in the message).
    """
    import sys

    site = target / f"usr/local/lib/python{SANDBOX_PYTHON}/dist-packages"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(site),
           "--only-binary=:all:", "--implementation", "cp", "--python-version", SANDBOX_PYTHON,
           "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
           "--platform", "manylinux_2_17_x86_64", *WHEELS]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxUnavailable(f"installing the sandbox's Python wheels failed (exit {proc.returncode}):\n"
                                 f"{(proc.stdout + proc.stderr)[-2000:]}")


def rootfs_tar(target: Path, out: Path) -> Path:
    """Write the rootfs as an uncompressed tar file (numeric owners kept), ready for import."""
    with tarfile.open(out, mode="w") as tar:
        tar.add(str(target), arcname=".")
    return out


def build_image(tag: str = DEFAULT_IMAGE, force: bool = False, log=print) -> str:
    """Build (or find cached) the sandbox image.

    Args:
        tag: image tag to create.
        force: rebuild even when an image with the same recipe exists.
        log: progress printer.

    Returns:
        The image id.

    Raises:
        SandboxUnavailable: no Docker engine, no debootstrap, or the build failed.
    """
    # on first use: it pulls in docker
    from sandboxes.docker_backend import docker_client, find_image, import_image, remove_image

    client = docker_client()
    found = find_image(client, tag)
    if found is not None and not force and found.labels.get("rlwb.recipe") == recipe_hash():
        log(f"image {tag} is up to date ({found.short_id}, recipe {recipe_hash()})")
        return found.id
    with tempfile.TemporaryDirectory(prefix="rlwb-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        log(f"debootstrap {SUITE} ({', '.join(PACKAGES)}) into {root} (about a minute)...")
        make_rootfs(root)
        log("importing into Docker...")
        image_id = import_image(client, rootfs_tar(root, Path(tmp) / "rootfs.tar"), tag, {"rlwb.recipe": recipe_hash()})
    log(f"built {tag} ({image_id[:19]})")
    if found is not None and found.id != image_id:
        remove_image(client, found.id, log)
    return image_id
