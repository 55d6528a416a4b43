"""Shared helpers of the envs: per-step TTFT / goodput / hit terms of the routed calls, the episode's workload.

The envs drive `optsched.sim.Simulator` through its public stepping API (``router=None``,
``run_until_decision`` / ``apply``; `optsched.sim.stepping`), which runs the same event-loop body as
``simulate``: an episode that applies a baseline's choices reproduces that baseline's run.
"""

from __future__ import annotations

import functools
import gc

from optsched.sim import SLO, Simulator
from optsched.workload.gen_agentx import AGENTX_VARIANTS, generate_agentx
from optsched.workload.types import Workload

__all__ = ["DEFAULT_SLO", "INFO_TERMS", "StepTerms", "check_episode_args", "close_sim", "episode_workload", "gc_paused",
           "workload_for_reset"]

RESET_OPTIONS = ("workload",)


DEFAULT_SLO = SLO(ttft_s=2.0, tpot_s=0.05)  # the envs' default SLO (2 s TTFT, 50 ms TPOT)

INFO_TERMS = ("ttft_s", "first_tokens", "finished", "slo_met", "hit_hbm_tokens", "hit_dram_tokens",
              "hit_ssd_tokens", "prefilled_tokens")
"""Per-step ``info`` keys every call-level env reports (`StepTerms.terms`)."""


class StepTerms:
    """Per-step accounting of the calls an env released: TTFT, goodput and prefix-hit terms.

    ``add(i)`` registers a released call (index into ``sim.calls``); `first_tokens` moves the calls
    that got their first token since the last call to the running set and returns their TTFT sum (s;
    the hot path of a step); `terms` then also counts the running calls that finished:

    ================  ==========================================================================
    key               definition (over the calls of this step)
    ================  ==========================================================================
    ttft_s            Σ TTFT (s, first token - release) of the calls whose first token came
    first_tokens      number of those calls
    finished          calls that finished (last output token)
    slo_met           finished calls with TTFT <= ``slo.ttft_s`` and TPOT <= ``slo.tpot_s``
                      (single-token calls by TTFT only): the ``goodput_calls_s`` numerator of
                      `optsched.sim.metrics`
    hit_*_tokens      Σ prompt tokens reused from HBM / DRAM / SSD by the calls whose first token
                      came (`optsched.sim.result` ``hit_{hbm,dram,ssd}_tokens``)
    prefilled_tokens  Σ prompt tokens those calls computed
    ================  ==========================================================================

    Summed over an episode, ``ttft_s`` is the run's total TTFT and ``slo_met`` its goodput count.
    """

    __slots__ = ("_hits", "_no_token", "_running", "_sim", "_slo")

    def __init__(self, sim: Simulator, slo) -> None:
        self._sim, self._slo = sim, slo
        self._no_token: list[int] = []
        self._running: list[int] = []
        self._hits = [0, 0, 0, 0, 0]  # first tokens, hbm, dram, ssd, prefilled since the last `terms`

    def add(self, i: int) -> None:
        self._no_token.append(i)

    def first_tokens(self) -> float:
        sim, total, left, hits = self._sim, 0.0, [], self._hits
        for i in self._no_token:
            ttft = sim.ttft_s(i)
            if ttft is None:
                left.append(i)
            else:
                total += ttft
                self._running.append(i)
                h = sim.call_tokens(i)
                hits[0] += 1
                hits[1] += h[0]
                hits[2] += h[1]
                hits[3] += h[2]
                hits[4] += h[3]
        self._no_token = left
        return total

    def terms(self, ttft_s: float) -> dict[str, float | int]:
        """The step's info terms (table above); ``ttft_s`` is what `first_tokens` returned."""
        sim, slo, still, finished, met = self._sim, self._slo, [], 0, 0
        for i in self._running:
            ttft, tpot, fin = sim.call_timing(i)
            if fin < 0:
                still.append(i)
                continue
            finished += 1
            met += ttft <= slo.ttft_s and tpot <= slo.tpot_s
        self._running = still
        h = self._hits
        out = {"ttft_s": float(ttft_s), "first_tokens": h[0], "finished": finished, "slo_met": met,
               "hit_hbm_tokens": h[1], "hit_dram_tokens": h[2], "hit_ssd_tokens": h[3], "prefilled_tokens": h[4]}
        self._hits = [0, 0, 0, 0, 0]
        return out


def check_episode_args(n_sessions: object, variant: object, workload: object, slo: object,
                       concurrency: object = 0) -> None:
    """Check the constructor arguments the envs over generated AgentX-like episodes share (Routing-v0,
    KVResidency-v0, Admission-v0).

    Raises:
        ValueError: naming the argument and its value: ``n_sessions`` not an int in [1,
            `optsched.workload.limits.MAX_GENERATED_SESSIONS`], ``variant`` not a key of `AGENTX_VARIANTS`,
            ``concurrency`` not an int >= 0, ``workload`` neither None nor a `Workload`, ``slo`` not an `SLO`.
    """
    from optsched.workload.limits import MAX_GENERATED_SESSIONS

    for name, v, lo in (("n_sessions", n_sessions, 1), ("concurrency", concurrency, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if n_sessions > MAX_GENERATED_SESSIONS:
        raise ValueError(f"n_sessions expects at most {MAX_GENERATED_SESSIONS:,} (the generator cap, "
                         f"optsched.workload.limits), got {n_sessions:,}")
    if variant not in AGENTX_VARIANTS:
        raise ValueError(f"variant must be one of {sorted(AGENTX_VARIANTS)}, got {variant!r}")
    if workload is not None and not isinstance(workload, Workload):
        raise ValueError(f"workload must be an optsched Workload or None, got {type(workload).__name__}")
    if not isinstance(slo, SLO):
        raise ValueError(f"slo must be an optsched.sim.SLO, got {slo!r}")


def workload_for_reset(fixed: Workload | None, seed: int | None, options: dict | None) -> Workload | None:
    """The fixed workload of the episode a ``reset(seed=seed, options=options)`` starts, or None (generate one).

    ``options={"workload": wl}`` (an optsched `Workload`) serves ``wl`` in this episode only, over a
    constructor ``fixed`` one; the seed then still seeds ``np_random`` for later generated episodes.
    A constructor workload is the same in every episode and the envs draw nothing else at random, so
    ``reset(seed=s)`` with ``s`` not None and no per-episode workload is rejected rather than ignored.

    Raises:
        ValueError: an unknown option key, an option workload that is not a `Workload`, or a seed
            given to an env built with a fixed workload.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - set(RESET_OPTIONS))
    if unknown:
        raise ValueError(f"reset options: unknown key(s) {unknown}; accepted: {list(RESET_OPTIONS)}")
    wl = options.get("workload")
    if wl is not None:
        if not isinstance(wl, Workload):
            raise ValueError(f"reset options['workload'] must be an optsched Workload, got {type(wl).__name__}")
        return wl
    if fixed is not None and seed is not None:
        raise ValueError(f"reset(seed={seed!r}): this env was built with a fixed workload ({fixed.name!r}), which "
                         "no seed changes; call reset(seed=None), or build the env without `workload` (generated "
                         "episodes) or pass a workload per episode with reset(options={'workload': ...})")
    return fixed


def episode_workload(fixed: Workload | None, n_sessions: int, rng, variant: str, cost_models) -> Workload:
    """The workload of one episode: ``fixed`` when given, else ``generate_agentx(n_sessions, rng, variant)``
    with sessions ended before their first call longer than the smallest context of ``cost_models``
    (`optsched.workload.context`: the simulator rejects longer calls)."""
    if fixed is not None:
        return fixed
    return generate_agentx(n_sessions, rng, variant=variant,
                           max_context_tokens=min(int(c.model.max_context_tokens) for c in cost_models))


def gc_paused(method):
    """Decorator of an env's ``reset`` / ``step``: Python's cyclic garbage collector is paused while it
    runs and its state restored after (as ``Simulator.run`` does). An episode allocates tens of thousands
    of KV-block, call and step objects, and the collector's passes rescanned all of them every few
    hundred allocations (~15-25% of a Routing-v0 episode's CPU, docs/notebook/BENCHMARKS.md,
    "Env speed, third pass"); the simulator frees its
    objects by reference counting (`close_sim`), and the collector runs between calls. Results do not
    depend on it."""

    @functools.wraps(method)
    def paused(self, *args, **kwargs):
        if not gc.isenabled():  # nested, or paused by the caller: nothing to restore
            return method(self, *args, **kwargs)
        gc.disable()  # `optsched.sim.engine.gc_paused` inlined: no generator context manager per step
        try:
            return method(self, *args, **kwargs)
        finally:
            gc.enable()

    return paused


def close_sim(sim: Simulator | None) -> None:
    """`Simulator.close` the previous episode's simulator (None: nothing), so that replacing it frees it
    by reference counting instead of leaving a cycle for the collector."""
    if sim is not None:
        sim.close()
