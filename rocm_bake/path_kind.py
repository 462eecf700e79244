"""What a path is, in words, for a message that refuses it: "is a directory" beats "not found" for a path that exists."""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def path_kind(path: Path) -> str | None:
    """``"a directory"``, ``"a FIFO (named pipe)"`` … for what ``path`` leads to; None when nothing is there
    (a dangling symlink included: it leads nowhere)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return next((name for test, name in _KINDS if test(mode)), "a special file")
