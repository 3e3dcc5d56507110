"""TEST DOUBLE: a scripted OpenAI-compatible chat server on 127.0.0.1.

It is not a model. It answers PROVE's prompts with deterministic, rule-based text derived from
the request (a naive tuple extractor, template QA pairs with real programs), so the pipeline's
plumbing can be tested offline and fast. Faults (HTTP errors, Retry-After, malformed bodies,
delays) are injected per test. Every request is recorded in `.requests` (its HTTP headers in
`.request_headers`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COLORS = {
    "red",
    "blue",
    "green",
    "white",
    "black",
    "brown",
    "orange",
    "yellow",
    "gray",
    "grey",
    "pink",
    "purple",
    "silver",
    "gold",
    "golden",
    "beige",
    "tan",
    "dark",
    "light",
}
MATERIALS = {"wooden", "metal", "glass", "plastic", "stone", "ceramic", "leather", "paper", "concrete"}
DETERMINERS = {"a", "an", "the", "two", "three", "four", "several", "its", "his", "her"}
PREPOSITIONS = (
    "next to",
    "in front of",
    "on top of",
    "behind",
    "under",
    "above",
    "below",
    "on",
    "beside",
    "near",
    "inside",
)
STOP = {"is", "are", "and", "with", "of", "in", "to", "at", "it", "that", "this", "which", "has", "there", "as", "by"}


def naive_tuples(text: str) -> dict[str, Any]:
    """Rule-based stand-in for tuple extraction: determiner (+ adjectives) + noun -> entity."""
    words = re.findall(r"[a-z]+", text.lower())
    entities: list[str] = []
    attributes: list[dict[str, str]] = []
    relations: list[dict[str, str]] = []
    positions: list[tuple[int, str]] = []
    i = 0
    while i < len(words):
        if words[i] in DETERMINERS:
            j, adjs = i + 1, []
            while j < len(words) and (words[j] in COLORS or words[j] in MATERIALS):
                adjs.append(words[j])
                j += 1
            if j < len(words) and words[j] not in STOP and words[j] not in DETERMINERS and len(words[j]) > 2:
                noun = words[j]
                if noun not in entities:
                    entities.append(noun)
                for a in adjs:
                    attributes.append({"entity": noun, "type": "color" if a in COLORS else "material", "value": a})
                positions.append((j, noun))
                i = j
        i += 1
    joined = " ".join(words)
    for (_, a), (_, b) in zip(positions, positions[1:], strict=False):
        for prep in PREPOSITIONS:
            if re.search(rf"\b{a}\b[a-z ]{{0,20}}\b{prep}\b (?:the |a |an )?[a-z ]{{0,20}}\b{b}\b", joined):
                relations.append({"source": a, "type": "spatial", "predicate": prep, "target": b})
                break
    return {"entities": [{"name": e} for e in entities], "attributes": attributes, "relations": relations}


QA_PROGRAM_ATTR = """def execute_command(scene_graph):
    attrs = scene_graph.get_attributes({ent!r})
    value = attrs.get({typ!r}, 'unknown')
    return f'The {ent} is {{value}}.'"""
QA_PROGRAM_REL = """def execute_command(scene_graph):
    for target, rels in scene_graph.get_outgoing_relations({ent!r}).items():
        for preds in rels.values():
            return f'The {ent} is {{preds[0]}} the {{target}}.'
    return 'unknown'"""


def template_qa(sg_dict: dict[str, Any], n: int) -> list[dict[str, str]]:
    pairs = []
    for ent, meta in sg_dict.items():
        for typ, value in meta.get("attributes", {}).items():
            q = f"What {typ} is the {ent}?" if typ == "color" else f"What is the {ent} made of?"
            pairs.append(
                {"question": q, "answer": f"The {ent} is {value}.", "program": QA_PROGRAM_ATTR.format(ent=ent, typ=typ)}
            )
        for target, rels in meta.get("relations_to", {}).items():
            pred = next(iter(rels.values()))[0]
            pairs.append(
                {
                    "question": f"Where is the {ent}?",
                    "answer": f"The {ent} is {pred} the {target}.",
                    "program": QA_PROGRAM_REL.format(ent=ent),
                }
            )
    return pairs[:n]


def judge_reply(body: dict[str, Any], last: str) -> dict[str, Any]:
    """Rubric judge by rules: the share of the answer's content words found in the description
    (text judge) sets the score 1-5; with no description (VLM judge) the score is 3. A sample at
    temperature > 0 moves it by its seed (odd seeds one point down), so spread is measurable."""
    answer = last.split("Model answer:", 1)[-1]
    words = set(re.findall(r"[a-z]+", answer.lower())) - STOP - DETERMINERS
    if "Description of the image:" in last:
        description = set(re.findall(r"[a-z]+", last.split("Question:", 1)[0].lower()))
        share = len(words & description) / max(1, len(words))
        score = 1 + round(4 * share)
    else:
        score = 3
    if body.get("temperature", 0) > 0 and body.get("seed", 0) % 2:
        score = max(1, score - 1)
    return {
        "accurate_claims": sorted(words)[:2],
        "inaccurate_claims": [],
        "hallucinated_objects": [],
        "score": score,
    }


def word_question(target: str) -> dict[str, str]:
    """The question of a planned target by rules: its instruction as a question."""
    instruction = target.split(" Answer: ", 1)[0]
    asked = instruction.removeprefix("Ask ").split(" (")[0].split(". Call it")[0].split(", without")[0]
    question = asked.rstrip(".") + "?"
    return {"question": question[0].upper() + question[1:]}


def default_reply(body: dict[str, Any]) -> str:
    """Answer a PROVE prompt by rules (see module docstring)."""
    messages = body["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    last = messages[-1]["content"]
    if isinstance(last, list):  # vision request: text part after the image
        last = " ".join(p.get("text", "") for p in last if p.get("type") == "text")
    if "extract a scene graph" in system:
        return json.dumps(naive_tuples(last.split("Text:", 1)[-1]))
    if "Consider the SceneGraph class" in system:
        sg = json.loads(last.split("Tuple dictionary:", 1)[1].strip())
        return "\n".join(
            f"Q: {p['question']}\nA: {p['answer']}\n```python\n{p['program']}\n```" for p in template_qa(sg, 12)
        )
    if "You write the question of a question-answer pair" in system:
        return json.dumps(word_question(last))
    if "You fix the question of a question-answer pair" in system:
        return json.dumps({"question": last.split("Your question:", 1)[1].split("\n")[0].strip()})
    if "fix a question-answer pair about an image and its verification" in system:
        pair = last.split("Q:", 1)[1]
        question = pair.split("\n", 1)[0].strip()
        program = (
            "def execute_command(scene_graph):\n"
            "    return 'The scene has ' + str(len(scene_graph.get_entities())) + ' things.'"
        )
        return f"Q: {question}\nA: The scene has some things.\n```python\n{program}\n```"
    if "identify whether each pair" in system:
        n = len(re.findall(r"^\d+\. Question:", last, re.MULTILINE))
        return json.dumps({"judgements": [{"index": i, "verdict": "ok", "reason": "fine"} for i in range(n)]})
    if "evaluating whether a model's answer" in system:
        return json.dumps(judge_reply(body, last))
    if "cannot see" in system:  # caption-oracle: repeat the caption's first sentence mentioning a question word
        caption = last.split("Description of the photo:", 1)[1].split("Question:", 1)[0]
        question_words = set(re.findall(r"[a-z]+", last.split("Question:", 1)[1].lower())) - STOP
        for sentence in re.split(r"(?<=[.!?])\s+", caption.strip()):
            if question_words & set(re.findall(r"[a-z]+", sentence.lower())):
                return sentence
        return caption.strip().split(". ")[0]
    return "It is a shiny purple bicycle next to a tall tree."  # blind / VLM: confident and wrong


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) overflows when a test opens many connections at once on a
    # loaded machine: the kernel drops the SYN and the client retries it only after 1 s.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its timeout passed during an injected hang) closed the socket:
        # the late reply's broken pipe is the fault working, not a server error worth a traceback.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedLLMServer:
    """`with ScriptedLLMServer() as s:` -> s.base_url. Fault injection: `s.faults.append(fn)`,
    where fn(body) returns (status, headers, raw_body) or None to fall through; each fault is
    used once, in order.

    Endpoint misconfiguration, like a real server: `api_key` set -> requests without
    `Authorization: Bearer <api_key>` get 401; `served_models` is what `GET /models` lists and,
    with `strict_models`, chat requests for any other model get 404 (as OpenAI and vLLM do;
    llama.cpp answers any name); `fail_all` = (status, body) answers every chat request with
    that error until set back to None (an endpoint that breaks mid-run); `chaos(body)`, when set,
    is asked on every chat request after the one-shot faults, like a fault (a standing fault
    plan: the soak's random errors, hangs and garbled bodies); `down` = True drops every
    connection, `GET /models` included (an endpoint that is gone for a stretch)."""

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], str] = default_reply,
        delay_s: float = 0.0,
        finish_reason: str = "stop",
        api_key: str | None = None,
        served_models: tuple[str, ...] = ("scripted",),
        strict_models: bool = False,
        keep_requests: bool = True,
    ):
        self.reply = reply
        self.delay_s = delay_s
        self.finish_reason = finish_reason
        self.api_key = api_key
        self.served_models = served_models
        self.strict_models = strict_models
        self.fail_all: tuple[int, bytes] | None = None
        self.chaos: Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes] | None] | None = None
        self.down = False
        self.get_requests: list[str] = []  # paths of GET requests (GET /models)
        # Every request body, for tests to read; a soak of tens of thousands of requests with
        # images in them keeps only the count (`keep_requests=False`).
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self._chat_count = 0
        self.request_headers: list[dict[str, str]] = []  # HTTP headers of each request, same order
        self.faults: deque[Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes] | None]] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _unauthorized(self) -> bool:
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
                    self._send(401, {}, json.dumps({"error": error}).encode())
                    return True
                return False

            def _drop(self) -> None:
                self.close_connection = True
                self.connection.shutdown(2)

            def do_GET(self) -> None:
                with server._lock:
                    server.get_requests.append(self.path)
                if server.down:
                    self._drop()
                    return
                if self._unauthorized():
                    return
                models = [{"id": m, "object": "model", "owned_by": "scripted"} for m in server.served_models]
                self._send(200, {}, json.dumps({"object": "list", "data": models}).encode())

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with server._lock:
                    server._chat_count += 1
                    if server.keep_requests:
                        server.requests.append(body)
                    server.request_headers.append(dict(self.headers.items()))
                    fault = server.faults.popleft() if server.faults else None
                    fail_all = server.fail_all
                if server.down:
                    self._drop()
                    return
                if fault is None and server.chaos is not None:
                    fault = server.chaos
                if self._unauthorized():
                    return
                if server.strict_models and body.get("model") not in server.served_models:
                    error = {"message": f"The model `{body.get('model')}` does not exist", "code": "model_not_found"}
                    self._send(404, {}, json.dumps({"error": error}).encode())
                    return
                if fail_all is not None:
                    self._send(fail_all[0], {}, fail_all[1])
                    return
                if server.delay_s:
                    time.sleep(server.delay_s)
                if fault is not None:
                    out = fault(body)
                    if out is not None:
                        status, headers, raw = out
                        if status == 0:  # drop the connection
                            self._drop()
                            return
                        self._send(status, headers, raw)
                        return
                content = server.reply(body)
                resp = {
                    "id": "scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": server.finish_reason,
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                self._send(200, {}, json.dumps(resp).encode())

            def _send(self, status: int, headers: dict[str, str], raw: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> int:
        return self._chat_count

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
