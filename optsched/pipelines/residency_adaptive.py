"""Adaptive residency rules of the wider slot class, replayed on the priced slot model: the rules that test the bound.

The class (`optsched.models.residency_priced` with ``prefetch_factor``): at the start of every slot of length s
a rule fixes each present pause's tier knowing the pauses seen so far (every pause whose first slot is <= t, as
`optsched.models.residency_priced_slots.replay_priced` places them: a new pause is placed at the start of its first
slot, then eviction reacts to it), their elapsed slots, the running KV R[i,t] and the pause law; it does not know
whether a pause resumes in slot t. Actions: keep in HBM, demote HBM -> DRAM -> none, and promote DRAM -> HBM
(prefetch). As s shrinks to 1 s the slot starts approach every arrival / eviction event of continuous time.

What a slot's new pauses reveal: the next pause of a session starts inside the slot where its previous pause
resumes, so an eviction that reacts to a slot's new pauses can see that an older pause of the same session resumes
in that slot. Such a rule is NOT non-anticipative for the bound's penalty (`optsched.pipelines.residency_bound`):
its penalty mean is negative (exactly -2.6875 s on the enumeration of
``tests/pipelines/test_residency_adaptive.py``; measured per slot length by ``experiments/residency/bound_wide.py``),
and the leak vanishes only as s -> 0 (a call shorter than s between two pauses).

Leak-free reaction to arrivals (``arrivals="fresh"``): in continuous time a session's next pause arrives after its
previous pause resumed, so an engine that evicts on that arrival cannot evict the pause that just resumed. The
slot model's equivalent: a slot's new pause is *fresh* when it is its session's first new pause of the slot and
the session has no pause present at the slot start (the session was running), else a *successor* (its session's
pause present in the slot resumed in it). Fresh pauses are placed and evicted for as in "all"; prefetch follows;
successors then take the HBM room left (else DRAM, else none) and never evict. A fresh arrival belongs to another
session than every present pause, so with independent sessions it says nothing about their outcomes: every tier
of a pause j in slot t is fixed by what is known at the start of t plus the fresh arrivals of t, which are
independent of whether j resumes in t, so the penalty's mean is 0 (exactly, on the same enumeration; tested).

One rule = an eviction order and an optional prefetch threshold (`AdaptiveRule`):

- ``evict``: "lru" (earliest pause start first, the prefix cache's order) or "hazard" (smallest h_k c_j / tok_j
  first: the expected resume time saved per HBM token by keeping pause j one more slot, with h_k the hazard of
  its current elapsed slot k, `optsched.pipelines.residency_bound.slot_hazards`);
- ``prefetch``: None, or a threshold theta: after arrivals and evictions, DRAM pauses whose current hazard is >=
  theta move back to HBM in decreasing hazard order while they fit in the room left (never evicting);
- ``peek`` (a check, not a rule of the class): evicts first the pauses that do NOT resume in slot t, which no
  online rule can know; its penalty mean must come out non-zero;
- ``arrivals``: "all" (every new pause of the slot is placed before eviction: the leak above) or "fresh" (only
  fresh pauses are; successors take the room left, above).

Step of slot t on instance i: place the new pauses ("fresh": the fresh ones) in HBM; while paused HBM > C[i,t]
demote the first pause of the order to DRAM (to none when DRAM is full); while DRAM > D demote to none the same
way; then prefetch; then ("fresh") the successors, in start order, into HBM where they fit, else DRAM where it
fits, else none. Every path is feasible for the MILP with prefetch (costed by
`PricedResidencyInstance.prefetch_path_cost`), so its cost is >= that optimum (tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optsched.models.residency_priced import PricedResidencyInstance
from optsched.pipelines.residency_bound import slot_hazards

__all__ = ["ADAPTIVE_RULES", "FRESH_RULES", "AdaptiveRule", "replay_adaptive"]


@dataclass(frozen=True, slots=True)
class AdaptiveRule:
    """``evict`` in ("lru", "hazard"); ``prefetch`` None or a hazard threshold in [0, 1]; ``peek`` (the
    clairvoyant check of the module docstring); ``arrivals`` in ("all", "fresh").

    Raises:
        ValueError: an unknown order or arrival mode, or a threshold outside [0, 1].
    """

    evict: str = "lru"
    prefetch: float | None = None
    peek: bool = False
    arrivals: str = "all"

    def __post_init__(self) -> None:
        if self.evict not in ("lru", "hazard"):
            raise ValueError(f"AdaptiveRule.evict must be 'lru' or 'hazard', got {self.evict!r}")
        if self.arrivals not in ("all", "fresh"):
            raise ValueError(f"AdaptiveRule.arrivals must be 'all' or 'fresh', got {self.arrivals!r}")
        if self.prefetch is not None and not (0.0 <= self.prefetch <= 1.0):
            raise ValueError(f"AdaptiveRule.prefetch must be None or in [0, 1], got {self.prefetch!r}")


# the rules every bound run replays: one reacting to arrivals (lru, = replay_priced with LRU), one ordering by the
# pause law, two prefetching (threshold 0.3: the AgentX first-slot hazard at 10 s is ~0.66, later ones lower)
ADAPTIVE_RULES = {"lru": AdaptiveRule("lru"), "hazard_evict": AdaptiveRule("hazard"),
                  "lru_prefetch": AdaptiveRule("lru", 0.3), "hazard_prefetch": AdaptiveRule("hazard", 0.3)}
# the same rules reacting to fresh arrivals only (leak-free at every slot length; they need the pauses' sessions)
FRESH_RULES = {f"{n}_fresh": AdaptiveRule(r.evict, r.prefetch, arrivals="fresh") for n, r in ADAPTIVE_RULES.items()}


def replay_adaptive(inst: PricedResidencyInstance, rule: AdaptiveRule, cdf: Callable[[float], float],
                    prefetch_factor: float = 1.0, session_of: Sequence[object] | None = None
                    ) -> tuple[tuple[tuple[int, ...], ...], float]:
    """(tier paths, total cost s) of ``rule`` on ``inst`` (module docstring); ``cdf`` is the pause law of the
    hazards; promotions cost ``prefetch_factor`` c_j each; ``session_of[j]``: the session of pause j (any
    hashable; `priced_instance`'s calls give ``call.session_id``), needed by ``arrivals="fresh"``.

    Raises:
        ValueError: as `slot_hazards`, a negative ``prefetch_factor``, or ``arrivals="fresh"`` without one
            session per pause.
    """
    if not (math.isfinite(prefetch_factor) and prefetch_factor >= 0):
        raise ValueError(f"prefetch_factor must be a finite number >= 0, got {prefetch_factor!r}")
    n = len(inst.pauses)
    if rule.arrivals == "fresh" and (session_of is None or len(session_of) != n):
        raise ValueError(f"arrivals='fresh' needs session_of with one session per pause ({n}), got "
                         f"{None if session_of is None else len(session_of)}")
    slots = [inst.slots(j) for j in range(n)]
    hz = slot_hazards(inst.slot_s, cdf, max(len(s) for s in slots) + 1)
    tok = [p.kv_tokens for p in inst.pauses]
    n_inst = max(inst.instance_of) + 1
    starts: dict[int, list[int]] = {}
    for j in sorted(range(n), key=lambda j: (inst.pauses[j].start_s, j)):
        starts.setdefault(slots[j][0], []).append(j)
    tier: dict[int, int] = {}
    paths: list[list[int]] = [[] for _ in range(n)]
    load = [[0] * n_inst, [0] * n_inst]  # paused tokens in HBM, DRAM per instance

    def key(j: int, t: int) -> tuple:
        k = t - slots[j][0]
        if rule.peek:
            return (t == slots[j][-1], inst.pauses[j].start_s, j)
        if rule.evict == "hazard":
            return (float(hz[k]) * inst.pauses[j].pcie_s / max(1, tok[j]), inst.pauses[j].start_s, j)
        return (inst.pauses[j].start_s, j)

    def move(j: int, dest: int) -> None:
        i, src = inst.instance_of[j], tier[j]
        if src < 2:
            load[src][i] -= tok[j]
        if dest == 1 and load[1][i] + tok[j] > inst.dram_tokens:
            dest = 2
        if dest < 2:
            load[dest][i] += tok[j]
        tier[j] = dest

    for t in range(min(s[0] for s in slots), max(s[-1] for s in slots) + 1):
        successors: list[int] = []
        busy = {session_of[k] for k in tier} if rule.arrivals == "fresh" else set()
        for j in starts.get(t, []):
            if rule.arrivals == "fresh":
                if session_of[j] in busy:
                    successors.append(j)
                    continue
                busy.add(session_of[j])
            tier[j] = 0
            load[0][inst.instance_of[j]] += tok[j]
        for i in range(n_inst):
            for lvl, cap in ((0, inst.hbm_capacity(i, t)), (1, inst.dram_tokens)):
                while load[lvl][i] > cap:
                    victim = min((j for j, k in tier.items() if k == lvl and inst.instance_of[j] == i),
                                 key=lambda j: key(j, t))
                    move(victim, lvl + 1)
            if rule.prefetch is not None:
                room = inst.hbm_capacity(i, t) - load[0][i]
                cand = sorted((j for j, k in tier.items() if k == 1 and inst.instance_of[j] == i
                               and hz[t - slots[j][0]] >= rule.prefetch),
                              key=lambda j: (-float(hz[t - slots[j][0]]), inst.pauses[j].start_s, j))
                for j in cand:
                    if tok[j] <= room:
                        move(j, 0)
                        room -= tok[j]
        for j in successors:  # "fresh" only: the room left, never an eviction
            i = inst.instance_of[j]
            dest = 0 if load[0][i] + tok[j] <= inst.hbm_capacity(i, t) else 1
            tier[j] = 2  # not yet on a tier: move() then places it on dest (DRAM full: none)
            move(j, dest)
        for j in list(tier):
            paths[j].append(tier[j])
            if t == slots[j][-1]:
                if tier[j] < 2:
                    load[tier[j]][inst.instance_of[j]] -= tok[j]
                del tier[j]
    total = sum(inst.prefetch_path_cost(j, paths[j], prefetch_factor) for j in range(n))
    return tuple(tuple(p) for p in paths), float(total)
