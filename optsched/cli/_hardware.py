"""The ``--gpu`` / ``--model`` / ``--tp`` options of the verbs that build a cost model from catalog names or files
(``optsched cost predict``, ``solve``, ``compare``)."""

from __future__ import annotations

import argparse

__all__ = ["add_hardware_args"]


def add_hardware_args(p: argparse.ArgumentParser, tp: int) -> None:
    """Add ``--gpu`` (default h200-sxm), ``--model`` (default llama-3-70b) and ``--tp`` (int, default ``tp``) to
    ``p``; each verb checks the values itself (one ``error:`` line naming the option)."""
    p.add_argument("--gpu", default="h200-sxm",
                   help="catalog GPU name (optsched cost list) or a GPU YAML/JSON file (default h200-sxm)")
    p.add_argument("--model", default="llama-3-70b",
                   help="catalog model name (optsched cost list) or a model YAML/JSON file (default llama-3-70b)")
    p.add_argument("--tp", type=int, default=tp, help=f"tensor-parallel degree, GPUs per instance (default {tp})")
