"""Every residency Plan type has an engine note (`optsched.export.RESIDENCY_NOTES`): a new type without one fails
here. Regression: load_priced_imitate (and load_priced_search, written as that type) fell through to the LRU
note, which says nothing of the per-pause call or the eviction-order hook the rule needs."""

from __future__ import annotations

import pytest

from optsched.export import RESIDENCY_NOTES, engine_settings, known_types
from optsched.plan import Plan, Provenance

PROV = Provenance(workload_digest="ab" * 32, cost_model="h200-sxm/llama-3-70b/tp4", seed=0)


def test_every_residency_type_has_a_note_and_every_note_a_type():
    assert set(RESIDENCY_NOTES) == set(known_types("residency"))


@pytest.mark.parametrize("typ", known_types("residency"))
@pytest.mark.parametrize("engine", ["vllm", "llm-d"])
def test_the_engine_settings_carry_the_types_note(typ, engine):
    notes = engine_settings(Plan("residency", typ, {}, PROV), engine).notes
    assert len(notes) == 1 and notes[0].endswith(RESIDENCY_NOTES[typ])


def test_the_derived_eviction_order_names_the_connector_and_its_hook():
    note = RESIDENCY_NOTES["load_priced_imitate"]
    for phrase in ("KV connector", "eviction-order hook", "LMCache", "load_priced_search", "eviction_weights",
                   "No engine flag"):
        assert phrase in note, phrase
