"""Why this user may not write a store file that exists (``not_writable``).

SQLite opens a file it may not write for reading only without a word, and the first
write then fails as ``attempt to write a readonly database``, which says nothing of
the cause; meanwhile it has created the ``-wal`` and ``-shm`` files next to the store,
owned by this user, where the file's owner may not be able to write them. So a store
opened for writing asks first, and refuses a file this user may not write, naming the
cause: a read-only file system, an immutable (``chattr +i``) or append-only file, or
a file of another user without write permission for this one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import stat
import struct
from pathlib import Path
from typing import Final

_FS_IOC_GETFLAGS: Final = 0x80086601
"""Linux ``ioctl`` reading an inode's attributes (what ``lsattr`` shows)."""
_FS_IMMUTABLE_FL: Final = 0x10
_FS_APPEND_FL: Final = 0x20


def on_read_only_file_system(path: Path) -> bool:
    """Whether ``path`` (or, when it does not exist, its folder) is on a read-only mount."""
    probe = path if path.exists() else path.parent
    try:
        return bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def not_writable(path: Path) -> str | None:
    """Why this user may not write the existing file ``path`` (``None``: it may)."""
    if os.access(path, os.W_OK):
        return None
    if on_read_only_file_system(path):
        return "it is on a read-only file system"
    flags = _attributes(path)
    if flags & _FS_IMMUTABLE_FL:
        return (
            "the file is immutable (chattr +i), so no user may write it, root included; "
            f"chattr -i {path} lifts that"
        )
    if flags & _FS_APPEND_FL:
        return f"the file is append-only (chattr +a); chattr -a {path} lifts that"
    cause = f"permission denied: {_this_user()} may not write it: {_whose(path)}"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        cause += f"; nor may it create files in {path.parent}: {_whose(path.parent)}"
    return cause


def no_new_files(folder: Path) -> str:
    """Why this user may not create files in ``folder`` (which it may not)."""
    if _attributes(folder) & _FS_IMMUTABLE_FL:
        why = (
            f"the directory is immutable (chattr +i), root included; chattr -i {folder} lifts that"
        )
    else:
        why = _whose(folder)
    return f"permission denied: {_this_user()} may not create files in {folder}: {why}"


def _this_user() -> str:
    return f"this user ({_user(os.geteuid())})"


def _whose(path: Path) -> str:
    """Who owns ``path``, and its permission bits."""
    info = path.stat()
    mode = stat.filemode(info.st_mode)
    if info.st_uid != os.geteuid():
        return f"it belongs to {_user(info.st_uid)} ({mode})"
    return f"it is this user's, with permissions {mode}"


def _attributes(path: Path) -> int:
    """The file's inode flags, 0 when the file system does not say."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            packed = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, struct.pack("l", 0))
            return int(struct.unpack("l", packed)[0])
        finally:
            os.close(fd)
    return 0


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
