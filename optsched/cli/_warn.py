"""One line for a loader warning on the command line (every subcommand prints warnings through it)."""

from __future__ import annotations

__all__ = ["warning_line"]


def warning_line(message: Warning, verbose: bool, limit: int = 3) -> str:
    """One line for a loader warning; a directory's re-sort list is cut to ``limit`` files unless -v."""
    text = str(message)
    head, sep, where = text.partition("first out-of-order line: ")
    items = where.split(", ") if sep else []
    if verbose or len(items) <= limit:
        return text
    return f"{head}{sep}{', '.join(items[:limit])} and {len(items) - limit} more (-v lists all)"
