"""``strata perplexity FILE``: how well a model predicts a text file.

The file is tokenized with the model's tokenizer, cut into windows of the context length, and every
token but each window's first is scored (``strata.Model.perplexity``). A progress bar runs on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from strata.cli.options import add_kv_type_argument, add_model_argument, config_from, load_model
from strata.errors import InvalidArgument, IOFailure


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "perplexity",
        help="perplexity of a model on a text file",
        description="Tokenize FILE with the model's tokenizer and report the perplexity, exp(mean negative "
        "log-likelihood of each next token). Lower is better. Without --model the shipped demo model "
        "is used.",
    )
    p.add_argument("file", type=Path, help="a UTF-8 text file ('-' = stdin)")
    add_model_argument(p)
    p.add_argument("-c", "--ctx-size", "--context", dest="window", type=int, default=None, metavar="N",
                   help="tokens per window (default: the context length, see STRATA_CONTEXT)")
    p.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="worker threads (0 = one per core)")
    add_kv_type_argument(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _read_text(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IOFailure(f"{path}: no such file") from None
    except IsADirectoryError:
        raise IOFailure(f"{path}: is a directory, not a text file") from None
    except OSError as exc:
        raise IOFailure(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None


def run(args: argparse.Namespace) -> int:
    text = _read_text(args.file)
    model = load_model(args)
    config = config_from(args)
    ids = model.tokenizer.encode(text)
    if len(ids) < 2:
        raise InvalidArgument(f"{args.file}: too short to score ({len(ids)} token(s); at least 2 are needed)")
    from tqdm import tqdm

    with tqdm(total=len(ids), unit="tok", desc="perplexity", file=sys.stderr, dynamic_ncols=True,
              disable=True if args.no_progress else None) as bar:
        result = model.perplexity(ids, context=args.window, config=config, progress=bar.update)
    if args.json:
        print(json.dumps({"file": str(args.file), "model": model.path, "perplexity": result.perplexity,
                          "mean_nll": result.mean_nll, "tokens_scored": result.tokens_scored,
                          "windows": result.windows, "context": result.context}))
    else:
        print(f"perplexity: {result.perplexity:.4f}")
        print(f"({result.tokens_scored} tokens scored in {result.windows} window(s) of up to "
              f"{result.context} tokens; mean NLL {result.mean_nll:.4f} nats)")
    return 0
