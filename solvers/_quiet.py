"""Silence C-level solver output (HiGHS prints a banner on construction) unless verbose."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["quiet_fds"]


@contextlib.contextmanager
def quiet_fds(enabled: bool) -> Iterator[None]:
    """Redirect OS-level stdout (fd 1) to /dev/null while active, if ``enabled``."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
