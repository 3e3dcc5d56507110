"""`prove-assets plan`: what a demo or backfill would ask the LLMs, before anything is sent.

Per step (asset) and partition: the requests the step would make, how many the cache answers
(recorded calls in `prove.llm_calls`, and the recorded ledger when the embedded model is
configured), how many would be sent, their estimated tokens, wall time and cost
(`prove_assets.core.cost`). Requests are built by the functions the assets use and hashed by
the real gateway (`DryRunGateway`), so "to send" is what the run sends.

A step whose inputs are not in the warehouse yet (QA generation before the scene graphs exist),
or will change because an upstream step has requests to send, cannot know its requests: its
count is estimated (one request per image, per kept pair, ...) and marked `estimate`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from prove_assets.backends.dry_run import DryRunGateway, PendingRequest, PlanLedger, RecordedCalls
from prove_assets.backends.responders import ModelSpec, Question, load_models, response_requests
from prove_assets.config import LEDGER_PATH, datasets_file, models_file, prompts_dir, warehouse_path
from prove_assets.core.construction.extraction import caption_chunk_inputs, to_send, tuple_requests
from prove_assets.core.construction.stages import planned_facts, qa_generation_inputs
from prove_assets.core.cost import Estimate, Price, UsageProfile, estimate, pick_profile, usage_profiles
from prove_assets.core.datasets import Record, load_registry, parse_shard_key, read_shard, registered_shards
from prove_assets.core.evaluation.stages import judge_endpoint, judge_inputs, judge_variants, response_tuple_inputs
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.settings import LLMSettings, Settings
from prove_assets.storage.benchmark import flagged_pairs, kept_questions
from prove_assets.storage.warehouse import Warehouse

# Verdicts of the pairs the post-processing filter judged (it judges the pairs whose program output
# matched the answer; a flag is applied after it).
FILTERED_VERDICTS = ["kept", "filtered_trivial", "filtered_incomplete", "filtered_unnatural", "flagged"]
ANSWER_PROMPTS = {"caption_oracle": "answer_with_caption", "blind": "answer_blind", "openai": "answer_with_image"}


@dataclass
class PlanRow:
    """One step of one partition."""

    step: str
    partition: str
    llm: str
    prompt: str
    requests: int | None  # None: not known before upstream steps run
    cached: int | None
    to_send: int | None
    estimate: Estimate | None = None
    exact: bool = True
    note: str = ""


@dataclass
class Plan:
    rows: list[PlanRow] = field(default_factory=list)
    priced: bool = False

    def table(self) -> pd.DataFrame:
        """One row per step and partition, then a total; money only when a price is configured."""
        records = []
        for r in self.rows:
            e = r.estimate
            records.append(
                {
                    "step": r.step,
                    "partition": r.partition,
                    "llm": r.llm,
                    "requests": _count(r.requests, r.exact),
                    "cached": _count(r.cached, r.exact),
                    "to send": _count(r.to_send, r.exact),
                    "in tokens": e.input_tokens if e and e.input_tokens is not None else None,
                    "out tokens": e.output_tokens if e and e.output_tokens is not None else None,
                    "wall s": round(e.wall_s, 1) if e and e.wall_s is not None else None,
                    **({"cost": round(e.cost, 4) if e and e.cost is not None else None} if self.priced else {}),
                    "basis": ("estimate: " if not r.exact else "") + r.note,
                }
            )
        df = pd.DataFrame(records)
        if df.empty:
            return df
        df = df.astype(object).where(df.notna(), None)
        for col in ("in tokens", "out tokens"):
            df[col] = [None if v is None else int(v) for v in df[col]]
        total = {"step": "TOTAL", "partition": "", "llm": "", "basis": ""}
        for col in (
            "requests",
            "cached",
            "to send",
            "in tokens",
            "out tokens",
            "wall s",
            *(["cost"] if self.priced else []),
        ):
            values = [_number(v) for v in df[col]]
            total[col] = _round(sum(v for v in values if v is not None))
        return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def _count(n: int | None, exact: bool) -> str | int:
    if n is None:
        return "?"
    return n if exact else f"~{n}"


def _number(value: Any) -> float | None:
    if isinstance(value, str):
        value = value.lstrip("~")
        return None if value in ("?", "") else float(value)
    return None if value is None or pd.isna(value) else float(value)


def _round(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 4)


def llm_price() -> Price | None:
    """PROVE_LLM_PRICE_IN / PROVE_LLM_PRICE_OUT: money per 1k tokens of the benchmark LLM."""
    return Price.from_settings(Settings.from_env().llm_price_in, Settings.from_env().llm_price_out)


def model_price(spec: ModelSpec) -> Price | None:
    """`price_in` / `price_out` (per 1k tokens) of a models.yaml entry."""
    return Price.from_settings(spec.settings.get("price_in"), spec.settings.get("price_out"))


class Planner:
    """Builds the plan step by step, in the order a demo runs them."""

    def __init__(self, wh: Warehouse, llm: LLMSettings, use_ledger: bool = True):
        self.wh = wh
        self.llm = llm_settings = llm  # the construction LLM the run would use
        self.use_ledger = use_ledger
        self.recorded = RecordedCalls(wh, LEDGER_PATH if use_ledger and llm_settings.embedded else None)
        self.ledger = PlanLedger()
        usage = self.recorded.usage_rows(use_ledger and llm_settings.embedded)
        self.profiles: dict[tuple[str, str | None], UsageProfile] = usage_profiles(usage)
        # Recorded calls per (prompt, version, model): how many an estimated step may find answered.
        self.recorded_versions = Counter((r["prompt_name"], r["prompt_version"], r["model"]) for r in usage)
        self.plan = Plan(priced=llm_price() is not None)
        self.settings = Settings.from_env()

    # --- helpers --------------------------------------------------------------------------------
    def gateway(self, settings: LLMSettings | None) -> DryRunGateway:
        return DryRunGateway(settings or self.llm, self.recorded, self.ledger, self.use_ledger)

    def dry_run(
        self,
        step: str,
        partition: str,
        requests: list[LLMRequest],
        settings: LLMSettings | None = None,
        price: Price | None = None,
        variants: list[LLMSettings] | None = None,
        note: str = "",
    ) -> list[Any]:
        """Hash and look up `requests` (once per settings variant); add the step's row. Returns
        the results of the first variant (answers known for the cached ones)."""
        price = price or self._llm_price(settings)
        settings = settings or self.llm
        gw = self.gateway(settings)
        results: list[Any] = []
        for i, variant in enumerate(variants or [settings]):
            gw.settings = variant
            out = gw.run(requests)
            results = out if i == 0 else results
        pending = [self.ledger.pending[h] for h in gw.to_send]
        prompt = requests[0].prompt.name if requests else ""
        est = self._estimate(pending, prompt, settings, price)
        n = len(requests) * len(variants or [settings])
        detail = [note] if note else []
        if gw.earlier:
            detail.append(f"{len(gw.earlier)} answered by an identical request sent before")
        repairs = sum(p.repair for p in pending)
        if repairs:
            detail.append(f"{repairs} repair requests for recorded answers that do not parse")
        detail.append(est.basis if pending else "all recorded")
        self.plan.rows.append(
            PlanRow(
                step,
                partition,
                settings.model,
                prompt,
                n,
                n - (len(gw.to_send) - repairs),
                len(gw.to_send),
                est,
                note="; ".join(detail),
            )
        )
        return results

    def _estimate(
        self, pending: list[PendingRequest], prompt: str, settings: LLMSettings, price: Price | None
    ) -> Estimate:
        profile = pick_profile(self.profiles, prompt, settings.model)
        return estimate([(p.chars, p.max_tokens) for p in pending], profile, settings.max_concurrency, price)

    def estimated(
        self,
        step: str,
        partition: str,
        prompt: str,
        n: int | None,
        why: str,
        settings: LLMSettings | None = None,
        price: Price | None = None,
        max_tokens: int | None = None,
    ) -> None:
        """A step whose requests cannot be built yet: n requests (an upper bound on what is sent),
        tokens and time from the recorded mean of the prompt."""
        price = price or self._llm_price(settings)
        settings = settings or self.llm
        profile = pick_profile(self.profiles, prompt, settings.model)
        est = None
        if n is not None and profile is not None:
            chars = profile.mean_chars
            est = estimate([(chars, max_tokens or settings.max_tokens)] * n, profile, settings.max_concurrency, price)
        elif n is not None:
            est = Estimate(None, None, None, None, "nothing recorded for this prompt")
        note = f"{why}; {est.basis if est else 'count unknown'}"
        recorded = self.recorded_versions[(prompt, load_prompt(prompts_dir(), prompt).version, settings.model)]
        if recorded:
            note += f"; {recorded} recorded calls of this prompt version and model may answer some"
        self.plan.rows.append(PlanRow(step, partition, settings.model, prompt, n, None, n, est, exact=False, note=note))

    # --- construction (build_benchmark, one shard) -------------------------------------------------
    def shard(self, shard: str) -> bool:
        """The shard's construction steps; returns whether its benchmark stays as in the warehouse
        (then the evaluation steps can build their requests exactly)."""
        images = self.wh.read("images", {"shard": shard})
        if images.empty:
            dataset, index = parse_shard_key(shard)
            records = [r for r in read_shard(load_registry(datasets_file())[dataset], index) if isinstance(r, Record)]
            images = pd.DataFrame(
                [
                    {"image_id": r.image_id, "caption": r.caption, "path": str(r.image_path), "status": "ok"}
                    for r in records
                ]
            )
        ok_images = images[images["status"] == "ok"] if len(images) else images
        stable = True

        texts, keys = caption_chunk_inputs(ok_images, self.settings.caption_chunk_words)
        self.dry_run("caption_tuples", shard, to_send(tuple_requests(texts, keys, ["image_id", "chunk"], caption=True)))
        stable = self._settled()

        graphs = self.wh.read("scene_graphs", {"shard": shard})
        if stable and len(graphs):
            plans = qa_generation_inputs(graphs, self.settings)
            gated = sum(v is not None for plan in plans for v in plan.gated)
            note = f"{gated} targets gated before wording (no request)" if gated else ""
            self.dry_run("qa_candidates", shard, [r for plan in plans for r in plan.requests], note=note)
        else:
            why = "scene graphs not built yet" if stable else "scene graphs will change first"
            self.estimated("qa_candidates", shard, "generate_qa", len(ok_images), f"{why}: one request per image")
        stable = stable and self._settled()

        qa = self.wh.read("verified_qa", {"shard": shard})
        # The answer-entailment gate reads each verified planned answer once (the request the `gold`
        # model's response_tuples sends later): those that reached it last time, when settled.
        if stable and len(qa):
            reached = qa["verdict"].isin(["kept", "filtered_unentailed", "flagged"]) & (qa["generator"] == "targeted")
            read = qa[reached & (qa["kind"] != "absent")]  # an absent-object "no" states nothing to read
            self.dry_run("verified_qa", shard, to_send(tuple_requests(list(read["answer"]))))
        else:
            why = "QA pairs not verified yet: one answer read per verified pair, about one per target"
            self.estimated("verified_qa", shard, "extract_tuples", len(ok_images) * self.settings.qa_targets, why)
        if self.settings.qa_filter_mode != "llm":
            pass  # the deterministic post-filter (PROVE_QA_FILTER=rules) sends nothing
        elif stable and len(qa):
            verified = int(qa["verdict"].isin(FILTERED_VERDICTS).sum())
            self._recorded_calls("verified_qa", shard, "filter_qa", "filter_call_id", verified, "one request a pair")
        else:
            why = "QA pairs not verified yet: one request per verified pair, about one per target"
            self.estimated("verified_qa", shard, "filter_qa", len(ok_images) * self.settings.qa_targets, why)
        stable = stable and self._settled()

        if stable:
            kept = qa[qa["verdict"] == "kept"]
            self.dry_run("answer_tuples", shard, to_send(tuple_requests(self._extracted_answers(shard, kept))))
        else:
            kept_n = int((qa["verdict"] == "kept").sum()) if len(qa) else None
            why = "kept pairs not known yet: one request per kept pair"
            self.estimated("answer_tuples", shard, "extract_tuples", kept_n, why)
        return stable and self._settled()

    def _extracted_answers(self, shard: str, kept: pd.DataFrame) -> list[str]:
        """The kept answers `answer_tuples` sends to tuple extraction: a planned pair's answer
        tuples are its target's facts (no request), a freely generated pair's answer is
        extracted (the asset's own selection, `planned_facts`)."""
        facts = planned_facts(self.wh.read("qa_candidates", {"shard": shard}))
        return [a for q, a in zip(kept["qa_id"], kept["answer"], strict=True) if q not in facts]

    def _settled(self) -> bool:
        """Whether the last step's output stays as it is (exactly known, nothing to send)."""
        return self.plan.rows[-1].exact and self.plan.rows[-1].to_send == 0

    def _recorded_calls(self, step: str, shard: str, prompt_name: str, column: str, requests: int, unit: str) -> None:
        """A construction step whose requests are built inside its asset (no request builder to
        call): with its inputs unchanged, its requests are those recorded for its current rows
        (`column` holds their call ids); a recorded call answers it again when it succeeded with
        the current prompt and model. Requests with no such call are to send."""
        prompt = load_prompt(prompts_dir(), prompt_name)
        rows = self.wh.read(step, {"shard": shard})
        if rows.empty or column not in rows:
            self.estimated(step, shard, prompt_name, requests, f"not built yet: {unit}")
            return
        ids = sorted({str(c) for c in rows[column].dropna()})
        calls = self.wh.query(
            "SELECT count(DISTINCT call_id) AS n FROM prove.llm_calls WHERE error IS NULL AND prompt_version = ? "
            "AND model = ? AND call_id IN (SELECT unnest(?::VARCHAR[]))",
            [prompt.version, self.llm.model, ids],
        )
        # The step may make one request per row rather than per `unit` (e.g. a per-pair filter):
        # then its recorded call ids are the count.
        requests = max(requests, len(ids))
        cached = min(requests, int(calls["n"].iloc[0])) if ids else 0
        to_send = requests - cached
        profile = pick_profile(self.profiles, prompt_name, self.llm.model)
        chars = profile.mean_chars if profile else 0.0
        est = estimate([(chars, self.llm.max_tokens)] * to_send, profile, self.llm.max_concurrency, llm_price())
        note = f"the recorded calls of its current rows ({unit})" + (f"; {est.basis}" if to_send else "")
        self.plan.rows.append(
            PlanRow(step, shard, self.llm.model, prompt_name, requests, cached, to_send, est, note=note)
        )

    # --- evaluation (evaluate_models, one shard x model) -----------------------------------------
    def evaluation(self, shard: str, spec: ModelSpec, benchmark_stable: bool) -> None:
        from prove_assets.backends.responders import Response

        part = f"{spec.name}|{shard}"
        config = self.settings
        qs = kept_questions(self.wh, shard)
        if not benchmark_stable:
            kept_n = len(qs) if len(self.wh.read("verified_qa", {"shard": shard}, columns=["qa_id"])) else None
            why = "the benchmark of this shard will be built or changed first" + (
                f"; {kept_n} kept pairs now" if kept_n is not None else ""
            )
            if spec.backend in ANSWER_PROMPTS:
                self.estimated(
                    "model_responses", part, ANSWER_PROMPTS[spec.backend], kept_n, why, *self._model_llm(spec)
                )
            self.estimated("response_tuples", part, "extract_tuples", kept_n, why)
            # A judge reads at most max_items responses (0 = all): a judgement + k samples each.
            judged = min(kept_n, config.judge_max_items or kept_n) if kept_n is not None else None
            for kind in config.judge_kinds:
                n = judged * (1 + config.judge_samples) if judged is not None else None
                self.estimated("judge_scores", part, f"judge_{kind}", n, why)
            return
        questions = [Question(r.qa_id, r.question, r.answer, r.caption, r.path) for r in qs.itertuples()]
        unknown = 0  # responses a run would get from the model: their text is not known yet
        if spec.backend == "gold":
            answers = [Response(q.answer) for q in questions]
            self.plan.rows.append(
                PlanRow("model_responses", part, spec.name, "", 0, 0, 0, None, note="the verified answers: no requests")
            )
        elif spec.backend in ANSWER_PROMPTS:
            settings, requests, bad = response_requests(spec, questions, prompts_dir())
            results = iter(self.dry_run("model_responses", part, requests, settings, model_price(spec)))
            answers = []
            for i in range(len(questions)):
                r = Response(None, error=bad[i]) if i in bad else _response(next(results))
                unknown += r.error is not None and r.error.startswith("not recorded")
                answers.append(r)
        else:  # transformers: a local model, no requests; its answers are known only after it runs
            answers = [Response(None, error="not recorded") for _ in questions]
            unknown = len(questions)
            self.plan.rows.append(
                PlanRow(
                    "model_responses",
                    part,
                    spec.name,
                    "",
                    0,
                    0,
                    0,
                    None,
                    note=f"local model: {len(questions)} answers, no requests",
                )
            )
        responses = pd.DataFrame(
            [
                {"qa_id": q.qa_id, "image_id": r.image_id, "response": a.response, "error": a.error}
                for q, r, a in zip(questions, qs.itertuples(), answers, strict=True)
                if not (a.error or "").startswith("not recorded")
            ],
            columns=["qa_id", "image_id", "response", "error"],
        )
        why = f"{unknown} responses are not known before the model answers: one request each"
        _, texts = response_tuple_inputs(responses)
        self._known_and_unknown("response_tuples", part, "extract_tuples", to_send(tuple_requests(texts)), unknown, why)
        flagged = flagged_pairs(self.wh, shard)
        for kind in config.judge_kinds:
            settings = judge_endpoint(kind, self.llm, config.judge_vlm_base_url, config.judge_vlm_model,
                                      config.judge_vlm_api_key_env)  # fmt: skip
            _, requests, _ = judge_inputs(kind, responses, qs.set_index("qa_id"), config.judge_max_items, flagged)
            variants = judge_variants(settings, config.judge_samples, config.judge_temperature)
            self._known_and_unknown("judge_scores", part, f"judge_{kind}", requests, unknown, why, settings, variants)

    def _known_and_unknown(
        self,
        step: str,
        part: str,
        prompt: str,
        requests: list[LLMRequest],
        unknown: int,
        why: str,
        settings: LLMSettings | None = None,
        variants: list[LLMSettings] | None = None,
    ) -> None:
        """The requests built from known inputs, exactly; then, for inputs known only after an
        upstream step sends its requests, an estimated row."""
        if requests or not unknown:
            self.dry_run(step, part, requests, settings, None, variants)
        if unknown:
            self.estimated(step, part, prompt, unknown * len(variants or [None]), why, settings)

    def _llm_price(self, settings: LLMSettings | None) -> Price | None:
        """The benchmark LLM's price (PROVE_LLM_PRICE_*) for its requests: construction, tuple
        extraction and judges on it; a model's own endpoint has its models.yaml price instead."""
        return llm_price() if settings is None or settings == self.llm else None

    def _model_llm(self, spec: ModelSpec) -> tuple[LLMSettings | None, Price | None]:
        if spec.backend == "openai":
            settings, _, _ = response_requests(spec, [], prompts_dir())
            return settings, model_price(spec)
        return None, llm_price()


def _response(result: Any) -> Any:
    from prove_assets.backends.responders import _from_results

    return _from_results([result])[0]


def build_plan(
    shards: list[str] | None = None,
    models: list[str] | None = None,
    llm: LLMSettings | None = None,
    warehouse: Warehouse | None = None,
    use_ledger: bool = True,
) -> Plan:
    """The plan of `prove-assets demo --shards ... --models ...` (default: every registered shard
    and model). `llm` is the construction LLM the run would use (default: from the environment)."""
    llm = llm or Settings.from_env().llm()
    registry = load_models(models_file())
    unknown = sorted(set(models or []) - set(registry))
    if unknown:
        raise ValueError(f"not in {models_file()}: {', '.join(unknown)}")
    planner = Planner(warehouse or Warehouse(warehouse_path()), llm, use_ledger)
    planner.plan.priced = planner.plan.priced or any(model_price(registry[m]) is not None for m in (models or registry))
    shards = shards or registered_shards(datasets_file())
    stable = {s: planner.shard(s) for s in shards}
    for s in shards:
        for m in models or list(registry):
            planner.evaluation(s, registry[m], stable[s])
    return planner.plan
