"""The human audit: sampling, marks, the Wilson report (core, no Dagster), then the CLI over a
warehouse: piped marks, `--mark`, `--list`, `--report`, and a pair marked wrong flagged (so it
leaves the benchmark on refresh, through `qa_flags`). stdin is replaced by a text stream, which
`input()` reads as it reads a pipe."""

from __future__ import annotations

import io
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from prove_assets.core.reports.audit import (
    audit_agreement,
    audit_report,
    audit_sample,
    current_marks,
    flag_action,
    flag_reason,
    kappa_with_interval,
    latest_marks,
    normalise_verdict,
    pair_verdicts,
    parse_answer,
    pass_majority,
    wilson_interval,
)
from prove_assets.core.reports.audit_page import audit_progress, fact_terms, highlight


def pool_of(n: int) -> pd.DataFrame:
    return pd.DataFrame({"qa_id": [f"img-{i:03d}" for i in range(n)], "shard": "s-000"})


def test_parse_answer():
    assert parse_answer("c") == parse_answer("correct ") == parse_answer("C")
    assert parse_answer("c").action == "correct" and parse_answer("w  the mug is blue ").note == "the mug is blue"
    assert parse_answer("irrelevant no sky in the photo").action == "irrelevant"
    assert [parse_answer(x).action for x in ("s", "q", "skip", "quit")] == ["skip", "quit", "skip", "quit"]
    for bad in ("", "x", "wrongish"):
        with pytest.raises(ValueError, match="is not one of"):
            parse_answer(bad)
    assert normalise_verdict("W") == "wrong"
    for bad in ("skip", "wrong because", "dunno"):
        with pytest.raises(ValueError, match="verdict must be"):
            normalise_verdict(bad)


def test_sample_is_fixed_seeded_and_skips_audited_pairs():
    pool = pool_of(50)
    first = audit_sample(pool, set(), 10, seed=0)
    assert len(first) == 10 and first.equals(audit_sample(pool, set(), 10, seed=0))
    assert set(first["qa_id"]) != set(audit_sample(pool, set(), 10, seed=1)["qa_id"])
    # Audited pairs are skipped without pulling others in: the sample stays the same 10.
    rest = audit_sample(pool, set(first["qa_id"][:4]), 10, seed=0)
    assert list(rest["qa_id"]) == list(first["qa_id"][4:])
    # A pair's place does not depend on the others: a grown pool keeps the old pairs' order.
    grown = audit_sample(pool_of(80), set(), None, seed=0)
    assert [q for q in grown["qa_id"] if q in set(pool["qa_id"])] == list(audit_sample(pool, set(), None, 0)["qa_id"])
    assert audit_sample(pool.iloc[:0], set(), 10, 0).empty


def test_latest_mark_counts():
    t0 = datetime(2026, 1, 1)
    log = pd.DataFrame(
        [
            {"qa_id": "a", "verdict": "wrong", "audited_at": t0},
            {"qa_id": "b", "verdict": "correct", "audited_at": t0},
            {"qa_id": "a", "verdict": "correct", "audited_at": t0 + timedelta(seconds=1)},
            {"qa_id": "b", "verdict": "irrelevant", "audited_at": t0},  # same time: the later row wins
        ]
    )
    assert dict(zip(*latest_marks(log)[["qa_id", "verdict"]].T.values, strict=True)) == {
        "a": "correct",
        "b": "irrelevant",
    }
    assert latest_marks(log.iloc[:0]).empty


def test_marks_count_only_for_pairs_still_in_the_benchmark_as_shown():
    marks = pd.DataFrame(
        [
            {"qa_id": "a", "question": "What color is the cup?", "answer": "Red.", "verdict": "wrong"},
            {"qa_id": "b", "question": "Is there a cat?", "answer": "No.", "verdict": "correct"},
            {"qa_id": "c", "question": "Where is the dog?", "answer": "On the rug.", "verdict": "correct"},
        ]
    )
    now = pd.DataFrame(
        [
            {"qa_id": "a", "question": "What color is the cup?", "answer": "Red."},  # still there (flagged)
            {"qa_id": "b", "question": "Is there a cat?", "answer": "No, there is no cat."},  # reworded
        ]
    )  # c was not rebuilt at all
    assert current_marks(marks, now)["qa_id"].tolist() == ["a"]
    assert current_marks(marks.iloc[:0], now).empty


def test_flag_follows_the_mark():
    assert flag_action("wrong", None) == "flag" and flag_action("irrelevant", "audit: wrong: x") == "flag"
    assert flag_action("correct", "audit: wrong: red is blue") == "unflag"
    # Another auditor's latest mark still flags the pair: one auditor's "correct" does not clear it.
    assert flag_action("correct", "audit: wrong: red is blue", flagged_by_others=True) is None
    assert flag_action("correct", "answer is wrong") is None  # a person's own flag stays
    assert flag_action("correct", None) is None
    assert (
        flag_reason("wrong", "red is blue") == "audit: wrong: red is blue"
        and flag_reason("wrong", "") == "audit: wrong"
    )


def test_wilson_interval():
    # 0 of 10: [0, z^2 / (n + z^2)] = [0, 0.2775]; the normal approximation would give [0, 0].
    lo, hi = wilson_interval(0, 10)
    assert lo == 0 and hi == pytest.approx(1.959964**2 / (10 + 1.959964**2), abs=1e-4)
    # 3 of 20 against the Wilson score formula.
    z, n, p = 1.959964, 20, 0.15
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    assert wilson_interval(3, 20) == pytest.approx((centre - half, centre + half), abs=1e-6)
    assert all(v != v for v in wilson_interval(0, 0))


def test_audit_report_rates_per_shard_and_generator():
    marks = pd.DataFrame(
        {
            "qa_id": [f"q{i}" for i in range(10)],
            "shard": ["s-000"] * 6 + ["s-001"] * 4,
            "generator": ["targeted"] * 5 + [None] * 5,  # before the generator column: 'free'
            "verdict": ["correct"] * 7 + ["wrong", "wrong", "irrelevant"],
        }
    )
    report = audit_report(marks).set_index(["scope", "group"])
    overall = report.loc[("all", "all")]
    assert (overall["audited"], overall["wrong"], overall["irrelevant"]) == (10, 2, 1)
    assert overall["wrong_pct"] == 20.0 and overall["wrong_lo"] < 20 < overall["wrong_hi"]
    assert report.loc[("shard", "s-001"), "wrong"] == 2 and report.loc[("shard", "s-000"), "wrong"] == 0
    assert report.loc[("generator", "free"), "audited"] == 5 and report.loc[("generator", "targeted"), "wrong"] == 0
    paper = report.loc[("PROVE paper", "human study (794 pairs)")]
    assert (paper["wrong_pct"], paper["irrelevant_pct"]) == (3.5, 1.4)
    empty = audit_report(marks.iloc[:0])
    assert list(empty["scope"]) == ["all", "PROVE paper"] and empty.iloc[0]["audited"] == 0


# --- storage and CLI over a warehouse ------------------------------------------------------


@pytest.fixture
def built(instance, prove_home):
    """A warehouse holding a shard's verified_qa and images as the benchmark writes them (5 kept
    pairs over 2 sample photos, one discarded pair), with the shard registered. Written directly:
    the audit reads these tables only, and building them needs no LLM."""
    from prove_assets.config import SAMPLE_DIR
    from prove_assets.storage.warehouse import Warehouse

    instance.add_dynamic_partitions("shards", ["mini-000"])
    wh = Warehouse(prove_home / "warehouse.duckdb")
    photos = sorted((SAMPLE_DIR / "images").iterdir())[:2]
    images = pd.DataFrame({"image_id": [p.stem for p in photos], "path": [str(p) for p in photos]})
    wh.replace_partition("images", images, {"shard": "mini-000"})
    qa = pd.DataFrame(
        {
            "qa_id": [f"{photos[i % 2].stem}-q{i}" for i in range(6)],
            "image_id": [photos[i % 2].stem for i in range(6)],
            "question": [f"What color is thing {i}?" for i in range(6)],
            "answer": [f"Thing {i} is red." for i in range(6)],
            "program_output": [f"Thing {i} is red." for i in range(6)],
            "verdict": ["kept"] * 5 + ["answer_mismatch"],
        }
    )
    wh.replace_partition("verified_qa", qa, {"shard": "mini-000"})
    return wh


def test_audit_cli_marks_flags_and_reports(built, monkeypatch, capsys):
    from prove_assets.cli import main

    wh = built
    kept = wh.read("verified_qa").query("verdict == 'kept'")
    assert len(kept) == 5
    capsys.readouterr()

    main(["audit", "--list", "--format", "json", "--n", "4"])
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 4 and {p["qa_id"] for p in listed} <= set(kept["qa_id"])
    assert all(Path(p["image_path"]).is_file() for p in listed) and {p["generator"] for p in listed} == {"free"}

    # Piped stdin: an invalid line is asked again, then wrong (with a note), skip, irrelevant,
    # correct; the input ends before the 5th pair (EOF quits).
    monkeypatch.setattr(sys, "stdin", io.StringIO("maybe\nw the cup is blue, not red\ns\ni no such object\nc\n"))
    main(["audit", "--n", "5", "--by", "tester"])
    out = capsys.readouterr().out
    assert "is not one of" in out and "[5/5]" in out and "recorded 3 mark(s)" in out and "prove-assets refresh" in out
    wrong_id, skipped_id, irrelevant_id, correct_id = (p["qa_id"] for p in listed)
    log = wh.read("qa_audit_log")
    assert list(log["verdict"]) == ["wrong", "irrelevant", "correct"] and set(log["audited_by"]) == {"tester"}
    flags = wh.read("qa_flag_log")
    assert list(flags["qa_id"]) == [wrong_id, irrelevant_id]
    assert list(flags["reason"]) == ["audit: wrong: the cup is blue, not red", "audit: irrelevant: no such object"]

    # The skipped pair is still to audit by this auditor; the marked ones are not. Another
    # auditor has all four still to audit.
    main(["audit", "--list", "--format", "json", "--n", "4", "--by", "tester"])
    assert [p["qa_id"] for p in json.loads(capsys.readouterr().out)] == [skipped_id]
    main(["audit", "--list", "--format", "json", "--n", "4", "--by", "someone else"])
    assert len(json.loads(capsys.readouterr().out)) == 4
    # The direct form: an unknown pair or verdict is a clear error.
    with pytest.raises(SystemExit, match="not a kept QA pair"):
        main(["audit", "--mark", "no-such-pair", "correct"])
    with pytest.raises(SystemExit, match="verdict must be"):
        main(["audit", "--mark", correct_id, "dunno"])
    capsys.readouterr()

    # The CLI materialized qa_flags: verified_qa honours it on refresh (the pair leaves the
    # benchmark, as `prove-assets flag` does) ...
    assert set(wh.read("qa_flags", {"shard": "mini-000"})["qa_id"]) == {wrong_id, irrelevant_id}
    # ... and the audit still counts it: 3 audited, 1 wrong, 1 irrelevant (the table the CLI updated).
    table = wh.read("qa_audit").set_index(["scope", "group"])
    assert (table.loc[("all", "all"), "audited"], table.loc[("all", "all"), "wrong"]) == (3, 1)
    main(["audit", "--report", "--format", "json"])
    tables = json.loads(capsys.readouterr().out)
    report = {(r["scope"], r["group"]): r for r in tables["rates"]}
    assert tables["agreement"] == []  # one auditor
    overall = report[("all", "all")]
    assert (overall["audited"], overall["wrong"], overall["irrelevant"], overall["correct"]) == (3, 1, 1, 1)
    assert overall["wrong_pct"] == 33.3 and 0 < overall["wrong_lo"] < 33.3 < overall["wrong_hi"] < 100
    assert report[("shard", "mini-000")]["audited"] == 3 and ("PROVE paper", "human study (794 pairs)") in report

    # Re-marked correct (the direct form): the latest mark counts and the audit's flag is taken back.
    main(["audit", "--mark", wrong_id, "c", "--note", "looked again", "--by", "tester"])
    assert wh.read("qa_flag_log").iloc[-1]["action"] == "unflag"
    assert set(wh.read("qa_flags", {"shard": "mini-000"})["qa_id"]) == {irrelevant_id}
    main(["audit", "--report"])
    assert "PROVE paper" in capsys.readouterr().out
    assert audit_report(latest_marks(wh.read("qa_audit_log"))).iloc[0]["wrong"] == 0


def test_an_exported_audit_imports_into_another_warehouse_once_and_only_for_pairs_as_shown(built, tmp_path, capsys):
    from prove_assets.cli import main
    from prove_assets.storage.audit import read_marks_file

    wh = built
    kept = sorted(wh.read("verified_qa").query("verdict == 'kept'")["qa_id"])
    main(["audit", "--mark", kept[0], "wrong", "--note", "the cup is blue", "--by", "ann"])
    main(["audit", "--mark", kept[1], "correct", "--by", "ann"])
    shared = tmp_path / "shared" / "marks.jsonl"
    main(["audit", "--export", str(shared)])
    assert len(shared.read_text().splitlines()) == 2

    # Another warehouse with the same pairs, except that kept[1] was rebuilt with other words,
    # and a file with one line that is no mark: the rebuilt pair's mark does not speak for it.
    with wh.connect() as con:
        con.execute("DELETE FROM prove.qa_audit_log")
        con.execute("DELETE FROM prove.qa_flag_log")
        con.execute("UPDATE prove.verified_qa SET answer = 'Thing 1 is blue.' WHERE qa_id = ?", [kept[1]])
    shared.write_text(shared.read_text() + "not json\n")
    capsys.readouterr()
    main(["audit", "--import", str(shared)])
    captured = capsys.readouterr()
    assert "line 3" in captured.err and "1 mark(s) are of pairs not in this benchmark" in captured.out
    assert "recorded 1 mark(s)" in captured.out
    log = wh.read("qa_audit_log")
    assert list(zip(log["qa_id"], log["verdict"], log["audited_by"], strict=True)) == [(kept[0], "wrong", "ann")]
    assert list(wh.read("qa_flag_log")["reason"]) == ["audit: wrong: the cup is blue"]
    # Importing again records nothing twice.
    main(["audit", "--import", str(shared)])
    assert "recorded 0 mark(s)" in capsys.readouterr().out and len(wh.read("qa_audit_log")) == 1
    marks, problems = read_marks_file(shared)
    assert len(marks) == 2 and problems == ["marks.jsonl line 3: Expecting value: line 1 column 1 (char 0)"]


def test_audit_report_counts_flawed_and_rates_per_question_kind():
    marks = pd.DataFrame(
        {
            "qa_id": [f"q{i}" for i in range(8)],
            "shard": ["s-000"] * 8,
            "generator": ["targeted"] * 8,
            "kind": ["where"] * 4 + ["which"] * 3 + [None],
            "verdict": ["correct", "wrong", "flawed", "correct", "correct", "correct", "flawed", "correct"],
        }
    )
    report = audit_report(marks).set_index(["scope", "group"])
    assert report.loc[("all", "all"), "flawed"] == 2 and report.loc[("all", "all"), "flawed_pct"] == 25.0
    assert (report.loc[("kind", "where"), "wrong"], report.loc[("kind", "where"), "flawed"]) == (1, 1)
    assert report.loc[("kind", "which"), "flawed_lo"] < 33.3 < report.loc[("kind", "which"), "flawed_hi"]
    assert report.loc[("kind", "free"), "audited"] == 1  # a pair without a kind: the paper's free generation
    # The paper's study had no flawed label: unknown, not 0.
    assert report.loc[("PROVE paper", "human study (794 pairs)"), "flawed_pct"] != 0
    assert normalise_verdict("f") == "flawed" and parse_answer("f the handle could be either").action == "flawed"


def test_two_auditors_are_kept_apart_and_compared():
    t0 = datetime(2026, 1, 1)
    rows = [
        # alice changes her mind on a; bob marks a, b, c; only alice marks d
        ("a", "alice", "wrong", 0), ("a", "alice", "correct", 1), ("b", "alice", "correct", 0),
        ("c", "alice", "wrong", 0), ("d", "alice", "flawed", 0),
        ("a", "bob", "correct", 0), ("b", "bob", "wrong", 0), ("c", "bob", "wrong", 0),
    ]  # fmt: skip
    log = pd.DataFrame(
        [{"qa_id": q, "audited_by": by, "verdict": v, "audited_at": t0 + timedelta(seconds=s)} for q, by, v, s in rows]
    ).assign(shard="s-000")
    latest = latest_marks(log)
    assert len(latest) == 7 and latest.query("qa_id == 'a' and audited_by == 'alice'")["verdict"].item() == "correct"
    # A pair counts once, with its most severe mark.
    assert dict(zip(pair_verdicts(latest)["qa_id"], pair_verdicts(latest)["verdict"], strict=True)) == {
        "a": "correct", "b": "wrong", "c": "wrong", "d": "flawed"
    }  # fmt: skip
    report = audit_report(latest).set_index(["scope", "group"])
    assert (report.loc[("all", "all"), "audited"], report.loc[("all", "all"), "wrong"]) == (4, 2)
    assert report.loc[("auditor", "alice"), "audited"] == 4 and report.loc[("auditor", "alice"), "wrong"] == 1
    assert report.loc[("auditor", "bob"), "audited"] == 3 and report.loc[("auditor", "bob"), "wrong"] == 2
    (row,) = audit_agreement(latest).to_dict("records")
    assert (row["auditor_a"], row["auditor_b"], row["both_marked"]) == ("alice", "bob", 3)
    assert row["agree_pct"] == pytest.approx(66.7)
    # Cohen's kappa by hand: po = 2/3; alice c 2, w 1; bob c 1, w 2; pe = (2*1 + 1*2) / 9 = 4/9.
    assert row["kappa"] == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9), abs=1e-3)
    assert row["kappa_lo"] <= row["kappa"] <= row["kappa_hi"]
    # One auditor: no agreement to report.
    assert audit_agreement(latest.query("audited_by == 'alice'")).empty and audit_agreement(latest.iloc[:0]).empty


def test_kappa_interval_is_seeded_and_undefined_for_one_label():
    a = ["correct"] * 30 + ["wrong"] * 10
    b = ["correct"] * 28 + ["wrong"] * 2 + ["wrong"] * 8 + ["correct"] * 2
    k1, k2 = kappa_with_interval(a, b, ["correct", "wrong"]), kappa_with_interval(a, b, ["correct", "wrong"])
    assert k1 == k2 and k1[1] < k1[0] < k1[2]
    kappa, lo, hi = kappa_with_interval(["correct"] * 5, ["correct"] * 5, ["correct", "wrong"])
    assert all(v != v for v in (kappa, lo, hi))  # both raters gave one label: kappa is undefined, not 1


def test_audit_page_highlights_the_pair_facts_in_the_caption():
    facts = [
        {"entity": "mug", "value": None, "predicate": "on", "target": "wooden shelf"},
        {"entity": "mug", "value": "dark blue", "predicate": None, "target": None},
        {"entity": "teapot", "value": None, "predicate": None, "target": None},
    ]
    terms = fact_terms(facts)
    assert terms == ["wooden shelf", "dark blue", "teapot", "mug"]  # "on" is in every caption
    caption = "Two dark-blue Mugs sit on a wooden shelf; a <b> label reads 'mug'."
    marked, missing = highlight(caption, terms)
    assert "<mark>dark-blue</mark> <mark>Mugs</mark>" in marked and "<mark>wooden shelf</mark>" in marked
    assert "&lt;b&gt;" in marked and missing == ["teapot"]
    # A phrase the caption never says is found by its last word.
    assert highlight("A shelf of books.", ["oak shelf"]) == ("A <mark>shelf</mark> of books.", [])
    queue = pd.DataFrame({"qa_id": ["p1", "p2", "p3"], "shard": "s", "image_id": ["x", "x", "y"]})
    progress = audit_progress(queue, {"p2": {}})
    assert progress.to_dict("records") == [
        {"shard": "s", "image_id": "x", "marked": 1, "total": 2},
        {"shard": "s", "image_id": "y", "marked": 0, "total": 1},
    ]


def test_audit_server_refuses_bad_marks_and_names_what_is_missing(built, tmp_path):
    """The audit server's routes without a browser (Starlette's test client): a malformed mark, an
    unknown pair, a pair rebuilt since shown, a repeated mark, a missing photo."""
    from starlette.testclient import TestClient

    from prove_assets.audit_server import AuditSession, build_app
    from prove_assets.storage.warehouse import SCHEMA

    wh = built
    session = AuditSession(wh, "tester")
    client = TestClient(build_app(session, tmp_path / "no-explorer"))
    first = client.get("/next", follow_redirects=False).headers["location"].removeprefix("/pair/")
    page = client.get(f"/pair/{first}")
    assert page.status_code == 200 and "0</span> of <span id='n-total'>5</span> marked" in page.text
    pair = wh.read("verified_qa").set_index("qa_id").loc[first]
    mark = {"qa_id": first, "verdict": "w", "note": "blue, not red", "question": pair.question, "answer": pair.answer}

    assert client.post("/api/mark", content=b"{not json").status_code == 400
    assert client.post("/api/mark", json={**mark, "verdict": "maybe"}).status_code == 400
    assert client.post("/api/mark", json={**mark, "qa_id": "no-such-pair"}).status_code == 409
    done = client.post("/api/mark", json=mark)
    assert done.status_code == 200 and done.json()["status"] == "recorded" and done.json()["marked"] == 1
    again = client.post("/api/mark", json=mark)  # a double click
    assert again.json()["status"] == "unchanged" and len(wh.read("qa_audit_log")) == 1
    assert session.recorded == 1 and session.flagged == {"mini-000"}
    # The pair is reworded after its page was shown: the mark is refused and says how it reads now.
    with wh.connect() as con:
        con.execute(f"UPDATE {SCHEMA}.verified_qa SET answer = 'Thing 0 is blue.' WHERE qa_id = ?", [first])
    refused = client.post("/api/mark", json={**mark, "verdict": "correct"})
    assert refused.status_code == 409 and "rebuilt since it was shown" in refused.json()["error"]
    assert "Thing 0 is blue." in refused.json()["error"] and len(wh.read("qa_audit_log")) == 1
    # An unknown pair's page, a photo that is not there, the marks for the explorer.
    assert client.get("/pair/no-such-pair").status_code == 404
    with wh.connect() as con:
        con.execute(f"UPDATE {SCHEMA}.images SET path = '/nonexistent/photo.jpg'")
    photo = client.get(f"/image/{first}")
    assert photo.status_code == 404 and "photo unavailable" in photo.text
    marks = client.get("/api/marks")
    assert marks.headers["access-control-allow-origin"] == "*" and marks.json() == {}  # the one mark was reworded
    # An imported mark without a note (NaN in the log) reads as an empty note, not a server error.
    second = client.get("/next", follow_redirects=False).headers["location"].removeprefix("/pair/")
    pair = wh.read("verified_qa").set_index("qa_id").loc[second]
    client.post("/api/mark", json={**mark, "qa_id": second, "question": pair.question, "answer": pair.answer})
    with wh.connect() as con:
        con.execute(f"UPDATE {SCHEMA}.qa_audit_log SET note = NULL")
    assert client.get("/api/marks").json() == {second: [{"by": "tester", "verdict": "wrong", "note": ""}]}
    assert client.get(f"/pair/{second}").status_code == 200
    missing = client.get("/explorer/index.html")
    assert missing.status_code == 404 and "no explorer at" in missing.text


def test_pass_majority_is_the_worse_of_two_and_a_majority_of_three():
    two = pd.DataFrame({"qa_id": ["a", "a", "b", "b"], "audited_by": ["p1", "p2"] * 2,
                        "verdict": ["correct", "flawed", "wrong", "flawed"]})  # fmt: skip
    assert pass_majority(two)["verdict"].tolist() == pair_verdicts(two)["verdict"].tolist() == ["flawed", "wrong"]
    three = pd.DataFrame({
        "qa_id": ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3,
        "audited_by": ["p1", "p2", "p3"] * 4,
        "verdict": ["wrong", "correct", "correct",   # one slip: kept
                    "wrong", "flawed", "correct",    # out; wrong and flawed tie: the more severe
                    "flawed", "flawed", "wrong",     # out as most passes say
                    "correct", "correct", "correct"],
    })  # fmt: skip
    got = pass_majority(three)
    assert got["verdict"].tolist() == ["correct", "wrong", "flawed", "correct"] and set(got["passes"]) == {3}
