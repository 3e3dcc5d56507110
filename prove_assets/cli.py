"""`prove-assets`: run PROVE headless and read its results.

prove-assets demo               register partitions, build the benchmark, evaluate, print
prove-assets leaderboard        print Table 1 with 95% bootstrap intervals (--format table|csv|json, --scorer ...)
prove-assets calibrate          each scorer's detection of injected hallucinations (--format table|json)
prove-assets run-program FILE   run one verification program in the sandbox
prove-assets plan               requests a run would send (cached vs to send), tokens, wall time, cost
prove-assets lineage QA_ID      trace a QA pair: caption, tuples, LLM calls, program, every model's score
prove-assets stale              list stale asset-partitions with their causes
prove-assets refresh            re-materialize exactly those
prove-assets add-model NAME --backend B [--set k=v] [--run]   register a model, backfill only its partitions
prove-assets flag QA_ID --reason TEXT / unflag QA_ID   a person's verdict on a QA pair
prove-assets audit [--shard S] [--n N] [--seed K]   mark kept pairs correct / wrong / irrelevant / flawed (stdin too)
prove-assets audit --mark QA_ID VERDICT [--note T] / --list / --report   the same, scripted; the audit's error rates
prove-assets audit --serve [--port P] [--by NAME]   the same in the browser: photo, caption, pair, one click per mark
prove-assets register           add datasets.yaml shards and models.yaml models as partitions
prove-assets export-ledger      write the embedded model's recorded calls (the ledger)
prove-assets compare-evaluators the guide's evaluators beside PROVE's H and T (--format table|json)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from prove_assets.config import LEDGER_PATH, warehouse_location
from prove_assets.core.reports.audit import AUDIT_PORT
from prove_assets.settings import Settings
from prove_assets.storage.parquet_warehouse import open_warehouse
from prove_assets.storage.warehouse import SCHEMA, Warehouse


def _print_df(df: pd.DataFrame, fmt: str = "table") -> None:
    if fmt == "json":
        print(df.to_json(orient="records", indent=2))
    elif fmt == "csv":
        print(df.to_csv(index=False), end="")
    else:
        # "-" rather than NaN: a leaderboard cell is empty when the split has no QA pairs.
        print(df.to_string(index=False, na_rep="-") if len(df) else "(no rows)")


def _metadata_sum(results: list[Any], key: str) -> int:
    total = 0
    for res in results:
        for ev in res.get_asset_materialization_events():
            value = ev.materialization.metadata.get(key)
            total += int(value.value) if value is not None else 0
    return total


def _llm_failures(results: list[Any]) -> list[str]:
    """'asset [partition]: N of M requests failed, most often ... -> what to change', per step;
    every failed call is in prove.llm_calls (error, error_kind)."""
    out = []
    for res in results:
        for ev in res.get_asset_materialization_events():
            mat = ev.materialization
            cause = mat.metadata.get("llm_failure")
            if cause is not None:
                where = mat.asset_key.to_user_string() + (f" [{mat.partition}]" if mat.partition else "")
                out.append(f"{where}: {cause.value}")
    if out:
        out.append(f"every failed request: SELECT * FROM {SCHEMA}.llm_calls WHERE error IS NOT NULL")
    return out


def _skip_preflight(args: argparse.Namespace) -> None:
    if getattr(args, "skip_preflight", False):
        from prove_assets.backends.endpoints import SKIP_PREFLIGHT_ENV

        os.environ[SKIP_PREFLIGHT_ENV] = "1"  # the steps' own check reads it too


def cmd_demo(args: argparse.Namespace) -> None:
    _skip_preflight(args)
    started = time.monotonic()
    from prove_assets.orchestration import run_pipeline

    results = run_pipeline(args.shards, args.models, args.log_level)
    wh = open_warehouse(warehouse_location())
    print(f"\nBuilt in {time.monotonic() - started:.0f} s. Warehouse: {wh.path} (schema {SCHEMA})")
    # information_schema, not duckdb_tables(): the Parquet warehouse's tables are views.
    names = wh.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name", [SCHEMA]
    )["table_name"]
    counts = " UNION ALL ".join(f"SELECT '{n}' AS table_name, count(*) AS rows FROM {SCHEMA}.\"{n}\"" for n in names)
    tables = wh.query(f"SELECT * FROM ({counts}) ORDER BY table_name") if counts else pd.DataFrame()
    _print_df(tables)
    print(
        "\nLLM requests this demo: "
        f"{_metadata_sum(results, 'llm_requests_sent')} sent to the model, "
        f"{_metadata_sum(results, 'llm_requests_cached')} answered from the recorded cache, "
        f"{_metadata_sum(results, 'llm_requests_failed')} failed"
    )
    for cause in _llm_failures(results):
        print(f"  {cause}")
    print("\nQA verdicts (benchmark = kept):")
    _print_df(
        wh.query(
            f"SELECT verdict, count(*) AS n, round(100.0 * count(*) / sum(count(*)) OVER (), 1) AS pct "
            f"FROM {SCHEMA}.verified_qa GROUP BY verdict ORDER BY n DESC"
        )
    )
    print("\nLeaderboard (PROVE Table 1; H = helpfulness, T = truthfulness, in %):")
    cmd_leaderboard(argparse.Namespace(format="table", long=False, scorer="all"))
    calibration = wh.read("metric_calibration")
    if len(calibration):
        print("\nHow far to trust it: share of injected errors each scorer catches (`prove-assets calibrate`):")
        caught = calibration.assign(caught=calibration["detection_recall"].fillna(calibration["false_alarm_rate"]))
        table = caught.pivot(index="perturbation", columns="scorer", values="caught")
        table["n"] = caught.groupby("perturbation")["n"].first()
        _print_df(table.reset_index().rename(columns={"perturbation": "perturbation (paraphrase: false alarms)"}))


def cmd_leaderboard(args: argparse.Namespace) -> None:
    from prove_assets.core.reports.leaderboard import interval_table, wide_table

    wh = open_warehouse(warehouse_location())
    board = wh.read("leaderboard")
    if "model" not in board:
        raise SystemExit("no leaderboard yet: run `make demo` (or materialize the `report` job)")
    board = board.drop(columns=["run_id"])
    if args.scorer != "all":
        board = board[board["scorer"] == args.scorer]
    if args.format == "table" and not args.long:
        _print_df(wide_table(board))
        print(f"truthfulness verified against: {', '.join(sorted(set(board['truth_source'])))}")
        if "helpfulness_lo" in board:
            print("\n95% bootstrap intervals over QA pairs (1,000 resamples, fixed seed), full subset:")
            _print_df(interval_table(board))
    else:
        _print_df(board, args.format)


def cmd_calibrate(args: argparse.Namespace) -> None:
    """The scorers' calibration table; materializes `metric_calibration` first if it is missing."""
    wh = open_warehouse(warehouse_location())
    table = wh.read("metric_calibration")
    if table.empty or args.refresh:
        from prove_assets.orchestration import get_instance, run_steps

        run_steps(get_instance(), [("calibrate", None)], args.log_level)
        table = wh.read("metric_calibration")
    cols = ["scorer", "perturbation", "n", "detection_recall", "false_alarm_rate", "mean_delta_h", "mean_delta_t"]
    if args.format == "json":
        print(json.dumps(json.loads(table[cols].to_json(orient="records")), indent=2))
    else:
        _print_df(table[[*cols, "meets_target"]])
        print("detection_recall: share of injected hallucinations (or dropped facts) the scorer flags;")
        print("false_alarm_rate: share of faithful paraphrases it flags. Cases: prove.metric_calibration_cases")


def cmd_run_program(args: argparse.Namespace) -> None:
    from prove_assets.core.sandbox import run_program

    source = Path(args.file).read_text()
    if args.scene_graph:
        from prove_assets.core.scene_graph_io import SceneGraphFormatError, read_scene_graph_file

        try:
            sg_json = read_scene_graph_file(Path(args.scene_graph))
        except SceneGraphFormatError as exc:
            raise SystemExit(f"invalid scene graph: {exc}") from None
    else:
        df = open_warehouse(warehouse_location()).read("scene_graphs", {"image_id": args.image})
        if df.empty:
            raise SystemExit(f"no scene graph for image {args.image!r} in {warehouse_location()}")
        sg_json = df.iloc[0]["scene_graph"]
    r = run_program(source, sg_json, timeout_s=args.timeout)
    print(
        json.dumps(
            {
                "output": r.output,
                "visited": r.visited,
                "verdict": r.verdict,
                "reason": r.reason,
                "seconds": round(r.seconds, 4),
            },
            indent=2,
        )
    )


def cmd_plan(args: argparse.Namespace) -> None:
    """What `demo` (or a backfill of these shards x models) would send, before sending anything."""
    from prove_assets.planning import build_plan

    try:
        plan = build_plan(args.shards, args.models)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    table = plan.table()
    if args.format == "json":
        print(table.to_json(orient="records", indent=2))
        return
    _print_df(table.where(table.notna(), "-"))
    print("requests: what the step asks; cached: answered by a recorded call (prove.llm_calls, or the recorded ledger")
    print("for the embedded model); to send: new requests. ~ = an estimate (inputs not built yet), ? = not known yet.")
    if not plan.priced:
        print("No price configured: PROVE_LLM_PRICE_IN / PROVE_LLM_PRICE_OUT (per 1k tokens), or price_in / price_out")
        print("of a models.yaml entry, add a cost column.")


def cmd_lineage(args: argparse.Namespace) -> None:
    from prove_assets.storage.lineage import LineageError, format_lineage, qa_lineage

    try:
        chain = qa_lineage(open_warehouse(warehouse_location()), args.qa_id)
    except LineageError as exc:
        raise SystemExit(str(exc)) from None
    link = explorer_link(args.qa_id, chain.get("shard"))
    if args.json:
        print(json.dumps({**chain, "explorer": link}, indent=2, default=str))
    else:
        print(format_lineage(chain))
        print(f"\nEXPLORER  {link or 'not built yet: materialize the `report` job (make demo)'}")


def explorer_link(qa_id: str, shard: str | None = None) -> str | None:
    """The QA pair's anchor on its image's page of the explorer (`file://.../pages/...html#qa_id`;
    the index's anchor when the shard is not given); None while there is no explorer."""
    from prove_assets.config import dagster_home
    from prove_assets.core.reports.explorer import explorer_index, qa_link

    index = explorer_index(dagster_home())
    return qa_link(index, qa_id, shard) if index.is_file() else None


def cmd_stale(args: argparse.Namespace) -> None:
    from prove_assets.orchestration import find_stale

    items = find_stale()
    if args.json:
        print(json.dumps([{"asset": i.asset, "partition": i.partition, "causes": i.causes} for i in items], indent=2))
        return
    if not items:
        print("nothing is stale")
    for i in items:
        print(f"{i.asset} [{i.partition or 'unpartitioned'}]: {'; '.join(i.causes)}")


def cmd_refresh(args: argparse.Namespace) -> None:
    from prove_assets.orchestration import find_stale, refresh

    _skip_preflight(args)
    results = refresh(log_level=args.log_level)
    print(f"refreshed {len(results)} asset-partitions; stale now: {len(find_stale())}")


def cmd_add_model(args: argparse.Namespace) -> None:
    from prove_assets.orchestration import add_model, backfill_model

    settings = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        settings[key] = yaml.safe_load(value) if value else ""
    add_model(args.name, args.backend, settings)
    print(f"added {args.name} ({args.backend}) to the model registry")
    _skip_preflight(args)
    if args.run:
        backfill_model(args.name, args.log_level)
        cmd_leaderboard(argparse.Namespace(format="table", long=False, scorer="all"))
    else:
        # The partition now, not at the registry sensor's next tick (up to 30 s, and only while the
        # daemon runs): the model is selectable in the UI's launch dialog at once.
        from prove_assets.definitions import register_partitions
        from prove_assets.orchestration import get_instance

        with get_instance() as instance:
            register_partitions(instance)
        print(
            f"{args.name} is a partition of `models`: in the UI, evaluation group -> Materialize all -> "
            f"model {args.name}, shard All -> Launch backfill; then materialize leaderboard"
        )


def cmd_flag(args: argparse.Namespace) -> None:
    from prove_assets.orchestration import flag_qa

    action = "unflag" if args.command == "unflag" else "flag"
    try:
        shard = flag_qa(args.qa_id, action, getattr(args, "reason", "") or "")
    except LookupError as exc:
        raise SystemExit(str(exc)) from None
    print(
        f"{action}ged {args.qa_id}. verified_qa[{shard}] is now stale: `prove-assets refresh` applies it "
        f"(the pair {'leaves' if action == 'flag' else 'returns to'} the benchmark and the leaderboard)."
    )


def _audit_pairs(wh: Warehouse, args: argparse.Namespace) -> pd.DataFrame:
    from prove_assets.core.reports.audit import audit_sample
    from prove_assets.storage.audit import audit_pool, auditor_name, marks_by

    try:
        pool = audit_pool(wh, args.shard, args.image)
    except LookupError as exc:
        raise SystemExit(str(exc)) from None
    # Pairs this auditor has not marked; a pair rebuilt with other words since its mark is offered again.
    audited = set(marks_by(wh, auditor_name(args.by))["qa_id"])
    return audit_sample(pool, audited, None if args.all else args.n, args.seed)


def _show_pair(i: int, total: int, pair: Any) -> None:
    print(f"\n[{i}/{total}] {pair.qa_id}  (shard {pair.shard}, generator {pair.generator})")
    print(f"  image:          {pair.image_path or '(no path: image ' + str(pair.image_id) + ')'}")
    print(f"  question:       {pair.question}")
    print(f"  answer:         {pair.answer}")
    print(f"  program output: {pair.program_output}")


def cmd_audit(args: argparse.Namespace) -> None:
    """The human audit of kept pairs: `--report` prints the error rates, `--list` the pairs to
    audit, `--mark` records one mark; otherwise each pair is shown and a line is read from stdin
    (`c`, `w`, `i`, `s`, `q`, optionally followed by a note), interactive or piped."""
    from prove_assets.core.reports.audit import audit_agreement, audit_report, current_marks, latest_marks, parse_answer
    from prove_assets.orchestration import apply_audit
    from prove_assets.storage.audit import benchmark_pairs, read_audit_log, record_audit

    wh = open_warehouse(warehouse_location())
    if args.report:
        latest = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
        report, agreement = audit_report(latest), audit_agreement(latest)
        if args.format == "json":
            tables = {"rates": report, "agreement": agreement}
            print(json.dumps({k: json.loads(t.to_json(orient="records")) for k, t in tables.items()}, indent=2))
        else:
            _print_df(report)
            print(
                "wrong / irrelevant / flawed in % of audited pairs now in the benchmark (latest mark per auditor, as"
                " shown; a pair counts with its most severe mark), [lo, hi] = 95% Wilson interval"
            )
            if len(agreement):
                print()
                _print_df(agreement)
                print(
                    "agreement on the pairs both auditors marked: Cohen's kappa over the four verdicts and over keep /"
                    " take out, [lo, hi] = 95% bootstrap interval"
                )
        return
    if args.serve:
        from prove_assets.audit_server import AuditSession, serve
        from prove_assets.config import dagster_home
        from prove_assets.core.reports.explorer import EXPLORER_DIR
        from prove_assets.storage.audit import auditor_name

        session = AuditSession(
            wh, auditor_name(args.by), args.shard, args.image, None if args.all else args.n, args.seed
        )
        try:
            session.queue()
        except LookupError as exc:
            raise SystemExit(str(exc)) from None
        serve(session, args.port, dagster_home() / EXPLORER_DIR)
        if session.recorded:
            apply_audit(session.flagged, args.log_level)
        _audit_done(session.recorded, session.flagged)
        return
    if args.export:
        from prove_assets.storage.audit import export_marks

        print(f"wrote {export_marks(wh, Path(args.export))} mark(s) to {args.export}")
        return
    if args.import_file:
        from prove_assets.storage.audit import import_marks, read_marks_file

        marks, problems = read_marks_file(Path(args.import_file))
        for problem in problems:
            print(f"skipped {problem}", file=sys.stderr)
        imported, stale, flagged = import_marks(wh, marks)
        if stale:
            print(f"{stale} mark(s) are of pairs not in this benchmark as shown (rebuilt since, or not built here)")
        apply_audit(flagged, args.log_level)
        _audit_done(imported, flagged)
        return
    if args.mark:
        qa_id, verdict = args.mark
        try:
            write = record_audit(wh, qa_id, verdict, args.note, args.by)
        except (LookupError, ValueError) as exc:
            raise SystemExit(str(exc)) from None
        apply_audit({write.shard} if write.action else set(), args.log_level)
        _audit_done(int(write.recorded), {write.shard} if write.action else set())
        return
    pairs = _audit_pairs(wh, args)
    if args.list:
        if args.format == "json":
            print(json.dumps(json.loads(pairs.to_json(orient="records")), indent=2))
        else:
            _print_df(pairs[["qa_id", "shard", "image_id", "generator", "question", "answer", "program_output"]])
        return
    if pairs.empty:
        print("nothing to audit: every pair of this sample is audited (a larger --n, another --seed or --all)")
        return
    print(
        f"{len(pairs)} pairs to audit. Per pair type c(orrect), w(rong: the answer is not true of the image, "
        "does not answer the question or leaves out what it asks for), i(rrelevant: the question does not fit the "
        "image), f(lawed: ambiguous, unnatural or trivial), s(kip) or q(uit), optionally followed by a note."
    )
    marked, flagged = 0, set()
    for i, pair in enumerate(pairs.itertuples(), 1):
        _show_pair(i, len(pairs), pair)
        answer = None
        while answer is None:
            try:
                line = input("  mark [c/w/i/f/s/q] (+ note): ")
            except EOFError:
                line = "q"
            try:
                answer = parse_answer(line)
            except ValueError as exc:
                print(f"  {exc}")
        if answer.action == "quit":
            break
        if answer.action == "skip":
            continue
        write = record_audit(wh, pair.qa_id, answer.action, answer.note, args.by)
        marked += write.recorded
        if write.action:
            flagged.add(write.shard)
    if marked:
        apply_audit(flagged, args.log_level)
    _audit_done(marked, flagged)


def _audit_done(marked: int, flagged: set[str]) -> None:
    print(f"\nrecorded {marked} mark(s) in prove.qa_audit_log; the qa_audit report is updated.")
    if flagged:
        print(
            f"flags changed in {', '.join(sorted(flagged))}: `prove-assets refresh` takes pairs marked wrong, "
            "irrelevant or flawed out of the benchmark (and returns pairs re-marked correct)."
        )


def cmd_register(args: argparse.Namespace) -> None:
    from prove_assets.definitions import register_partitions
    from prove_assets.orchestration import get_instance

    added = register_partitions(get_instance())
    print(json.dumps(added or {"added": "nothing new"}, indent=2))


def cmd_export_ledger(args: argparse.Namespace) -> None:
    from prove_assets.backends.llm import export_ledger

    model = Settings.from_env().llm_model

    n = export_ledger(open_warehouse(warehouse_location()), Path(args.path), model)
    print(f"wrote {n} recorded calls of {model} to {args.path}")


def cmd_compare_evaluators(args: argparse.Namespace) -> None:
    """The agreement report (asset `evaluator_agreement`): per model each evaluator beside H and
    T, rank correlations with PROVE, and the judges' self-consistency."""
    from prove_assets.core.evaluation.evaluators import agreement_vs_prove

    wh = open_warehouse(warehouse_location())
    per_model, corr, consistency, injected = (
        wh.read(t).drop(columns=["run_id"], errors="ignore")
        for t in ("evaluator_agreement", "evaluator_correlations", "judge_consistency", "evaluator_calibration")
    )
    if per_model.empty:
        raise SystemExit("no evaluator agreement yet: run `make demo` (or materialize evaluator_agreement)")
    if args.format == "json":
        out = {
            name: json.loads(df.to_json(orient="records"))
            for name, df in (
                ("per_model", per_model),
                ("correlations", corr),
                ("self_consistency", consistency),
                ("injected_hallucinations", injected),
            )
        }
        print(json.dumps(out, indent=2))
        return
    print("Per model (%; judges: mean rubric score 1-5, pass = score >= 4):")
    _print_df(per_model.dropna(axis=1, how="all"))
    print("\nRank correlation with PROVE (Spearman rho, Kendall tau) across models and across responses:")
    _print_df(agreement_vs_prove(corr).dropna(axis=1, how="all"))
    print("\nJudge self-consistency (k repeated judgements at temperature > 0, different seeds):")
    _print_df(consistency)
    print("\nInjected hallucinations (calibration cases): share flagged (recall; false alarms for paraphrases):")
    _print_df(injected)


SKIP_PREFLIGHT_HELP = (
    "do not check the LLM endpoints (GET /models) before the run (servers without /models; "
    "same as PROVE_SKIP_PREFLIGHT=1)"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="prove-assets", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="materialize the whole pipeline headless and print the results")
    p.add_argument("--shards", nargs="*", help="shard keys (default: every shard in datasets.yaml)")
    p.add_argument("--models", nargs="*", help="model names (default: every model in models.yaml)")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--skip-preflight", action="store_true", help=SKIP_PREFLIGHT_HELP)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("leaderboard", help="print the leaderboard")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("--long", action="store_true", help="one row per scorer x model x subset")
    p.add_argument(
        "--scorer",
        choices=["all", "paper", "strict"],
        default="all",
        help="the paper's soft scorer, the strict one, or both",
    )
    p.set_defaults(func=cmd_leaderboard)
    p = sub.add_parser("calibrate", help="how well each scorer catches injected hallucinations (metric_calibration)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--refresh", action="store_true", help="re-materialize metric_calibration first")
    p.add_argument("--log-level", default="WARNING")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("run-program", help="run a verification program in the sandbox, print JSON")
    p.add_argument("file")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--image", help="use this image's scene graph from the warehouse")
    g.add_argument(
        "--scene-graph",
        help='a scene graph JSON file: {"caption", "sg_dict"} (the seed form), a bare sg_dict, '
        "or the node-link export of prove.scene_graphs",
    )
    p.add_argument("--timeout", type=float, default=2.0)
    p.set_defaults(func=cmd_run_program)
    p = sub.add_parser("plan", help="requests a demo/backfill would send, cached vs to send, tokens, time, cost")
    p.add_argument("--shards", nargs="*", help="shard keys (default: every shard in datasets.yaml)")
    p.add_argument("--models", nargs="*", help="model names (default: every model in models.yaml)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("lineage", help="trace one QA pair from image to every model's score")
    p.add_argument("qa_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_lineage)
    p = sub.add_parser("stale", help="list stale asset-partitions and why")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stale)
    p = sub.add_parser("refresh", help="re-materialize exactly the stale asset-partitions")
    p.add_argument("--log-level", default="WARNING")
    p.add_argument("--skip-preflight", action="store_true", help=SKIP_PREFLIGHT_HELP)
    p.set_defaults(func=cmd_refresh)
    p = sub.add_parser("add-model", help="register a model; --run backfills only its partitions")
    p.add_argument("name")
    p.add_argument("--backend", required=True, help="gold | caption_oracle | blind | openai | transformers")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a backend setting, e.g. model=gpt-4o-mini")
    p.add_argument(
        "--run", action="store_true", help="then materialize its shard x model partitions and the leaderboard"
    )
    p.add_argument("--log-level", default="WARNING")
    p.add_argument("--skip-preflight", action="store_true", help=SKIP_PREFLIGHT_HELP)
    p.set_defaults(func=cmd_add_model)
    p = sub.add_parser("flag", help="record a person's verdict that a QA pair is bad")
    p.add_argument("qa_id")
    p.add_argument("--reason", required=True)
    p.set_defaults(func=cmd_flag)
    p = sub.add_parser("unflag", help="take a flag back (nothing is deleted: the log keeps both)")
    p.add_argument("qa_id")
    p.set_defaults(func=cmd_flag)
    p = sub.add_parser("audit", help="a person marks kept QA pairs correct/wrong/irrelevant/flawed (the human study)")
    p.add_argument("--shard", help="only this shard's pairs")
    p.add_argument("--image", action="append", help="only this image's pairs (repeatable)")
    p.add_argument("--n", type=int, default=20, help="size of the fixed random sample (default 20)")
    p.add_argument("--all", action="store_true", help="every kept pair (of --shard / --image), not a sample")
    p.add_argument("--seed", type=int, default=0, help="which fixed random sample (default 0)")
    p.add_argument("--by", help="who audits (default: the OS user); each auditor's marks are kept apart")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--mark", nargs=2, metavar=("QA_ID", "VERDICT"), help="record one mark: correct|wrong|irrelevant|flawed"
    )
    mode.add_argument("--list", action="store_true", help="print the pairs still to audit, ask nothing")
    mode.add_argument(
        "--serve", action="store_true", help="audit in the browser: a page per pair on http://127.0.0.1:PORT/"
    )
    mode.add_argument(
        "--report",
        action="store_true",
        help="error rates with 95%% Wilson intervals, per auditor too, and two auditors' kappa",
    )
    mode.add_argument("--export", metavar="FILE", help="write every mark to a JSON-lines file (to share an audit)")
    mode.add_argument(
        "--import", dest="import_file", metavar="FILE",
        help="record the marks of such a file whose pairs are in the benchmark as they were shown",
    )  # fmt: skip
    p.add_argument("--note", default="", help="with --mark: why")
    p.add_argument(
        "--port", type=int, default=AUDIT_PORT, help=f"with --serve: the port on 127.0.0.1 (default {AUDIT_PORT})"
    )
    p.add_argument("--format", choices=["table", "json"], default="table", help="for --list and --report")
    p.add_argument("--log-level", default="WARNING")
    p.set_defaults(func=cmd_audit)
    p = sub.add_parser("register", help="add registry shards and models as Dagster partitions")
    p.set_defaults(func=cmd_register)
    p = sub.add_parser("export-ledger", help="export the embedded model's recorded calls")
    p.add_argument("--path", default=str(LEDGER_PATH))
    p.set_defaults(func=cmd_export_ledger)
    p = sub.add_parser("compare-evaluators", help="VQA match, token F1, CHAIR and rubric judges beside PROVE")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_compare_evaluators)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
