"""The git revision of the checkout optsched was imported from (plan provenance, run provenance)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

__all__ = ["git_revision"]


def git_revision(repo_root: Path | None = None) -> dict[str, Any]:
    """``{"commit": sha or "unknown", "dirty": bool or None}``.

    Without ``repo_root``, git looks upward from the installed ``optsched`` package folder, so an
    editable install reports its checkout and a wheel install (no checkout above site-packages) reports
    "unknown". ``dirty`` is True when tracked files differ from the commit (untracked files are ignored).
    Never raises: without git or outside a checkout, commit is "unknown".
    """
    root = Path(repo_root) if repo_root else Path(__file__).resolve().parent
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        if repo_root is None and not (Path(top) / "optsched" / "revision.py").is_file():
            return {"commit": "unknown", "dirty": None}  # a git repository that is not optsched's checkout
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, timeout=30, check=True,
        ).stdout
        return {"commit": sha, "dirty": bool(status.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}
