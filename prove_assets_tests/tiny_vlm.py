"""PLUMBING ONLY: a tiny randomly initialised LLaVA (CLIP vision tower + Llama text model) built
offline, for the `transformers` responder's tests and its accelerator check
(`bench/bench_transformers_device.py`). Its answers are noise.

It is saved with `save_pretrained`, with a `LlavaProcessor` made of the PIL (no torchvision) CLIP
image processor and a word-level tokenizer built from `tokenizers`; nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] | upper }}: "
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image> "
    "{% elif c['type'] == 'text' %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def build_tiny_llava(folder: Path, hidden: int = 32, layers: int = 2, image_size: int = 16, patch: int = 8) -> Path:
    """A random, untrained LLaVA: noise in, noise out. The defaults run in milliseconds; larger
    `hidden`/`layers`/`image_size` give a model whose time on an accelerator means something."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    words = ["<pad>", "<unk>", "<s>", "</s>", "<image>", "USER:", "SYSTEM:", "ASSISTANT:"]
    words += ["what", "colour", "is", "the", "square", "how", "many", "?"] + [f"w{i}" for i in range(48)]
    vocab = {w: i for i, w in enumerate(words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )
    # By default 16x16 crops, 8x8 patches: 4 patch features per image (+CLS, dropped by "default").
    crop = {"height": image_size, "width": image_size}
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": image_size}, crop_size=crop)
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=patch,
            projection_dim=hidden,
        ),
        text_config=LlamaConfig(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=2,
            vocab_size=len(vocab),
            max_position_embeddings=256 + (image_size // patch) ** 2,
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=3,
        ),
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
