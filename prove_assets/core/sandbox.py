"""Run LLM-written verification programs (`def execute_command(scene_graph): ...`) safely.

The programs are untrusted code. They run in a pool of warm worker processes
(`sandbox_worker.py`, started once with `subprocess`: a fresh interpreter, a minimal environment,
its own session); a program is a message over a pipe. Layers, outermost first:

1. the host never parses or executes a program: it only sends text and reads back small JSON
   frames, which it validates (size, types, verdict names);
2. the worker checks each program statically (no imports, no class definitions, no private or
   frame attributes, no eval/exec/open/getattr/type/..., str.format only on literals whose
   fields read no private attribute) and runs it with a short list of safe builtins (`print`
   writes nowhere);
3. every program gets its own SceneGraph object, built fresh from the JSON (the parsed graph
   is cached per distinct JSON string in the worker, as a pickle, and unpickled per program);
4. process limits: RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE=0, RLIMIT_CORE=0, RLIMIT_NOFILE,
   RLIMIT_NPROC=0, plus a private network namespace and a drop to uid 65534 where the OS
   allows (see `Sandbox.protections`);
5. a wall timer inside the worker (the program gets a program_timeout); a program that
   swallows the timer or spins inside C code is SIGKILLed by the host at timeout + grace, and
   any worker that dies (killed, crashed, out of memory) is replaced. The result names what
   happened. After a timeout, MemoryError or RecursionError the worker is retired too; its
   successor is a hot spare that is already warm, so the next program does not wait.

    with Sandbox(workers=2, timeout_s=2.0) as sandbox:
        result = sandbox.run(source, scene_graph.to_json())
        results = sandbox.run_many([(source, sg_json), ...])

Known limits: Linux only (RLIMITs, /proc, poll). There is no seccomp filter, so a program
that escaped the Python-level policy through an interpreter bug would run with the worker's
limits and uid and could read world-readable files. RLIMIT_NPROC does not bind root, hence the
drop to uid 65534 when the host runs as root. RLIMIT_AS counts the worker's own interpreter too
(its size: docs/reliability.md). Code stuck inside one C call (a huge `pow`,
`sum(range(10**15))`) never sees the timer: it is killed at timeout + KILL_GRACE_S. The policy
is deliberately narrow: no imports at all (not even `math` or `re`), no classes, `str.format`
only on literals.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from typing import Any

from prove_assets.core.sandbox_worker import (
    CPU_LIFETIME_S,
    MAX_SOURCE_CHARS,
    VERDICTS,
    check_source,
)

__all__ = ["ProgramResult", "Sandbox", "SandboxError", "check_source", "run_program"]

WORKER_SCRIPT = Path(__file__).with_name("sandbox_worker.py")
PKG_ROOT = Path(__file__).resolve().parents[2]

KILL_GRACE_S = 0.5  # after the worker's own timer should have fired
STARTUP_TIMEOUT_S = 60.0
MAX_FRAME_BYTES = 4 << 20
MAX_JOBS_PER_WORKER = 10_000  # recycle now and then: bounds whatever a worker may accumulate
MAX_BATCH = 32  # programs per message in run_many
MAX_BATCH_CHARS = 4 << 20  # and about this much text per message


@dataclass(frozen=True)
class ProgramResult:
    """The outcome of one program.

    output:  str() of execute_command's return value (None -> "None"), cut to
             max_output_chars; None when there is no result.
    visited: sorted entity names the program touched through the SceneGraph API.
    verdict: "ok" | "program_error" | "program_timeout" | "program_rejected".
    reason:  why it is not ok ("NameError: name 'x' is not defined (line 3)", "wall time
             2.0 s exceeded", "import statements are not allowed (line 1)"); for "ok" None, or
             "output truncated" when the output was cut.
    seconds: wall time of the program in its worker (host-measured when the worker was
             killed).
    """

    output: str | None
    visited: list[str]
    verdict: str
    reason: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


class SandboxError(RuntimeError):
    """The sandbox itself failed (worker cannot start, sandbox closed): not the program's fault."""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _worker_env() -> dict[str, str]:
    # Nothing from the host environment (API keys...) reaches the worker.
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}


class _Worker:
    """One worker process and the host's side of its pipes. Used under `lock` only."""

    def __init__(self, memory_mb: int, workdir: str) -> None:
        self.memory_mb = memory_mb
        self.workdir = workdir
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = False
        self.buf = bytearray()
        self.jobs_done = 0
        self.protections: list[str] = []
        self.starts = 0

    # --- lifecycle ---------------------------------------------------------------------------
    def spawn(self) -> None:
        cmd = [
            sys.executable,
            "-s",
            "-B",
            "-P",
            str(WORKER_SCRIPT),
            str(PKG_ROOT),
            str(self.memory_mb),
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.workdir,
            env=_worker_env(),
            close_fds=True,
            start_new_session=True,
        )
        self.ready = False
        self.buf = bytearray()
        self.jobs_done = 0
        self.starts += 1

    def ensure_ready(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self.spawn()
        if self.ready:
            return
        frame = self.read_frame(time.monotonic() + STARTUP_TIMEOUT_S)
        if not isinstance(frame, dict) or frame.get("ready") is not True:
            proc, err = self.proc, b""
            assert proc is not None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.stderr is not None:
                with contextlib.suppress(Exception):
                    err = proc.stderr.read()[-2000:]
            self.kill()
            raise SandboxError(f"sandbox worker failed to start ({frame!r}): {err.decode('utf-8', 'replace')}")
        self.protections = [str(p) for p in frame.get("protections", [])][:20]
        self.ready = True
        if self.proc.stderr is not None:  # only startup errors ever go there
            self.proc.stderr.close()

    def kill(self) -> int | None:
        """SIGKILL the worker's process group and reap it; return its exit status."""
        proc, self.proc, self.ready = self.proc, None, False
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            code = None
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()
        return code

    def adopt(self, other: _Worker) -> None:
        """Take over `other`'s (started) process; `other` is left empty."""
        self.proc, self.ready, self.buf = other.proc, other.ready, other.buf
        self.protections = other.protections or self.protections
        self.jobs_done = 0
        self.starts += 1
        other.proc, other.ready, other.buf = None, False, bytearray()

    def shutdown(self) -> None:
        """Polite stop: EOF on stdin, then SIGKILL whatever is left."""
        proc = self.proc
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()

    # --- frames ------------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        data = json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
        self.proc.stdin.write(len(data).to_bytes(4, "big") + data)
        self.proc.stdin.flush()

    def read_frame(self, deadline: float) -> Any:
        """The next frame, or "timeout" / "eof" / "bad" (strings, not frames)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            if len(self.buf) >= 4:
                size = int.from_bytes(self.buf[:4], "big")
                if size > MAX_FRAME_BYTES:
                    return "bad"
                if len(self.buf) >= 4 + size:
                    body = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    try:
                        return json.loads(body)
                    except ValueError:
                        return "bad"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if not poller.poll(max(1, math.ceil(remaining * 1000))):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return "eof"
            self.buf += chunk


def _clean_result(frame: dict, max_output: int) -> ProgramResult:
    """A ProgramResult from a worker frame, trusting nothing about its shape."""
    verdict = frame.get("verdict")
    if verdict not in VERDICTS:
        return ProgramResult(None, [], "program_error", "sandbox protocol error (bad verdict)", 0.0)
    output = frame.get("output")
    output = output[:max_output] if isinstance(output, str) and verdict == "ok" else None
    if verdict == "ok" and output is None:
        output = "None"
    visited_raw = frame.get("visited")
    visited = sorted({v for v in visited_raw if isinstance(v, str)}) if isinstance(visited_raw, list) else []
    reason = frame.get("reason")
    reason = reason[:1000] if isinstance(reason, str) else None
    if verdict != "ok" and not reason:
        reason = verdict.replace("_", " ")
    seconds = frame.get("seconds")
    seconds = float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else 0.0
    return ProgramResult(output, visited, verdict, reason, seconds)


def _death_result(status: int | None, timeout_s: float, seconds: float) -> ProgramResult:
    if status is not None and status < 0:
        sig = -status
        name = _signal_name(sig)
        if sig == signal.SIGXCPU:
            return ProgramResult(None, [], "program_timeout", f"CPU time limit exceeded ({name})", seconds)
        if sig == signal.SIGXFSZ:
            return ProgramResult(None, [], "program_error", f"file size limit exceeded ({name})", seconds)
        why = f"sandbox worker died from {name}"
        if sig == signal.SIGKILL:
            why += " (out of memory or killed)"
        return ProgramResult(None, [], "program_error", why, seconds)
    return ProgramResult(None, [], "program_error", f"sandbox worker exited with status {status}", seconds)


_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()


class Sandbox:
    """A pool of warm worker processes that run untrusted verification programs.

    Thread-safe: `run` may be called from several threads (each call takes an idle worker);
    `run_many` spreads a list of jobs over all workers, several programs per message.
    """

    def __init__(
        self,
        workers: int = 2,
        timeout_s: float = 2.0,
        memory_mb: int = 512,
        max_output_chars: int = 2000,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.max_output_chars = int(max_output_chars)
        self._closed = False
        self._new_pool()
        for w in self._pool:
            w.spawn()  # they import in parallel; the first job waits for "ready"
        _LIVE.add(self)

    def _new_pool(self) -> None:
        self._pid = os.getpid()
        self._workdir = tempfile.mkdtemp(prefix="prove-sandbox-")
        self._pool = [_Worker(self.memory_mb, self._workdir) for _ in range(self.workers)]
        # A hot spare, started after the first replacement: a killed worker's successor is
        # then already warm, so the next program does not wait for an interpreter to start.
        self._spare = _Worker(self.memory_mb, self._workdir)
        self._spare_lock = threading.Lock()
        self._idle: Queue[_Worker] = Queue()
        for w in self._pool:
            self._idle.put(w)
        self._finalizer = weakref.finalize(
            self,
            _shutdown_pool,
            [*self._pool, self._spare],
            self._workdir,
            self._pid,
            self._close_wait_s(),
        )

    # --- public API --------------------------------------------------------------------------
    def run(self, source: str, scene_graph_json: str) -> ProgramResult:
        return self._run_batch([(source, scene_graph_json)], self.timeout_s)[0]

    def run_many(
        self, jobs: Sequence[tuple[str, str]], on_progress: Callable[[int, int], None] | None = None
    ) -> list[ProgramResult]:
        """Run (source, scene graph JSON) jobs over the workers; results in job order.
        `on_progress(done, total)` is called after each batch of programs."""
        jobs = list(jobs)
        if not jobs:
            return []
        chunks = _chunk(jobs, self.workers)
        results: list[ProgramResult | None] = [None] * len(jobs)
        cursor = iter(chunks)
        cursor_lock = threading.Lock()
        errors: list[BaseException] = []
        done = 0

        def drain() -> None:
            nonlocal done
            while not errors:
                with cursor_lock:
                    item = next(cursor, None)
                if item is None:
                    return
                start, chunk = item
                try:
                    for k, res in enumerate(self._run_batch(chunk, self.timeout_s)):
                        results[start + k] = res
                except BaseException as exc:  # noqa: BLE001 - re-raised below
                    errors.append(exc)
                    return
                if on_progress:
                    with cursor_lock:
                        done += len(chunk)
                        now = done
                    on_progress(now, len(jobs))

        threads = [threading.Thread(target=drain, daemon=True) for _ in range(min(self.workers, len(chunks)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return _complete(results)

    @property
    def protections(self) -> list[str]:
        """The OS-level protections the workers applied (after the first program)."""
        return sorted({p for w in self._pool for p in w.protections})

    @property
    def pids(self) -> list[int]:
        """Process ids of the live worker processes, hot spare included (monitoring, tests)."""
        return [w.proc.pid for w in [*self._pool, self._spare] if w.proc is not None and w.proc.poll() is None]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._finalizer()
        _LIVE.discard(self)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------
    def _close_wait_s(self) -> float:
        return self.timeout_s + KILL_GRACE_S + 1.0

    def _check_usable(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")
        if os.getpid() != self._pid:
            # Forked host: the workers' pipes belong to the parent; start our own.
            self._finalizer.detach()
            self._new_pool()

    def _replace(self, worker: _Worker) -> int | None:
        """Kill `worker`'s process and give it the hot spare's; return the old exit status."""
        status = worker.kill()
        with self._spare_lock:
            spare = self._spare
            if spare.proc is not None and spare.proc.poll() is None:
                worker.adopt(spare)
            elif spare.proc is not None:
                spare.kill()
            if not self._closed:
                if worker.proc is None:
                    worker.spawn()
                spare.spawn()
        return status

    def _run_batch(self, jobs: list[tuple[str, str]], timeout_s: float) -> list[ProgramResult]:
        self._check_usable()
        results: list[ProgramResult | None] = [None] * len(jobs)
        todo: list[int] = []
        for i, (source, sg_json) in enumerate(jobs):
            if not isinstance(source, str) or not isinstance(sg_json, str):
                results[i] = ProgramResult(None, [], "program_error", "source and scene graph JSON must be str", 0.0)
            elif len(source) > MAX_SOURCE_CHARS:
                results[i] = ProgramResult(
                    None, [], "program_rejected",
                    f"source is too long ({len(source)} > {MAX_SOURCE_CHARS} characters)", 0.0,
                )  # fmt: skip
            else:
                todo.append(i)
        if todo:
            worker = self._idle.get()
            try:
                with worker.lock:
                    self._drive(worker, jobs, todo, results, timeout_s)
            finally:
                self._idle.put(worker)
        return _complete(results)

    def _drive(
        self,
        worker: _Worker,
        jobs: list[tuple[str, str]],
        todo: list[int],
        results: list[ProgramResult | None],
        timeout_s: float,
    ) -> None:
        """Run jobs[todo] on `worker`, replacing it whenever it dies or must be recycled."""
        while todo:
            if self._closed:
                raise SandboxError("sandbox is closed")
            if worker.jobs_done >= MAX_JOBS_PER_WORKER:
                self._replace(worker)
            worker.ensure_ready()
            graphs: dict[str, int] = {}
            message = {
                "timeout": timeout_s,
                "max_output": self.max_output_chars,
                "jobs": [[jobs[i][0], graphs.setdefault(jobs[i][1], len(graphs))] for i in todo],
                "graphs": [],
            }
            message["graphs"] = list(graphs)
            sent_at = time.monotonic()
            try:
                worker.send(message)
            except (BrokenPipeError, OSError):
                self._replace(worker)
                worker.ensure_ready()
                sent_at = time.monotonic()
                worker.send(message)
            for k, idx in enumerate(todo):
                frame = worker.read_frame(sent_at + timeout_s + KILL_GRACE_S)
                now = time.monotonic()
                if isinstance(frame, dict) and frame.get("i") == k:
                    results[idx] = _clean_result(frame, self.max_output_chars)
                    worker.jobs_done += 1
                    sent_at = now
                    cpu = frame.get("cpu")
                    if isinstance(cpu, (int, float)) and cpu > CPU_LIFETIME_S / 2:
                        worker.jobs_done = MAX_JOBS_PER_WORKER  # retire before its hard limit
                    if frame.get("recycle"):
                        self._replace(worker)
                        todo = todo[k + 1 :]
                        break
                    continue
                elapsed = round(now - sent_at, 6)
                if frame == "timeout":
                    self._replace(worker)
                    results[idx] = ProgramResult(
                        None, [], "program_timeout",
                        f"wall time {timeout_s:g} s exceeded (worker killed)", elapsed,
                    )  # fmt: skip
                elif frame == "eof":
                    status = self._replace(worker)
                    results[idx] = _death_result(status, timeout_s, elapsed)
                else:  # garbage on the pipe: never trust that worker again
                    self._replace(worker)
                    results[idx] = ProgramResult(None, [], "program_error", "sandbox protocol error", elapsed)
                todo = todo[k + 1 :]
                break
            else:
                todo = []


def _chunk(jobs: list[tuple[str, str]], workers: int) -> list[tuple[int, list[tuple[str, str]]]]:
    """Split jobs into (start, batch) messages: several per worker for balance, at most
    MAX_BATCH programs and about MAX_BATCH_CHARS of text (graphs counted once) each."""
    n_chunks = min(len(jobs), max(workers * 4, math.ceil(len(jobs) / MAX_BATCH)))
    per_chunk = math.ceil(len(jobs) / n_chunks)
    chunks: list[tuple[int, list[tuple[str, str]]]] = []
    start, size, graphs = 0, 0, set()
    for i, (source, sg_json) in enumerate(jobs):
        cost = len(source) if isinstance(source, str) else 0
        if sg_json not in graphs:
            cost += len(sg_json) if isinstance(sg_json, str) else 0
        if i > start and (i - start >= per_chunk or size + cost > MAX_BATCH_CHARS):
            chunks.append((start, jobs[start:i]))
            start, size, graphs = i, 0, set()
            cost = (len(source) if isinstance(source, str) else 0) + (len(sg_json) if isinstance(sg_json, str) else 0)
        size += cost
        if isinstance(sg_json, str):
            graphs.add(sg_json)
    chunks.append((start, jobs[start:]))
    return chunks


def _complete(results: list[ProgramResult | None]) -> list[ProgramResult]:
    if any(r is None for r in results):  # pragma: no cover - would be a bug in _drive
        raise SandboxError("internal error: a program got no result")
    return [r for r in results if r is not None]


def _shutdown_pool(pool: list[_Worker], workdir: str, owner_pid: int, wait_s: float) -> None:
    if os.getpid() != owner_pid:  # a forked child must not kill its parent's workers
        return
    # Let programs in flight finish (bounded by their timeout), then stop every worker.
    deadline = time.monotonic() + wait_s
    held = [w.lock.acquire(timeout=max(0.0, deadline - time.monotonic())) for w in pool]
    try:
        for w in pool:
            w.shutdown()
        deadline = time.monotonic() + 1.0
        for w in pool:
            proc = w.proc
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            w.kill()
    finally:
        for w, got in zip(pool, held, strict=True):
            if got:
                w.lock.release()
    with contextlib.suppress(OSError):
        for name in os.listdir(workdir):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)


# --- one-shot convenience ----------------------------------------------------------------------

_shared: Sandbox | None = None
_shared_lock = threading.Lock()


def run_program(source: str, scene_graph_json: str, timeout_s: float = 2.0) -> ProgramResult:
    """Run one program in a shared one-worker sandbox (started on first use, closed at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._closed or _shared._pid != os.getpid():
            _shared = Sandbox(workers=1, timeout_s=timeout_s)
        sandbox = _shared
    return sandbox._run_batch([(source, scene_graph_json)], float(timeout_s))[0]


@atexit.register
def _close_all() -> None:
    for sandbox in list(_LIVE):
        with contextlib.suppress(Exception):
            sandbox.close()
