"""The `transformers` responder: a local Hugging Face image-text-to-text model, batched.

Offline only: the model folder must already be on disk (`model_path` in `models.yaml`); nothing
is downloaded (`local_files_only=True` everywhere). Each question becomes one user turn holding
the image and the question text, rendered with the processor's own chat template; generation is
greedy and only the new tokens are decoded.

A failure inside a batch (an image the processor rejects, a CUDA out-of-memory) is retried item
by item, so one bad item becomes an Exception in its own slot instead of failing its neighbours.
An image that cannot be read at all is an Exception in its slot before the batch runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "float16", "bfloat16")


class TransformersResponderError(RuntimeError):
    pass


def pick_device(device: str = "auto") -> str:
    """`auto` -> cuda if available, else mps, else cpu; an explicit device must be available."""
    import torch

    device = str(device or "auto").lower()
    if device.split(":")[0] not in DEVICES:
        raise TransformersResponderError(f"device must be one of {', '.join(DEVICES)} (got {device!r})")
    mps_ok = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if mps_ok else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TransformersResponderError("device 'cuda' requested but torch sees no CUDA GPU")
    if device == "mps" and not mps_ok:
        raise TransformersResponderError("device 'mps' requested but it is not available")
    return device


def _torch_dtype(dtype: str, device: str) -> Any:
    """`auto` keeps the checkpoint's dtype on an accelerator and uses float32 on CPU (half
    precision on CPU is slow or unsupported for many ops)."""
    import torch

    dtype = str(dtype or "auto").lower()
    if dtype not in DTYPES:
        raise TransformersResponderError(f"dtype must be one of {', '.join(DTYPES)} (got {dtype!r})")
    if dtype == "auto":
        return torch.float32 if device == "cpu" else "auto"
    return getattr(torch, dtype)


def load_image(path: str) -> Any:
    from PIL import Image

    with Image.open(path) as im:
        return im.convert("RGB")  # convert() loads the pixels, so the file can close


class TransformersResponder:
    def __init__(
        self,
        model_path: str,
        batch_size: int = 4,
        device: str = "auto",
        max_new_tokens: int = 128,
        dtype: str = "auto",
        system_prompt: str | None = None,
    ) -> None:
        path = Path(str(model_path)).expanduser()
        if not path.is_dir():
            raise TransformersResponderError(
                f"model_path {str(model_path)!r} does not exist or is not a folder: the "
                "transformers backend never downloads; download the model on a machine with "
                "internet (e.g. `hf download ORG/NAME --local-dir DIR`) and point model_path "
                "at the folder"
            )
        if int(batch_size) < 1 or int(max_new_tokens) < 1:
            raise TransformersResponderError("batch_size and max_new_tokens must be >= 1")
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.model_path = str(path)
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.system_prompt = system_prompt
        self.device = pick_device(device)
        try:
            self.processor = AutoProcessor.from_pretrained(self.model_path, local_files_only=True)
            self.model = AutoModelForImageTextToText.from_pretrained(
                self.model_path, local_files_only=True, dtype=_torch_dtype(dtype, self.device)
            )
        except (OSError, ValueError) as exc:
            raise TransformersResponderError(
                f"could not load an image-text-to-text model and processor from {self.model_path}: {exc}"
            ) from exc
        self.model.to(self.device)
        self.model.eval()
        self._torch = torch

        tok = getattr(self.processor, "tokenizer", None)
        if tok is not None:
            tok.padding_side = "left"  # decoder-only generation continues from the right edge
            if tok.pad_token is None and tok.eos_token is not None:
                tok.pad_token = tok.eos_token
        # The processor's chat template, else the tokenizer's (older checkpoints keep it there).
        self._chat_template = None
        if not getattr(self.processor, "chat_template", None):
            template = getattr(tok, "chat_template", None)
            if isinstance(template, dict):
                template = template.get("default")
            if not template:
                raise TransformersResponderError(
                    f"{self.model_path} has no chat template (chat_template.jinja, or one in its "
                    "processor or tokenizer config); use an instruction-tuned image-text-to-text "
                    "checkpoint that ships one"
                )
            self._chat_template = template
        self._pad_token_id = getattr(tok, "pad_token_id", None)
        self._bos_token = getattr(tok, "bos_token", None)

    def prompt(self, question: str) -> str:
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]})
        return self.processor.apply_chat_template(
            messages, chat_template=self._chat_template, add_generation_prompt=True, tokenize=False
        )

    def _inputs(self, images: list[Any], questions: list[str]) -> Any:
        """The processor's batch (CPU tensors) for these images and questions."""
        texts = [self.prompt(q) for q in questions]
        # One image per prompt, nested, so processors that group images per sample (Idefics3,
        # SmolVLM) see one image each; flat-list processors (LLaVA, Qwen2-VL) flatten it back.
        extra: dict[str, Any] = {}
        if self._bos_token and all(t.startswith(self._bos_token) for t in texts):
            extra["add_special_tokens"] = False  # the template wrote BOS already: not twice
        return self.processor(images=[[im] for im in images], text=texts, padding=True, return_tensors="pt", **extra)

    def _run(self, inputs: Any) -> Any:
        """Greedy generation on the device; the new tokens' ids."""
        inputs = inputs.to(self.device)
        if "pixel_values" in inputs and self.model.dtype != self._torch.float32:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        gen_kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": False}
        if self._pad_token_id is not None:
            gen_kwargs["pad_token_id"] = self._pad_token_id
        with self._torch.inference_mode():
            out = self.model.generate(**inputs, **gen_kwargs)
        if not getattr(self.model.config, "is_encoder_decoder", False):
            out = out[:, inputs["input_ids"].shape[1] :]
        return out.cpu()

    def _decode(self, out: Any) -> list[str]:
        return [t.strip() for t in self.processor.batch_decode(out, skip_special_tokens=True)]

    def answer(
        self,
        items: Sequence[tuple[str, str]],
        on_progress: Callable[[int, int], None] | None = None,
    ) -> list[str | Exception]:
        """Answer (image_path, question) pairs; one str or Exception per item, same order.

        The next batch's images are read and processed on a worker thread while the model
        generates the current one (on a GPU that CPU work took as long as generating, for a small
        model at batch size 32: docs/performance.md). Every processor and tokenizer call runs on
        that one thread: a fast tokenizer must not be used by two threads at once."""
        total = len(items)
        results: list[str | Exception] = [None] * total  # type: ignore[list-item]
        batches = [list(range(s, min(s + self.batch_size, total))) for s in range(0, total, self.batch_size)]

        def prepare(idx: list[int]) -> tuple[dict[int, Any], Any]:
            loaded: dict[int, Any] = {}
            for i in idx:
                try:
                    loaded[i] = load_image(items[i][0])
                except Exception as exc:  # unreadable image: its slot only
                    results[i] = exc
            if not loaded:
                return loaded, None
            try:
                return loaded, self._inputs(list(loaded.values()), [items[i][1] for i in loaded])
            except Exception as exc:  # the processor rejects the batch: retried one by one below
                return loaded, exc

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vlm-prepare") as worker:
            upcoming = worker.submit(prepare, batches[0]) if batches else None
            for k, idx in enumerate(batches):
                loaded, inputs = upcoming.result()
                if k + 1 < len(batches):
                    upcoming = worker.submit(prepare, batches[k + 1])
                ok = list(loaded)
                try:
                    if isinstance(inputs, Exception):
                        raise inputs
                    if ok:
                        answers = worker.submit(self._decode, self._run(inputs)).result()
                        for i, a in zip(ok, answers, strict=True):
                            results[i] = a
                except Exception as batch_exc:
                    self._free_cache()
                    for i in ok:  # retry one by one so a single bad item stays in its slot
                        if len(ok) == 1:
                            results[i] = batch_exc
                            continue
                        try:
                            one = worker.submit(self._inputs, [loaded[i]], [items[i][1]]).result()
                            results[i] = worker.submit(self._decode, self._run(one)).result()[0]
                        except Exception as exc:
                            results[i] = exc
                if on_progress is not None:
                    on_progress(idx[-1] + 1, total)
        return results

    def _free_cache(self) -> None:
        if self.device.startswith("cuda"):
            self._torch.cuda.empty_cache()
