"""Build the tiny embedded model (Llama architecture, about 0.54 M parameters, character-level tokenizer, chat template).

    python scripts/make_tiny_model.py --output-dir artifacts/tiny-base [--seed 0]

No download: the config, the weights (random, seeded) and the tokenizer are all made here, in about a
second. The result loads with AutoModelForCausalLM / AutoTokenizer.from_pretrained under HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from eval.cli import FlagParser  # takes --output-dir and --output_dir alike
from recipes.common.command_line.config import setup_logging
from recipes.common.model.tiny import TinyModelSpec, build_tiny_model


def main(argv: list[str] | None = None) -> Path:
    defaults = TinyModelSpec()
    parser = FlagParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", required=True, type=Path, help="folder to save the model and tokenizer in")
    parser.add_argument("--seed", type=int, default=0, help="weight initialisation seed (default 0)")
    parser.add_argument("--hidden-size", type=int, default=defaults.hidden_size)
    parser.add_argument("--num-layers", type=int, default=defaults.num_hidden_layers)
    parser.add_argument("--num-heads", type=int, default=defaults.num_attention_heads)
    parser.add_argument("--intermediate-size", type=int, default=defaults.intermediate_size)
    args = parser.parse_args(argv)
    spec = TinyModelSpec(
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_layers,
        num_attention_heads=args.num_heads,
        intermediate_size=args.intermediate_size,
    )
    path = build_tiny_model(args.output_dir, seed=args.seed, spec=spec)
    logging.getLogger("make_tiny_model").info("done: %s", path)
    return path


if __name__ == "__main__":
    setup_logging()
    main()
