"""`python -m data_filters --config FILE.yaml`: run a filter pipeline and print its report.

    python -m data_filters --config recipes/configs/data_filters/math_static.yaml
    python -m data_filters --config FILE.yaml --output artifacts/filtered/rows.parquet --num-rows 500

The config format is described in data_filters/pipeline.py. Input paths in a config are found beside the
config file first, then in the current directory; flags take `--num-rows` and `--num_rows` alike. The exit status is 0 on success and 2 for
a mistake in the config or the data (the message names it); anything else is a bug, with its traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from eval.cli import FlagParser

    parser = FlagParser(prog="python -m data_filters", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="YAML file: input, steps, model, output")
    parser.add_argument("--output", help="override output.path (.jsonl, .parquet, or a folder for save_to_disk)")
    parser.add_argument("--num-rows", type=int, help="override input.dataset_num_rows (keep the first N rows)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars, warnings only")
    args = parser.parse_args(argv)

    import yaml

    from data_filters.pipeline import ConfigError, resolve_input_paths, run_pipeline
    from tasks.schema import DatasetNotFoundError, SchemaError

    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        level=logging.WARNING if args.quiet else logging.INFO,
    )
    path = Path(args.config)
    if not path.is_file():
        sys.stderr.write(f"error: config file {args.config!r} not found\n")
        return 2
    try:
        config = yaml.safe_load(path.read_text()) or {}
        if isinstance(config, dict):  # input paths are found beside the config first (then in the cwd)
            config = resolve_input_paths(config, path.resolve().parent)
        if args.output:
            config.setdefault("output", {})["path"] = args.output
        if args.num_rows is not None:
            config.setdefault("input", {})["dataset_num_rows"] = args.num_rows
        _, report = run_pipeline(config, progress=not args.quiet)
    except (ConfigError, SchemaError, DatasetNotFoundError, yaml.YAMLError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    sys.stdout.write(report.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
