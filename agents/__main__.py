"""``python -m optsched.agents``: train the reference PPO (`optsched.agents.ppo`) from the command line and write the
learned policy (`optsched.agents.export`). Kept apart from ppo.py so that the exporter, which needs ppo's network,
and the trainer do not import each other."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import gymnasium as gym

from optsched.agents.ppo import Args, arg_parser, train, write_provenance

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """CLI: train, then write ``policy.json`` (`optsched.agents.export.learned_plan`), ``train_log.json``
    and ``provenance.json`` into ``--out``. Exits 2 with one ``error:`` line on a bad flag value."""
    from optsched.agents.export import learned_plan
    from optsched.export import dump_policy

    p = arg_parser()
    ns = vars(p.parse_args(argv))
    out = Path(ns.pop("out"))
    if ns["action_subset"] is not None:
        ns["action_subset"] = tuple(ns["action_subset"])
    try:
        args = Args(**ns)
    except ValueError as exc:
        p.error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    agent, logs = train(args)
    out.mkdir(parents=True, exist_ok=True)
    env = gym.make(args.env_id, **args.env_kwargs).unwrapped
    dump_policy(learned_plan(agent, args, env), out / "policy.json")
    (out / "train_log.json").write_text(json.dumps(logs, sort_keys=True) + "\n")
    write_provenance(out, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
