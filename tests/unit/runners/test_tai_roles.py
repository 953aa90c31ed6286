"""tai's `light` role: the turn document names the light model for compaction summaries, and
`cage-tai` builds the loop's compactor on a client of that model (same endpoint)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.dsl.role_support import role_refusal
from orchestrator.llm import client_for
from runners.tai.adapter import tai_turn
from runners.tai.incontainer.cli import build_loop, client_settings
from tests.unit.runners.test_runner_images import turn


def test_the_light_model_is_the_summary_model() -> None:
    assert role_refusal("tai", "light") is None and role_refusal("tai", "vision") is not None
    assert tai_turn(turn(role_models={"light": "fake-light"})).summary_model == "fake-light"
    assert tai_turn(turn()).summary_model is None


def test_cage_tai_compacts_with_the_light_client(tmp_path: Path) -> None:
    doc = tai_turn(turn(role_models={"light": "fake-light"}))
    settings = client_settings(doc)
    client = client_for(settings)
    summary = client_for(settings.model_copy(update={"model": doc.summary_model}))
    loop = build_loop(doc, client, tmp_path, summary_client=summary)
    assert loop.compactor is not None and loop.compactor._client is summary
    assert summary.model == "fake-light" and client.model == "gpt-fake"
