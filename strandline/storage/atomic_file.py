"""Replacing small files safely: the crash guarantees each kind of write gives.

- `write_atomically` / `write_bytes_atomically`: tmp + fsync + rename + dir fsync; a
  crash leaves the old file or the new one (checkpoints, producer-state snapshots).
- `replace_unsynced`: tmp + rename, no fsync; readers never see a torn file while the
  broker runs, but after a crash the file may be the old one or unreadable (the
  leader-epoch checkpoint on the append path, rebuilt from the batches on load).
- `create_unsynced`: content meaning "nothing recorded", written in place.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that a crash leaves either the old or the new file."""
    write_bytes_atomically(path, text.encode())


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """tmp + fsync + rename + dir fsync: a crash leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def replace_unsynced(path: Path, text: str) -> None:
    """tmp + rename without fsync: readers never see a torn file while the broker runs;
    after a crash the file may be the old one, or unreadable (both handled on load)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(text.encode())
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def create_unsynced(path: Path, text: str) -> None:
    """Write `text` (content meaning "nothing recorded") without the fsyncs of an atomic
    replace: a crash can only leave it missing or torn, and both read as nothing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a rename or create inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
