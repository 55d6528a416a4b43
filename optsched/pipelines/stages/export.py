"""Stage 6: the compared policies written as ``runs/<name>/policies/*.json`` (``optsched.policy/v1``)
with the serving-engine settings each maps to (``optsched.export``), or a plain statement that no
mapping exists for that engine.
"""

from __future__ import annotations

import logging
from typing import Any

from optsched.pipelines.reproduce_config import ReproduceConfig
from optsched.pipelines.runcache import atomic_write_text
from optsched.pipelines.stages.base import Stage, StageContext, StageResult, StageUnavailable, Table

__all__ = ["STAGE"]

log = logging.getLogger(__name__)


def _export_module() -> Any:
    try:
        import optsched.export as ex
    except ImportError as exc:
        raise StageUnavailable(f"optsched.export has not landed ({exc})") from None
    return ex


def _inputs(cfg: ReproduceConfig) -> dict[str, Any]:
    return {"seed": cfg.seed, "gpu": cfg.gpu, "model": cfg.model, "tp": cfg.tp}


def _run(ctx: StageContext) -> StageResult:
    ex = _export_module()
    raise StageUnavailable(f"optsched.export exists ({ex.__name__}) but is not wired into reproduce yet")


STAGE = Stage(
    name="export",
    title="Policies exported (optsched.policy/v1) with engine settings",
    deps=("baselines",),
    soft_deps=("formulations", "comparison"),
    inputs=_inputs,
    run=_run,
)
