"""Small file helpers: the caderno home, exclusive locks, private appends, atomic writes.

None of them follows a symbolic link at the file itself: a lock file or a
data file that is a link (planted by another local user, or by a tool the
agent ran) could otherwise make caderno create, read or truncate a file
anywhere the process can reach. The *directory* may be a link; that is the
user's choice of where the files live. Refusals are ``OSError`` with
``errno.ELOOP`` (what ``O_NOFOLLOW`` itself raises), for the caller to turn
into its own error.

Portable: nothing here needs a POSIX-only module. Where ``fcntl`` exists a
lock is ``flock`` on a descriptor opened without following links; elsewhere
(Windows) it is ``filelock``'s, after the same refusal of a link. The
``O_NOFOLLOW``, ``O_NONBLOCK`` and ``O_CLOEXEC`` flags are 0 where the OS
lacks them, and a link is then refused by ``lstat`` before the open
(``tests/test_portability.py`` imports caderno with ``fcntl`` unavailable).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

_fcntl: ModuleType | None
try:
    import fcntl as _fcntl
except ImportError:  # Windows: locks go through filelock (``locked``)
    _fcntl = None

#: ``os.open`` flags that POSIX has and Windows lacks; 0 where missing. Without O_NOFOLLOW a link
#: is refused by ``_refuse_link`` before the open; Windows descriptors are not inherited by a
#: child process anyway (PEP 446), and a FIFO cannot be planted there.
_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)


def caderno_home() -> Path:
    """``$CADERNO_HOME``, or ``~/.caderno``."""
    return Path(os.environ.get("CADERNO_HOME") or Path.home() / ".caderno")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` (across processes).

    Raises:
        OSError: ``ELOOP`` when the lock file is a symbolic link (it is
            neither followed nor created through), or any error opening it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(f"{path}.lock")
    if _fcntl is None:
        if os.path.islink(lock):  # filelock's own open is not ours to audit: refuse a link first
            raise OSError(errno.ELOOP, "is a symbolic link", str(lock))
        import filelock  # only where fcntl is missing: Windows, whose locks it takes with msvcrt

        with filelock.FileLock(lock):
            yield
        return
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o644)
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX)
        yield
    finally:
        _fcntl.flock(fd, _fcntl.LOCK_UN)
        os.close(fd)


def _refuse_link(path: Path) -> None:
    """Raise ``ELOOP`` when ``path`` is a symbolic link and the OS has no ``O_NOFOLLOW`` to refuse it on open."""
    if not _NOFOLLOW and os.path.islink(path):
        raise OSError(errno.ELOOP, "is a symbolic link", str(path))


#: Mode of the files caderno creates that hold a user's data (databases,
#: notebook files): their owner's alone, as ssh keeps its keys.
PRIVATE_MODE = 0o600


def create_private(path: Path) -> bool:
    """Create ``path`` empty with ``PRIVATE_MODE`` if nothing is there; True when it did.

    SQLite creates a new database 0644 and gives its ``-wal``, ``-shm`` and
    journal files the database file's mode: creating the (empty) file first,
    0600, makes all of them private. An existing file keeps the mode its
    owner chose. ``O_EXCL`` never opens what another process created
    meanwhile, and ``O_NOFOLLOW`` never creates through a planted link.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, PRIVATE_MODE)
    except FileExistsError:
        return False
    try:
        if hasattr(os, "fchmod"):  # Windows before 3.13 has none (and no such modes to set)
            os.fchmod(fd, PRIVATE_MODE)  # the mode of os.open is filtered by the umask; this is not
    finally:
        os.close(fd)
    return True


def open_append(path: Path) -> int:
    """A descriptor for appending to ``path`` (read and write), created ``PRIVATE_MODE`` when missing.

    For files caderno grows a line at a time (journals): ``create_private``
    makes a new one its owner's alone whatever the umask, and the open itself
    uses ``O_NOFOLLOW`` (a planted link is refused, its target untouched) and
    ``O_NONBLOCK`` (a planted FIFO cannot hang the writer), then checks on
    the open descriptor that it holds a regular file. The caller closes it.

    Raises:
        OSError: ``ELOOP`` for a symbolic link, ``EINVAL`` for something
            other than a regular file, or the error of the open itself.
    """
    create_private(path)
    _refuse_link(path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if _NONBLOCK:
            os.set_blocking(fd, True)  # a regular file never blocks; writes and fsync as usual
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, *, max_bytes: int) -> bytes:
    """The bytes of ``path``, which must be a regular file, not a link.

    Opened with ``O_NOFOLLOW`` (a link is never read through) and
    ``O_NONBLOCK`` (a FIFO planted at the path cannot hang the reader), then
    checked with ``fstat`` on the open descriptor, so nothing can be swapped
    in between the check and the read.

    Raises:
        FileNotFoundError: nothing is at ``path``.
        OSError: ``ELOOP`` for a symbolic link, ``EINVAL`` for something
            other than a regular file, ``EFBIG`` when it holds more than
            ``max_bytes``, or the error of the read itself.
    """
    _refuse_link(path)
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than the {max_bytes:,} bytes caderno reads", str(path))
        chunks = []
        remaining = max_bytes + 1
        # Read to EOF rather than st_size: the file may grow under us.
        while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise OSError(errno.EFBIG, f"larger than the {max_bytes:,} bytes caderno reads", str(path))
        return data
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: temp file in the same directory, fsync, rename.

    Readers see the old file or the new one, never half of either. On any
    failure (disk full, file too large, permissions) the old file is left
    as it was and the temp file is removed.

    Raises:
        OSError: ``ELOOP`` when ``path`` is a symbolic link (refused rather
            than replaced, so a planted link is noticed), or the write's error.
    """
    if os.path.islink(path):
        raise OSError(errno.ELOOP, "is a symbolic link", str(path))
    _sweep_stale_temps(path)
    # The temp file is created with O_EXCL under a random name in the same
    # directory, and rename() replaces a directory entry without following
    # it: no step of a write can create or change a file elsewhere.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if os.name != "posix":
        return  # Windows cannot open a directory to fsync it; its rename is durable by itself (NTFS journal)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


#: A temp file of an atomic write older than this was left by a process that
#: died between creating it and renaming it (a live write takes milliseconds).
STALE_TEMP_SECONDS = 600


def _sweep_stale_temps(path: Path) -> None:
    """Remove temp files a killed writer left beside ``path`` (regular files only, never links)."""
    now = time.time()
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            info = tmp.lstat()
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
        except OSError:
            pass  # gone already, or not ours to remove: the write goes on
