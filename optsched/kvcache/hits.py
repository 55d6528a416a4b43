"""Accounting of every prompt token by where it came from: HBM, DRAM, SSD, a remote instance, recompute.

Per call, ``CallHit`` splits the prompt (``input_tokens``) into reused tokens by source and recomputed
tokens; they sum to ``input_tokens`` exactly (the simulator's "every token is prefilled or reused exactly
once" invariant). ``HitAccount`` sums ``CallHit`` records on one instance and merges across instances.
Units: tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HIT_SOURCES", "CallHit", "HitAccount"]

HIT_SOURCES = ("hbm", "dram", "ssd", "remote", "recomputed")


def _nonneg_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")


@dataclass(frozen=True, slots=True)
class CallHit:
    """Where one call's prompt tokens came from (tokens).

    Raises:
        ValueError: a negative or non-integer count.
    """

    call_id: str
    hbm_tokens: int = 0
    dram_tokens: int = 0
    ssd_tokens: int = 0
    remote_tokens: int = 0
    recomputed_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("hbm_tokens", "dram_tokens", "ssd_tokens", "remote_tokens", "recomputed_tokens"):
            _nonneg_int(name, getattr(self, name))

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens: reused from every source plus recomputed."""
        return self.reused_tokens + self.recomputed_tokens

    @property
    def reused_tokens(self) -> int:
        """Tokens not recomputed: hbm + dram + ssd + remote (tokens)."""
        return self.hbm_tokens + self.dram_tokens + self.ssd_tokens + self.remote_tokens

    @classmethod
    def from_blocks(
        cls,
        call_id: str,
        input_tokens: int,
        block_size: int,
        hbm_blocks: int = 0,
        dram_blocks: int = 0,
        ssd_blocks: int = 0,
        remote_blocks: int = 0,
        min_recompute_tokens: int = 0,
    ) -> CallHit:
        """Split ``input_tokens`` given reused blocks per source (e.g. from ``PrefixCache.acquire``).

        Reused tokens are taken in the prefix order HBM, DRAM, SSD, remote, ``block_size`` tokens a
        block, capped so that at least ``min_recompute_tokens`` are recomputed (vLLM recomputes the last
        prompt token on a full hit to get logits: pass 1 for that behaviour); the last block of a prompt
        may be partial, so a full match reuses at most ``input_tokens`` tokens.

        Raises:
            ValueError: negative counts, ``block_size < 1``, or ``min_recompute_tokens > input_tokens``.
        """
        _nonneg_int("input_tokens", input_tokens)
        if not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        _nonneg_int("min_recompute_tokens", min_recompute_tokens)
        if min_recompute_tokens > input_tokens:
            raise ValueError(f"min_recompute_tokens ({min_recompute_tokens}) > input_tokens ({input_tokens})")
        left = input_tokens - min_recompute_tokens
        out = []
        for name, blocks in (("hbm_blocks", hbm_blocks), ("dram_blocks", dram_blocks),
                             ("ssd_blocks", ssd_blocks), ("remote_blocks", remote_blocks)):
            _nonneg_int(name, blocks)
            take = min(blocks * block_size, left)
            out.append(take)
            left -= take
        return cls(call_id, *out, recomputed_tokens=input_tokens - sum(out))


class HitAccount:
    """Running token totals by source (``HIT_SOURCES``) over many calls; optionally keeps the records.

    Args:
        keep_records: keep every ``CallHit`` in ``records`` (per-call output); totals only otherwise.
    """

    __slots__ = ("_keep", "calls", "records", "tokens")

    def __init__(self, keep_records: bool = False) -> None:
        self.tokens = dict.fromkeys(HIT_SOURCES, 0)
        self.calls = 0
        self.records: list[CallHit] = []
        self._keep = keep_records

    def add(self, hit: CallHit) -> None:
        """Add one call's split."""
        t = self.tokens
        t["hbm"] += hit.hbm_tokens
        t["dram"] += hit.dram_tokens
        t["ssd"] += hit.ssd_tokens
        t["remote"] += hit.remote_tokens
        t["recomputed"] += hit.recomputed_tokens
        self.calls += 1
        if self._keep:
            self.records.append(hit)

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens accounted (reused + recomputed)."""
        return sum(self.tokens.values())

    def hit_rate(self, source: str = "reused") -> float:
        """Fraction of prompt tokens from ``source`` (one of HIT_SOURCES, or "reused" = all but
        recomputed); 0.0 when nothing was accounted.

        Raises:
            ValueError: unknown source.
        """
        total = self.prompt_tokens
        if source == "reused":
            part = total - self.tokens["recomputed"]
        elif source in self.tokens:
            part = self.tokens[source]
        else:
            raise ValueError(f"source must be 'reused' or one of {HIT_SOURCES}, got {source!r}")
        return part / total if total else 0.0

    def as_dict(self) -> dict[str, float]:
        """``{source}_tokens`` totals, ``calls`` and ``{source}_hit_rate`` (flat, for summaries)."""
        out: dict[str, float] = {f"{s}_tokens": v for s, v in self.tokens.items()}
        out["calls"] = self.calls
        for s in HIT_SOURCES:
            out[f"{s}_hit_rate"] = self.hit_rate(s)
        out["reused_hit_rate"] = self.hit_rate("reused")
        return out

    @classmethod
    def merged(cls, accounts: Iterable[HitAccount]) -> HitAccount:
        """Sum of several accounts (e.g. all instances of a cluster); records concatenated in order."""
        out = cls(keep_records=True)
        for a in accounts:
            for s in HIT_SOURCES:
                out.tokens[s] += a.tokens[s]
            out.calls += a.calls
            out.records.extend(a.records)
        return out
