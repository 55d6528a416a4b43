"""Disjoint parts of one workload, for fitting on one part and scoring on another (out-of-sample checks).

- `call_window` (open loop): the calls ``first`` .. ``first + count − 1`` in arrival order (ties by position),
  times shifted so the window's first arrival is at 0 s. Two windows that do not overlap share no call.
- `session_part` (closed loop): each session cut into its ``"head"`` (first ⌈k/2⌉ calls of k, a prefix, so a valid
  DAG as it stands) or its ``"tail"`` (the other calls; a parent in the head is dropped, so a tail call whose
  parents were all in the head becomes a root released at the session start plus its own ``wait_s``). Sessions
  of one call have no tail and are left out of it. Head and tail share no call.
"""

from __future__ import annotations

import dataclasses

from optsched.workload.types import Session, Workload

__all__ = ["call_window", "session_part"]


def call_window(wl: Workload, first: int, count: int) -> Workload:
    """Calls ``first`` .. ``first + count − 1`` of the open-loop ``wl`` in arrival order (module docstring).

    Raises:
        ValueError: a closed-loop workload, first < 0, count < 1, or a window past the last call.
    """
    if wl.closed_loop:
        raise ValueError(f"call_window needs an open-loop workload, {wl.name!r} is closed-loop")
    if not (first >= 0 and count >= 1):
        raise ValueError(f"call_window needs first >= 0 and count >= 1, got {first}, {count}")
    flat = sorted(((c.arrival_s if c.arrival_s is not None else s.start_s, k, si, c)
                   for k, (si, s, c) in enumerate((si, s, c) for si, s in enumerate(wl.sessions) for c in s.calls)),
                  key=lambda x: (x[0], x[1]))
    if first + count > len(flat):
        raise ValueError(f"call_window [{first}, {first + count}) is past the {len(flat)} calls of {wl.name!r}")
    keep = flat[first:first + count]
    t0 = keep[0][0]
    ids = {c.call_id for *_, c in keep}
    sessions = []
    for s in wl.sessions:
        calls = tuple(dataclasses.replace(c, arrival_s=None if c.arrival_s is None else c.arrival_s - t0,
                                          parents=tuple(p for p in c.parents if p in ids))
                      for c in s.calls if c.call_id in ids)
        if calls:
            start = min((c.arrival_s for c in calls if c.arrival_s is not None), default=max(0.0, s.start_s - t0))
            sessions.append(Session(s.session_id, calls, start_s=max(0.0, start)))
    return dataclasses.replace(wl, sessions=tuple(sessions), name=f"{wl.name}[{first}:{first + count}]")


def session_part(wl: Workload, part: str) -> Workload:
    """The ``"head"`` or ``"tail"`` of every session of ``wl`` (module docstring).

    Raises:
        ValueError: ``part`` not "head" / "tail", or no session has a tail.
    """
    if part not in ("head", "tail"):
        raise ValueError(f"session_part: part must be 'head' or 'tail', got {part!r}")
    sessions = []
    for s in wl.sessions:
        h = (len(s.calls) + 1) // 2
        calls = s.calls[:h] if part == "head" else s.calls[h:]
        if not calls:
            continue
        ids = {c.call_id for c in calls}
        calls = tuple(dataclasses.replace(c, parents=tuple(p for p in c.parents if p in ids)) for c in calls)
        sessions.append(Session(s.session_id, calls, start_s=s.start_s))
    if not sessions:
        raise ValueError(f"session_part: no session of {wl.name!r} has a {part}")
    return dataclasses.replace(wl, sessions=tuple(sessions), name=f"{wl.name}:{part}")
