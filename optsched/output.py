"""The one way optsched writes an output file or folder (every ``-o`` / ``--output`` / ``--out``).

Rules, the same for every writer:

- the parent folders of an output FILE are created; an existing file is replaced; an existing folder where
  a file is expected is an error;
- an output FOLDER (``simulate --out``) is created with its parents; an existing folder is written into
  (files of the same name are replaced); an existing file where a folder is expected is an error;
- a name ending in ``.gz`` is written gzip-compressed (deterministic bytes: no name or time in the header),
  and every loader reads it back (`optsched.workload._io.open_trace`);
- a write that fails (no space left, no permission, a read-only file system) raises `OutputError`, an
  ``OSError`` whose message is one line naming the path and the reason.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["OutputError", "open_output", "prepare_output", "prepare_output_dir", "write_output"]


class OutputError(OSError):
    """An output path that cannot be written; ``str()`` is one line naming the path and the reason."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def prepare_output(path: str | Path) -> Path:
    """``path`` ready to be written as a file: parent folders created.

    Raises:
        OutputError: ``path`` is an existing folder, or its parent cannot be created (a file in the way, no
            permission).
    """
    p = Path(path)
    if p.is_dir():
        raise OutputError(f"{p}: is a folder, expected an output file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{p}: cannot create folder {p.parent} (a file of that name exists)") from None
    except OSError as exc:
        raise OutputError(f"{p}: cannot create folder {p.parent} ({_reason(exc)})") from None
    return p


def prepare_output_dir(path: str | Path) -> Path:
    """``path`` as an output folder, created with its parents.

    Raises:
        OutputError: ``path`` (or a parent) is an existing file, or cannot be created.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"{p}: is a file, expected an output folder (give a folder name, or remove the file)")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{p}: cannot create the output folder (a file is in the way on its path)") from None
    except OSError as exc:
        raise OutputError(f"{p}: cannot create the output folder ({_reason(exc)})") from None
    return p


@contextmanager
def open_output(path: str | Path) -> Iterator[TextIO]:
    """A UTF-8 text handle (``"\\n"`` line ends) writing ``path`` by the module's rules: gzip when the name
    ends in ``.gz``. The file is complete when the ``with`` block ends.

    Raises:
        OutputError: the file cannot be created or written (also when the error comes at close, as a full
            disk's does).
    """
    p = prepare_output(path)
    try:
        raw = p.open("wb")
    except OSError as exc:
        raise OutputError(f"{p}: cannot write ({_reason(exc)})") from None
    try:
        with raw:
            if p.suffix.lower() == ".gz":
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz, \
                        io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as fh:
                    yield fh
            else:
                with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as fh:
                    yield fh
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"{p}: cannot write ({_reason(exc)})") from None


def write_output(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` with `open_output` (gzip for ``.gz``); returns the path.

    Raises:
        OutputError: as `open_output`.
    """
    with open_output(path) as fh:
        fh.write(text)
    return Path(path)
