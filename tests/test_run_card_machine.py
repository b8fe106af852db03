"""The run card names the CPU a run ran on (model, ISA flags, torch's kernels, the variables that hold them back):
what `auto` precision resolved to and which float kernels made the samples depend on it."""

from __future__ import annotations

import json

import torch

from recipes.common.run_card import ISA_FLAGS, machine, write_run_card

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_bf16 fma
processor\t: 1
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_bf16 fma amx_tile
"""


def test_the_machine_is_read_from_cpuinfo_and_torch(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    seen = machine(info)
    assert seen["cpu"] == "AMD EPYC 9R14"
    assert seen["isa"] == ["avx2", "avx512f", "avx512_bf16"]  # the first processor's flags, in ISA_FLAGS's order
    assert seen["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert seen["kernel_env"]["ONEDNN_MAX_CPU_ISA"] == "AVX2" and "ATEN_CPU_CAPABILITY" not in seen["kernel_env"]


def test_a_machine_without_cpuinfo_still_gets_a_card(tmp_path):
    seen = machine(tmp_path / "missing")
    assert seen["isa"] == [] and seen["cpu"]


def test_every_run_card_carries_the_machine(tmp_path):
    write_run_card(tmp_path, {})
    card = json.loads((tmp_path / "run_card.json").read_text())
    assert set(card["machine"]["isa"]) <= set(ISA_FLAGS)
    assert card["machine"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
