"""Tests for the program sandbox (prove_assets.core.sandbox).

- ordinary verification programs: attribute lookups, relation traversals, counting, the
  `visited` set, print, f-strings, comprehensions, output truncation;
- the API: run / run_many (order, parallel workers, batching across failures), run_program,
  thread safety, close() and interpreter exit leave no worker behind;
- the static policy on its own (check_source): legitimate idioms pass, escapes are named;
- the hostile corpus (prove_assets_tests/hostile_programs/*.py, one program a file, a header
  `# tries:` and `# expect:` verdicts): every file gets an expected verdict with a reason within
  a bounded time, the next program on the same worker still sees the intact graph, and the
  test process (a sentinel file, an environment variable, the working directory) is untouched;
- worker deaths (a signal from outside) are reported and the worker is replaced.

Throughput and containment figures come from bench/bench_sandbox.py, not from here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from prove_assets.core import sandbox as sandbox_module
from prove_assets.core.sandbox import (
    ProgramResult,
    Sandbox,
    SandboxError,
    check_source,
    run_program,
)
from prove_assets.core.scene_graph import SceneGraph

CORPUS_DIR = Path(__file__).parent / "hostile_programs"
CORPUS = sorted(CORPUS_DIR.glob("*.py"))
TIMEOUT_S = 0.5
# A hostile program may use its full timeout, the kill grace and a worker restart.
BOUND_S = TIMEOUT_S + sandbox_module.KILL_GRACE_S + 3.0

SG_DICT = {
    "cat": {
        "attributes": {"color": "orange", "size": "small"},
        "relations_to": {"sofa": {"spatial": ["on"]}, "lamp": {"spatial": ["next to"]}},
    },
    "sofa": {"attributes": {"color": "blue"}, "relations_to": {"rug": {"spatial": ["on"]}}},
    "lamp": {"attributes": {"material": "metal"}, "relations_to": {}},
    "rug": {"attributes": {"color": "red, white"}, "relations_to": {}},
    "dog": {"attributes": {"color": "brown"}, "relations_to": {"cat": {"action": ["chasing"]}}},
}
SG_JSON = SceneGraph("a cat on a sofa", SG_DICT).to_json()

# Renders the whole graph through the public API: any leak from an earlier program shows up.
FINGERPRINT = """def execute_command(scene_graph):
    out = []
    for e in sorted(scene_graph.get_entities()):
        attrs = sorted(scene_graph.get_attributes(e).items())
        rels = sorted((t, sorted((k, list(v)) for k, v in r.items()))
                      for t, r in scene_graph.get_outgoing_relations(e).items())
        out.append((e, attrs, rels))
    return str(out) + "|" + str(sorted(scene_graph.sg_dict)) + "|" + str(len(scene_graph.edges))
"""


def expected_fingerprint() -> str:
    out = []
    for e in sorted(SG_DICT):
        attrs = sorted(SG_DICT[e]["attributes"].items())
        rels = sorted((t, sorted((k, list(v)) for k, v in r.items())) for t, r in SG_DICT[e]["relations_to"].items())
        out.append((e, attrs, rels))
    n_edges = sum(len(m["relations_to"]) for m in SG_DICT.values())
    return str(out) + "|" + str(sorted(SG_DICT)) + "|" + str(n_edges)


def program(body: str) -> str:
    lines = body.strip("\n").splitlines()
    return "def execute_command(scene_graph):\n" + "\n".join("    " + line for line in lines) + "\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=TIMEOUT_S) as sb:
        yield sb


@pytest.fixture(scope="module")
def single():
    """One worker: a program and its follow-up are guaranteed to share the worker."""
    with Sandbox(workers=1, timeout_s=TIMEOUT_S) as sb:
        yield sb


# --- ordinary programs -----------------------------------------------------------------------


def test_attribute_lookup(sandbox):
    res = sandbox.run(program('return scene_graph.get_attributes("cat")["color"] == "orange"'), SG_JSON)
    assert res == ProgramResult("True", ["cat"], "ok", None, res.seconds)
    assert 0 <= res.seconds < TIMEOUT_S


def test_relation_traversal_and_visited(sandbox):
    src = program(
        """
rels = scene_graph.get_outgoing_relations("cat")
return "on" in rels.get("sofa", {}).get("spatial", [])
"""
    )
    res = sandbox.run(src, SG_JSON)
    assert (res.verdict, res.output) == ("ok", "True")
    assert res.visited == ["cat", "lamp", "sofa"]  # the source and every target it saw


def test_counting_comprehension_fstring_print(sandbox):
    src = program(
        """
colored = [e for e in scene_graph.get_entities() if "color" in scene_graph.get_attributes(e)]
print("debug output goes nowhere", colored)
return f"{len(colored)} colored: {', '.join(sorted(colored))}"
"""
    )
    res = sandbox.run(src, SG_JSON)
    assert res.verdict == "ok", res.reason
    assert res.output == "4 colored: cat, dog, rug, sofa"
    assert res.visited == ["cat", "dog", "lamp", "rug", "sofa"]


def test_visited_only_counts_entities_of_the_given_graph(sandbox):
    src = program(
        """
scene_graph.add_node("ghost")
scene_graph.get_attributes("ghost")
scene_graph.visited.update(["nobody", 7])
scene_graph.get_attributes("rug")
return 1
"""
    )
    assert sandbox.run(src, SG_JSON).visited == ["rug"]


def test_get_entities_alone_visits_nothing(sandbox):
    res = sandbox.run(program("return len(scene_graph.get_entities())"), SG_JSON)
    assert (res.output, res.visited) == ("5", [])


def test_incoming_relations_helpers_and_format(sandbox):
    src = """
def chasers(scene_graph, name):
    return sorted(scene_graph.get_incoming_relations(name))


def execute_command(scene_graph):
    for type, value in scene_graph.get_attributes("dog").items():  # `type` as a variable is fine
        pass
    return "{} chased by {}".format("cat", ", ".join(chasers(scene_graph, "cat")))
"""
    res = sandbox.run(src, SG_JSON)
    assert (res.verdict, res.output) == ("ok", "cat chased by dog"), res.reason
    assert res.visited == ["cat", "dog"]


def test_describe_subgraph(sandbox):
    res = sandbox.run(
        program('return scene_graph.describe(scene_graph.generate_subgraph(["cat", "sofa"]))'),
        SG_JSON,
    )
    assert res.verdict == "ok", res.reason
    assert "There is a cat" in res.output and "The cat is on the sofa." in res.output
    assert res.visited == ["cat", "sofa"]


def test_return_values_are_stringified(sandbox):
    assert sandbox.run(program("return None"), SG_JSON).output == "None"
    assert sandbox.run(program("return [1, 'a']"), SG_JSON).output == "[1, 'a']"
    assert sandbox.run(program("return 2.5"), SG_JSON).output == "2.5"


def test_output_is_truncated(sandbox):
    res = sandbox.run(program('return "x" * 50_000'), SG_JSON)
    assert res.verdict == "ok"
    assert res.output == "x" * 2000
    assert res.reason == "output truncated"
    with Sandbox(workers=1, max_output_chars=10) as small:
        assert small.run(program("return list(range(100))"), SG_JSON).output == "[0, 1, 2, "


def test_program_exception_reports_type_message_line(sandbox):
    res = sandbox.run(program("x = 1\nreturn undefined_name"), SG_JSON)
    assert res.verdict == "program_error"
    assert res.reason == "NameError: name 'undefined_name' is not defined (line 3)"
    assert res.output is None and res.visited == []


def test_key_error_inside_api_use(sandbox):
    res = sandbox.run(program('return scene_graph.get_attributes("lamp")["color"]'), SG_JSON)
    assert res.reason == "KeyError: 'color' (line 2)"


def test_each_program_gets_a_fresh_graph(single):
    mutate = program('scene_graph.remove_node("cat")\nscene_graph.nodes["dog"]["color"] = "x"\nreturn "gone"')
    assert single.run(mutate, SG_JSON).output == "gone"
    assert single.run(FINGERPRINT, SG_JSON).output == expected_fingerprint()


def test_graph_cache_keeps_graphs_apart(sandbox):
    other = SceneGraph("", {"zebra": {"attributes": {"color": "striped"}, "relations_to": {}}}).to_json()
    src = program("return sorted(scene_graph.get_entities())")
    results = sandbox.run_many([(src, SG_JSON), (src, other)] * 10)
    assert [r.output for r in results] == [str(sorted(SG_DICT)), "['zebra']"] * 10


def test_invalid_scene_graph_json(sandbox):
    res = sandbox.run(program("return 1"), "{not json")
    assert res.verdict == "program_error" and "invalid scene graph JSON" in res.reason


def test_set_order_is_deterministic_across_workers(sandbox):
    src = program("return str(set(scene_graph.get_entities()))")
    outputs = {r.output for r in sandbox.run_many([(src, SG_JSON)] * 16)}
    assert len(outputs) == 1


# --- API -------------------------------------------------------------------------------------


def test_run_many_keeps_order_across_failures(sandbox):
    ok = program('return scene_graph.get_attributes("{}").get("color")')
    jobs = [
        (ok.format("cat"), SG_JSON),
        (program("while True:\n    pass"), SG_JSON),
        (ok.format("sofa"), SG_JSON),
        (program("return len('x' * 10**10)"), SG_JSON),
        ("import os", SG_JSON),
        (ok.format("dog"), SG_JSON),
        (program("return sum(range(10**15))"), SG_JSON),  # killed by the host
        (ok.format("rug"), SG_JSON),
    ]
    t0 = time.monotonic()
    results = sandbox.run_many(jobs)
    assert time.monotonic() - t0 < 2 * BOUND_S
    assert [r.verdict[:12] for r in results] == [
        "ok", "program_time", "ok", "program_erro", "program_reje", "ok", "program_time", "ok",
    ]  # fmt: skip
    assert [r.output for r in results if r.verdict == "ok"] == [
        "orange",
        "blue",
        "brown",
        "red, white",
    ]


def test_run_many_uses_all_workers():
    src = program("n = 0\nfor i in range(1_000_000):\n    n += i\nreturn n")
    with Sandbox(workers=2, timeout_s=20) as sb:
        sb.run_many([(program("return 1"), SG_JSON)] * 4)  # warm
        done_before = [w.jobs_done for w in sb._pool]
        results = sb.run_many([(src, SG_JSON)] * 4)
        done = [w.jobs_done - b for w, b in zip(sb._pool, done_before, strict=True)]
    assert all(r.output == str(sum(range(1_000_000))) for r in results)
    assert min(done) >= 1 and sum(done) == 4  # one message per program, on both workers


def test_run_many_empty_and_large_batches(sandbox):
    assert sandbox.run_many([]) == []
    jobs = [(program(f"return {i}"), SG_JSON) for i in range(300)]
    assert [r.output for r in sandbox.run_many(jobs)] == [str(i) for i in range(300)]


def test_run_many_batches_cover_all_jobs_in_order(monkeypatch):
    monkeypatch.setattr(sandbox_module, "MAX_BATCH_CHARS", 1000)
    jobs = [(f"src{i}" * (1 + i % 7), "g" * (300 if i % 5 else 900)) for i in range(200)]
    chunks = sandbox_module._chunk(jobs, workers=2)
    assert [job for _, chunk in chunks for job in chunk] == jobs
    assert [start for start, _ in chunks] == [sum(len(c) for _, c in chunks[:k]) for k in range(len(chunks))]
    for _, chunk in chunks:
        assert len(chunk) <= sandbox_module.MAX_BATCH
        if len(chunk) > 1:
            assert sum(len(s) for s, _ in chunk) + sum(len(g) for g in {g for _, g in chunk}) <= 1000


def test_concurrent_run_calls(sandbox):
    results: dict[int, str | None] = {}

    def call(i: int) -> None:
        results[i] = sandbox.run(program(f"return {i} * 2"), SG_JSON).output

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: str(i * 2) for i in range(8)}


def test_run_program_one_shot():
    res = run_program(program('return scene_graph.get_attributes("sofa")["color"]'), SG_JSON)
    assert (res.verdict, res.output, res.visited) == ("ok", "blue", ["sofa"])
    res = run_program(program("while True:\n    pass"), SG_JSON, timeout_s=0.3)
    assert res.verdict == "program_timeout" and res.reason.startswith("wall time 0.3 s exceeded")


def test_too_long_and_non_str_inputs(sandbox):
    res = sandbox.run("x = 1\n" * 50_000, SG_JSON)
    assert res.verdict == "program_rejected" and "too long" in res.reason
    res = sandbox.run(None, SG_JSON)  # type: ignore[arg-type]
    assert res.verdict == "program_error"


def test_limits_are_applied(sandbox):
    sandbox.run(program("return 1"), SG_JSON)
    prot = sandbox.protections
    for name in ("RLIMIT_AS", "RLIMIT_FSIZE=0", "RLIMIT_CORE=0", "RLIMIT_NOFILE", "RLIMIT_NPROC=0"):
        assert any(p.startswith(name) for p in prot), prot


def test_worker_killed_from_outside_is_reported_and_replaced():
    with Sandbox(workers=1, timeout_s=5) as sb:
        sb.run(program("return 1"), SG_JSON)
        (pid,) = sb.pids
        box: list[ProgramResult] = []
        t = threading.Thread(target=lambda: box.append(sb.run(program("while True:\n    pass"), SG_JSON)))
        t.start()
        time.sleep(0.3)
        os.kill(pid, signal.SIGSEGV)
        t.join(10)
        assert box[0].verdict == "program_error"
        assert "SIGSEGV" in box[0].reason
        assert sb.run(program("return 'alive'"), SG_JSON).output == "alive"
        assert sb.pids and sb.pids != [pid]


def test_close_leaves_no_workers_and_rejects_runs():
    sb = Sandbox(workers=2, timeout_s=0.3)
    sb.run_many([(program("return 1"), SG_JSON)] * 4)
    assert len(sb.pids) == 2
    sb.run(program("while True:\n    pass"), SG_JSON)  # a replacement starts the hot spare
    pids = sb.pids
    assert len(pids) == 3
    sb.close()
    for pid in pids:
        assert not _alive(pid)
    with pytest.raises(SandboxError):
        sb.run(program("return 1"), SG_JSON)
    sb.close()  # idempotent


def _child_host_pids(tmp_path: Path, body: str) -> list[int]:
    """Run `body` in a separate host interpreter (with `sb`, `SRC`, `SG_JSON` defined); it
    prints its worker pids. Returns them once that host has exited."""
    script = tmp_path / "host.py"
    script.write_text(
        "import os, sys, threading, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from prove_assets.core.sandbox import Sandbox\n"
        "SG_JSON = sys.argv[2]\n"
        "SRC = 'def execute_command(scene_graph):\\n    return 1'\n" + textwrap.dedent(body)
    )
    root = str(Path(__file__).resolve().parents[1])
    cmd = [sys.executable, str(script), root, SG_JSON]
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # a host killed by os._exit leaves its tmp dir
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True, env=env)
    return [int(p) for p in out.stdout.split()]


def _wait_gone(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


def test_interpreter_exit_leaves_no_workers(tmp_path):
    pids = _child_host_pids(
        tmp_path,
        """
        sb = Sandbox(workers=2)
        sb.run_many([(SRC, SG_JSON)] * 4)
        print(*sb.pids)
        """,  # no close(): the atexit hook must do it
    )
    assert len(pids) == 2
    assert _wait_gone(pids, 5)


def test_host_killed_mid_program_leaves_no_workers(tmp_path):
    """No atexit (os._exit): idle workers see EOF; the busy one hits its RLIMIT_CPU."""
    pids = _child_host_pids(
        tmp_path,
        """
        sb = Sandbox(workers=2, timeout_s=0.5)
        sb.run_many([(SRC, SG_JSON)] * 4)
        print(*sb.pids, flush=True)
        spin = "def execute_command(scene_graph):\\n    return sum(range(10**15))"
        threading.Thread(target=sb.run, args=(spin, SG_JSON), daemon=True).start()
        time.sleep(0.2)
        os._exit(0)
        """,
    )
    assert len(pids) == 2
    assert _wait_gone(pids, 30)  # CPU seconds: slower in wall time on a loaded machine


def test_worker_that_cannot_start_raises(monkeypatch):
    monkeypatch.setattr(sandbox_module, "WORKER_SCRIPT", Path("/nonexistent/worker.py"))
    sb = Sandbox(workers=1)
    try:
        with pytest.raises(SandboxError, match="failed to start"):
            sb.run(program("return 1"), SG_JSON)
    finally:
        sb.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


# --- static policy -----------------------------------------------------------------------------

LEGIT = [
    program("return [e.upper() for e in scene_graph.get_entities()]"),
    program("return {k: v for k, v in scene_graph.get_attributes('cat').items()}"),
    program("return '{0} and {1.real}'.format('a', 3)"),
    program("x = 3\nreturn f'{x:>{x}}' + '%s' % x"),
    program("try:\n    return 1 / 0\nexcept ZeroDivisionError as e:\n    return str(e)"),
    program("match scene_graph.get_entities():\n    case [first, *rest]:\n        return first"),
    program("if (n := len(scene_graph.get_entities())) > 2:\n    return n"),
    program("return sorted(scene_graph.get_entities(), key=lambda e: -len(e))"),
    program("type = 'color'\nreturn scene_graph.get_attributes('cat').get(type)"),
    program("def gen():\n    yield from scene_graph.get_entities()\nreturn list(gen())"),
    program("return 1") + "\nif __name__ == '__main__':\n    print(execute_command(None))\n",
]


@pytest.mark.parametrize("source", LEGIT)
def test_policy_accepts_ordinary_idioms(source, sandbox):
    assert check_source(source) is None
    assert sandbox.run(source, SG_JSON).verdict == "ok"


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("import os", "import statements"),
        ("from os import path", "import statements"),
        ("x = ().__class__", "private attribute '.__class__'"),
        ("x = (1).real._private", "private attribute"),
        ("def f():\n    yield\ng = f().gi_frame", "'.gi_frame'"),
        ("x = eval", "'eval' is not allowed"),
        ("x = getattr(1, 'real')", "'getattr' is not allowed"),
        ("class A:\n    pass", "class definitions"),
        ("x = [1]\nx.append = None", "assigning or deleting attributes"),
        ("s = 'a'\nt = s.format(1)", "only allowed on a string literal"),
        ("t = '{0.__class__}'.format(1)", "reads a private attribute"),
        ("t = '{0:{0.__class__}}'.format(1)", "reads a private attribute"),
        ("async def f():\n    pass", "async code"),
        ("__builtins__ = {}", "name '__builtins__'"),
    ],
)
def test_policy_rejects(source, fragment):
    reason = check_source(source)
    assert reason is not None and fragment in reason


@pytest.mark.parametrize(
    "source",
    [
        program("return " + "-" * 50_000 + "1"),  # too deep for the parser/compiler
        program("return " + "(" * 500 + "1" + ")" * 500),
        program("return " + "[" * 300 + "]" * 300),
    ],
    ids=["unary-50000", "parens-500", "lists-300"],
)
def test_deeply_nested_source_is_refused(sandbox, source):
    res = sandbox.run(source, SG_JSON)
    assert res.verdict in {"program_error", "program_rejected"}, res
    assert res.reason
    assert sandbox.run(program("return 'fine'"), SG_JSON).output == "fine"


def test_syntax_error_is_a_program_error(sandbox):
    res = sandbox.run("def execute_command(scene_graph:\n    return 1\n", SG_JSON)
    assert res.verdict == "program_error" and res.reason.startswith("SyntaxError") and "(line 1)" in res.reason


# --- hostile corpus ----------------------------------------------------------------------------


def _expected(path: Path) -> set[str]:
    match = re.search(r"^# expect: (\S+)$", path.read_text(), re.M)
    assert match, f"{path.name} has no '# expect:' header"
    return set(match.group(1).split("|"))


def test_corpus_is_complete():
    assert len(CORPUS) >= 40
    for path in CORPUS:
        text = path.read_text()
        assert text.startswith("# tries: "), path.name
        assert _expected(path) <= {"ok", "program_error", "program_timeout", "program_rejected"}


@pytest.fixture(scope="module")
def host_state(tmp_path_factory):
    sentinel = tmp_path_factory.mktemp("host") / "sentinel.txt"
    sentinel.write_text("untouched")
    os.environ["PROVE_SANDBOX_SENTINEL"] = "untouched"
    yield sentinel
    os.environ.pop("PROVE_SANDBOX_SENTINEL", None)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_hostile_program_is_contained(path, single, host_state):
    cwd_before = sorted(os.listdir(os.getcwd()))
    expected = _expected(path)
    t0 = time.monotonic()
    res = single.run(path.read_text(), SG_JSON)
    elapsed = time.monotonic() - t0
    assert res.verdict in expected, (res.verdict, res.reason)
    if res.verdict != "ok":
        assert res.reason and res.output is None
    else:
        assert expected & {"ok"} and path.stem.startswith("mutate_")
        assert res.output is not None and len(res.output) <= 2000
    assert elapsed < BOUND_S
    # The next program on the same worker answers correctly and sees the intact graph.
    after = single.run(FINGERPRINT, SG_JSON)
    assert (after.verdict, after.output) == ("ok", expected_fingerprint()), after.reason
    assert single.run(program('return scene_graph.get_attributes("cat")["color"]'), SG_JSON).output == "orange"
    # The host is untouched.
    assert host_state.read_text() == "untouched"
    assert os.environ.get("PROVE_SANDBOX_SENTINEL") == "untouched"
    assert sorted(os.listdir(os.getcwd())) == cwd_before
    assert json.loads(SG_JSON)["graph"]["caption"] == "a cat on a sofa"
