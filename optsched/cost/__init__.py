"""GPU cost model: hardware/model catalog, calibrated roofline step time, KV sizes, transfer costs.

Public API (the "Cost model" contract, docs in each module):
``load_gpu``, ``load_model``, ``list_gpus``, ``list_models``, ``CostModel`` (``from_names``, ``step_time``,
``step_breakdown``, ``kv_bytes_per_token``, ``kv_capacity_tokens``, ``kv_capacity_blocks``,
``tier_capacity_blocks``, ``prefill_time``, ``decode_step_time``, ``transfer_time``, ``kv_transfer_time``,
``recompute_time``), ``chunk_attn_pairs``, ``Calibration``, ``load_calibration``.
"""

from optsched.cost.calibration import Calibration, load_calibration, shipped_calibration
from optsched.cost.catalog import list_gpus, list_models, load_gpu, load_model
from optsched.cost.efficiency import FamilyParams
from optsched.cost.model import CostModel
from optsched.cost.ops import chunk_attn_pairs
from optsched.cost.specs import GPUSpec, ModelSpec

__all__ = [
           "Calibration",
           "CostModel",
           "FamilyParams",
           "GPUSpec",
           "ModelSpec",
           "chunk_attn_pairs",
           "list_gpus",
           "list_models",
           "load_calibration",
           "load_gpu",
           "load_model",
           "shipped_calibration",
]
