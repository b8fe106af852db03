"""recipes/distill.py's own options: the teacher, the stages, how the student is made, the on-policy options, on
top of how completions are sampled and kept (recipes.common.traces.TraceArguments) and which rows."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from basics.option_values import mapping_option
from recipes.common.model.loading import DemoModelArguments
from recipes.common.traces import TraceArguments
from tasks.schema import DataArguments

MODES = ("offline", "on_policy", "both")  # which stages run


@dataclass
class DistillScriptArguments(TraceArguments, DemoModelArguments, DataArguments):
    """recipes/distill.py: the teacher, the stages, how the student is made, the on-policy options."""

    mode: str = field(default="offline", metadata={"help": "'offline', 'on_policy', or 'both' (offline first)."})
    teacher_model_name_or_path: str | None = field(
        default=None, metadata={"help": "The teacher: a folder saved with save_pretrained or a Hub model name."}
    )
    verify_traces: bool = field(
        default=True, metadata={"help": "Keep only traces the row's verifier accepts (R1's distillation data)."}
    )
    student_spec: dict | str | None = field(
        default=None,
        metadata={
            "help": "Build a fresh tiny student with this architecture (recipes.common.model.tiny.TinyModelSpec "
            "fields, e.g. {hidden_size: 64, intermediate_size: 256}) instead of loading model_name_or_path."
        },
    )
    student_seed: int = field(default=0, metadata={"help": "Seed of a fresh student's initial weights."})
    student_prune: dict | str | None = field(
        default=None,
        metadata={
            "help": "Cut the student from the teacher instead (Minitron): {intermediate_size: N} keeps each MLP's N "
            "most active neurons, measured on `prune_calibration_rows` prompts (recipes/stages/distill/prune.py)."
        },
    )
    prune_calibration_rows: int = field(default=512, metadata={"help": "Rows whose activations rank the neurons."})
    on_policy: dict | str | None = field(
        default=None,
        metadata={
            "help": "trl.DistillationConfig options of the on-policy stage (beta, max_completion_length, "
            "temperature, max_steps, learning_rate, ...); unset ones come from this YAML's training options."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.student_spec = mapping_option(self.student_spec, "student_spec")
        self.student_prune = mapping_option(self.student_prune, "student_prune")
        if self.student_prune is not None:
            if self.student_spec is not None:
                raise ValueError("student_spec and student_prune both build the student: set one of them")
            if set(self.student_prune) != {"intermediate_size"}:
                raise ValueError(f"student_prune takes {{intermediate_size: N}}, got {self.student_prune}")
        self.on_policy = mapping_option(self.on_policy, "on_policy") or {}
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.tools and self.mode != "offline":
            raise ValueError(
                f"tools: distillation trains on tool traces offline only (mode: offline); mode {self.mode}'s on-policy "
                "stage (TRL's DistillationTrainer) would sample the student without the tools"
            )
        if not self.teacher_model_name_or_path:
            raise ValueError("teacher_model_name_or_path is required: the model whose reasoning is distilled")
        if self.student_spec is not None:
            from recipes.common.model.tiny import TinyModelSpec

            known = {f.name for f in fields(TinyModelSpec)}
            unknown = sorted(set(self.student_spec) - known)
            if unknown:
                raise ValueError(f"student_spec: unknown option(s) {unknown}; TinyModelSpec has {sorted(known)}")

    def check_with(self, *configs) -> None:
        """With tools, the student's SFT masks the loss by the template (recipes.common.command_line.checks runs
        this once every dataclass is parsed): a prompt/completion split would leave the calls out of the loss."""
        for config in configs:
            if self.tools and getattr(config, "assistant_only_loss", None) is False:
                raise ValueError(
                    "tools: the teacher's traces are conversations with tool calls; set assistant_only_loss: true so "
                    "that the student trains on every assistant turn (the calls too) and not on the tools' results"
                )
