"""PLUMBING ONLY: the `transformers` responder backend against a tiny randomly initialised
model built in the test. Its answers are noise; these tests check the machinery (offline
loading, chat template, left-padded batching, decoding only new tokens, per-item fallback,
progress, error slots), never answer quality.

The tiny model is a LLaVA (CLIP vision tower + Llama text model, hidden size 32, 2 layers each)
saved with `save_pretrained`, with a `LlavaProcessor` made of the PIL (no torchvision) CLIP
image processor and a word-level tokenizer built from `tokenizers`, all offline; the Hub is
switched off (HF_HUB_OFFLINE=1) for the whole module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prove_assets.backends.hf_vlm import TransformersResponder, TransformersResponderError
from prove_assets.backends.responders import ModelSpec, Question, respond
from prove_assets_tests.tiny_vlm import build_tiny_llava


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield


@pytest.fixture(scope="module")
def tiny_model(offline: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llava(tmp_path_factory.mktemp("tiny_llava"))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from PIL import Image

    d = tmp_path_factory.mktemp("images")
    Image.new("RGB", (40, 30), (200, 10, 10)).save(d / "red.png")
    Image.new("L", (20, 50), 128).save(d / "grey.png")  # greyscale: must be converted to RGB
    Image.new("RGBA", (33, 33), (0, 0, 255, 128)).save(d / "blue.png")
    return [str(d / n) for n in ("red.png", "grey.png", "blue.png")]


@pytest.fixture(scope="module")
def responder(tiny_model: Path) -> TransformersResponder:
    return TransformersResponder(model_path=str(tiny_model), batch_size=2, device="cpu", max_new_tokens=4)


def test_plumbing_only_noise_answers_are_strings_in_order_with_progress(responder, images):
    items = [
        (images[0], "what colour is the square ?"),
        (images[1], "how many"),
        (images[2], "what is"),
    ]
    progress: list[tuple[int, int]] = []
    answers = responder.answer(items, lambda done, total: progress.append((done, total)))
    assert len(answers) == 3
    assert all(isinstance(a, str) for a in answers), answers
    assert progress == [(2, 3), (3, 3)]  # batch_size 2: two batches
    # Noise, but deterministic (greedy decoding).
    assert responder.answer(items) == answers
    # The prompt alone is longer than 4 tokens; max_new_tokens=4 caps what may come back.
    assert all(len(a.split()) <= 4 for a in answers), answers


def test_plumbing_only_prompt_uses_chat_template_with_image_and_system(tiny_model):
    r = TransformersResponder(model_path=str(tiny_model), device="cpu", max_new_tokens=2, system_prompt="w1 w2")
    assert r.prompt("how many ?") == "SYSTEM: w1 w2 USER: <image> how many ? ASSISTANT:"
    assert r.processor.tokenizer.padding_side == "left"


def test_plumbing_only_missing_image_is_an_exception_in_its_slot(responder, images, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    items = [
        (images[0], "what"),
        (str(tmp_path / "missing.png"), "what"),
        (images[1], "what"),
        (str(broken), "w1"),
    ]
    answers = responder.answer(items)
    assert isinstance(answers[0], str) and isinstance(answers[2], str)
    assert isinstance(answers[1], FileNotFoundError)
    assert isinstance(answers[3], Exception)


def test_plumbing_only_failed_batch_falls_back_to_one_by_one(responder, images, monkeypatch):
    real = responder._inputs
    calls: list[int] = []

    def flaky(imgs, questions):
        calls.append(len(questions))
        if "w13" in questions:
            raise RuntimeError("this item breaks the processor")
        return real(imgs, questions)

    monkeypatch.setattr(responder, "_inputs", flaky)
    answers = responder.answer([(images[0], "what"), (images[1], "w13"), (images[2], "how")])
    assert calls == [2, 1, 1, 1]  # batch of 2 fails -> each alone; second batch has one item
    assert isinstance(answers[0], str) and isinstance(answers[2], str)
    assert isinstance(answers[1], RuntimeError)


def test_plumbing_only_failed_generation_falls_back_and_tokenizer_work_stays_on_one_thread(
    responder, images, monkeypatch
):
    import threading

    real_run, real_inputs, real_decode = responder._run, responder._inputs, responder._decode
    threads: set[str] = set()

    def out_of_memory_when_batched(inputs):
        if inputs["input_ids"].shape[0] > 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real_run(inputs)

    def recorded(fn):
        def call(*args):
            threads.add(threading.current_thread().name)
            return fn(*args)

        return call

    monkeypatch.setattr(responder, "_run", out_of_memory_when_batched)
    monkeypatch.setattr(responder, "_inputs", recorded(real_inputs))
    monkeypatch.setattr(responder, "_decode", recorded(real_decode))
    answers = responder.answer([(images[0], "what"), (images[1], "how"), (images[2], "w2")])
    assert all(isinstance(a, str) for a in answers), answers
    # The processor and the tokenizer are never used by two threads at once: one worker does it all.
    assert len(threads) == 1 and next(iter(threads)).startswith("vlm-prepare"), threads


def test_plumbing_only_respond_maps_to_responses(tiny_model, images, tmp_path):
    spec = ModelSpec(
        "tiny",
        "transformers",
        {"model_path": str(tiny_model), "batch_size": 2, "device": "cpu", "max_new_tokens": 3},
    )
    qs = [Question(f"q{i}", "what", "a", "c", p) for i, p in enumerate([images[0], str(tmp_path / "gone.png")])]
    out = respond(spec, qs, prompts_dir=tmp_path, llm=lambda settings: pytest.fail("no LLM for transformers"))
    assert isinstance(out[0].response, str) and out[0].error is None and out[0].latency_s is not None
    assert out[1].response is None and out[1].error.startswith("FileNotFoundError")


def test_missing_model_path_raises_a_clear_error(tmp_path):
    with pytest.raises(TransformersResponderError, match="download the model on a machine with internet"):
        TransformersResponder(model_path=str(tmp_path / "no-such-model"))
