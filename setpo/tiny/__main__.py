"""Command line: ``python -m setpo.tiny OUT_DIR [--family qwen2|llama] [--hidden-size 64] ...``."""

from __future__ import annotations

import argparse
import sys

from setpo.tiny.model import FAMILIES, build_tiny_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m setpo.tiny", description="Build and save a tiny causal LM.")
    parser.add_argument("out_dir", help="folder to write the model and tokenizer to (must be empty or new)")
    parser.add_argument("--family", choices=sorted(FAMILIES), default="qwen2")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-kv-heads", type=int, default=None)
    parser.add_argument("--intermediate-size", type=int, default=None)
    parser.add_argument("--max-position-embeddings", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="delete a non-empty out_dir first")
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
    except (ValueError, FileExistsError) as err:
        parser.exit(2, f"error: {err}\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
