"""json.loads for untrusted text (model output, user files)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# Half of a surrogate pair, escaped (`\ud800`) or as is: json.loads keeps it in the string, and
# such a string cannot be encoded as UTF-8 (DuckDB, hashes, files) later, far from its input.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def loads_json(text: str | bytes) -> Any:
    """json.loads, with nesting too deep for the parser, numbers too long to convert and strings
    that are not UTF-8 reported as the JSONDecodeError every caller already handles: `[[[[...` from
    a model that loops, or a broken file, is bad input, and json.loads would raise RecursionError
    (not a ValueError) or a plain ValueError and fail the whole run."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text if isinstance(text, str) else "", 0) from None
    except ValueError as exc:  # a number of over 4,300 digits (int_max_str_digits)
        raise json.JSONDecodeError(str(exc)[:80], text if isinstance(text, str) else "", 0) from None
    return checked_utf8(value, text)


def checked_utf8(value: Any, text: str | bytes) -> Any:
    """`value`, parsed from `text`, unless one of its strings holds half a surrogate pair
    (JSONDecodeError then). Only text with such an escape or character is checked."""
    found = _SURROGATE.search(text) if isinstance(text, str) else _SURROGATE_BYTES.search(text)
    if found:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            doc = text if isinstance(text, str) else ""
            raise json.JSONDecodeError("a string holds half a surrogate pair (not UTF-8)", doc, 0) from None
    return value


def yaml_registry_section(path: Path, key: str, error: type[ValueError], kind: str) -> dict:
    """The `key:` mapping of a registry file (datasets.yaml, models.yaml), or `error` naming the
    file: missing, not YAML, or not a mapping with that key."""
    import yaml

    if not Path(path).exists():
        raise error(f"{kind} registry {path} not found")
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    # A broken file is the user's to fix: say which file and where, not a parser traceback
    # (deep nesting makes the YAML parser recurse past the limit).
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise error(f"{path}: not valid YAML: {str(exc)[:300]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get(key) or {}, dict):
        raise error(f"{path}: expected a mapping with a `{key}:` key")
    return raw.get(key) or {}
