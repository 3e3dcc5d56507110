"""The benchmark built on held-out hand-written captions (no rule was written from them), as the
sample's is built: `build_benchmark` per set, then what a reader of the benchmark checks per set
(kept per image, question kinds, complex share, question and answer length, answer words given
away in the question), the verdicts each gate gave, and, where the audit marks file has marks of
these pairs, the audited error rates and each gate's catch of wrong pairs and loss of right ones.

The captions have no photos: each gets a blank placeholder image, since construction reads only
the caption. The sets are `bench/heldout/` and `bench/heldout2/` (captions.jsonl each);
`--sets dev` builds `bench/dev/` (likewise dev2, dev3, dev4), development captions rules may be
written from (its marks: `--marks bench/dev_audit.jsonl`). The recorded ledger holds the calls of
all of them.

Requests the recorded held-out ledger (`bench/heldout_ledger.jsonl.gz`) cannot answer go to the
configured construction LLM (the embedded model by default), so run it with a DAGSTER_HOME of
its own; the sample's ledger never grows from here:

    DAGSTER_HOME=/tmp/heldout-home python bench/heldout_construction.py            # build + report
    DAGSTER_HOME=/tmp/heldout-home python bench/heldout_construction.py --export-ledger
    DAGSTER_HOME=/tmp/heldout-home python bench/heldout_construction.py --report   # no build

Audit: `--audit-sheet FILE` writes every pair that reached the gates and has no mark yet (all of
them with `--again`: a second, independent pass, its auditors named `second-pass-...`; the report
gives the two passes' agreement), kept or not and without saying which, with its caption, for an
auditor who never sees the pipeline (the instructions the
audits so far were made under: `bench/audit_instructions.md`); `--add-marks FILE
--by NAME` adds their {"qa_id", "verdict", "note"} lines to the marks that ship in
`bench/heldout_audit.jsonl` (`--marks` for another file, e.g. the sample's with `--sets sample`
and the project's DAGSTER_HOME: only building refuses it). `prove-assets audit --import` of that
file under the same DAGSTER_HOME and PROVE_DATASETS (this script prints both) records the kept
pairs' marks, and `prove-assets audit --report` gives their rates per question kind.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SETS = ("heldout", "heldout2")
# Auditors of the second, independent blind pass (`--audit-sheet --again`) are named so.
SECOND = "second-pass"
LEDGER = BENCH / "heldout_ledger.jsonl.gz"
MARKS = BENCH / "heldout_audit.jsonl"


def prepare(home: Path, sets: list[str]) -> Path:
    """Captions with placeholder images and a datasets.yaml naming one dataset per set, under
    DAGSTER_HOME; returns the datasets file."""
    from PIL import Image

    lines = ["datasets:"]
    for name in sets:
        folder = home / "heldout_sets" / name
        (folder / "images").mkdir(parents=True, exist_ok=True)
        rows = [json.loads(line) for line in (BENCH / name / "captions.jsonl").read_text().splitlines() if line.strip()]
        with open(folder / "captions.jsonl", "w") as out:
            for row in rows:
                image = folder / "images" / f"{row['id']}.png"
                if not image.exists():
                    Image.new("RGB", (64, 64), (128, 128, 128)).save(image)
                out.write(json.dumps({"id": row["id"], "image": str(image), "caption": row["caption"]}) + "\n")
        lines += [f"  {name}:", "    loader: jsonl", f"    path: {folder / 'captions.jsonl'}", "    shard_size: 50"]
    path = home / "heldout_datasets.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def gives_away(kind: str, facts: list, question: str) -> list[str]:
    """Answer words the question already says: the values an attribute question asks for, and
    the end of a relation an around / activity / place question asks for.
    A "which things are X?" question names X and a comparison both
    things by design: those words are the names of what is asked about."""
    from prove_assets.core.construction.verify import fact_words, words

    said = words(question)
    out: set[str] = set()
    for f in facts:
        if f.kind == "attribute" and kind not in ("which", "compare", "absent"):
            out |= fact_words(f) & said
        elif f.kind == "relation" and kind in ("around", "activity", "place"):
            out |= (words(f.target or "") - words(f.entity or "")) & said
    return sorted(out)


def report(sets: list[str], marks_file: Path, third_file: Path | None = None) -> None:
    import pandas as pd

    from prove_assets.config import warehouse_location
    from prove_assets.core.construction.generation import facts_from_json
    from prove_assets.core.evaluation.scoring import question_type
    from prove_assets.core.reports.audit import (
        audit_agreement,
        audit_report,
        latest_marks,
        pair_verdicts,
        pass_majority,
        wilson_interval,
    )
    from prove_assets.storage.parquet_warehouse import open_warehouse

    wh = open_warehouse(warehouse_location())
    qa = wh.read("verified_qa")
    cands = wh.read("qa_candidates")
    facts = dict(zip(cands["qa_id"], cands["facts"], strict=True))
    marks = latest_marks(read_marks(marks_file)) if marks_file.exists() else pd.DataFrame()
    third = latest_marks(read_marks(third_file)) if third_file else pd.DataFrame()
    for name in sets:
        q = qa[qa["shard"] == f"{name}-000"]
        if q.empty:
            print(f"{name}: not built")
            continue
        kept = q[q["verdict"] == "kept"]
        images = q["image_id"].nunique()
        kinds = kept["question"].map(question_type).value_counts()
        leaks = sum(bool(gives_away(r.kind, facts_from_json(facts.get(r.qa_id)) or [], r.question))
                    for r in kept.itertuples())  # fmt: skip
        qwords = kept["question"].map(lambda s: len(s.split())).mean()
        awords = kept["answer"].map(lambda s: len(s.split())).mean()
        print(f"\n== {name}: {images} captions, {len(q)} candidates verified, {len(kept)} kept "
              f"({len(kept) / max(1, images):.1f} per caption), {len(kinds)} question types (largest "
              f"{kinds.index[0] if len(kinds) else '-'} {kinds.iloc[0] / max(1, len(kept)):.0%}), complex "
              f"{(kept['complexity'] == 'complex').mean():.0%}, question {qwords:.1f} words, answer {awords:.1f}, "
              f"pairs whose question says an answer word {leaks}")  # fmt: skip
        print("question types: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
        print("planned kinds: " + ", ".join(f"{k} {v}" for k, v in kept["kind"].value_counts().items()))
        verdicts = q["verdict"].value_counts()
        print("verdicts (gates): " + ", ".join(f"{k} {v}" for k, v in verdicts.items()))
        if marks.empty:
            continue
        m = marks.merge(q[["qa_id", "question", "answer", "verdict", "kind"]], on=["qa_id", "question", "answer"],
                        suffixes=("", "_now"))  # fmt: skip
        if m.empty:
            continue
        now = m[m["verdict_now"].isin(["kept", "flagged"])]
        print(f"audited pairs kept now: {now['qa_id'].nunique()} of {len(kept)} kept")
        table = audit_report(now.assign(shard=name))
        print(table[table["scope"].isin(["all", "kind", "auditor"])].to_string(index=False))
        # Two independent blind passes over the same pairs: how far the marks depend on the auditor.
        pass_of = now["audited_by"].map(lambda a: SECOND if a.startswith(SECOND) else "first pass")
        passes = now.assign(audited_by=pass_of)
        agreement = audit_agreement(passes)
        if len(agreement):
            print("agreement of the two blind passes on the kept pairs (Cohen's kappa, 95% bootstrap interval):")
            print(agreement.round(2).to_string(index=False))
        if not third.empty:
            # A third blind pass, in a file of its own so the figures above stay the worse of two
            # marks: the majority of the three passes (`pass_majority`) on the kept pairs all three marked.
            marked_third = third.merge(kept[["qa_id", "question", "answer"]], on=["qa_id", "question", "answer"])
            each = [pair_verdicts(marks_of).assign(audited_by=name) for name, marks_of in
                    (("first pass", now[pass_of != SECOND]), (SECOND, now[pass_of == SECOND]),
                     ("third pass", marked_third)) if len(marks_of)]  # fmt: skip
            three = pd.concat(each)[["qa_id", "audited_by", "verdict"]]
            majority = pass_majority(three)
            majority = majority[majority["passes"] == 3]
            print(f"majority of three blind passes on the {len(majority)} kept pairs all three marked:")
            for name, verdicts in [*((p, three[three["audited_by"] == p]) for p in three["audited_by"].unique()),
                                   ("majority", majority)]:  # fmt: skip
                verdicts = verdicts[verdicts["qa_id"].isin(majority["qa_id"])]
                n, parts = len(verdicts), []
                for v in ("wrong", "flawed"):
                    k = int((verdicts["verdict"] == v).sum())
                    lo, hi = wilson_interval(k, n)
                    parts.append(f"{v} {k} = {100 * k / max(1, n):.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]")
                print(f"  {name}: " + ", ".join(parts))
            print(audit_agreement(three).round(2).to_string(index=False))
        # A pair counts once, with its most severe mark, as in the report above.
        gate = pair_verdicts(m[~m["verdict_now"].isin(["kept", "flagged"])])
        if len(gate):
            print("gates on audited pairs (dropped now: marked correct / wrong / flawed / irrelevant):")
            print(pd.crosstab(gate["verdict_now"], gate["verdict"]).to_string())


# Verdicts of pairs that reached the gates: what an audit sheet shows, so each gate's catch of
# wrong pairs and loss of right ones is measured on the same marks as the kept pairs.
GATED = ("kept", "flagged", "filtered_ambiguous", "filtered_incomplete", "filtered_untrusted", "filtered_trivial",
         "filtered_unnatural", "filtered_unentailed")  # fmt: skip


def audit_sheet(sets: list[str], path: Path, marks: Path, again: bool = False) -> None:
    """Every pair that reached the gates, kept or not (the sheet does not say which), in a fixed
    shuffled order, with its caption: what an auditor who never sees the pipeline marks. Pairs
    already marked in their present wording are left out unless `again` (a second, independent
    pass, for the auditors' agreement)."""
    import hashlib

    from prove_assets.config import warehouse_location
    from prove_assets.storage.parquet_warehouse import open_warehouse

    wh = open_warehouse(warehouse_location())
    qa = wh.read("verified_qa").merge(wh.read("images")[["image_id", "caption"]], on="image_id")
    # A target gated before it was worded (PROVE_QA_WORD_GATED=0) has no pair to judge.
    qa = qa[qa["verdict"].isin(GATED) & qa["shard"].isin([f"{s}-000" for s in sets]) & qa["question"].notna()]
    # A mark holds for the wording it judged: a pair re-worded since (same qa_id) is audited again.
    done = read_marks(marks) if marks.exists() else None
    marked = set(zip(done["qa_id"], done["question"], done["answer"], strict=True)) if done is not None else set()
    if not again:
        qa = qa[[k not in marked for k in zip(qa["qa_id"], qa["question"], qa["answer"], strict=True)]]
    qa = qa.assign(_rank=qa["qa_id"].map(lambda q: hashlib.sha256(q.encode()).hexdigest())).sort_values("_rank")
    with open(path, "w") as out:
        for r in qa.itertuples():
            out.write(json.dumps({"qa_id": r.qa_id, "caption": r.caption, "question": r.question,
                                  "answer": r.answer}) + "\n")  # fmt: skip
    print(f"wrote {len(qa)} pairs to audit to {path} ({len(marked)} marked before{', included' if again else ''})")


def read_marks(path: Path) -> Any:
    """The marks of a shipped marks file (a DataFrame)."""
    from prove_assets.storage.audit import read_marks_file

    return read_marks_file(path)[0]


def add_marks(path: Path, by: str, marks: Path) -> None:
    """An auditor's {"qa_id", "verdict", "note"} lines, completed from the warehouse (the pair as it
    was shown) and appended to the shipped marks file."""
    from datetime import UTC, datetime

    from prove_assets.config import warehouse_location
    from prove_assets.core.reports.audit import normalise_verdict
    from prove_assets.storage.parquet_warehouse import open_warehouse

    qa = open_warehouse(warehouse_location()).read("verified_qa").set_index("qa_id")
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")
    added = 0
    with open(marks, "a") as out:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            mark = json.loads(line)
            pair = qa.loc[mark["qa_id"]]
            out.write(json.dumps({
                "qa_id": mark["qa_id"], "shard": pair["shard"], "image_id": pair["image_id"],
                "generator": pair["generator"], "verdict": normalise_verdict(mark["verdict"]),
                "note": mark.get("note") or "", "audited_by": by, "audited_at": now, "question": pair["question"],
                "answer": pair["answer"], "program_output": pair["program_output"],
            }) + "\n")  # fmt: skip
            added += 1
    print(f"added {added} marks by {by} to {marks}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="*", default=[s for s in SETS if (BENCH / s / "captions.jsonl").exists()])
    parser.add_argument("--report", action="store_true", help="only report the built benchmark")
    parser.add_argument(
        "--export-ledger", action="store_true", help=f"add the live calls of this DAGSTER_HOME to {LEDGER.name}"
    )
    parser.add_argument("--audit-sheet", type=Path, help="write the pairs still to audit (blind) to this file")
    parser.add_argument("--again", action="store_true", help="with --audit-sheet: include pairs already marked")
    parser.add_argument("--add-marks", type=Path, help="append an auditor's marks file to the marks file")
    parser.add_argument("--by", default="auditor", help="with --add-marks: who marked")
    parser.add_argument("--marks", type=Path, default=MARKS, help=f"the marks file (default {MARKS.name})")
    parser.add_argument(
        "--third", type=Path, help="a third blind pass's marks file: the report adds the majority of three passes"
    )
    args = parser.parse_args()
    # Every target worded, so an audit judges every gate (the gate table's catch and loss); a
    # user's run skips the wording of targets a gate drops first (`PROVE_QA_WORD_GATED=0`).
    os.environ.setdefault("PROVE_QA_WORD_GATED", "1")
    build = not (args.report or args.export_ledger or args.audit_sheet or args.add_marks)
    home = Path(os.environ.get("DAGSTER_HOME", "")).resolve()
    if build and (not os.environ.get("DAGSTER_HOME") or home == (BENCH.parent / "dagster_home").resolve()):
        sys.exit("set DAGSTER_HOME to a folder of its own: the sample's recorded ledger must not grow from here")
    if all((BENCH / s / "captions.jsonl").exists() for s in args.sets):
        home.mkdir(parents=True, exist_ok=True)
        os.environ["PROVE_DATASETS"] = str(prepare(home, args.sets))
        print(f"export DAGSTER_HOME={home} PROVE_DATASETS={os.environ['PROVE_DATASETS']}  # for prove-assets audit")

    from prove_assets.backends.llm import export_ledger, import_ledger
    from prove_assets.config import LEDGER_PATH, warehouse_location
    from prove_assets.settings import Settings
    from prove_assets.storage.parquet_warehouse import open_warehouse

    wh = open_warehouse(warehouse_location())
    if args.export_ledger:
        # Added to what the file holds, so the calls of builds in other DAGSTER_HOMEs stay.
        with gzip.open(LEDGER, "rt") as before:
            calls = {json.loads(line)["call_id"]: line for line in before}
        fresh = home / "heldout_ledger_export.jsonl.gz"
        export_ledger(wh, fresh, Settings.from_env().llm_model)
        with gzip.open(fresh, "rt") as exported:
            for line in exported:
                calls.setdefault(json.loads(line)["call_id"], line)
        fresh.unlink()
        # Only the held-out calls: the sample's recorded ones (loaded by the gateway) ship in its own ledger.
        with gzip.open(LEDGER_PATH, "rt") as recorded:
            sample = {json.loads(line)["call_id"] for line in recorded}
        kept = sorted(
            (line for c, line in calls.items() if c not in sample), key=lambda line: json.loads(line)["created_at"]
        )
        with gzip.open(LEDGER, "wt") as out:
            out.writelines(kept)
        print(f"wrote {len(kept)} calls to {LEDGER}")
        return
    if args.audit_sheet:
        audit_sheet(args.sets, args.audit_sheet, args.marks, args.again)
        return
    if args.add_marks:
        add_marks(args.add_marks, args.by, args.marks)
        return
    if build:
        from prove_assets.orchestration import get_instance, run_steps

        if LEDGER.exists():
            print(f"{import_ledger(wh, LEDGER)} recorded held-out calls loaded from {LEDGER.name}")
        instance = get_instance()
        from prove_assets.definitions import register_partitions

        register_partitions(instance)
        run_steps(instance, [("build_benchmark", f"{s}-000") for s in args.sets], "WARNING")
    report(args.sets, args.marks, args.third)


if __name__ == "__main__":
    main()
