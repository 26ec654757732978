"""Command line: ``python -m setpo.tiny OUT_DIR [--family qwen2|llama] [--hidden-size 64] ...``."""

from __future__ import annotations

import argparse
import sys

from setpo._cli import Parser
from setpo.tiny.model import FAMILIES, build_tiny_model


def _out_dir(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty string; name a folder (for the current one, say '.')")
    return value


def main(argv: list[str] | None = None) -> int:
    """Build a tiny model from the command line; errors end in one line (exit 2)."""
    parser = Parser(prog="python -m setpo.tiny", description="Build and save a tiny causal LM.")
    parser.add_argument(
        "out_dir",
        type=_out_dir,
        help="folder to write the model and tokenizer to (new, empty, or an earlier build with --overwrite)",
    )
    parser.add_argument("--family", choices=sorted(FAMILIES), default="qwen2")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-kv-heads", type=int, default=None)
    parser.add_argument("--intermediate-size", type=int, default=None)
    parser.add_argument("--max-position-embeddings", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier setpo.tiny build in out_dir (its files only; other folders are refused)",
    )
    args = parser.parse_args(argv)
    try:
        path = build_tiny_model(
            args.out_dir,
            family=args.family,
            hidden_size=args.hidden_size,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            num_kv_heads=args.num_kv_heads,
            intermediate_size=args.intermediate_size,
            max_position_embeddings=args.max_position_embeddings,
            seed=args.seed,
            overwrite=args.overwrite,
        )
    except (ValueError, OSError) as err:
        parser.exit(2, f"{parser.prog}: error: {' '.join(str(err).split())}\n")
    except KeyboardInterrupt:
        parser.exit(130, f"\n{parser.prog}: interrupted; rerun with --overwrite to rebuild {args.out_dir}\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
