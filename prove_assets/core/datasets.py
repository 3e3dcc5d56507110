"""Dataset loaders: DOCCI and a generic JSONL, registered by config (`datasets.yaml`).

A dataset is cut into shards of `shard_size` entries in file order; shard `i` of dataset
`name` has the partition key `name-000i`. Every entry of a shard becomes either a Record or a
Skip with a reason: one bad line never fails a shard.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from prove_assets.core.json_input import loads_json, yaml_registry_section

_NAME = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    loader: str  # "jsonl" | "docci"
    path: Path  # jsonl file, or the DOCCI folder holding docci_descriptions.jsonlines + images/
    split: str | None = None
    shard_size: int = 50
    max_caption_chars: int = 20_000
    max_image_pixels: int = 60_000_000


@dataclass(frozen=True)
class Record:
    position: int  # entry index within the dataset (1-based line for jsonl)
    image_id: str
    image_path: Path
    caption: str
    dataset: str
    split: str | None


@dataclass(frozen=True)
class Skip:
    position: int
    image_id: str | None
    reason: str


@dataclass(frozen=True)
class ImageInfo:
    sha256: str
    width: int
    height: int


class DatasetConfigError(ValueError):
    pass


def load_registry(path: Path) -> dict[str, DatasetSpec]:
    """Read `datasets.yaml`: {datasets: {name: {loader, path, split?, shard_size?}}}; relative
    paths are relative to the file. Raises DatasetConfigError naming the file otherwise."""
    section = yaml_registry_section(Path(path), "datasets", DatasetConfigError, "dataset")
    specs: dict[str, DatasetSpec] = {}
    for name, cfg in section.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise DatasetConfigError(f"{path}: dataset name {name!r}: use lowercase letters, digits and _ only")
        if (
            not isinstance(cfg, dict)
            or cfg.get("loader") not in ("jsonl", "docci")
            or not cfg.get("path")
            or not isinstance(cfg["path"], str)
        ):
            raise DatasetConfigError(f"{path}: dataset {name!r} needs loader: jsonl|docci and path")
        split = cfg.get("split")
        if split is not None and not isinstance(split, str | int):  # `split: 2017` is read as a number
            raise DatasetConfigError(f"{path}: dataset {name!r}: split must be a string")
        data_path = Path(cfg["path"]).expanduser()
        if not data_path.is_absolute():
            data_path = (Path(path).parent / data_path).resolve()
        try:
            shard_size = int(cfg.get("shard_size", 50))
            max_pixels = int(cfg.get("max_image_pixels", 60_000_000))
            max_caption_chars = int(cfg.get("max_caption_chars", 20_000))
        except (TypeError, ValueError, OverflowError):  # OverflowError: `.inf`
            raise DatasetConfigError(
                f"{path}: dataset {name!r}: shard_size, max_image_pixels and max_caption_chars must be integers"
            ) from None
        if shard_size < 1:
            raise DatasetConfigError(f"{path}: dataset {name!r}: shard_size must be >= 1")
        specs[name] = DatasetSpec(
            name=name,
            loader=cfg["loader"],
            path=data_path,
            split=None if split is None else str(split),
            shard_size=shard_size,
            max_image_pixels=max_pixels,
            max_caption_chars=max_caption_chars,
        )
    return specs


def shard_key(dataset: str, index: int) -> str:
    return f"{dataset}-{index:03d}"


def parse_shard_key(key: str) -> tuple[str, int]:
    name, _, index = key.rpartition("-")
    if not name or not index.isdigit():
        raise ValueError(f"not a shard key: {key!r} (expected DATASET-NNN)")
    return name, int(index)


def _raw_lines(path: Path) -> list[bytes]:
    if not path.exists():
        raise DatasetConfigError(f"dataset file {path} not found")
    return path.read_bytes().removeprefix(b"\xef\xbb\xbf").splitlines()


def _entries(spec: DatasetSpec) -> list[tuple[int, bytes]]:
    """(position, raw line) of every entry of the dataset, in order. DOCCI keeps the chosen
    split plus undecodable lines (they cannot be attributed to a split and must be reported)."""
    if spec.loader == "jsonl":
        return [(i + 1, line) for i, line in enumerate(_raw_lines(spec.path)) if line.strip()]
    lines = _raw_lines(spec.path / "docci_descriptions.jsonlines")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = loads_json(line)
            keep = not spec.split or (isinstance(obj, dict) and obj.get("split") == spec.split)
        except (json.JSONDecodeError, UnicodeDecodeError):
            keep = True
        if keep:
            out.append((i + 1, line))
    return out


def shard_count(spec: DatasetSpec) -> int:
    n = len(_entries(spec))
    return max(1, -(-n // spec.shard_size))


def _parse(spec: DatasetSpec, position: int, line: bytes) -> Record | Skip:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skip(position, None, f"line is not UTF-8 ({exc.reason} at byte {exc.start})")
    try:
        obj: Any = loads_json(text)
    except json.JSONDecodeError as exc:
        return Skip(position, None, f"malformed JSON: {exc.msg} (column {exc.colno})")
    if not isinstance(obj, dict):
        return Skip(position, None, f"expected a JSON object, got {type(obj).__name__}")
    if spec.loader == "docci":
        image_id, image, caption = obj.get("example_id"), obj.get("image_file"), obj.get("description")
        image_path = spec.path / "images" / str(image)
        split = obj.get("split")
        missing = [k for k, v in (("example_id", image_id), ("image_file", image), ("description", caption)) if not v]
    else:
        image, caption = obj.get("image"), obj.get("caption")
        image_id = obj.get("id") or (Path(str(image)).stem if image else None)
        image_path = Path(str(image))
        image_path = image_path if image_path.is_absolute() else spec.path.parent / image_path
        split = obj.get("split", spec.split)
        missing = [k for k, v in (("image", image), ("caption", caption)) if not v]
    if missing:
        return Skip(position, str(image_id) if image_id else None, f"missing or empty field(s): {', '.join(missing)}")
    if not isinstance(caption, str) or not caption.strip():
        return Skip(position, str(image_id), "caption is not a non-empty string")
    if len(caption) > spec.max_caption_chars:
        return Skip(
            position,
            str(image_id),
            f"caption has {len(caption)} characters, over max_caption_chars={spec.max_caption_chars}",
        )
    return Record(position, str(image_id), image_path, " ".join(caption.split()), spec.name, split)


def read_shard(spec: DatasetSpec, index: int) -> list[Record | Skip]:
    """Records and skips of one shard. Duplicate ids are skipped after their first occurrence
    in the whole dataset, so the same id never lands in two shards."""
    entries = _entries(spec)
    lo, hi = index * spec.shard_size, (index + 1) * spec.shard_size
    if index < 0 or (lo >= len(entries) and index > 0):
        raise ValueError(f"dataset {spec.name} has {shard_count(spec)} shards; no shard {index}")
    seen: set[str] = set()
    out: list[Record | Skip] = []
    for n, (position, line) in enumerate(entries[:hi]):
        item = _parse(spec, position, line)
        if isinstance(item, Record):
            if item.image_id in seen:
                item = Skip(position, item.image_id, "duplicate id (first occurrence kept)")
            else:
                seen.add(item.image_id)
        if n >= lo:
            out.append(item)
    return out


def inspect_image(path: Path, max_pixels: int = 60_000_000) -> ImageInfo:
    """sha256 and size of a readable image; raises ValueError with the reason otherwise."""
    if not path.is_file():  # a directory would raise IsADirectoryError below and fail the shard
        raise ValueError(f"image file not found: {path}")
    data = path.read_bytes()
    if not data:
        raise ValueError(f"image file is empty (0 bytes): {path.name}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                width, height = img.size
                if width * height > max_pixels:
                    raise ValueError(f"image is {width}x{height}, over max_image_pixels={max_pixels}")
                img.load()  # decodes the pixels: catches truncated files that verify() misses
    except ValueError:
        raise
    except (OSError, Image.DecompressionBombError, Image.DecompressionBombWarning, SyntaxError) as exc:
        raise ValueError(f"unreadable image {path.name}: {type(exc).__name__}: {exc}") from None
    return ImageInfo(hashlib.sha256(data).hexdigest(), width, height)


def registered_shards(registry: Path) -> list[str]:
    """Every shard key of every dataset in the registry file."""
    return [shard_key(name, i) for name, spec in load_registry(registry).items() for i in range(shard_count(spec))]


def image_rows(spec: DatasetSpec, dataset: str, index: int) -> list[dict[str, Any]]:
    """The `images` rows of one shard: each entry's image and caption, or, for a malformed line
    or a missing or unreadable image, a row with status `skipped` and the reason (one bad line
    never fails the shard)."""
    rows = []
    for item in read_shard(spec, index):
        row: dict[str, Any] = {
            "position": item.position, "image_id": item.image_id, "dataset": dataset, "split": None,
            "path": None, "sha256": None, "width": None, "height": None, "caption": None,
            "status": "skipped", "reason": None,
        }  # fmt: skip
        if isinstance(item, Record):
            row.update(split=item.split, path=str(item.image_path), caption=item.caption)
            try:
                info = inspect_image(item.image_path, spec.max_image_pixels)
                row.update(sha256=info.sha256, width=info.width, height=info.height, status="ok")
            except ValueError as exc:
                row["reason"] = str(exc)
        else:
            row["reason"] = item.reason
        rows.append(row)
    return rows


def image_data_url(path: str) -> str:
    """The image file as a data URL, for a vision chat request."""
    mime = mimetypes.guess_type(path)[0] or "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode()}"
