"""The evaluators practitioners reach for first (the multimodal-eval guide), to run beside PROVE.

Pure Python, no Dagster. Each takes a response and what the benchmark knows about its question:

- **VQA match** (the guide's `eval_vqa`): normalise (lowercase, strip punctuation, drop the
  articles a/an/the, collapse whitespace); 1.0 when the response equals a reference answer,
  0.5 when one contains the other, else 0.0. References: the verified answer and the
  verification program's output (both passed PROVE's check).
- **Token F1** (the guide's `eval_text_extraction`): normalise (lowercase, whitespace,
  punctuation); 1.0 on an exact match, else the F1 of the two token *sets*. `text_f1` applies it
  to questions about rendered text (the text itself vs what the response quotes); `answer_f1`
  to every question (the whole response vs the verified answer), as a plain overlap baseline.
- **CHAIR-style object hallucination** (Rohrbach et al. 2018, "CHAIR"): objects named in the
  response, found with a fixed vocabulary of object words and their synonyms (`OBJECT_SYNONYMS`,
  written for this project), that the image's scene graph does not contain. CHAIR_i of a
  response = hallucinated object mentions / object mentions; CHAIR_s of a model = share of its
  responses with at least one hallucinated object. (The guide's code swaps the two names; these
  are the original paper's.) The vocabulary is fixed on purpose: adding each image's own entity
  names would recognise correct objects more often than hallucinated ones and bias CHAIR_i down.
- **Judge with a rubric**: the guide's 1-5 factual-accuracy rubric with structured JSON output
  (`JUDGE_SCHEMA`, `parse_judgement`); the prompts live in `prompts/judge_*.md`.
- Agreement: rank correlation (Spearman, Kendall) between evaluators, and the spread of a
  judge's repeated judgements (self-consistency).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import pandas as pd

from prove_assets.core.text import singular as singular_by_spelling

# --- normalisation (the guide's) -------------------------------------------------------------
_PUNCT = re.compile(r"[^\w\s]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPACES = re.compile(r"\s+")


def normalize_answer(text: str | None) -> str:
    """The guide's VQA normalisation: lowercase, no punctuation, no articles, single spaces."""
    s = _PUNCT.sub("", (text or "").lower().strip())
    s = _ARTICLES.sub("", s)
    return " ".join(s.split())


def normalize_text(text: str | None) -> str:
    """The guide's text-extraction normalisation: lowercase, single spaces, no punctuation
    (articles kept: in rendered text they are part of what is written)."""
    s = _SPACES.sub(" ", (text or "").lower()).strip()
    return _PUNCT.sub("", s)


# --- VQA match ----------------------------------------------------------------------------
@dataclass(frozen=True)
class VQAMatch:
    score: float  # 1.0 exact, 0.5 containment, 0.0 none
    match_type: str  # exact | partial | none
    reference: str | None = None  # the reference it matched


def vqa_match(response: str | None, references: Iterable[str | None]) -> VQAMatch:
    """Normalised exact match with the guide's partial credit (0.5 when one normalised string
    contains the other). Empty references are ignored; an empty response matches nothing."""
    norm = normalize_answer(response)
    refs = [(r, normalize_answer(r)) for r in references if r and normalize_answer(r)]
    if not norm or not refs:
        return VQAMatch(0.0, "none")
    for raw, ref in refs:
        if norm == ref:
            return VQAMatch(1.0, "exact", raw)
    for raw, ref in refs:
        if _contains(norm, ref) or _contains(ref, norm):
            return VQAMatch(0.5, "partial", raw)
    return VQAMatch(0.0, "none")


def _contains(haystack: str, needle: str) -> bool:
    """Whole-word containment ('red' is in 'glossy red', not in 'tired')."""
    return f" {needle} " in f" {haystack} "


# --- token F1 -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenF1:
    f1: float
    precision: float
    recall: float
    match_type: str  # exact | partial | none


def token_f1(prediction: str | None, reference: str | None) -> TokenF1:
    """The guide's text-extraction score: exact after normalisation -> 1.0, else F1 of the
    token sets. An empty reference is only matched by an empty prediction."""
    a, b = normalize_text(prediction), normalize_text(reference)
    if a == b:
        return TokenF1(1.0, 1.0, 1.0, "exact")
    pred, ref = set(a.split()), set(b.split())
    overlap = pred & ref
    if not overlap:
        return TokenF1(0.0, 0.0, 0.0, "none")
    p, r = len(overlap) / len(pred), len(overlap) / len(ref)
    return TokenF1(2 * p * r / (p + r), p, r, "partial")


_TEXT_QUESTION = re.compile(
    r"\b(text|texts|written|writing|write|say|says|said|read|reads|word|words|letter|letters|lettering|"
    r"label|labels|labeled|labelled|inscription|inscribed|printed|print|title|name|names|logo|slogan)\b"
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<![a-z])'([^']{2,})'(?![a-z])", re.IGNORECASE)


def quoted_spans(text: str | None) -> list[str]:
    """Text in double quotes (straight or curly) or in single quotes not used as apostrophes."""
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text or "")]


def is_text_question(question: str, rendered_text: Sequence[str] = ()) -> bool:
    """A question about rendered text: its answer has a `text rendering` tuple, or the question
    asks what something says / reads / is written / is named."""
    return bool(rendered_text) or bool(_TEXT_QUESTION.search(question.lower()))


def text_reference(answer: str, rendered_text: Sequence[str] = ()) -> str:
    """What a text question's answer says is written: its `text rendering` values, else its
    quoted spans, else the whole answer."""
    spans = [t.strip("\"'“” ") for t in rendered_text if t] or quoted_spans(answer)
    return " ".join(spans) if spans else answer


def text_extraction_f1(response: str | None, answer: str, rendered_text: Sequence[str] = ()) -> TokenF1:
    """Token F1 of the text a response reports (what it quotes, else all of it) against the
    rendered text of the verified answer."""
    quoted = quoted_spans(response)
    return token_f1(" ".join(quoted) if quoted else response, text_reference(answer, rendered_text))


# --- CHAIR-style object hallucination -----------------------------------------------------
# canonical object -> words and phrases that name it. Written for this project: COCO's 80
# categories (as CHAIR uses them) plus common scene, household, clothing and space objects.
# Left out on purpose: words that are mostly something else in image descriptions ("orange",
# "glass", "light", "top", "back", "watch", "can", "stand", "frame", "model", "tie", "sink",
# "fan", "surface", "background"), and generic container words that name whatever holds
# something ("dish", "vessel", "container").
# fmt: off
OBJECT_SYNONYMS: dict[str, tuple[str, ...]] = {
    "person": (
        "person", "people", "man", "woman", "boy", "girl", "child", "kid", "lady", "gentleman", "guy",
        "baby", "toddler", "adult", "teenager", "astronaut", "player", "rider", "pilot", "officer", "sailor",
        "soldier", "worker", "student", "teacher", "admiral", "scientist", "human", "men", "women",
        "children",
    ),
    "bicycle": ("bicycle", "bike"),
    "car": ("car", "automobile", "sedan", "taxi", "suv", "jeep"),
    "motorcycle": ("motorcycle", "motorbike", "scooter", "moped", "dirt bike"),
    "airplane": ("airplane", "aeroplane", "plane", "jet", "aircraft", "airliner"),
    "bus": ("bus",),
    "train": ("train", "locomotive", "railcar", "tram"),
    "truck": ("truck", "lorry", "pickup truck", "van"),
    "boat": ("boat", "ship", "sailboat", "canoe", "kayak", "yacht", "ferry"),
    "traffic light": ("traffic light", "traffic signal", "stoplight"),
    "fire hydrant": ("fire hydrant", "hydrant"),
    "stop sign": ("stop sign",),
    "sign": ("sign", "signboard", "placard", "billboard", "signpost"),
    "bench": ("bench",),
    "bird": ("bird", "pigeon", "sparrow", "duck", "goose", "parrot", "seagull", "gull", "eagle", "crow"),
    "cat": ("cat", "kitten", "kitty", "tabby"),
    "dog": ("dog", "puppy", "pup", "hound"),
    "horse": ("horse", "pony", "foal"),
    "sheep": ("sheep", "lamb"),
    "cow": ("cow", "cattle", "bull", "calf", "ox"),
    "elephant": ("elephant",),
    "bear": ("bear", "teddy bear"),
    "zebra": ("zebra",),
    "giraffe": ("giraffe",),
    "backpack": ("backpack", "rucksack"),
    "umbrella": ("umbrella", "parasol"),
    "handbag": ("handbag", "purse", "bag", "tote"),
    "necktie": ("necktie", "bow tie"),
    "suitcase": ("suitcase", "luggage", "briefcase"),
    "frisbee": ("frisbee",),
    "skis": ("ski", "skis"),
    "snowboard": ("snowboard",),
    "ball": ("ball", "football", "soccer ball", "basketball", "tennis ball", "baseball"),
    "kite": ("kite",),
    "baseball bat": ("baseball bat",),
    "baseball glove": ("baseball glove", "mitt"),
    "skateboard": ("skateboard",),
    "surfboard": ("surfboard",),
    "tennis racket": ("tennis racket", "racket", "racquet"),
    "bottle": ("bottle", "flask"),
    "wine glass": ("wine glass", "wine glasses", "goblet"),
    "cup": ("cup", "mug", "teacup", "espresso cup", "coffee cup", "demitasse"),
    "saucer": ("saucer",),
    "fork": ("fork",),
    "knife": ("knife", "knives"),
    "spoon": ("spoon", "teaspoon"),
    "bowl": ("bowl",),
    "plate": ("plate", "platter"),
    "banana": ("banana",),
    "apple": ("apple",),
    "sandwich": ("sandwich", "burger", "hamburger"),
    "broccoli": ("broccoli",),
    "carrot": ("carrot",),
    "hot dog": ("hot dog",),
    "pizza": ("pizza",),
    "donut": ("donut", "doughnut"),
    "cake": ("cake", "cupcake", "pastry"),
    "chair": ("chair", "stool", "armchair"),
    "couch": ("couch", "sofa"),
    "potted plant": ("potted plant", "houseplant", "plant", "flowerpot", "pot plant"),
    "bed": ("bed",),
    "table": ("table", "tabletop", "desk", "countertop", "counter", "dining table"),
    "toilet": ("toilet",),
    "tv": ("tv", "television", "monitor", "screen"),
    "laptop": ("laptop", "notebook computer", "computer"),
    "computer mouse": ("computer mouse",),
    "remote control": ("remote control",),
    "keyboard": ("keyboard",),
    "cell phone": ("cell phone", "phone", "smartphone", "mobile phone", "cellphone"),
    "microwave": ("microwave",),
    "oven": ("oven", "stove"),
    "toaster": ("toaster",),
    "refrigerator": ("refrigerator", "fridge"),
    "book": ("book", "novel", "magazine"),
    "clock": ("clock",),
    "vase": ("vase",),
    "scissors": ("scissors",),
    "hair drier": ("hair drier", "hair dryer"),
    "toothbrush": ("toothbrush",),
    # scene and household
    "tree": ("tree", "palm", "pine"),
    "flower": ("flower", "blossom", "bloom", "petal", "daisy", "rose", "tulip", "sunflower"),
    "leaf": ("leaf", "leaves", "foliage"),
    "grass": ("grass", "lawn"),
    "bush": ("bush", "shrub", "hedge"),
    "rock": ("rock", "stone", "boulder", "pebble"),
    "mountain": ("mountain", "hill", "peak"),
    "sky": ("sky",),
    "cloud": ("cloud",),
    "sun": ("sun",),
    "moon": ("moon",),
    "star": ("star",),
    "galaxy": ("galaxy", "galaxies", "nebula"),
    "water": ("water", "river", "lake", "sea", "ocean", "pond", "stream"),
    "road": ("road", "street", "highway", "path", "sidewalk", "pavement"),
    "building": ("building", "house", "temple", "pagoda", "tower", "church", "palace", "pavilion", "skyscraper"),
    "roof": ("roof", "rooftop", "eaves"),
    "window": ("window", "windowpane"),
    "door": ("door", "doorway", "gate"),
    "wall": ("wall",),
    "floor": ("floor", "ground"),
    "fence": ("fence", "railing", "rail"),
    "pole": ("pole", "post", "lamppost"),
    "lamp": ("lamp", "lantern", "bulb", "chandelier"),
    "curtain": ("curtain", "drape"),
    "rug": ("rug", "carpet", "mat"),
    "pillow": ("pillow", "cushion"),
    "blanket": ("blanket", "quilt"),
    "box": ("box", "crate", "carton"),
    "basket": ("basket",),
    "shelf": ("shelf", "shelves", "bookshelf", "cabinet", "cupboard"),
    "mirror": ("mirror",),
    "painting": ("painting", "picture", "poster", "photograph", "artwork"),
    "candle": ("candle",),
    "napkin": ("napkin", "tissue"),
    "tray": ("tray",),
    "pen": ("pen", "pencil"),
    "paper": ("paper", "document", "page", "envelope"),
    "coin": ("coin",),
    # clothing and accessories
    "shirt": ("shirt", "t shirt", "blouse"),
    "jacket": ("jacket", "coat", "blazer", "uniform"),
    "dress": ("dress", "gown", "skirt"),
    "pants": ("pants", "trousers", "jeans", "shorts"),
    "hat": ("hat", "cap", "beanie"),
    "helmet": ("helmet", "visor"),
    "shoe": ("shoe", "boot", "sneaker", "sandal"),
    "glove": ("glove",),
    "glasses": ("glasses", "eyeglasses", "spectacles", "sunglasses", "goggles"),
    "necklace": ("necklace", "pendant", "chain"),
    "ring": ("ring",),
    "scarf": ("scarf",),
    "belt": ("belt", "strap"),
    "badge": ("badge", "patch", "emblem", "insignia", "medal", "pin", "name tag", "nametag", "tag"),
    "spacesuit": ("spacesuit", "space suit", "flight suit", "suit", "jumpsuit"),
    "flag": ("flag", "banner"),
    # vehicles and machines, space
    "rocket": ("rocket", "missile", "launch vehicle"),
    "space shuttle": ("space shuttle", "shuttle", "orbiter"),
    "satellite": ("satellite",),
    "wheel": ("wheel", "tire", "tyre"),
    "engine": ("engine", "motor"),
    "headlight": ("headlight", "headlamp"),
    "seat": ("seat", "saddle"),
    "handlebar": ("handlebar", "handlebars"),
    "tank": ("tank", "fuel tank", "gas tank"),
    "exhaust": ("exhaust", "exhaust pipe", "muffler", "tailpipe"),
    "launch pad": ("launch pad", "launchpad", "launch tower", "gantry"),
    "smoke": ("smoke", "steam", "exhaust plume", "plume"),
    "fire": ("fire", "flame", "flames"),
    # animals and body (CHAIR-style object words only where unambiguous)
    "fish": ("fish",),
    "insect": ("insect", "bee", "butterfly", "ant", "beetle"),
    "whisker": ("whisker", "whiskers"),
    "tail": ("tail",),
    "eye": ("eye",),
    "ear": ("ear",),
    "hair": ("hair",),
    "hand": ("hand", "finger"),
    "face": ("face",),
}
# fmt: on

_IRREGULAR = {
    "people": "person",
    "men": "man",
    "women": "woman",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "leaves": "leaf",
    "knives": "knife",
    "shelves": "shelf",
    "geese": "goose",
    "galaxies": "galaxy",
}
# fmt: off
_NO_SINGULAR = {"glasses", "scissors", "pants", "trousers", "jeans", "shorts", "skis", "goggles", "sunglasses",
                "handlebars", "whiskers", "eyeglasses", "spectacles", "flames", "bus", "gas", "canvas", "cactus"}
# fmt: on


def singular(word: str) -> str:
    """An object word's singular: the project's plural rule (core/text.py) with this vocabulary's
    irregular plurals (people -> person) and words that are plural only (glasses, scissors)."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    return word if word in _NO_SINGULAR else singular_by_spelling(word)


def _phrase_key(phrase: str) -> tuple[str, ...]:
    return tuple(singular(w) for w in re.findall(r"[a-z]+", phrase.lower()))


def build_vocabulary(synonyms: dict[str, Sequence[str]] = OBJECT_SYNONYMS) -> dict[tuple[str, ...], str]:
    """(singularised words of a synonym) -> canonical object. A phrase listed under two objects
    is a mistake in the table and raises."""
    vocab: dict[tuple[str, ...], str] = {}
    for canonical, words in synonyms.items():
        for phrase in (canonical, *words):
            key = _phrase_key(phrase)
            if key in vocab and vocab[key] != canonical:
                raise ValueError(f"{phrase!r} is listed under both {vocab[key]!r} and {canonical!r}")
            vocab[key] = canonical
    return vocab


VOCABULARY = build_vocabulary()
_MAX_PHRASE = max(len(k) for k in VOCABULARY)


def object_mentions(text: str | None, vocabulary: dict[tuple[str, ...], str] = VOCABULARY) -> list[str]:
    """Canonical objects named in a text, in order, one per mention; the longest phrase wins
    ("fire hydrant" is a fire hydrant, not a fire)."""
    words = [singular(w) for w in re.findall(r"[a-z]+", (text or "").lower())]
    out: list[str] = []
    i = 0
    while i < len(words):
        for n in range(min(_MAX_PHRASE, len(words) - i), 0, -1):
            hit = vocabulary.get(tuple(words[i : i + n]))
            if hit:
                out.append(hit)
                i += n
                break
        else:
            i += 1
    return out


def scene_objects(entity_names: Iterable[str], vocabulary: dict[tuple[str, ...], str] = VOCABULARY) -> set[str]:
    """The canonical objects a scene graph contains: every vocabulary object named in its entity
    names ("espresso cup" -> cup, "left window" -> window, "name tag" -> badge)."""
    found: set[str] = set()
    for name in entity_names:
        found.update(object_mentions(name, vocabulary))
    return found


@dataclass(frozen=True)
class ChairResult:
    mentioned: list[str]  # canonical objects, once each, in order of first mention
    hallucinated: list[str]  # mentioned and not in the scene graph
    hallucinated_vs_caption: list[str]  # ... nor anywhere in the caption text
    chair_i: float | None  # hallucinated / mentioned; None when no object is named

    @property
    def has_hallucination(self) -> bool:
        return bool(self.hallucinated)


def chair(
    response: str | None,
    scene_entities: Iterable[str],
    caption: str | None = None,
    vocabulary: dict[tuple[str, ...], str] = VOCABULARY,
) -> ChairResult:
    """CHAIR for one response against its image's scene graph (entity names). Objects are counted
    once per response, as CHAIR counts them per caption. `hallucinated_vs_caption` also checks
    the caption's text, which shows what the scene-graph extraction missed."""
    mentioned = list(dict.fromkeys(object_mentions(response, vocabulary)))
    present = scene_objects(scene_entities, vocabulary)
    hallucinated = [o for o in mentioned if o not in present]
    in_caption = set(object_mentions(caption, vocabulary)) if caption else set()
    return ChairResult(
        mentioned=mentioned,
        hallucinated=hallucinated,
        hallucinated_vs_caption=[o for o in hallucinated if o not in in_caption],
        chair_i=len(hallucinated) / len(mentioned) if mentioned else None,
    )


def chair_summary(rows: pd.DataFrame) -> dict[str, float | int | None]:
    """Per model: CHAIR_s = share of responses (naming at least one object) with a hallucinated
    object; CHAIR_i pooled = hallucinated mentions / mentions; mean of the per-response CHAIR_i."""
    named = rows[rows["n_objects"] > 0]
    mentions = int(named["n_objects"].sum())
    halluc = int(named["n_hallucinated_objects"].sum())
    return {
        "responses_naming_objects": len(named),
        "chair_s": float((named["n_hallucinated_objects"] > 0).mean()) if len(named) else None,
        "chair_i_pooled": halluc / mentions if mentions else None,
        "chair_i_mean": float(named["chair_i"].mean()) if len(named) else None,
    }


# --- judge with a rubric ------------------------------------------------------------------
# The guide's output, claims first: a small model then states what it checked before it scores
# (with the score first, the lists only justify a number already written). Lists are bounded
# so a looping model stops early.
_CLAIMS = {"type": "array", "items": {"type": "string"}, "maxItems": 4}
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "accurate_claims": _CLAIMS,
        "inaccurate_claims": _CLAIMS,
        "hallucinated_objects": _CLAIMS,
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["accurate_claims", "inaccurate_claims", "hallucinated_objects", "score"],
}


@dataclass(frozen=True)
class Judgement:
    score: int  # 1-5, the guide's factual-accuracy rubric
    accurate_claims: list[str] = field(default_factory=list)
    inaccurate_claims: list[str] = field(default_factory=list)
    hallucinated_objects: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """The guide's pass mark: score >= 4."""
        return self.score >= 4


def _str_list(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a list of strings, got {type(value).__name__}")
    return [str(v).strip() for v in value if str(v).strip()]


def parse_judgement(data: Any) -> Judgement:
    """Validate a judge's JSON: an integer score 1-5 (4, 4.0 or "4"), lists of strings. Raises
    ValueError (which triggers the gateway's one repair request) on anything else."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    raw = data.get("score")
    try:
        score_f = float(str(raw).strip())
    except (TypeError, ValueError):
        raise ValueError(f"score must be an integer from 1 to 5, got {raw!r}") from None
    if not score_f.is_integer() or not 1 <= score_f <= 5:
        raise ValueError(f"score must be an integer from 1 to 5, got {raw!r}")
    return Judgement(
        score=int(score_f),
        accurate_claims=_str_list(data.get("accurate_claims"), "accurate_claims"),
        inaccurate_claims=_str_list(data.get("inaccurate_claims"), "inaccurate_claims"),
        hallucinated_objects=_str_list(data.get("hallucinated_objects"), "hallucinated_objects"),
    )


def rubric_to_unit(score: float | None) -> float | None:
    """A 1-5 rubric score on the 0-1 scale of the other evaluators: (score - 1) / 4."""
    return None if score is None or (isinstance(score, float) and math.isnan(score)) else (score - 1) / 4


@dataclass(frozen=True)
class Spread:
    n: int
    mean: float | None
    std: float | None  # population standard deviation of the k scores
    range: int | None  # max - min
    unanimous: bool | None  # all k the same


def spread(scores: Sequence[int | None]) -> Spread:
    """How much k repeated judgements of the same item disagree (failed ones ignored)."""
    xs = [float(s) for s in scores if s is not None and not (isinstance(s, float) and math.isnan(s))]
    if not xs:
        return Spread(0, None, None, None, None)
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    return Spread(len(xs), mean, std, int(max(xs) - min(xs)), max(xs) == min(xs))


# --- agreement ----------------------------------------------------------------------------
def rank_correlations(df: pd.DataFrame, columns: Sequence[str], level: str) -> pd.DataFrame:
    """Spearman's rho and Kendall's tau-b (scipy) between every pair of `columns`, over the rows
    where both are known. NaN where fewer than 3 rows or a column is constant (no ranking)."""
    from scipy.stats import kendalltau, spearmanr

    rows = []
    for a, b in combinations([c for c in columns if c in df], 2):
        pair = df[[a, b]].apply(pd.to_numeric, errors="coerce").dropna()
        n = len(pair)
        rho = tau = p_rho = p_tau = float("nan")
        note = ""
        if n < 3:
            note = "fewer than 3 pairs"
        elif pair[a].nunique() < 2 or pair[b].nunique() < 2:
            note = "constant: " + ", ".join(c for c in (a, b) if pair[c].nunique() < 2)
        else:
            rho, p_rho = (float(x) for x in spearmanr(pair[a], pair[b]))
            tau, p_tau = (float(x) for x in kendalltau(pair[a], pair[b]))
        rows.append(
            {
                "level": level,
                "evaluator_a": a,
                "evaluator_b": b,
                "n": n,
                "spearman": round(rho, 3),
                "spearman_p": round(p_rho, 3),
                "kendall": round(tau, 3),
                "kendall_p": round(p_tau, 3),
                "note": note,
            }
        )
    return pd.DataFrame(
        rows,
        columns=["level", "evaluator_a", "evaluator_b", "n", "spearman", "spearman_p", "kendall", "kendall_p", "note"],
    )


# --- the agreement report -----------------------------------------------------------------
# Per-response columns compared, all oriented so that higher is better, with their labels.
EVALUATORS: dict[str, str] = {
    "prove_h": "PROVE H",
    "prove_t": "PROVE T",
    "strict_h": "strict H",
    "strict_t": "strict T",
    "vqa_match": "VQA match",
    "answer_f1": "answer token F1",
    "text_f1": "text F1",
    "chair_free": "1 - CHAIR_i",
    "judge_text": "text judge",
    "judge_vlm": "VLM judge",
}
KEYS = ["model", "shard", "qa_id"]


def response_table(scores: pd.DataFrame, evaluators: pd.DataFrame, judges: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, shard, qa_id) with every evaluator's score: PROVE's H and T from
    `response_scores` (scorer 'paper', and 'strict' when present), the deterministic
    evaluators, and each judge's temperature-0 score (1-5) with its samples' spread."""
    out = pd.DataFrame(columns=KEYS)
    if len(scores):
        ok = scores[scores["error"].isna()] if "error" in scores else scores
        if "scorer" not in ok:
            ok = ok.assign(scorer="paper")
        for scorer, prefix in (("paper", "prove"), ("strict", "strict")):
            part = ok[ok["scorer"] == scorer][[*KEYS, "helpfulness", "truthfulness"]]
            part = part.rename(columns={"helpfulness": f"{prefix}_h", "truthfulness": f"{prefix}_t"})
            if len(part):
                out = part if out.empty else out.merge(part, on=KEYS, how="outer")
    if len(evaluators):
        ev = evaluators[evaluators["error"].isna()].copy()
        ev["chair_free"] = 1 - ev["chair_i"].astype(float)
        cols = ["vqa_match", "answer_f1", "text_f1", "chair_i", "chair_free", "n_objects", "n_hallucinated_objects"]
        out = ev[[*KEYS, *cols]] if out.empty else out.merge(ev[[*KEYS, *cols]], on=KEYS, how="outer")
    if len(judges):
        js = judges[judges["error"].isna()]
        for kind, g in js.groupby("judge"):
            part = g[[*KEYS, "score", "sample_std", "sample_range"]].rename(
                columns={
                    "score": f"judge_{kind}",
                    "sample_std": f"judge_{kind}_sample_std",
                    "sample_range": f"judge_{kind}_sample_range",
                }
            )
            out = part if out.empty else out.merge(part, on=KEYS, how="outer")
    return out.sort_values(KEYS).reset_index(drop=True)


def _pct(series: pd.Series) -> float:
    s = pd.to_numeric(series, errors="coerce").dropna()
    return round(float(s.mean()) * 100, 1) if len(s) else float("nan")


def per_model_table(responses: pd.DataFrame) -> pd.DataFrame:
    """Per model: each evaluator's score beside PROVE's H and T. Percentages (0-100) except the
    judges (mean rubric score, 1-5). CHAIR_i is pooled over the model's object mentions, CHAIR_s
    is the share of its responses naming an object that name a hallucinated one."""
    rows = []
    for model, g in responses.groupby("model", sort=True):
        row: dict[str, Any] = {"model": model, "n": len(g)}
        for col in ("prove_h", "prove_t", "strict_h", "strict_t", "vqa_match", "answer_f1"):
            if col in g:
                row[EVALUATORS[col]] = _pct(g[col])
        if "text_f1" in g:
            row["text F1"] = _pct(g["text_f1"])
            row["text questions"] = int(g["text_f1"].notna().sum())
        if "n_objects" in g:
            ch = chair_summary(g.assign(n_objects=g["n_objects"].fillna(0)).dropna(subset=["chair_i"]))
            row["CHAIR_i"] = round(ch["chair_i_pooled"] * 100, 1) if ch["chair_i_pooled"] is not None else float("nan")
            row["CHAIR_s"] = round(ch["chair_s"] * 100, 1) if ch["chair_s"] is not None else float("nan")
        for kind in ("text", "vlm"):
            col = f"judge_{kind}"
            if col in g:
                s = pd.to_numeric(g[col], errors="coerce").dropna()
                row[f"{kind} judge (1-5)"] = round(float(s.mean()), 2) if len(s) else float("nan")
                row[f"{kind} judge pass"] = _pct((s >= 4).astype(float)) if len(s) else float("nan")
                row[f"{kind} judge sample std"] = round(float(g[f"{col}_sample_std"].mean()), 2)
        rows.append(row)
    return pd.DataFrame(rows)


def model_level_scores(responses: pd.DataFrame) -> pd.DataFrame:
    """Per-model means of every evaluator column (higher is better), for rank correlation
    across models; 1 - CHAIR_i pooled over mentions as in `per_model_table`."""
    cols = [c for c in EVALUATORS if c in responses]
    out = responses.groupby("model")[cols].mean(numeric_only=True)
    if "n_objects" in responses:
        named = responses[responses["n_objects"].fillna(0) > 0]
        pooled = named.groupby("model")[["n_hallucinated_objects", "n_objects"]].sum()
        out["chair_free"] = 1 - pooled["n_hallucinated_objects"] / pooled["n_objects"]
    return out.reset_index()


def agreement_vs_prove(correlations: pd.DataFrame) -> pd.DataFrame:
    """The compact view of `rank_correlations` output (evaluator labels as in `EVALUATORS`):
    each evaluator's Spearman rho and Kendall tau with PROVE's H and T, across models and
    across responses."""
    rows = []
    refs = (EVALUATORS["prove_h"], EVALUATORS["prove_t"])
    for ev in [label for label in EVALUATORS.values() if label not in refs]:
        row: dict[str, Any] = {"evaluator": ev}
        for level in ("models", "responses"):
            for ref in refs:
                hit = correlations[
                    (correlations["level"] == level)
                    & (
                        ((correlations["evaluator_a"] == ref) & (correlations["evaluator_b"] == ev))
                        | ((correlations["evaluator_a"] == ev) & (correlations["evaluator_b"] == ref))
                    )
                ]
                if len(hit):
                    row[f"n {level}"] = int(hit.iloc[0]["n"])
                    row[f"rho {ref} ({level})"] = hit.iloc[0]["spearman"]
                    row[f"tau {ref} ({level})"] = hit.iloc[0]["kendall"]
        if len(row) > 1:
            rows.append(row)
    return pd.DataFrame(rows)


def consistency_table(judges: pd.DataFrame) -> pd.DataFrame:
    """Per judge (and per model): how much the k repeated judgements of one item disagree."""
    js = judges[judges["error"].isna()] if len(judges) else judges
    rows = []
    if js.empty:
        return pd.DataFrame(
            columns=[
                "judge",
                "model",
                "items",
                "k",
                "mean_std",
                "mean_range",
                "max_range",
                "unanimous",
                "t0_in_sample_range",
            ]  # fmt: skip
        )
    for (kind, model), g in [*js.groupby(["judge", "model"]), *((("" + k, "all"), g) for k, g in js.groupby("judge"))]:
        samples = [json.loads(s) if isinstance(s, str) else [] for s in g["samples"]]
        k = max((len(s) for s in samples), default=0)
        in_range = [
            min(x for x in s if x is not None) <= t <= max(x for x in s if x is not None)
            for s, t in zip(samples, g["score"], strict=True)
            if any(x is not None for x in s) and t == t
        ]
        rows.append(
            {
                "judge": kind,
                "model": model,
                "items": len(g),
                "k": k,
                "mean_std": round(float(g["sample_std"].mean()), 3) if g["sample_std"].notna().any() else None,
                "mean_range": round(float(g["sample_range"].mean()), 2) if g["sample_range"].notna().any() else None,
                "max_range": int(g["sample_range"].max()) if g["sample_range"].notna().any() else None,
                "unanimous": round(float(g["sample_unanimous"].astype(float).mean()), 2)
                if g["sample_unanimous"].notna().any()
                else None,
                "t0_in_sample_range": round(sum(in_range) / len(in_range), 2) if in_range else None,
            }
        )
    return pd.DataFrame(rows)


# --- injected hallucinations (the calibration cases of prove_assets.core.reports.calibration) ---------
def render_tuples(tuples: Iterable[Any]) -> str:
    """A response made of tuples as text: one short sentence per tuple (`SceneTuple.text`)."""
    return " ".join(f"{t.text}." for t in tuples)


def evaluate_perturbations(cases: Iterable[Any]) -> pd.DataFrame:
    """The deterministic evaluators on the calibration cases (faithful responses with one known
    perturbation each; `prove_assets.core.reports.calibration.Case`). Both the faithful response and the
    perturbed one are rendered as text from their tuples; the faithful one is the reference.
    Flagged: VQA match below 1 (an exact match no longer), token F1 below the guide's 0.9 pass
    mark, CHAIR naming a hallucinated object the faithful response did not. For a paraphrase
    (no hallucination) a flag is a false alarm."""
    rows = []
    for case in cases:
        faithful = render_tuples(case.source.answer)
        perturbed = render_tuples(case.response)
        entities = [t.entity for t in case.source.reference if t.kind == "entity"] or [
            t.entity for t in case.source.reference
        ]
        before = set(chair(faithful, entities).hallucinated)
        after = chair(perturbed, entities)
        vqa = vqa_match(perturbed, [faithful]).score
        f1 = token_f1(perturbed, faithful).f1
        new_objects = [o for o in after.hallucinated if o not in before]
        for evaluator, flagged, value in (
            ("VQA match", vqa < 1.0, vqa),
            ("token F1", f1 < 0.9, f1),
            ("CHAIR", bool(new_objects), len(new_objects)),
        ):
            rows.append(
                {
                    "case_id": case.case_id,
                    "evaluator": evaluator,
                    "perturbation": case.perturbation,
                    "flagged": flagged,
                    "value": round(float(value), 4),
                }
            )
    return pd.DataFrame(rows, columns=["case_id", "evaluator", "perturbation", "flagged", "value"])


def perturbation_summary(results: pd.DataFrame, prove: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per perturbation type, each evaluator's detection recall (false-alarm rate for the
    paraphrases), beside PROVE's scorers from `metric_calibration` when given."""
    if results.empty:
        return pd.DataFrame(columns=["perturbation", "n"])
    rate = results.groupby(["perturbation", "evaluator"], sort=False)["flagged"].mean().unstack("evaluator")
    out = rate.round(3)
    out.insert(0, "n", results[results["evaluator"] == results["evaluator"].iloc[0]].groupby("perturbation").size())
    if prove is not None and len(prove) and {"scorer", "perturbation"} <= set(prove.columns):
        measure = prove["detection_recall"].fillna(prove["false_alarm_rate"])
        pv = prove.assign(measure=measure).pivot_table(index="perturbation", columns="scorer", values="measure")
        pv.columns = [f"PROVE {c}" for c in pv.columns]
        out = pv.join(out, how="right")
        out = out[["n", *[c for c in out.columns if c != "n"]]]
    out = out.reset_index()
    out["measure"] = out["perturbation"].map(lambda p: "false alarms" if p == "paraphrase" else "recall")
    return out
