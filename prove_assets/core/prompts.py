"""Prompt files: `prompts/<name>.md`, split into chat turns by `## system|user|assistant` headings.

Placeholders are `${name}` (string.Template) because the prompts quote Python and JSON, whose
braces would clash with str.format. A prompt's version is the hash of its file's bytes: editing
one prompt changes only the `code_version` of the assets that use it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

_TURN = re.compile(r"^## (system|user|assistant)\s*$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class Prompt:
    name: str
    text: str

    @property
    def version(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    def render(self, **values: object) -> list[dict[str, str]]:
        """Chat messages with placeholders filled; a missing value raises KeyError."""
        body = _COMMENT.sub("", self.text)
        parts = _TURN.split(body)
        messages = []
        for role, content in zip(parts[1::2], parts[2::2], strict=True):
            text = Template(content.strip()).substitute({k: str(v) for k, v in values.items()})
            messages.append({"role": role, "content": text})
        if not messages:
            raise ValueError(f"prompt {self.name!r} has no '## system' / '## user' sections")
        return messages


def load_prompt(prompts_dir: Path, name: str) -> Prompt:
    path = Path(prompts_dir) / f"{name}.md"
    if not path.exists():
        raise FileNotFoundError(f"prompt file {path} not found (prompts live in {prompts_dir})")
    return Prompt(name=name, text=path.read_text(encoding="utf-8"))


def prompts_version(prompts_dir: Path, names: list[str], settings: dict | None = None) -> str:
    """code_version for an asset: hash of its prompt files plus generation settings."""
    h = hashlib.sha256()
    for name in sorted(names):
        h.update(name.encode() + b"\0" + load_prompt(prompts_dir, name).text.encode() + b"\0")
    h.update(repr(sorted((settings or {}).items())).encode())
    return h.hexdigest()[:12]
