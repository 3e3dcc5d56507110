"""Reports a person looks at: the PROVE explorer (static HTML) and the paper's figures."""

from collections.abc import Iterator

import dagster as dg
import pandas as pd

from prove_assets.backends.responders import load_models
from prove_assets.config import dagster_home, models_file
from prove_assets.core.reports.audit import current_marks, latest_marks
from prove_assets.core.reports.explorer import EXPLORER_DIR, TABLES, write_explorer
from prove_assets.defs.construction import verified_qa
from prove_assets.defs.reports import leaderboard, qa_audit
from prove_assets.defs.resources import WarehouseResource
from prove_assets.storage.audit import benchmark_pairs, read_audit_log
from prove_assets.storage.warehouse import Warehouse


def _registered(df: pd.DataFrame, models: set[str]) -> pd.DataFrame:
    return df[df["model"].isin(models)] if "model" in df else df


FIGURE_SCORE_COLUMNS = [
    "model",
    "scorer",
    "error",
    "question_type",
    "helpfulness",
    "truthfulness",
    "hallucinated_entities",
]


def _shard_tables(wh: Warehouse, registered: set[str]) -> Iterator[tuple[str, dict[str, pd.DataFrame]]]:
    """Each shard's rows of the explorer's tables, one shard at a time (memory: one shard), with
    the audit marks that speak for its pairs as they are now."""
    shards = wh.read("images", columns=["shard"])
    marks = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
    marks = marks.rename(columns={"audited_by": "by"}).reindex(columns=["qa_id", "shard", "by", "verdict", "note"])
    for shard in sorted(set(shards["shard"])) if len(shards) else []:
        tables = {name: wh.read(name, {"shard": shard}) for name in TABLES if name != "leaderboard"}
        for name in ("model_responses", "response_scores"):
            tables[name] = _registered(tables[name], registered)
        tables["audit_marks"] = marks[marks["shard"] == shard]
        yield shard, tables


@dg.asset(
    group_name="reports", deps=[leaderboard, verified_qa, qa_audit], code_version="2", kinds={"html", "matplotlib"}
)
def explorer(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """A self-contained static HTML explorer under `$DAGSTER_HOME/explorer/` (opens offline):
    an index with the leaderboard, the figures and a row per image (filters by model, verdict,
    question type and complexity), and a page per image: the photo, caption, scene graph and
    every generated QA pair, kept or discarded, with its program, output and verdict; per kept
    pair every model's response with supported tuples green and hallucinated tuples red, and its
    scores. Each QA pair is anchored by its qa_id on its image's page. Written one shard at a
    time, so its memory does not grow with the dataset. The figures (H vs T per model, scores
    by question type, construction funnel, most-hallucinated objects) are PNG files beside it
    and inline in this asset's metadata."""
    # matplotlib is imported here, not with the definitions: every run process imports those.
    from prove_assets.core.reports import plots

    wh = warehouse.get()
    # Like the leaderboard: models removed from the registry keep their rows but are not shown.
    registered = set(load_models(models_file()))
    board = _registered(wh.read("leaderboard"), registered).drop(columns=["run_id"], errors="ignore")
    # The figures need a few columns of the whole dataset, never the per-tuple JSON.
    scores = _registered(wh.read("response_scores", columns=FIGURE_SCORE_COLUMNS), registered)
    figures = plots.all_plots(board, scores, wh.read("verified_qa", columns=["verdict"]))
    del scores
    out = dagster_home() / EXPLORER_DIR
    summary = write_explorer(_shard_tables(wh, registered), board, out, figures)
    context.log.info(
        f"explorer: {summary.images} images, {summary.qa_pairs} QA pairs ({summary.kept} kept), "
        f"{summary.responses} responses of {len(summary.models)} models, {summary.bytes / 1e6:.1f} MB "
        f"-> {summary.index}"
    )
    titles = {
        "ht_tradeoff": "Helpfulness vs truthfulness",
        "by_question_type": "Scores by question type",
        "verdict_funnel": "Construction funnel",
        "hallucinated_objects": "Most-hallucinated objects",
    }
    return dg.MaterializeResult(
        metadata={
            "explorer": dg.MetadataValue.path(str(summary.index)),
            "explorer_url": dg.MetadataValue.url(summary.index.resolve().as_uri()),
            "images": dg.MetadataValue.int(summary.images),
            "qa_pairs": dg.MetadataValue.int(summary.qa_pairs),
            "kept": dg.MetadataValue.int(summary.kept),
            "responses": dg.MetadataValue.int(summary.responses),
            "size_bytes": dg.MetadataValue.int(summary.bytes),
            **{
                f"plot_{name}": dg.MetadataValue.md(plots.markdown_image(png, titles[name]))
                for name, png in figures.items()
            },
            "plot_files": dg.MetadataValue.md("\n".join(f"- `{out / 'plots' / (name + '.png')}`" for name in figures)),
        }
    )
