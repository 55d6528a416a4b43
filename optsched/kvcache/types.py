"""Small value types of the KV prefix cache: tier names, prefix matches, block moves.

A tier is one of ``TIERS`` = ("hbm", "dram", "ssd"), hottest first; internally a tier is its index
(0, 1, 2). Counts are in KV blocks of ``PrefixCache.block_size`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DRAM", "HBM", "SSD", "TIERS", "BlockMoves", "PrefixMatch", "check_time", "tier_index"]

TIERS = ("hbm", "dram", "ssd")
HBM, DRAM, SSD = 0, 1, 2


def check_time(now_s: Any, allow_inf: bool = False) -> None:
    """Raise ValueError unless ``now_s`` is a finite simulated time in seconds (or +inf if ``allow_inf``);
    a NaN would silently corrupt LRU/TTL orders."""
    try:
        t = float(now_s)
        ok = (-float("inf") < t < float("inf")) or (allow_inf and t == float("inf"))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"now_s must be a finite simulated time in seconds, got {now_s!r}")


def tier_index(tier: str) -> int:
    """Index of ``tier`` in ``TIERS``.

    Raises:
        ValueError: ``tier`` is not one of "hbm", "dram", "ssd".
    """
    try:
        return TIERS.index(tier)
    except ValueError:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}") from None


def _check_count(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """Longest resident prefix of a call's block hashes, split by the tier each block lives in.

    The cache keeps every root-to-leaf path ordered hottest first (HBM blocks, then DRAM, then SSD;
    see ``PrefixCache``), so the leading run is ``hbm_blocks`` HBM blocks followed by ``dram_blocks``
    DRAM blocks followed by ``ssd_blocks`` SSD blocks; a prefix never alternates tiers.

    Returned by ``PrefixCache.match`` (where the blocks are now) and ``PrefixCache.acquire`` (where the
    pinned blocks came from: ``dram_blocks``/``ssd_blocks`` were promoted to HBM by that call, so the
    caller charges their transfer time, e.g. ``CostModel.kv_transfer_time(dram_blocks * block_size,
    "pcie")``).
    """

    hbm_blocks: int = 0
    dram_blocks: int = 0
    ssd_blocks: int = 0

    def __post_init__(self) -> None:
        _check_count("hbm_blocks", self.hbm_blocks)
        _check_count("dram_blocks", self.dram_blocks)
        _check_count("ssd_blocks", self.ssd_blocks)

    @property
    def total_blocks(self) -> int:
        """Blocks in the leading resident run, all tiers."""
        return self.hbm_blocks + self.dram_blocks + self.ssd_blocks

    def blocks(self, tier: str) -> int:
        """Blocks of the run in ``tier`` ("hbm", "dram", "ssd") or "any" (all tiers)."""
        if tier == "any":
            return self.total_blocks
        return (self.hbm_blocks, self.dram_blocks, self.ssd_blocks)[tier_index(tier)]


@dataclass(frozen=True, slots=True)
class BlockMoves:
    """Blocks a residency action moved, by the tier they came from, plus blocks it had to leave.

    ``hbm_blocks``, ``dram_blocks``, ``ssd_blocks`` count blocks by the tier they LEFT: moved to a colder
    tier (``PrefixCache.demote``, ``expire``) or removed from the index (``PrefixCache.drop``); ``skipped_blocks`` counts present blocks left in place because
    they were pinned by a running sequence, still had a child in a hotter tier / any child (drop), or
    the target tier had no room. Absent hashes are not counted.
    """

    hbm_blocks: int = 0
    dram_blocks: int = 0
    ssd_blocks: int = 0
    skipped_blocks: int = 0

    def __post_init__(self) -> None:
        _check_count("hbm_blocks", self.hbm_blocks)
        _check_count("dram_blocks", self.dram_blocks)
        _check_count("ssd_blocks", self.ssd_blocks)
        _check_count("skipped_blocks", self.skipped_blocks)

    @property
    def moved_blocks(self) -> int:
        """All blocks moved (or removed), any source tier."""
        return self.hbm_blocks + self.dram_blocks + self.ssd_blocks
