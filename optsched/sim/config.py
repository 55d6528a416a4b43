"""Frozen, validated configuration of a simulated cluster (instances, step scheduler, SLO).

Units: tokens, seconds. Every type validates in ``__post_init__`` and raises ``ValueError`` naming
the field and the offending value (CONTRIBUTING.md).

SOURCE of the scheduler knobs: vLLM v1 engine arguments ``--max-num-batched-tokens``,
``--max-num-seqs``, ``--long-prefill-token-threshold`` (vllm/config.py ``SchedulerConfig``), vLLM v0's
``--max-num-partial-prefills`` / ``--max-long-partial-prefills`` (same class; used by
``vllm/core/scheduler.py`` ``PartialPrefillMetadata``; the v1 engine does not enforce them: older
releases reject non-default values as "Concurrent Partial Prefill" not supported,
``vllm/engine/arg_utils.py``, and open pull requests such as vllm-project/vllm#49075 add enforcement) and the
``prefill_schedule_interval`` of lockstep data-parallel groups (DESIGN.md, "Prefill admission").
Defaults of ``SchedulerConfig`` are vLLM v1's online-serving defaults (8192 / 256; partial prefills 1 / 1).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LINKS", "LONG_PREFILL_BASES", "MAX_INSTANCES", "PREEMPTION_MODES", "ROLES", "SLO", "ClusterConfig", "InstanceConfig",
           "SchedulerConfig"]

ROLES = ("colocated", "prefill", "decode")
PREEMPTION_MODES = ("recompute", "swap")
LONG_PREFILL_BASES = ("uncomputed", "uncached")
LINKS = ("rdma", "nvlink")
# instances of one cluster, all groups together: 4,096 TP-4 instances are 16,384 GPUs, past any published
# deployment; each simulated instance costs ~60 KB and a step loop, so a typo such as count: 1000000 would
# otherwise run for hours with no output.
MAX_INSTANCES = 4096


def _pos_int(obj: object, name: str, value: object, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{type(obj).__name__}.{name} must be an int >= {minimum}, got {value!r}")


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """``count`` identical serving instances.

    Fields:
        role: "colocated" (prefill + decode), "prefill" (P/D prefill side) or "decode".
        gpu, model: catalog names for ``optsched.cost.CostModel.from_names``.
        tp: tensor-parallel degree (GPUs per instance).
        count: number of such instances.
        group: lockstep data-parallel group id; instances sharing a group id >= 0 start every engine
            step together and the step lasts as long as the slowest member's (barrier). -1 = none.
    """

    role: str = "colocated"
    gpu: str = "h200-sxm"
    model: str = "llama-3-70b"
    tp: int = 4
    count: int = 1
    group: int = -1

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"InstanceConfig.role must be one of {ROLES}, got {self.role!r}")
        for name in ("gpu", "model"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v:
                raise ValueError(f"InstanceConfig.{name} must be a non-empty string, got {v!r}")
        _pos_int(self, "tp", self.tp)
        _pos_int(self, "count", self.count)
        if not isinstance(self.group, int) or isinstance(self.group, bool) or self.group < -1:
            raise ValueError(f"InstanceConfig.group must be an int >= -1, got {self.group!r}")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Per-instance vLLM-v1-like step scheduler.

    Fields:
        max_num_batched_tokens: token budget of one engine step (decodes count 1 each).
        max_num_seqs: most sequences in one step (running decodes + prefills); <= the token budget
            so that every running decode always fits (vLLM enforces the same).
        long_prefill_token_threshold: cap on one request's prefill chunk per step (tokens), 0 = off.
        prefill_schedule_interval: N >= 1; prefills that have not started yet are admitted only on
            steps whose index is a multiple of N (started chunks continue every step).
        block_size: KV block size (tokens); None = the workload's ``block_size`` (required when
            calls carry block hashes, so that hashes and blocks line up).
        preemption: "recompute" (drop the victim's KV, re-prefill later) or "swap" (copy it to host
            DRAM over PCIe and back).
        max_num_partial_prefills: vLLM v0 ``--max-num-partial-prefills``; 1 (vLLM's default) = off.
            N > 1 turns on vLLM v0's concurrent partial prefill rules (``optsched.sim.scheduler``,
            "Partial prefills"): each prefill chunk is also capped at ``max_num_batched_tokens // k``
            (k = partial prefills that can run this step, <= N), and a waiting prompt that is "long"
            (more than ``long_prefill_token_threshold`` tokens, which must then be >= 1) cannot start
            while ``max_long_partial_prefills`` long prefills run: shorter prompts behind it start
            first ("jump the queue").
        max_long_partial_prefills: vLLM v0 ``--max-long-partial-prefills``; 1..max_num_partial_prefills.
            ``max_num_partial_prefills`` must be <= ``max_num_batched_tokens`` (a chunk cap of
            ``max_num_batched_tokens // k`` tokens must be >= 1, or prefills would never progress).
        long_prefill_basis: what "long" measures for a prompt that has not started: "uncomputed"
            (vLLM v0 exactly, ``Sequence.get_num_new_tokens``: every prompt token not yet computed,
            prefix-cache hits included, since v0 marks cached tokens computed only when scheduled) or
            "uncached" (tokens left after the prefix-cache hit estimated at enqueue: v1's
            ``request.num_tokens - num_computed_tokens`` after the prefix lookup, the count used by the
            V1 enforcement proposed in vllm-project/vllm#49075). Started prefills always count their
            remaining tokens.
        chunked_prefill: True (default) = vLLM v1 steps: running decodes and prefill chunks share every
            step. False = vLLM v0's default scheduler without chunked prefill (SOURCE:
            ``vllm/core/scheduler.py`` ``Scheduler._schedule_default``: waiting prompts are scheduled
            first, whole, up to ``max_num_batched_tokens`` and ``max_num_seqs``; only when none is
            scheduled does the step run the decodes; the two never mix, so running decodes pause for
            every prefill step). Needs ``long_prefill_token_threshold == 0``, ``max_num_partial_prefills
            == 1`` and the built-in FCFS admission (no `Admission` policy); a prompt longer than
            ``max_num_batched_tokens`` raises ValueError when it reaches the queue head (v0 ignores it).
            This is the "existing systems" colocated baseline of DistServe (Zhong et al., OSDI'24, Fig. 1).
        kv_watermark: fraction of HBM KV blocks that must stay free after admitting a waiting or
            preempted request while others run (vLLM v1 ``KVCacheManager(watermark=...)``, default 0.0;
            vLLM v0 ``BlockSpaceManager`` and Vidur use 0.01). Running requests ignore it.
        admit_full_prompt: admit a waiting request only if the blocks of its whole remaining prompt are
            free (vLLM v1 ``allocate_slots(full_sequence_must_fit=True)``; vLLM v0 ``can_allocate`` and
            Vidur reserve the whole prompt at admission). False (vLLM v1's default) checks only the
            first chunk. Both knobs only gate admission; blocks are still allocated chunk by chunk and
            decode blocks on demand, one per block boundary crossed (vLLM v1 ``allocate_slots``).
            With both at Vidur's values (0.01, True) Vidur's splitwise_conv setup preempts 3 times as
            Vidur does; with vLLM v1's defaults it preempts 868 times (docs/notebook/BENCHMARKS.md,
            "Simulator speed").
    """

    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    long_prefill_token_threshold: int = 0
    prefill_schedule_interval: int = 1
    block_size: int | None = None
    preemption: str = "recompute"
    max_num_partial_prefills: int = 1
    max_long_partial_prefills: int = 1
    long_prefill_basis: str = "uncomputed"
    chunked_prefill: bool = True
    kv_watermark: float = 0.0
    admit_full_prompt: bool = False

    def __post_init__(self) -> None:
        _pos_int(self, "max_num_batched_tokens", self.max_num_batched_tokens)
        _pos_int(self, "max_num_seqs", self.max_num_seqs)
        if self.max_num_seqs > self.max_num_batched_tokens:
            raise ValueError(
                f"SchedulerConfig.max_num_seqs ({self.max_num_seqs}) must be <= max_num_batched_tokens "
                f"({self.max_num_batched_tokens}) so every running decode fits in a step"
            )
        _pos_int(self, "long_prefill_token_threshold", self.long_prefill_token_threshold, minimum=0)
        _pos_int(self, "prefill_schedule_interval", self.prefill_schedule_interval)
        if self.block_size is not None:
            _pos_int(self, "block_size", self.block_size)
        if self.preemption not in PREEMPTION_MODES:
            raise ValueError(f"SchedulerConfig.preemption must be one of {PREEMPTION_MODES}, got {self.preemption!r}")
        _pos_int(self, "max_num_partial_prefills", self.max_num_partial_prefills)
        _pos_int(self, "max_long_partial_prefills", self.max_long_partial_prefills)
        if self.max_long_partial_prefills > self.max_num_partial_prefills:
            raise ValueError(
                f"SchedulerConfig.max_long_partial_prefills ({self.max_long_partial_prefills}) must be <= "
                f"max_num_partial_prefills ({self.max_num_partial_prefills})"
            )
        if self.max_num_partial_prefills > 1 and self.long_prefill_token_threshold == 0:
            raise ValueError(
                "SchedulerConfig.long_prefill_token_threshold must be >= 1 when max_num_partial_prefills > 1 "
                "(it defines a 'long' prompt; vLLM v0 defaults it to 4% of max_model_len), got 0"
            )
        if self.max_num_partial_prefills > self.max_num_batched_tokens:
            # each chunk is capped at max_num_batched_tokens // k with k <= max_num_partial_prefills:
            # past the budget the cap is 0 tokens and prefills never progress (the simulation hangs)
            raise ValueError(
                f"SchedulerConfig.max_num_partial_prefills ({self.max_num_partial_prefills}) must be <= "
                f"max_num_batched_tokens ({self.max_num_batched_tokens}): each partial prefill gets "
                "max_num_batched_tokens // max_num_partial_prefills tokens per step, which must be >= 1"
            )
        if self.long_prefill_basis not in LONG_PREFILL_BASES:
            raise ValueError(
                f"SchedulerConfig.long_prefill_basis must be one of {LONG_PREFILL_BASES}, got {self.long_prefill_basis!r}"
            )
        w = self.kv_watermark
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (0.0 <= w < 1.0):
            raise ValueError(f"SchedulerConfig.kv_watermark must be a number in [0, 1), got {w!r}")
        if not isinstance(self.admit_full_prompt, bool):
            raise ValueError(f"SchedulerConfig.admit_full_prompt must be a bool, got {self.admit_full_prompt!r}")
        if not isinstance(self.chunked_prefill, bool):
            raise ValueError(f"SchedulerConfig.chunked_prefill must be a bool, got {self.chunked_prefill!r}")
        if not self.chunked_prefill and (self.long_prefill_token_threshold or self.max_num_partial_prefills > 1):
            raise ValueError(
                "SchedulerConfig.chunked_prefill=False schedules whole prompts: it needs "
                f"long_prefill_token_threshold == 0 (got {self.long_prefill_token_threshold}) and "
                f"max_num_partial_prefills == 1 (got {self.max_num_partial_prefills})"
            )


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Instances plus the scheduler every instance runs.

    Fields:
        instances: instance groups (expanded by ``count`` in order; instance index = position).
        scheduler: the step scheduler of every instance.
        dram_tier / ssd_tier: give each instance's prefix cache a host-DRAM / SSD tier sized by
            ``cm.tier_capacity_blocks``.
        pd_link: link for prefill->decode KV transfer in P/D clusters ("rdma" across nodes or
            "nvlink" inside a node).
    """

    instances: tuple[InstanceConfig, ...]
    scheduler: SchedulerConfig = SchedulerConfig()
    dram_tier: bool = True
    ssd_tier: bool = False
    pd_link: str = "rdma"

    def __post_init__(self) -> None:
        if not isinstance(self.instances, tuple) or not self.instances:
            raise ValueError(f"ClusterConfig.instances must be a non-empty tuple, got {self.instances!r}")
        for i, ic in enumerate(self.instances):
            if not isinstance(ic, InstanceConfig):
                raise ValueError(f"ClusterConfig.instances[{i}] must be an InstanceConfig, got {ic!r}")
        if not isinstance(self.scheduler, SchedulerConfig):
            raise ValueError(f"ClusterConfig.scheduler must be a SchedulerConfig, got {self.scheduler!r}")
        if self.pd_link not in LINKS:
            raise ValueError(f"ClusterConfig.pd_link must be one of {LINKS}, got {self.pd_link!r}")
        n = sum(ic.count for ic in self.instances)
        if n > MAX_INSTANCES:
            raise ValueError(f"ClusterConfig.instances: {n:,} instances; expects at most {MAX_INSTANCES:,} "
                             "(MAX_INSTANCES, the plausibility limit of optsched.sim.config)")
        roles = {ic.role for ic in self.instances}
        if "decode" in roles and "prefill" not in roles:
            raise ValueError("ClusterConfig.instances: 'decode' instances need at least one 'prefill' instance")
        if "prefill" in roles and "decode" not in roles:
            raise ValueError("ClusterConfig.instances: 'prefill' instances need at least one 'decode' instance")
        for ic in self.instances:
            if ic.group >= 0:
                same = {(o.role, o.gpu, o.model, o.tp) for o in self.instances if o.group == ic.group}
                if len(same) > 1:
                    raise ValueError(f"ClusterConfig.instances: lockstep group {ic.group} mixes instance kinds {same}")

    @property
    def expanded(self) -> tuple[InstanceConfig, ...]:
        """One entry per instance (``count`` expanded), in index order."""
        return tuple(ic for ic in self.instances for _ in range(ic.count))

    @property
    def num_gpus(self) -> int:
        """Total GPUs (sum of tp over instances)."""
        return sum(ic.tp * ic.count for ic in self.instances)


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency service-level objective: a call meets it when TTFT <= ttft_s and TPOT <= tpot_s (s)."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0):
                raise ValueError(f"SLO.{name} must be a positive number of seconds, got {v!r}")
