"""A real full disk for one broker: its log dir on a size-limited tmpfs, filled on demand.

The broker then meets ENOSPC from the kernel, in whatever write hits it first (a
segment append, an index entry, a checkpoint, a producer snapshot), not from a
simulated writer. Needs root (mount(2)); every function fails loudly otherwise.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

FILLER = ".strandline-filler"
_CHUNK = 1 << 20


class DiskFaultError(RuntimeError):
    """The fault could not be set up or removed (not root, mount failed, ...)."""


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise DiskFaultError(f"{what} needs root (mount/umount); running as uid {os.geteuid()}")


def _run(command: list[str]) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DiskFaultError(f"{' '.join(command)} failed: {exc}") from exc
    if done.returncode != 0:
        raise DiskFaultError(
            f"{' '.join(command)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}"
        )


def _mount_point_fstypes() -> dict[str, str]:
    """Mount point -> file system type of the innermost mount (later lines win)."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3:
            # /proc/mounts escapes blanks in paths as octal.
            point = fields[1].replace("\\040", " ").replace("\\011", "\t")
            found[point] = fields[2]
    return found


def is_limited(directory: Path) -> bool:
    """Whether `directory` is itself the mount point of a tmpfs."""
    return _mount_point_fstypes().get(str(Path(directory).resolve())) == "tmpfs"


def _copy_contents(source: Path, target: Path) -> None:
    for entry in source.iterdir():
        destination = target / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, destination, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, destination, follow_symlinks=False)


def _clear(directory: Path) -> None:
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def mount_limited(directory: Path, size_mb: int) -> None:
    """Mount a `size_mb` MiB tmpfs on `directory`, keeping what it held.

    The existing files are copied aside, then into the new file system; the originals
    stay underneath the mount. Stop the broker using the directory first: it would keep
    writing to the files it has open underneath.
    """
    _require_root("mount_limited")
    directory = Path(directory).resolve()
    if size_mb <= 0:
        raise DiskFaultError(f"size_mb must be positive, not {size_mb}")
    directory.mkdir(parents=True, exist_ok=True)
    if is_limited(directory):
        raise DiskFaultError(f"{directory} is already a tmpfs mount point")
    with tempfile.TemporaryDirectory(prefix=".strandline-disk-", dir=directory.parent) as aside:
        saved = Path(aside)
        _copy_contents(directory, saved)
        _run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(directory)])
        try:
            _copy_contents(saved, directory)
        except OSError as exc:
            _run(["umount", "-l", str(directory)])
            raise DiskFaultError(
                f"{directory}'s contents do not fit in {size_mb} MiB; unmounted again: {exc}"
            ) from exc


def fill(directory: Path, leave_bytes: int = 0) -> int:
    """Write `directory/.strandline-filler` until the file system says ENOSPC, then give
    back `leave_bytes`; returns the filler's size. Refuses an unlimited directory, so a
    mistake cannot fill the machine's real disk."""
    directory = Path(directory)
    if not is_limited(directory):
        raise DiskFaultError(f"{directory} is not a size-limited mount; mount_limited it first")
    path = directory / FILLER
    chunk = b"\0" * _CHUNK
    written = path.stat().st_size if path.exists() else 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = _CHUNK
        while size:
            try:
                written += os.write(fd, chunk[:size])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                # Smaller writes take the last partly free pages too.
                size //= 2
        if leave_bytes > 0:
            written = max(0, written - leave_bytes)
            os.ftruncate(fd, written)
    finally:
        os.close(fd)
    return written


def free(directory: Path) -> None:
    """Remove the filler: the space it held is free again at once."""
    (Path(directory) / FILLER).unlink(missing_ok=True)


def unmount(directory: Path, keep_contents: bool = False) -> None:
    """Lazily unmount the tmpfs on `directory` (a broker may still hold files open).

    With `keep_contents` the files written on the tmpfs (the filler aside) replace what
    lay underneath, so a broker restarted afterwards finds the data it wrote; without,
    the directory shows what it held before `mount_limited`.
    """
    _require_root("unmount")
    directory = Path(directory).resolve()
    if not is_limited(directory):
        return
    if not keep_contents:
        _run(["umount", "-l", str(directory)])
        return
    with tempfile.TemporaryDirectory(prefix=".strandline-disk-", dir=directory.parent) as aside:
        saved = Path(aside)
        free(directory)
        _copy_contents(directory, saved)
        _run(["umount", "-l", str(directory)])
        _clear(directory)
        _copy_contents(saved, directory)
