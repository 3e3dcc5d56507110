"""`prove-assets plan` (prove_assets.planning, prove_assets.core.cost) against the scripted test
server (a test double, not a model).

- the estimate arithmetic: recorded usage per prompt and model, the fallback without records,
  concurrency, money only with a price;
- a new API model (`openai` backend at the scripted server, with a price) on a built shard: the
  plan's "to send" per step equals what the run then sends (counted in `prove.llm_calls` by run
  and prompt) — first `model_responses` alone, then the rest of the evaluation group once the
  responses are recorded — and a plan after the run has nothing to send;
- `prove-assets plan` prints the table with a cost column.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pytest
import yaml

from prove_assets.cli import main
from prove_assets.core.cost import Price, estimate, pick_profile, usage_profiles
from prove_assets.planning import build_plan
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.pipeline import run_groups, run_selection, scripted_resources, shard_model

MODEL = "vlm-api"


def test_estimate_from_recorded_usage() -> None:
    rows = [
        {
            "prompt_name": "p",
            "model": "m",
            "chars": 400,
            "usage": json.dumps({"prompt_tokens": 100, "completion_tokens": 50}),
            "latency_s": 2.0,
        },
        {
            "prompt_name": "p",
            "model": "m",
            "chars": 400,
            "usage": json.dumps({"prompt_tokens": 100, "completion_tokens": 30}),
            "latency_s": 4.0,
        },
        {"prompt_name": "p", "model": "other", "chars": 100, "usage": "not json", "latency_s": 1.0},
    ]
    profiles = usage_profiles(rows)
    profile = pick_profile(profiles, "p", "m")
    assert profile is not None and profile.calls == 2 and profile.output_tokens == 40
    assert pick_profile(profiles, "p", "unseen") is profiles[("p", None)]  # same prompt, any model
    est = estimate([(800, 512), (400, 20)], profile, concurrency=2, price=Price(1.0, 2.0))
    # 0.25 tokens a char; output the recorded mean, capped by max_tokens; 2 x 3 s at concurrency 2.
    assert (est.input_tokens, est.output_tokens, est.wall_s) == (300, 60, 3.0)
    assert est.cost == pytest.approx((300 * 1.0 + 60 * 2.0) / 1000)
    blind = estimate([(400, 256)], None, concurrency=1, price=None)
    assert (blind.input_tokens, blind.output_tokens, blind.wall_s, blind.cost) == (100, 256, None, None)


def _sent_by_prompt(wh: Warehouse, run_id: str) -> dict[str, int]:
    df = wh.query(
        "SELECT prompt_name, count(*) AS n FROM prove.llm_calls WHERE run_id = ? AND source = 'live' GROUP BY 1",
        [run_id],
    )
    return dict(zip(df["prompt_name"], df["n"].astype(int), strict=True))


def _to_send(plan, partition: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in plan.rows:
        if row.partition == partition and row.prompt:
            out[row.prompt] = out.get(row.prompt, 0) + (row.to_send or 0)
    return {k: v for k, v in out.items() if v}


@pytest.mark.timeout(480)
def test_plan_matches_what_the_run_sends(
    instance: dg.DagsterInstance, scripted_llm, prove_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = scripted_resources(scripted_llm.base_url)
    instance.add_dynamic_partitions("shards", ["mini-000"])
    assert run_groups(instance, res, "construction", partition_key="mini-000").success
    models_file = Path(os.environ["PROVE_MODELS"])
    registry = yaml.safe_load(models_file.read_text())
    registry["models"][MODEL] = {
        "backend": "openai",
        "model": "scripted",
        "base_url": scripted_llm.base_url,
        "price_in": 0.15,
        "price_out": 0.6,
    }
    models_file.write_text(yaml.safe_dump(registry))
    instance.add_dynamic_partitions("models", [MODEL])
    wh = Warehouse(prove_home / "warehouse.duckdb")
    part = f"{MODEL}|mini-000"

    def plan():
        return build_plan(
            ["mini-000"], [MODEL], llm=res["llm"].settings(), warehouse=wh, use_ledger=res["llm"].use_ledger
        )

    # Construction is built and recorded: nothing of it is sent again.
    before = plan()
    unsent = [(r.step, r.prompt, r.to_send) for r in before.rows if r.partition == "mini-000" and r.exact and r.to_send]
    assert not unsent, unsent
    responses = next(r for r in before.rows if r.step == "model_responses")
    n_kept = len(wh.read("verified_qa").query("verdict == 'kept'"))
    assert responses.exact and responses.requests == responses.to_send == n_kept > 0
    assert responses.estimate.cost is not None and responses.estimate.cost > 0  # the model's price
    # Tuples and judgements of responses not given yet are estimates, never exact.
    assert all(not r.exact for r in before.rows if r.step in ("response_tuples", "judge_scores"))

    run = run_selection(instance, res, dg.AssetSelection.assets("model_responses"), shard_model(MODEL))
    assert run.success
    assert _sent_by_prompt(wh, run.run_id) == {"answer_with_image": n_kept}
    assert _to_send(before, part)["answer_with_image"] == n_kept

    # With the responses recorded, every step's requests are built exactly.
    middle = plan()
    assert all(r.exact for r in middle.rows)
    expected = _to_send(middle, part)
    assert "answer_with_image" not in expected and expected.get("judge_text", 0) > 0
    run = run_groups(instance, res, "evaluation", partition_key=shard_model(MODEL))
    assert run.success
    assert _sent_by_prompt(wh, run.run_id) == expected

    after = plan()
    assert sum(r.to_send or 0 for r in after.rows) == 0

    main(["plan", "--shards", "mini-000", "--models", MODEL])
    out = capsys.readouterr().out
    assert "to send" in out and "cost" in out and "TOTAL" in out
