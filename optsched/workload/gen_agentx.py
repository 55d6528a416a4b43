"""AgentX-like coding-agent sessions calibrated to the published AgentX v1.0 statistics.

Published targets (DESIGN.md, "Workload"; AgentX v1.0 trace statistics): input tokens per call median
142,016, p95 682,880, capped at the 1M context (256K variant: median 88,768, cap 262,144); output median
444; inter-call gap median 3.84 s, p95 3.08 min = 184.8 s; 44% of sessions fork subagents; sessions of at
least 20 calls; at most 10 concurrent subagents; subagent group runtime median 2.27 min.

Construction (all lognormal parameters from ``calibrate.lognormal_from_median_p95``):

1. Structure: each session has ``min_calls + NegBin(2, p)`` main-chain calls (mean extra
   ``extra_calls_mean``, an assumption: AgentX publishes only the minimum). Exactly ``round(0.44 N)``
   sessions get subagents: ``1 + Poisson(0.5)`` fork points on the main chain; each fork opens
   ``1 + Binomial(max_subagents - 1, 0.25)`` lanes (never more than ``max_subagents`` = 10) of
   ``1 + Poisson(lane_extra_calls_mean)`` calls; the next main call is the join gate whose parents are the
   last call of every lane. Groups are sequential, so at most one group's lanes are open at a time.
2. Input lengths (exact marginal by rank matching): every call gets a latent score
   ``y = rho * z_session + sqrt(1 - rho^2) * w_position - shift * [subagent]`` where ``z_session`` is a
   stratified N(0, 1) draw per session and ``w_position = Phi^{-1}((i + 0.5) / n)`` increases along a chain
   of ``n`` calls; the stratified lognormal(142,016, sigma = 0.9547) sample of all calls is handed out in
   the order of ``y``. So the marginal is the published lognormal (median/p95 within one stratum),
   sessions differ in scale (``rho``), contexts grow monotonically along every chain, and subagent
   contexts are smaller (``shift``).
3. Outputs: stratified lognormal, median 444, ``output_sigma`` = 0.9 (assumption: p95 not published).
4. Gaps: every call with a child gets a ``think_time_s`` from the stratified lognormal(3.84 s, sigma =
   ln(184.8 / 3.84) / 1.6449 = 2.355), capped at ``gap_cap_s``; the gap is the tool/think wait before the
   next call is released (closed loop). With ``gap_draw="iid"`` (variant ``full-iid-gaps``) the gaps are
   independent draws of that law instead. The subagent group time (max over lanes of the summed waits) is
   set by the lane lengths: with the defaults its median is close to 2.27 min (``workload_stats`` key
   ``subagent_group_wait_s``; service time excluded, so this approximates the published runtime).
5. Prefix blocks (layered model, ``prefix_model``): global system prompt (``global_prompt_tokens``, shared
   by all sessions), per-repository layer (sessions draw one of ``n_repos`` repositories), per-session
   layer, then growing history; main-chain calls extend the session stream; subagent lanes share the
   global + repository layers and grow their own history. Resulting ``prefix_reuse`` > 0.96.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from optsched.workload.calibrate import (
    assign_by_rank,
    capped_lognormal_cdf,
    lognormal_from_median_p95,
    named_streams,
    stratified_count,
    stratified_lognormal,
)
from optsched.workload.context import _check_limit
from optsched.workload.prefix_model import HashSource, global_prompt_hashes
from optsched.workload.types import Call, ContextCut, Session, Workload

__all__ = ["AGENTX_VARIANTS", "AgentXParams", "generate_agentx", "spec_variant"]

TOOLS = ("bash", "read", "edit", "search", "web")
TOOL_P = (0.35, 0.30, 0.20, 0.10, 0.05)  # assumption (tool mix is not used by any calibration target)
_HASH_BATCH = 4_096  # ids drawn per refill of the HashSource (values independent of it; speed only)


@dataclass(frozen=True, slots=True)
class AgentXParams:
    """Generator parameters (tokens, seconds); defaults = AgentX v1.0 full variant (see module docstring).

    Raises:
        ValueError: a non-positive length/time, median >= p95, a share outside [0, 1], rho outside [0, 1),
            ``max_subagents`` < 1 or ``min_calls`` < 1.
    """

    input_median_tokens: float = 142_016
    input_p95_tokens: float = 682_880
    input_cap_tokens: int = 1_000_000
    output_median_tokens: float = 444
    output_sigma: float = 0.9
    output_cap_tokens: int = 32_768
    gap_median_s: float = 3.84
    gap_p95_s: float = 184.8
    gap_cap_s: float = 3_600.0
    subagent_session_share: float = 0.44
    min_calls: int = 20
    extra_calls_mean: float = 40.0
    max_subagents: int = 10
    lane_extra_calls_mean: float = 2.0
    context_rho: float = 0.99
    subagent_shift: float = 1.0
    global_prompt_tokens: int = 12_000
    repo_tokens: int = 8_192
    session_tokens: int = 2_048
    n_repos: int = 0  # 0 = max(1, n_sessions // 10)
    session_rate_per_s: float = 1 / 30
    block_size: int = 512
    # "stratified" (default): one gap per stratum of the law, in random order (the published quantiles hold in
    # every workload); "iid": independent draws of the same law, so each pause's length is independent of every
    # other one (what the information-relaxation bound of `optsched.pipelines.residency_bound` assumes exactly)
    gap_draw: str = "stratified"

    def gap_cdf(self, x_s: float) -> float:
        """P(gap <= x_s): the law of one tool/think gap (step 4 of the module docstring: lognormal from
        ``gap_median_s`` / ``gap_p95_s``, capped at ``gap_cap_s``). Each gap of a workload is a stratified draw,
        so this is its marginal law; the gaps of one workload are not independent (one per stratum) unless
        ``gap_draw`` is "iid", where it is the law of each gap given all the others."""
        mu, sigma = lognormal_from_median_p95(self.gap_median_s, self.gap_p95_s)
        return capped_lognormal_cdf(x_s, mu, sigma, self.gap_cap_s)

    def __post_init__(self) -> None:
        for f in ("input_median_tokens", "output_median_tokens", "output_sigma", "gap_median_s", "gap_cap_s",
                  "session_rate_per_s", "extra_calls_mean", "lane_extra_calls_mean"):
            if not (getattr(self, f) > 0):
                raise ValueError(f"{f} must be > 0, got {getattr(self, f)!r}")
        if not (self.input_p95_tokens > self.input_median_tokens and self.gap_p95_s > self.gap_median_s):
            raise ValueError("input_p95_tokens and gap_p95_s must exceed their medians")
        if not (0.0 <= self.subagent_session_share <= 1.0):
            raise ValueError(f"subagent_session_share must be in [0, 1], got {self.subagent_session_share!r}")
        if not (0.0 <= self.context_rho < 1.0):
            raise ValueError(f"context_rho must be in [0, 1), got {self.context_rho!r}")
        for f in ("max_subagents", "min_calls", "block_size", "input_cap_tokens", "output_cap_tokens"):
            if not (isinstance(getattr(self, f), int) and getattr(self, f) >= 1):
                raise ValueError(f"{f} must be an int >= 1, got {getattr(self, f)!r}")
        if self.gap_draw not in ("stratified", "iid"):
            raise ValueError(f"gap_draw must be 'stratified' or 'iid', got {self.gap_draw!r}")


AGENTX_VARIANTS = {
    "full": AgentXParams(),
    # 256K-context variant: published median 88,768; p95 not published, same sigma assumed; cap 256K.
    "256k": AgentXParams(input_median_tokens=88_768, input_p95_tokens=88_768 * 682_880 / 142_016,
                         input_cap_tokens=262_144),
    # the full variant with independent gaps (same law): the setting on which the residency bound is exact
    "full-iid-gaps": AgentXParams(gap_draw="iid"),
}


def spec_variant(source: str) -> str:
    """The ``variant=`` of a generator spec such as ``"agentx:sessions=16,variant=full-iid-gaps"`` (``"full"``,
    the generator's default, when absent); not checked against ``AGENTX_VARIANTS`` (callers report an unknown one)."""
    kw = dict(x.split("=", 1) for x in source.partition(":")[2].split(",") if "=" in x)
    return kw.get("variant", "full")


def _structure(n_sessions: int, p: AgentXParams, rng: np.random.Generator) -> list[list[tuple]]:
    """Per session, a list of chains: ("main", n) and ("lanes", fork_pos, [lane lengths])."""
    extra = rng.negative_binomial(2, 2.0 / (2.0 + p.extra_calls_mean), size=n_sessions)
    subs = stratified_count(rng, n_sessions, p.subagent_session_share)
    out = []
    for s in range(n_sessions):
        n_main = p.min_calls + int(extra[s])
        groups = []
        if subs[s]:
            g = min(1 + int(rng.poisson(0.5)), n_main - 2)
            forks = np.sort(rng.choice(np.arange(0, n_main - 1), size=g, replace=False))
            for f in forks:
                k = 1 + int(rng.binomial(p.max_subagents - 1, 0.25))
                groups.append((int(f), (1 + rng.poisson(p.lane_extra_calls_mean, size=k)).tolist()))
        out.append([n_main, groups])
    return out


def generate_agentx(n_sessions: int, rng: np.random.Generator, variant: str = "full",
                    params: AgentXParams | None = None, name: str | None = None,
                    max_context_tokens: int = 0) -> Workload:
    """Generate ``n_sessions`` AgentX-like closed-loop sessions (see module docstring).

    Args:
        n_sessions: number of sessions (>= 1).
        rng: the only source of randomness (named child streams are spawned from it).
        variant: ``"full"`` (1M context) or ``"256k"``; ignored when ``params`` is given.
        params: explicit parameters (overrides ``variant``).
        max_context_tokens: > 0: each session ends before its first call whose input + output tokens exceed
            it (the serving model's context; `optsched.workload.context.cap_context`, counted in
            ``Workload.context_cut``). 0 = no cap (inputs reach ``input_cap_tokens``: 1M full, 262,144 for
            256k, longer than every catalog model's context, so the simulator would reject them).

    Returns:
        ``Workload(closed_loop=True, block_size=params.block_size)``; sessions ``agentx-00000`` ...

    Raises:
        ValueError: ``n_sessions`` < 1 or an unknown variant.
    """
    if not (isinstance(n_sessions, int) and n_sessions >= 1):
        raise ValueError(f"n_sessions must be an int >= 1, got {n_sessions!r}")
    from optsched.workload.limits import MAX_GENERATED_SESSIONS

    if n_sessions > MAX_GENERATED_SESSIONS:
        raise ValueError(f"n_sessions expects at most {MAX_GENERATED_SESSIONS:,} (the generator cap, "
                         f"optsched.workload.limits), got {n_sessions:,}")
    from scipy.special import ndtri  # here, not at import: `import optsched.workload` never pays for scipy

    label = variant if params is None else "custom"
    if params is None:
        if variant not in AGENTX_VARIANTS:
            raise ValueError(f"variant must be one of {sorted(AGENTX_VARIANTS)}, got {variant!r}")
        params = AGENTX_VARIANTS[variant]
    p = params
    if p.n_repos == 0:
        p = replace(p, n_repos=max(1, n_sessions // 10))
    st = named_streams(rng, "structure", "lengths", "outputs", "gaps", "prefix", "arrivals", "tools")
    plan = _structure(n_sessions, p, st["structure"])

    # latent scores of every call, in the order calls are built below
    z = ndtri((st["lengths"].permutation(n_sessions) + st["lengths"].random(n_sessions)) / n_sessions)
    a = math.sqrt(1.0 - p.context_rho**2)
    scores: list[float] = []
    for s, (n_main, groups) in enumerate(plan):
        w = ndtri((np.arange(n_main) + 0.5) / n_main)
        scores.extend((p.context_rho * z[s] + a * w).tolist())
        for _, lanes in groups:
            for m in lanes:
                wl = ndtri((np.arange(m) + 0.5) / m)
                scores.extend((p.context_rho * z[s] + a * wl - p.subagent_shift).tolist())
    n_calls = len(scores)
    mu, sigma = lognormal_from_median_p95(p.input_median_tokens, p.input_p95_tokens)
    x = stratified_lognormal(st["lengths"], n_calls, mu, sigma, cap=p.input_cap_tokens)
    inputs = np.maximum(1, np.rint(assign_by_rank(np.asarray(scores), x))).astype(np.int64).tolist()
    outputs = np.maximum(1, np.rint(stratified_lognormal(
        st["outputs"], n_calls, math.log(p.output_median_tokens), p.output_sigma, cap=p.output_cap_tokens
    ))).astype(np.int64).tolist()
    gmu, gsig = lognormal_from_median_p95(p.gap_median_s, p.gap_p95_s)
    if p.gap_draw == "iid":
        gaps = np.minimum(np.exp(gmu + gsig * st["gaps"].standard_normal(n_calls - n_sessions)), p.gap_cap_s).tolist()
    else:
        gaps = stratified_lognormal(st["gaps"], n_calls - n_sessions, gmu, gsig, cap=p.gap_cap_s).tolist()
    tools = st["tools"].choice(len(TOOLS), size=n_calls, p=TOOL_P).tolist()
    starts = np.cumsum(st["arrivals"].exponential(1.0 / p.session_rate_per_s, size=n_sessions)).tolist()
    repos = st["prefix"].integers(0, p.n_repos, size=n_sessions).tolist()

    bs = p.block_size
    # batch: per-element draws, so the ids do not depend on it (a small batch converts only what is used)
    hs = HashSource(st["prefix"], batch=_HASH_BATCH)
    g_full = p.global_prompt_tokens // bs
    r_full = (p.global_prompt_tokens + p.repo_tokens) // bs
    s_full = (p.global_prompt_tokens + p.repo_tokens + p.session_tokens) // bs
    glob = global_prompt_hashes(g_full, "optsched-agentx-global-prompt")
    repo_layer = [hs.take(r_full - g_full) for _ in range(p.n_repos)]
    shared_lane_tokens = r_full * bs
    limit = max_context_tokens
    if limit:
        _check_limit(limit)

    k = 0  # index into the flat per-call arrays
    gi = 0  # index into gaps
    sessions = []
    calls_cut = sessions_cut = 0
    for s, (n_main, groups) in enumerate(plan):
        sid = f"agentx-{s:05d}"
        main_stream = glob + repo_layer[repos[s]] + hs.take(s_full - r_full)
        lanes_at = dict(groups)
        lane_k = {f: k + n_main + sum(sum(l) for f2, l in groups if f2 < f) for f, _ in groups}
        k_lane_total = sum(sum(l) for _, l in groups)
        calls: list[Call] = []
        # context cap (cap_context's end_session rule, applied while generating): from the first call
        # longer than ``limit`` on, calls are not built, but their hash draws are still made (_skip) so
        # that later sessions get the same ids as without the cap
        cut = False
        prev_main: Call | None = None
        pending_join: tuple[str, ...] = ()
        lane_no = 0
        for j in range(n_main):
            xin = inputs[k + j]
            last = j == n_main - 1
            cut = cut or (limit and xin + outputs[k + j] > limit)
            if cut:
                _skip(xin, main_stream, bs, hs)
            else:
                call = _mk(f"{sid}-m{j}", sid, xin, outputs[k + j], main_stream, bs, hs, 0,
                           pending_join or ((prev_main.call_id,) if prev_main else ()),
                           xin - prev_main.input_tokens if prev_main else xin,
                           0.0 if last else gaps[gi],
                           "" if last else ("task" if j in lanes_at else TOOLS[tools[k + j]]))
                calls.append(call)
                prev_main, pending_join = call, ()
            gi += 0 if last else 1
            if j in lanes_at:
                idx = lane_k[j]
                ends = []
                for m in lanes_at[j]:
                    lane_no += 1
                    stream = main_stream[:r_full]
                    prev: Call | None = None
                    for i in range(m):
                        xi = inputs[idx]
                        cut = cut or (limit and xi + outputs[idx] > limit)
                        if cut:
                            _skip(xi, stream, bs, hs)
                        else:
                            c = _mk(f"{sid}-s{lane_no}.{i}", sid, xi, outputs[idx], stream, bs, hs, lane_no,
                                    (prev.call_id,) if prev else (call.call_id,),
                                    xi - prev.input_tokens if prev else xi - min(xi, shared_lane_tokens),
                                    gaps[gi], TOOLS[tools[idx]])
                            calls.append(c)
                            prev = c
                        gi += 1
                        idx += 1
                    if not cut:
                        ends.append(prev.call_id)
                pending_join = tuple(ends)
        n_total = n_main + k_lane_total
        k += n_total
        if len(calls) < n_total:
            calls_cut += n_total - len(calls)
            sessions_cut += 1
        if calls:
            sessions.append(Session(sid, tuple(calls), start_s=starts[s]))
    if limit and not sessions:
        raise ValueError(f"every session's first call exceeds the model context of {limit} tokens")
    return Workload(name or f"agentx-{label}", tuple(sessions), block_size=bs, closed_loop=True,
                    source="generated:agentx",
                    context_cut=ContextCut(limit, "end_session", calls_cut, sessions_cut) if limit else None)


def _skip(xin, stream, bs, hs) -> None:
    """`_mk`'s hash draws for a call that is not built (cut by the context cap): ``stream`` grows to
    ``xin // bs`` blocks (a list standing for the stream: only its length matters after a cut) and the
    last partial block takes one fresh id."""
    full = xin // bs
    if full > len(stream):
        stream.extend(hs.take(full - len(stream)))
    if xin % bs:
        hs.take1()


def _mk(cid, sid, xin, out, stream, bs, hs, lane, parents, new, think, tool) -> Call:
    full = xin // bs
    have = len(stream)
    if full > have:
        stream.extend(hs.take(full - have))
    hashes = (*stream[:full], hs.take1()) if xin % bs else tuple(stream[:full])
    return Call(cid, sid, xin, out, max(0, min(new, xin)), lane, parents, hashes, bs, tool=tool, think_time_s=think)
