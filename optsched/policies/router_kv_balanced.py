"""KV-balanced router for lockstep data-parallel groups.

Ranks of a data-parallel group (DP attention, e.g. DeepSeek-V3 serving in SGLang/vLLM) step together
and each step lasts as long as the slowest rank, so the baseline keeps their KV usage even: a call
goes to the rank with the least KV in use within its group (SOURCE: the sglang router's
``--dp-minimum-tokens-scheduler``, whose ``MinimumTokensPolicy`` sends a request to the data-parallel
rank with the fewest tokens; measured here as KV-block utilization). Prefix residency is
deliberately ignored (that is what makes it a baseline).

Group choice (documented rule):
1. sticky to a group: if the session has a home instance (``view.session_home``) that accepts
   prefill, the call stays in that instance's group;
2. otherwise the group with the lowest KV utilization (sum used / sum capacity), ties to the lower
   group id. Instances with ``group == -1`` form one pool together.
Within the group: lowest KV utilization ``active / capacity`` (``_load.active_kv_blocks``), ties to
the lower instance index.
"""

from __future__ import annotations

from optsched.policies._load import active_kv_blocks, argmin
from optsched.policies._roles import decode_candidates, prefill_candidates
from optsched.policies.base import ClusterView
from optsched.workload.types import Call

__all__ = ["KVBalancedRouter"]


def _util(view: ClusterView, i: int) -> float:
    inst = view.instances[i]
    return active_kv_blocks(inst) / max(inst.kv_capacity_blocks, 1)


class KVBalancedRouter:
    """Least KV utilization within the call's lockstep group (see module docstring). Deterministic."""

    name = "kv_balanced"
    kind = "router"

    __slots__ = ()

    def _pick(self, call: Call, view: ClusterView, cands: list[int]) -> int:
        groups: dict[int, list[int]] = {}
        for i in cands:
            groups.setdefault(view.instances[i].group, []).append(i)
        home = view.session_home(call.session_id)
        if home is not None and home in cands:
            members = groups[view.instances[home].group]
        else:
            def group_util(g: int) -> float:
                m = groups[g]
                used = sum(active_kv_blocks(view.instances[i]) for i in m)
                return used / max(sum(view.instances[i].kv_capacity_blocks for i in m), 1)
            members = groups[argmin(sorted(groups), group_util)]
        return argmin(members, lambda i: _util(view, i))

    def route(self, call: Call, view: ClusterView) -> int:
        """Prefill instance for ``call``. Raises ValueError if no instance accepts prefill."""
        return self._pick(call, view, prefill_candidates(view))

    def route_decode(self, call: Call, view: ClusterView) -> int:
        """Decode instance (P/D): least KV utilization among decode instances, group-sticky."""
        return self._pick(call, view, decode_candidates(view))
