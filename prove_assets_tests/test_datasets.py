"""Tests for the dataset loaders (prove_assets.core.datasets).

- read_shard on a hostile JSONL: every good line is a Record, every bad line a Skip with a
  specific reason (malformed JSON, non-UTF-8, empty caption, missing image, duplicate id,
  oversized caption, non-object JSON), and nothing raises;
- sharding: shard counts, keys, positions covering the file exactly once;
- the DOCCI loader: split filter, image paths under images/;
- inspect_image on good and broken files; load_registry path resolution and config errors;
- the bundled sample: every caption loads, every image decodes, every id has gold tuples.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR
from prove_assets.core.datasets import (
    DatasetConfigError,
    DatasetSpec,
    Record,
    Skip,
    inspect_image,
    load_registry,
    parse_shard_key,
    read_shard,
    shard_count,
    shard_key,
)
from prove_assets.core.tuples import parse_tuples

SAMPLE_JPEG = SAMPLE_DIR / "images" / "coffee.jpg"


def _jsonl_spec(path: Path, **kw) -> DatasetSpec:
    return DatasetSpec(name="t", loader="jsonl", path=path, **kw)


def _line(**obj) -> bytes:
    return json.dumps(obj).encode()


# --- read_shard on bad lines ------------------------------------------------------------------
@pytest.fixture
def hostile_jsonl(tmp_path: Path) -> Path:
    lines = [
        _line(id="a", image="images/a.jpg", caption="A red   cup\non a table."),  # 1 good
        b'{"id": "b", "image": "images/b.jpg", "caption": "unterminated',  # 2 malformed
        b'{"id": "c", "image": "c.jpg", "caption": "caf\xe9 \xff\xfe"}',  # 3 not UTF-8
        _line(id="d", image="d.jpg", caption=""),  # 4 empty caption
        _line(id="e", caption="no image field here"),  # 5 missing image
        _line(id="a", image="images/a2.jpg", caption="Same id again."),  # 6 duplicate id
        _line(id="f", image="f.jpg", caption="word " * 10_000),  # 7 50,000 characters
        b'["g", "g.jpg", "a caption"]',  # 8 an array
        b"",  # blank lines are not entries
        _line(image="/abs/path/h.png", caption="An absolute path, the id from the stem."),  # 10 good
        _line(id="i", image="i.jpg", caption="   "),  # 11 whitespace-only caption
        _line(id="j", image="j.jpg", caption=12345),  # 12 caption not a string
        b"42",  # 13 a number
    ]
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_read_shard_reports_every_bad_line(hostile_jsonl: Path) -> None:
    items = read_shard(_jsonl_spec(hostile_jsonl), 0)
    by_pos = {item.position: item for item in items}
    assert sorted(by_pos) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13]

    records = [i for i in items if isinstance(i, Record)]
    assert [(r.position, r.image_id) for r in records] == [(1, "a"), (10, "h")]
    a = by_pos[1]
    assert a.caption == "A red cup on a table."  # whitespace normalised
    assert a.image_path == hostile_jsonl.parent / "images" / "a.jpg"  # relative to the file
    assert a.dataset == "t"
    assert by_pos[10].image_path == Path("/abs/path/h.png")

    expected = {
        2: (None, "malformed JSON"),
        3: (None, "not UTF-8"),
        4: ("d", "missing or empty field(s): caption"),
        5: ("e", "missing or empty field(s): image"),
        6: ("a", "duplicate id"),
        7: ("f", "50000 characters, over max_caption_chars=20000"),
        8: (None, "expected a JSON object, got list"),
        11: ("i", "caption is not a non-empty string"),
        12: ("j", "caption is not a non-empty string"),
        13: (None, "expected a JSON object, got int"),
    }
    for pos, (image_id, reason) in expected.items():
        item = by_pos[pos]
        assert isinstance(item, Skip), (pos, item)
        assert item.image_id == image_id, pos
        assert reason in item.reason, (pos, item.reason)


def test_max_caption_chars_is_configurable(hostile_jsonl: Path) -> None:
    items = read_shard(_jsonl_spec(hostile_jsonl, max_caption_chars=100_000), 0)
    f = next(i for i in items if i.position == 7)
    assert isinstance(f, Record) and len(f.caption) == 49_999  # trailing space stripped


def test_duplicate_ids_skipped_across_shards(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    ids = ["x", "y", "x", "z", "y"]
    path.write_text("\n".join(json.dumps({"id": i, "image": f"{i}.jpg", "caption": "c"}) for i in ids))
    spec = _jsonl_spec(path, shard_size=2)
    shards = [read_shard(spec, k) for k in range(shard_count(spec))]
    kinds = [[type(i).__name__ for i in s] for s in shards]
    assert kinds == [["Record", "Record"], ["Skip", "Record"], ["Skip"]]
    recorded = [i.image_id for s in shards for i in s if isinstance(i, Record)]
    assert recorded == ["x", "y", "z"]


def test_missing_dataset_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetConfigError, match="not found"):
        read_shard(_jsonl_spec(tmp_path / "nope.jsonl"), 0)


# --- sharding ---------------------------------------------------------------------------------
def test_sharding_covers_every_entry_once(tmp_path: Path) -> None:
    path = tmp_path / "seven.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"i{n}", "image": f"{n}.jpg", "caption": f"c{n}"}) + "\n" for n in range(7))
    )
    spec = _jsonl_spec(path, shard_size=3)
    assert shard_count(spec) == 3
    shards = [read_shard(spec, k) for k in range(3)]
    assert [len(s) for s in shards] == [3, 3, 1]
    positions = [i.position for s in shards for i in s]
    assert positions == list(range(1, 8))
    assert all(isinstance(i, Record) for s in shards for i in s)
    with pytest.raises(ValueError, match="3 shards"):
        read_shard(spec, 3)
    with pytest.raises(ValueError):
        read_shard(spec, -1)


def test_shard_count_edges(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("")
    spec = _jsonl_spec(path, shard_size=3)
    assert shard_count(spec) == 1  # an empty dataset still has one (empty) shard
    assert read_shard(spec, 0) == []
    path.write_text("".join(json.dumps({"image": f"{n}.jpg", "caption": "c"}) + "\n" for n in range(6)))
    assert shard_count(spec) == 2  # exact multiple: no trailing empty shard


def test_shard_keys_round_trip() -> None:
    assert shard_key("docci_test", 7) == "docci_test-007"
    assert parse_shard_key("docci_test-007") == ("docci_test", 7)
    assert parse_shard_key(shard_key("sample", 1234)) == ("sample", 1234)
    for bad in ("sample", "sample-", "-001", "sample-x1"):
        with pytest.raises(ValueError, match="shard key"):
            parse_shard_key(bad)


# --- DOCCI ------------------------------------------------------------------------------------
def test_docci_loader_split_filter_and_image_paths(tmp_path: Path) -> None:
    root = tmp_path / "docci"
    (root / "images").mkdir(parents=True)
    rows = [
        {
            "example_id": "train_01",
            "split": "train",
            "image_file": "train_01.jpg",
            "description": "A train photo.",
        },
        {
            "example_id": "test_01",
            "split": "test",
            "image_file": "test_01.jpg",
            "description": "A  test photo.",
        },
        {
            "example_id": "train_02",
            "split": "train",
            "image_file": "train_02.jpg",
            "description": "Another.",
        },
        {"example_id": "test_02", "split": "test", "image_file": "test_02.jpg", "description": ""},
        {
            "example_id": "test_03",
            "split": "test",
            "image_file": "test_03.jpg",
            "description": "Third test.",
        },
    ]
    lines = [json.dumps(r).encode() for r in rows] + [b"\xff\xfe not utf-8"]
    (root / "docci_descriptions.jsonlines").write_bytes(b"\n".join(lines) + b"\n")

    test = DatasetSpec(name="docci_test", loader="docci", path=root, split="test", shard_size=10)
    items = read_shard(test, 0)
    records = [i for i in items if isinstance(i, Record)]
    assert [r.image_id for r in records] == ["test_01", "test_03"]
    assert [r.position for r in records] == [2, 5]  # line numbers in the shared file
    assert all(r.split == "test" for r in records)
    assert records[0].image_path == root / "images" / "test_01.jpg"
    assert records[0].caption == "A test photo."
    skips = {i.position: i for i in items if isinstance(i, Skip)}
    assert "description" in skips[4].reason and skips[4].image_id == "test_02"
    assert "not UTF-8" in skips[6].reason  # cannot be attributed to a split: reported
    assert shard_count(test) == 1 and len(items) == 4

    train = DatasetSpec(name="docci_train", loader="docci", path=root, split="train", shard_size=1)
    assert shard_count(train) == 3  # two train lines + the undecodable one
    got = [read_shard(train, k)[0] for k in range(3)]
    assert [g.image_id for g in got] == ["train_01", "train_02", None]

    everything = DatasetSpec(name="docci_all", loader="docci", path=root, shard_size=100)
    assert sum(isinstance(i, Record) for i in read_shard(everything, 0)) == 4


# --- inspect_image ----------------------------------------------------------------------------
def test_inspect_real_image() -> None:
    import hashlib

    info = inspect_image(SAMPLE_JPEG)
    assert (info.width, info.height) == (600, 400)
    assert info.sha256 == hashlib.sha256(SAMPLE_JPEG.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match="max_image_pixels"):
        inspect_image(SAMPLE_JPEG, max_pixels=1000)


def test_inspect_broken_images(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(SAMPLE_JPEG.read_bytes()[:2048])
    text = tmp_path / "text.jpg"
    text.write_text("this is not a picture\n")
    cases = {
        empty: "empty (0 bytes)",
        truncated: "truncated",
        text: "unreadable image text.jpg",
        tmp_path / "missing.jpg": "not found",
        tmp_path: "not found",  # a directory is not an image file
    }
    for path, reason in cases.items():
        with pytest.raises(ValueError) as info:
            inspect_image(path)
        assert reason in str(info.value), (path, str(info.value))


# --- load_registry ----------------------------------------------------------------------------
def test_load_registry_resolves_relative_paths(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    reg = conf / "datasets.yaml"
    reg.write_text(
        "datasets:\n"
        "  mine:\n    loader: jsonl\n    path: data/captions.jsonl\n    shard_size: 7\n"
        "  docci_test:\n    loader: docci\n    path: /data/docci\n    split: test\n"
    )
    specs = load_registry(reg)
    assert set(specs) == {"mine", "docci_test"}
    assert specs["mine"].path == (conf / "data" / "captions.jsonl").resolve()
    assert specs["mine"].shard_size == 7 and specs["mine"].split is None
    assert specs["docci_test"].path == Path("/data/docci")
    assert specs["docci_test"].split == "test" and specs["docci_test"].shard_size == 50


@pytest.mark.parametrize(
    "body, match",
    [
        ("datasets:\n  Bad-Name:\n    loader: jsonl\n    path: x.jsonl\n", "lowercase"),
        ("datasets:\n  ok:\n    loader: csv\n    path: x.csv\n", "loader"),
        ("datasets:\n  ok:\n    loader: jsonl\n", "path"),
        ("datasets:\n  ok: just-a-string\n", "loader"),
    ],
)
def test_load_registry_rejects_bad_config(tmp_path: Path, body: str, match: str) -> None:
    reg = tmp_path / "datasets.yaml"
    reg.write_text(body)
    with pytest.raises(DatasetConfigError, match=match):
        load_registry(reg)


def test_load_registry_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetConfigError, match="not found"):
        load_registry(tmp_path / "absent.yaml")


# --- the bundled sample -----------------------------------------------------------------------
def test_project_registry_sample_loads_completely() -> None:
    spec = load_registry(PROJECT_ROOT / "datasets.yaml")["sample"]
    assert spec.path == (SAMPLE_DIR / "captions.jsonl").resolve()
    n_lines = len([x for x in spec.path.read_text().splitlines() if x.strip()])
    items = [i for k in range(shard_count(spec)) for i in read_shard(spec, k)]
    assert len(items) == n_lines >= 9
    assert all(isinstance(i, Record) for i in items), [i for i in items if isinstance(i, Skip)]
    gold = json.loads((SAMPLE_DIR / "gold_tuples.json").read_text())
    for rec in items:
        assert rec.image_path.parent == SAMPLE_DIR / "images"
        info = inspect_image(rec.image_path)
        assert info.width >= 256 and info.height >= 256
        assert len(rec.caption.split()) >= 80, rec.image_id
        tuples = parse_tuples(gold[rec.image_id])
        kinds = {t.kind for t in tuples}
        assert kinds == {"entity", "attribute", "relation"}, rec.image_id
    assert set(gold) - {"_note"} == {r.image_id for r in items}
    assert len({r.image_id for r in items}) == len(items)
