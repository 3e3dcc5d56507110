"""PLUMBING AND OVERHEAD ONLY: the `transformers` responder on an accelerator, with randomly
initialised LLaVAs (`prove_assets_tests/tiny_vlm.py`; no trained VLM weights are on these
machines, so nothing here says anything about answer quality).

    python bench/bench_transformers_device.py [--device cuda] [--out FILE.json]

Prints, in one run:
1. greedy answers of the tiny model in float32 on the CPU and on the device, item by item
   (random weights give near-flat logits, so a tie may flip the odd token: a count, not a test);
2. the device's answers at batch size 1 and at batch size 8 (left padding must not change them);
3. a corrupt image in a batch: an Exception in its own slot, its neighbours answered;
4. bfloat16 and float16 loads answer every item;
5. throughput of `TransformersResponder.answer` against raw `model.generate` on the same
   batches, processed beforehand, for a larger random LLaVA (hidden 1024, 8 layers, 224-pixel
   images, 256 image tokens), per batch size: the ratio is what our loop (image loading, chat
   template, processor, decoding) costs on top of the model.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from prove_assets.backends.hf_vlm import TransformersResponder, load_image  # noqa: E402
from prove_assets_tests.tiny_vlm import build_tiny_llava  # noqa: E402

WORDS = ["what", "colour", "is", "the", "square", "how", "many", "?"] + [f"w{i}" for i in range(48)]


def make_items(folder: Path, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n noise images of varied sizes and modes, each with a question of 3-12 vocabulary words."""
    import numpy as np
    from PIL import Image

    rng = random.Random(seed)
    items = []
    for i in range(n):
        w, h = rng.randint(20, 400), rng.randint(20, 400)
        pixels = np.random.default_rng(seed + i).integers(0, 256, (h, w, 3), dtype=np.uint8)
        im = Image.fromarray(pixels).convert(rng.choice(["RGB", "L", "RGBA"]))
        path = folder / f"img{i}.png"
        im.save(path)
        items.append((str(path), " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))))
    return items


def same(a: list[Any], b: list[Any]) -> int:
    return sum(isinstance(x, str) and x == y for x, y in zip(a, b, strict=True))


def sync(device: str) -> None:
    """Wait for the device's queued work, so a timer reads finished work."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def throughput(model_dir: Path, items: list[tuple[str, str]], device: str, batch: int, new_tokens: int) -> dict:
    """Answers per second through `answer()` and through raw `generate` on pre-processed batches."""
    import torch

    r = TransformersResponder(str(model_dir), batch_size=batch, device=device, max_new_tokens=new_tokens,
                              dtype="bfloat16")  # fmt: skip
    r.answer(items[:batch])  # warm-up: kernels, allocator
    sync(device)
    t0 = time.perf_counter()
    ours = r.answer(items)
    sync(device)
    t_ours = time.perf_counter() - t0
    batches = []
    for s in range(0, len(items), batch):
        chunk = items[s : s + batch]
        # The responder's own processor call, done before the clock starts.
        inputs = r._inputs([load_image(p) for p, _ in chunk], [q for _, q in chunk]).to(device)
        inputs["pixel_values"] = inputs["pixel_values"].to(r.model.dtype)
        batches.append(inputs)
    sync(device)
    t0 = time.perf_counter()
    generated = 0
    with torch.inference_mode():
        for inputs in batches:
            out = r.model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False, pad_token_id=r._pad_token_id)
            generated += (out.shape[1] - inputs["input_ids"].shape[1]) * out.shape[0]
    sync(device)
    t_raw = time.perf_counter() - t0
    del r
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"batch": batch, "items": len(items), "ours_s": round(t_ours, 3), "raw_generate_s": round(t_raw, 3),
            "ours_per_s": round(len(items) / t_ours, 1), "raw_per_s": round(len(items) / t_raw, 1),
            "raw_over_ours": round(t_raw / t_ours, 3), "errors": sum(not isinstance(a, str) for a in ours),
            "generated_tokens": generated}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--items", type=int, default=128, help="items timed per batch size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch
    import transformers

    report: dict[str, Any] = {"torch": torch.__version__, "transformers": transformers.__version__}
    if args.device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        tiny = build_tiny_llava(tmp_path / "tiny")
        items = make_items(tmp_path, 24)
        cpu = TransformersResponder(str(tiny), batch_size=4, device="cpu", max_new_tokens=8).answer(items)
        dev32 = TransformersResponder(str(tiny), batch_size=4, device=args.device, max_new_tokens=8, dtype="float32")
        on_dev = dev32.answer(items)
        report["cpu_vs_device_fp32_same"] = f"{same(cpu, on_dev)}/{len(items)}"
        dev32.batch_size = 1
        one = dev32.answer(items)
        dev32.batch_size = 8
        eight = dev32.answer(items)
        report["device_batch1_vs_batch8_same"] = f"{same(one, eight)}/{len(items)}"
        bad = tmp_path / "corrupt.png"
        bad.write_bytes(b"\x89PNG\r\n\x1a\n not an image")
        mixed = dev32.answer([items[0], (str(bad), "what is"), items[1]])
        report["corrupt_in_batch"] = [type(a).__name__ if not isinstance(a, str) else "str" for a in mixed]
        report["corrupt_neighbours_unchanged"] = mixed[0] == eight[0] and mixed[2] == eight[1]
        for dtype in ("bfloat16", "float16"):
            answers = TransformersResponder(str(tiny), batch_size=8, device=args.device, max_new_tokens=8,
                                            dtype=dtype).answer(items)  # fmt: skip
            report[f"{dtype}_answered"] = f"{sum(isinstance(a, str) for a in answers)}/{len(items)}"
        larger = build_tiny_llava(tmp_path / "larger", hidden=1024, layers=8, image_size=224, patch=14)
        many = make_items(tmp_path, args.items, seed=1)
        report["throughput_bf16_32_new_tokens"] = [
            throughput(larger, many, args.device, batch, 32) for batch in (1, 8, 32)
        ]
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
