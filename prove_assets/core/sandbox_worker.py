"""The sandbox worker: runs untrusted `execute_command(scene_graph)` programs, one at a time.

Started by `prove_assets.core.sandbox.Sandbox` as `python -s -B -P sandbox_worker.py PKG_ROOT`
with a minimal environment. It imports networkx and the SceneGraph, exercises the whole
SceneGraph API once (so no lazy import or file access is left for later), then locks itself down:

- resource limits: RLIMIT_AS (memory), RLIMIT_CPU (re-armed before every program),
  RLIMIT_FSIZE=0, RLIMIT_CORE=0, RLIMIT_NOFILE (the descriptors it already has), RLIMIT_NPROC=0;
- best effort: a private network namespace (no network at all) and, when started as root,
  dropping to uid/gid 65534 so that RLIMIT_NPROC is enforced and the filesystem is read-only
  to it;
- stdin/stdout/stderr point at /dev/null; the protocol runs on private duplicates of the pipes.

Protocol (both ways): frames of a 4-byte big-endian length + UTF-8 JSON.
  worker -> parent, once:  {"ready": true, "pid": ..., "protections": [...]}
  parent -> worker:        {"timeout": s, "max_output": n, "graphs": [sg_json, ...],
                            "jobs": [[source, graph_index], ...]}
  worker -> parent, one frame per job, as soon as it is done:
                           {"i": k, "verdict": ..., "output": ..., "reason": ..., "visited": [...],
                            "seconds": ..., "recycle": bool}
After a result with "recycle": true (timeout swallowed, MemoryError, RecursionError) the
worker exits and the parent starts a fresh one for the remaining jobs.

Per program: parse + static policy check (`check_source`), compile, a FRESH SceneGraph
(unpickled from a per-graph cache, so no object is shared with another program), execution with
restricted builtins, str() of the return value with a size cap, and the clean-up of everything
the program created; all of it under one ITIMER_REAL wall timer. Programs that swallow the
timer or hang inside C code are killed by the parent.

This module is also imported by the host for `check_source` only: the heavy imports and all
process-wide changes happen in `main()`.
"""

from __future__ import annotations

import ast
import math
import string
import sys
import time
from typing import Any

MAX_SOURCE_CHARS = 100_000
CPU_LIFETIME_S = 3600  # RLIMIT_CPU hard limit of a worker; the host retires it at half
PROGRAM_FILENAME = "<program>"
VERDICTS = ("ok", "program_error", "program_timeout", "program_rejected")

# Names a program may not use (unless it binds the name itself, e.g. `for type, v in ...`: the
# restricted builtins lack all of them, so such a name can only ever be the program's own value).
BLOCKED_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr", "setattr",
        "delattr", "breakpoint", "input", "memoryview", "type", "object", "super", "exit",
        "quit", "help", "dir", "id", "classmethod", "staticmethod", "property", "copyright",
        "credits", "license", "BaseException", "SystemExit", "KeyboardInterrupt",
        "GeneratorExit",
    }
)  # fmt: skip

# Attribute names that lead from ordinary objects to frames, code and interpreter internals.
BLOCKED_ATTRS = frozenset(
    {
        "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended",
        "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running",
        "ag_frame", "ag_code", "ag_await", "ag_running",
        "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_lasti",
        "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
        "co_code", "co_consts", "co_names", "co_varnames", "co_filename",
        "func_globals", "func_code", "im_func", "im_self", "mro",
    }
)  # fmt: skip

FORMAT_METHODS = frozenset({"format", "format_map"})
# `if __name__ == "__main__":` guards are common in generated code; `__name__` is "program".
ALLOWED_DUNDER_NAMES = frozenset({"__name__"})


class PolicyError(Exception):
    """The program breaks the static policy (verdict program_rejected)."""


_NAMED_NODES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ExceptHandler,
    ast.MatchAs,
    ast.MatchStar,
)


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the program binds itself (assignments, parameters, defs, except/match)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, _NAMED_NODES) and getattr(node, "name", None):
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _check_format_string(text: str, line: int) -> None:
    """str.format fields may read attributes (`{0.__class__}`): no private ones."""
    from _string import formatter_field_name_split  # the parser str.format itself uses

    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise PolicyError(f"malformed format string: {exc} (line {line})") from None
    for _literal, field, spec, _conversion in parsed:
        if field:
            try:
                _first, rest = formatter_field_name_split(field)
                parts = list(rest)
            except ValueError as exc:
                raise PolicyError(f"malformed format field {field!r}: {exc} (line {line})") from None
            for is_attr, name in parts:
                if is_attr and (str(name).startswith("_") or name in BLOCKED_ATTRS):
                    raise PolicyError(f"format field {field!r} reads a private attribute (line {line})")
        if spec:
            _check_format_string(spec, line)


def check_tree(tree: ast.AST) -> None:
    """Raise PolicyError if the parsed program breaks the static policy."""
    bound = _bound_names(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            raise PolicyError(f"import statements are not allowed (line {line})")
        if isinstance(node, ast.ClassDef):
            raise PolicyError(f"class definitions are not allowed (line {line})")
        if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
            raise PolicyError(f"async code is not allowed (line {line})")
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.startswith("_"):
                raise PolicyError(f"access to private attribute '.{attr}' is not allowed (line {line})")
            if attr in BLOCKED_ATTRS:
                raise PolicyError(f"access to attribute '.{attr}' is not allowed (line {line})")
            if not isinstance(node.ctx, ast.Load):
                raise PolicyError(f"assigning or deleting attributes is not allowed (line {line})")
            if attr in FORMAT_METHODS:
                value = node.value
                if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                    raise PolicyError(f"'.{attr}' is only allowed on a string literal (line {line})")
                _check_format_string(value.value, line)
        elif isinstance(node, ast.Name):
            if node.id.startswith("__") and node.id not in ALLOWED_DUNDER_NAMES:
                raise PolicyError(f"name '{node.id}' is not allowed (line {line})")
            if node.id in BLOCKED_NAMES and node.id not in bound:
                raise PolicyError(f"'{node.id}' is not allowed (line {line})")
        elif isinstance(node, ast.MatchClass):
            for attr in node.kwd_attrs:
                if attr.startswith("_") or attr in BLOCKED_ATTRS:
                    raise PolicyError(f"match pattern reads attribute '{attr}', not allowed (line {line})")
        elif isinstance(node, ast.arg) and node.arg.startswith("__"):
            raise PolicyError(f"name '{node.arg}' is not allowed (line {line})")
        elif isinstance(node, (ast.FunctionDef, ast.Global, ast.Nonlocal)):
            names = [node.name] if isinstance(node, ast.FunctionDef) else node.names
            for name in names:
                if name.startswith("__"):
                    raise PolicyError(f"name '{name}' is not allowed (line {line})")


def parse_program(source: str) -> ast.Module:
    """Parse + policy check. Raises SyntaxError (program_error) or PolicyError (rejected)."""
    if not isinstance(source, str):
        raise PolicyError("source must be a string")
    if len(source) > MAX_SOURCE_CHARS:
        raise PolicyError(f"source is too long ({len(source)} > {MAX_SOURCE_CHARS} characters)")
    try:
        tree = ast.parse(source, PROGRAM_FILENAME)
    except (RecursionError, MemoryError):
        raise PolicyError("source is too deeply nested to parse") from None
    except ValueError as exc:  # e.g. null bytes
        raise SyntaxError(str(exc)) from None
    check_tree(tree)
    return tree


def check_source(source: str) -> str | None:
    """The static policy alone: None if `source` may run, else the rejection reason.

    A syntax error is reported as a reason too (the sandbox reports it as program_error)."""
    try:
        parse_program(source)
    except PolicyError as exc:
        return str(exc)
    except SyntaxError as exc:
        return describe_syntax_error(exc)
    return None


def describe_syntax_error(exc: SyntaxError) -> str:
    where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
    return f"SyntaxError: {exc.msg if hasattr(exc, 'msg') and exc.msg else exc}{where}"


# ---------------------------------------------------------------------------------------------
# Everything below runs in the worker process only.


class _Timeout(BaseException):
    """Raised by the wall timer. A BaseException no program can name."""


def _noop_print(*args: Any, **kwargs: Any) -> None:
    """`print` for programs: output goes nowhere."""
    return None


def _safe_builtins() -> dict[str, Any]:
    import builtins

    names = [
        "abs", "all", "any", "ascii", "bool", "callable", "chr", "dict", "divmod", "enumerate",
        "filter", "float", "format", "frozenset", "hasattr", "hash", "int", "isinstance",
        "issubclass", "iter", "len", "list", "map", "max", "min", "next", "ord", "pow",
        "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum",
        "tuple", "zip", "bytes", "complex",
        "Exception", "ArithmeticError", "AssertionError", "AttributeError", "IndexError",
        "KeyError", "LookupError", "NameError", "NotImplementedError", "OverflowError",
        "RecursionError", "RuntimeError", "StopIteration", "TypeError", "ValueError",
        "ZeroDivisionError", "MemoryError", "UnicodeError",
        "True", "False", "None", "NotImplemented", "Ellipsis",
    ]  # fmt: skip
    safe = {name: getattr(builtins, name) for name in names}
    safe["print"] = _noop_print
    return safe


def _line_of(exc: BaseException) -> int | None:
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == PROGRAM_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _describe(exc: BaseException, limit: int = 500) -> str:
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a message that cannot be rendered
        message = "<unprintable message>"
    if len(message) > limit:
        message = message[:limit] + "..."
    line = _line_of(exc)
    text = type(exc).__name__ + (f": {message}" if message else "")
    return text + (f" (line {line})" if line is not None else "")


def _visited_names(graph: Any, entities: frozenset[str]) -> list[str]:
    """Sorted entity names from graph.visited that are entities of the scene graph as given
    (a program can add nodes and stuff the set; neither counts)."""
    visited = getattr(graph, "visited", None)
    if not isinstance(visited, set):
        return []
    if len(visited) <= len(entities):
        return sorted(n for n in visited if type(n) is str and n in entities)
    return sorted(n for n in entities if n in visited)


class _Worker:
    def __init__(self) -> None:
        import collections
        import gc
        import pickle
        import resource
        import signal

        from prove_assets.core.scene_graph import SceneGraph

        self.gc, self.pickle, self.resource, self.signal = gc, pickle, resource, signal
        self.SceneGraph = SceneGraph
        self.builtins = _safe_builtins()
        # sg_json -> (pickled pristine SceneGraph, its entity names)
        self.graph_cache: collections.OrderedDict[str, tuple[bytes, frozenset[str]]] = collections.OrderedDict()
        self.fired = False
        self.jobs_done = 0
        signal.signal(signal.SIGALRM, self._on_alarm)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        self.fired = True
        raise _Timeout()

    # --- graphs ------------------------------------------------------------------------------
    def fresh_graph(self, sg_json: str) -> tuple[Any, frozenset[str]]:
        """A new SceneGraph object for one program (unpickled, so nothing is shared with any
        other program) and the entity names of the graph as given."""
        entry = self.graph_cache.get(sg_json)
        if entry is None:
            graph = self.SceneGraph.from_json(sg_json)
            graph.reset_visited()
            names = frozenset(n for n in graph.nodes if type(n) is str)
            entry = (self.pickle.dumps(graph, protocol=self.pickle.HIGHEST_PROTOCOL), names)
            del graph
            self.graph_cache[sg_json] = entry
            while len(self.graph_cache) > 64:
                self.graph_cache.popitem(last=False)
        else:
            self.graph_cache.move_to_end(sg_json)
        return self.pickle.loads(entry[0]), entry[1]

    # --- one program -------------------------------------------------------------------------
    def run_job(self, source: str, sg_json: str, timeout: float, max_output: int) -> dict:
        start = time.perf_counter()
        res: dict[str, Any]
        self.fired = False
        self._arm_cpu_limit(timeout)
        try:
            self.signal.setitimer(self.signal.ITIMER_REAL, timeout)
            try:
                res = self._execute(source, sg_json, max_output)
            finally:
                self.signal.setitimer(self.signal.ITIMER_REAL, 0)
        except _Timeout:
            res = {"verdict": "program_timeout", "output": None, "visited": []}
        except BaseException as exc:  # noqa: BLE001 - e.g. MemoryError in our own code
            res = {"verdict": "program_error", "output": None, "visited": [],
                   "reason": f"worker: {_describe(exc)}", "recycle": True}  # fmt: skip
        if self.fired:
            # The program caught the timer (bare except) and went on: still a timeout.
            res = {"verdict": "program_timeout", "output": None, "visited": [], "recycle": True}
        if res["verdict"] == "program_timeout":
            res["reason"] = f"wall time {timeout:g} s exceeded"
            res["recycle"] = True  # the timer may have cut our own clean-up short
        res["seconds"] = round(time.perf_counter() - start, 6)
        usage = self.resource.getrusage(self.resource.RUSAGE_SELF)
        res["cpu"] = round(usage.ru_utime + usage.ru_stime, 3)
        return res

    def _arm_cpu_limit(self, timeout: float) -> None:
        r = self.resource
        usage = r.getrusage(r.RUSAGE_SELF)
        used = usage.ru_utime + usage.ru_stime
        # Fires 1-2 CPU seconds after the wall timer: the backstop for when the host is gone.
        soft = math.ceil(used + timeout) + 1
        _, hard = r.getrlimit(r.RLIMIT_CPU)
        if hard != r.RLIM_INFINITY:
            soft = min(soft, hard)  # near the end of its life: SIGKILL at hard, host recycles
        r.setrlimit(r.RLIMIT_CPU, (soft, hard))

    def _execute(self, source: str, sg_json: str, max_output: int) -> dict:
        try:
            tree = parse_program(source)
            code = compile(tree, PROGRAM_FILENAME, "exec", dont_inherit=True)
        except PolicyError as exc:
            return {
                "verdict": "program_rejected",
                "output": None,
                "visited": [],
                "reason": str(exc),
            }
        except SyntaxError as exc:
            return {"verdict": "program_error", "output": None, "visited": [],
                    "reason": describe_syntax_error(exc)}  # fmt: skip
        except (RecursionError, MemoryError) as exc:
            return {"verdict": "program_error", "output": None, "visited": [],
                    "reason": f"cannot compile: {_describe(exc)}", "recycle": True}  # fmt: skip
        del tree
        try:
            graph, entities = self.fresh_graph(sg_json)
        except Exception as exc:  # noqa: BLE001
            return {"verdict": "program_error", "output": None, "visited": [],
                    "reason": f"invalid scene graph JSON: {_describe(exc)}"}  # fmt: skip
        namespace: dict[str, Any] = {"__builtins__": dict(self.builtins), "__name__": "program"}
        res: dict[str, Any]
        try:
            exec(code, namespace)
            func = namespace.get("execute_command")
            if func is None:
                res = {"verdict": "program_error", "output": None, "visited": [],
                       "reason": "the program does not define execute_command"}  # fmt: skip
            elif not callable(func):
                res = {"verdict": "program_error", "output": None, "visited": [],
                       "reason": "execute_command is not a function"}  # fmt: skip
            else:
                value = func(graph)
                text = value if type(value) is str else str(value)
                del value
                truncated = len(text) > max_output
                output = text[:max_output]
                del text
                names = _visited_names(graph, entities)
                res = {"verdict": "ok", "output": output, "visited": names,
                       "reason": "output truncated" if truncated else None}  # fmt: skip
        except _Timeout:
            raise
        except (MemoryError, RecursionError) as exc:
            res = {"verdict": "program_error", "output": None, "visited": [],
                   "reason": _describe(exc), "recycle": True}  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - anything the program raised
            res = {"verdict": "program_error", "output": None, "visited": [],
                   "reason": _describe(exc)}  # fmt: skip
        finally:
            # Drop everything the program made while the timer still runs: generator
            # `finally:` blocks and the like execute now, charged to this program.
            namespace.clear()
            del namespace, graph, code
            self.gc.collect(0)
        return res


# --- process setup ---------------------------------------------------------------------------


def _lock_down(memory_mb: int) -> list[str]:
    """Apply the process-wide limits; return the protections that took effect."""
    import os
    import resource

    applied: list[str] = []

    def limit(name: str, soft: int, hard: int | None = None) -> None:
        which = getattr(resource, name)
        cur_soft, cur_hard = resource.getrlimit(which)
        hard = soft if hard is None else hard
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard) if hard != resource.RLIM_INFINITY else cur_hard
            soft = min(soft, hard) if soft != resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(which, (soft, hard))
            applied.append(f"{name}={soft}")
        except (ValueError, OSError):
            pass

    # Network namespace (no interfaces but a down loopback) and privilege drop: best effort.
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        clone_newnet, clone_newuser = 0x40000000, 0x10000000
        flags = clone_newnet if os.geteuid() == 0 else (clone_newnet | clone_newuser)
        if libc.unshare(flags) == 0:
            applied.append("netns")
    except Exception:  # noqa: BLE001
        pass
    if os.geteuid() == 0:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            applied.append("uid=65534")
        except OSError:
            pass

    limit("RLIMIT_CORE", 0)
    limit("RLIMIT_FSIZE", 0)
    limit("RLIMIT_NPROC", 0)
    limit("RLIMIT_AS", memory_mb * 1024 * 1024)
    # CPU: a lifetime hard limit (the host retires a worker at half of it) and a soft limit
    # re-armed before each program (_Worker._arm_cpu_limit).
    usage = resource.getrusage(resource.RUSAGE_SELF)
    hard_cpu = math.ceil(usage.ru_utime + usage.ru_stime) + CPU_LIFETIME_S
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (hard_cpu, hard_cpu))
        applied.append("RLIMIT_CPU=per program")
    except (ValueError, OSError):
        pass
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 16
    limit("RLIMIT_NOFILE", highest + 1)
    return applied


def _warm_up() -> None:
    """Run the whole SceneGraph API once, so nothing is imported lazily after the lock-down."""
    import pickle

    from prove_assets.core.scene_graph import SceneGraph

    sg = SceneGraph(
        "a cat on a sofa",
        {"cat": {"attributes": {"color": "orange"}, "relations_to": {"sofa": {"spatial": ["on"]}}},
         "sofa": {"attributes": {}, "relations_to": {}}},
    )  # fmt: skip
    sg2 = pickle.loads(pickle.dumps(SceneGraph.from_json(sg.to_json())))
    for g in (sg, sg2):
        g.get_entities()
        g.get_attributes("cat")
        g.get_outgoing_relations("cat")
        g.get_incoming_relations("sofa")
        g.describe(g.generate_subgraph(["cat", "sofa"]))
        g.copy()
        g.to_undirected()
        g.reset_visited()
    SceneGraph.from_tuples("x", [])
    str(sg.nodes), str(sg.edges), list(sg.nodes(data=True)), list(sg.edges(data=True))


def _read_exact(fd: int, n: int) -> bytes | None:
    import os

    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_frame(fd: int, obj: Any) -> None:
    import json
    import os

    data = json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace")
    data = len(data).to_bytes(4, "big") + data
    while data:
        written = os.write(fd, data)
        data = data[written:]


def main(argv: list[str]) -> int:
    import gc
    import json
    import os

    pkg_root = argv[1] if len(argv) > 1 else None
    memory_mb = int(argv[2]) if len(argv) > 2 else 512
    if pkg_root and pkg_root not in sys.path:
        sys.path.insert(0, pkg_root)

    # Private copies of the pipes; fds 0/1/2 go to /dev/null.
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    gc.disable()  # collected per program, inside its timer (see _execute)
    _warm_up()
    worker = _Worker()
    protections = _lock_down(memory_mb)
    sys.setrecursionlimit(1000)
    gc.collect()
    gc.freeze()  # the warm-up heap: never scanned again

    _write_frame(wfd, {"ready": True, "pid": os.getpid(), "protections": protections})
    os.dup2(os.open(os.devnull, os.O_RDWR), 2)  # startup errors went to the parent's pipe
    sys.stdout = sys.stderr = None  # type: ignore[assignment]

    while True:
        header = _read_exact(rfd, 4)
        if header is None:
            return 0
        body = _read_exact(rfd, int.from_bytes(header, "big"))
        if body is None:
            return 0
        msg = json.loads(body)
        del header, body
        timeout = float(msg["timeout"])
        max_output = int(msg["max_output"])
        graphs = msg["graphs"]
        for k, (source, graph_index) in enumerate(msg["jobs"]):
            res = worker.run_job(source, graphs[graph_index], timeout, max_output)
            res["i"] = k
            worker.jobs_done += 1
            try:
                _write_frame(wfd, res)
            except OSError:
                return 0
            if res.get("recycle"):
                return 0  # the parent starts a fresh worker for the rest
        del msg, graphs


if __name__ == "__main__":
    sys.exit(main(sys.argv))
