"""``strata convert SRC OUT.gguf``: a Hugging Face Qwen3-MoE, GLM-4-MoE or DeepSeek-V4 directory or a
strata training checkpoint (.pt) to GGUF, with a progress bar on stderr."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from strata.errors import InvalidArgument


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert a Hugging Face Qwen3-MoE / GLM-4-MoE / DeepSeek-V4 directory or a strata training "
        "checkpoint to GGUF",
        description="Convert SRC (a Hugging Face Qwen3MoeForCausalLM, Glm4MoeForCausalLM or "
        "DeepseekV4ForCausalLM directory, or a strata training checkpoint .pt) to a GGUF file.",
    )
    p.add_argument("src", type=Path, help="model directory (config.json + safetensors) or checkpoint .pt")
    p.add_argument("out", type=Path, help="the GGUF file to write")
    p.add_argument("--type", "--outtype", dest="type", default="F16",
                   help="storage of weight matrices: F32, F16, BF16, Q8_0, Q5_0, Q5_1, Q4_0, any case "
                   "(default F16); norms, biases, routers and gates stay F32")
    p.add_argument("--expert-type", default=None,
                   help="storage of the routed experts, the bulk of an MoE (default: the --type)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--tokenizer",
        choices=("auto", "bytes", "none"),
        default="auto",
        help="auto: the source's own tokenizer (tokenizer.json, via strata.tokenizer); bytes: a "
        "256-byte test vocabulary; none: no tokenizer keys",
    )
    p.add_argument("--name", default=None, help="general.name (default: the source's name)")
    p.add_argument("--mtp", action="store_true",
                   help="DeepSeek-V4: write only the MTP layer's file (llama.cpp's --mtp layout: the MTP "
                   "layer as the last block with nextn.* tensors) instead of the main model")
    p.set_defaults(func=run)


def _hf_tokenizer(source: Path) -> Any:
    """The tokenizer-key writer for a tokenizer.json (file or the directory holding it)."""
    from strata.convert.hf_tokenizer import hf_tokenizer_writer

    return hf_tokenizer_writer(source)


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[int, int, str], None]]:
    """A tqdm bar on stderr fed by the converters' ``progress(done, total, what)`` callback."""
    from tqdm import tqdm

    bar = tqdm(total=None, unit="step", desc="convert", file=sys.stderr, dynamic_ncols=True,
               disable=None if enabled else True)  # None: shown on a terminal only

    def update(done: int, total: int, what: str) -> None:
        if bar.total != total:
            bar.total = total
        bar.set_postfix_str(what, refresh=False)
        bar.update(done - bar.n)

    try:
        yield update
    finally:
        bar.close()


def run(args: argparse.Namespace) -> int:
    from strata.convert import byte_level_tokenizer, write_strata_gguf

    src: Path = args.src
    if not src.exists():
        raise InvalidArgument(f"{src}: no such file or directory")
    if src.is_dir():
        from strata.convert.hf_dir import convert_hf_dir

        with _progress_bar(not args.no_progress) as progress:
            out = convert_hf_dir(src, args.out, weight_type=args.type, expert_type=args.expert_type,
                                 tokenizer=args.tokenizer, name=args.name, progress=progress, mtp=args.mtp)
    else:
        if args.mtp:
            raise InvalidArgument("--mtp converts a DeepSeek-V4 directory, not a training checkpoint")
        from strata.convert.training_checkpoint import read_training_checkpoint

        payload = read_training_checkpoint(src)
        config = payload["config"]
        with tempfile.TemporaryDirectory() as tmp:
            tokenizer = None
            if args.tokenizer == "auto" and isinstance(payload.get("tokenizer_json"), str):
                tok_path = Path(tmp) / "tokenizer.json"
                tok_path.write_text(payload["tokenizer_json"])
                tokenizer = _hf_tokenizer(tok_path)
            elif args.tokenizer == "bytes":
                tokenizer = byte_level_tokenizer(int(config["vocab_size"]))
            with _progress_bar(not args.no_progress) as progress:
                out = write_strata_gguf(payload["tensors"], config, args.out, tokenizer=tokenizer,
                                        weight_type=args.type, expert_type=args.expert_type,
                                        name=args.name or src.stem, progress=progress)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
    return 0
