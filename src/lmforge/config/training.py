"""The ``dataset``, ``train``, ``finetune`` and ``evaluate`` sections of ``params.yaml``: every
objective's parameters, which recipes pretrain and fine-tune on which machine, the downstream
tasks, and what the evaluate stage measures. It embeds the objectives' own configs and reads the
architectures from the model registry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..models.registry import ARCHITECTURES
from ..objectives.registry import OBJECTIVES
from ..schema import StrictModel as _Strict


def _objective_config(name: str):
    return OBJECTIVES[name].Config


class DatasetConfig(_Strict):
    """The dataset stage and every objective's parameters (defaults: the reference values)."""

    output: str = "data/datasets"
    objectives: list[str] = Field(
        ["clm", "mlm", "mlm_nsp", "mlm_sop", "knowledge_mlm", "span_corruption", "denoising", "permutation", "segments", "bilm"],
        description="what `lmforge run` builds",
    )
    mode: Literal["dynamic", "static"] = Field("dynamic", description="dynamic: masks re-drawn each epoch; static: epoch 0 written to disk")
    seed: int = Field(0, ge=0)
    statistics_examples: int = Field(2000, ge=1, description="dynamic mode: examples measured for stats.json")
    # Sequence lengths are the embedded default's (CPU-sized, 128 positions); each objective's
    # own Config carries the paper's value (512 for GPT, T5, BART, XLNet) for a GPU recipe.
    clm: _objective_config("clm") = _objective_config("clm")(block_size=128)
    mlm: _objective_config("mlm") = _objective_config("mlm")()
    mlm_nsp: _objective_config("mlm_nsp") = _objective_config("mlm_nsp")()
    mlm_sop: _objective_config("mlm_sop") = _objective_config("mlm_sop")()
    knowledge_mlm: _objective_config("knowledge_mlm") = _objective_config("knowledge_mlm")()
    span_corruption: _objective_config("span_corruption") = _objective_config("span_corruption")(input_length=128)
    denoising: _objective_config("denoising") = _objective_config("denoising")(max_length=128)
    permutation: _objective_config("permutation") = _objective_config("permutation")(max_length=128)
    segments: _objective_config("segments") = _objective_config("segments")(segment_length=64, batch_size=16)
    bilm: _objective_config("bilm") = _objective_config("bilm")()

    @field_validator("objectives")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in OBJECTIVES]
        if unknown:
            raise ValueError(f"unknown objective(s) {unknown}; known: {sorted(OBJECTIVES)}")
        return value


# every architecture of the model registry, in its order (read without importing torch)
ARCHITECTURE_NAMES = list(ARCHITECTURES)


class TrainConfig(_Strict):
    """Pretraining and fine-tuning: which recipes run, and the Lightning Trainer settings that
    are the machine's rather than the recipe's (accelerator, devices, precision, ...)."""

    output: str = Field("models", description="checkpoints and trained models: <output>/<arch>/pretrain, <output>/<arch>/<task>")
    recipes: str = Field("pipelines", description="folder of per-architecture recipes (<arch>.yaml)")
    architectures: list[str] = Field(ARCHITECTURE_NAMES, description="what `lmforge run` trains")
    size: str = Field("tiny", description="which size of each recipe to run (tiny: CPU; base: GPU)")
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int | Literal["auto"] = Field(1, description="devices per node; >1 needs torchrun (or srun), see docs/TRAINING.md")
    num_nodes: int = Field(1, ge=1)
    strategy: Literal["auto", "ddp", "fsdp", "ddp_find_unused_parameters_true"] = "auto"
    precision: str | None = Field(None, description="null: bf16-mixed on a GPU that supports it, 32-true on CPU")
    compile: bool = Field(False, description="torch.compile the model")
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = Field(
        "default", description="torch.compile's mode with compile: true (reduce-overhead: CUDA graphs of the step)")
    seed: int = Field(0, ge=0)
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes")
    max_steps: int | None = Field(None, ge=1, description="override every recipe's pretraining steps (quick experiments)")
    budget_minutes: float | None = Field(None, gt=0, description="pretrain every recipe for this many wall-clock minutes "
                                         "instead of its steps (max_steps, if given, caps the steps); the schedule "
                                         "decays to its floor at the budget's end")
    finetune_max_steps: int | None = Field(None, ge=1, description="override every recipe's fine-tuning steps")
    checkpoint_every: int = Field(50, ge=1, description="optimizer steps between checkpoints (last.ckpt)")
    keep_attempts: int = Field(2, ge=1, description="attempts (checkpoints of one set of settings, beside the output in "
                                                    ".<output>.attempts/) kept after a run finishes, the latest first")
    restart: bool = Field(False, description="discard the resume state of the current settings and train from the start "
                                             "(`--restart`); never implied by changed settings")
    log_every: int = Field(5, ge=1, description="optimizer steps between logged training metrics")
    threads: int | None = Field(None, ge=1, description="torch intra-op threads on CPU (null: torch's default)")

    @field_validator("architectures")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in ARCHITECTURE_NAMES]
        if unknown:
            raise ValueError(f"unknown architecture(s) {unknown}; known: {ARCHITECTURE_NAMES}")
        return value


class FinetuneConfig(_Strict):
    """Downstream tasks: the default is built from the embedded corpus (finetuning/tasks/docstring_kind.py)."""

    tasks: list[str] = Field(["docstring_kind"], description="task names, local folders, or hf:NAME[/CONFIG]")

    @field_validator("tasks")
    @classmethod
    def _named(cls, value: list[str]) -> list[str]:
        for task in value:  # a task's outputs are <train.output>/<arch>/<its last name>: "." or ".." would be above
            last = task.removeprefix("hf:").replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
            if last.strip(".") == "":
                raise ValueError(f"{task!r} does not name a task: its last part ({last!r}) names no folder of its "
                                 "own; give the task folder's own path")
        return value
    max_length: int = Field(128, ge=8, description="tokens per fine-tuning input")
    max_train_examples: int | None = Field(4000, ge=1, description="cap on training examples per task (seeded sample)")
    scratch_control: bool = Field(True, description="also fine-tune each architecture from random initialisation with the "
                                                    "same recipe and budget (<task>-scratch): what pretraining is worth")


class EvaluateConfig(_Strict):
    output: str = Field("data/report", description="leaderboard, charts, per-architecture metrics")
    validation_batches: int | None = Field(None, ge=1, description="cap on validation batches (null: the whole split)")
    harness: list[str] = Field(
        default_factory=lambda: ["docstring_next"],
        description="zero-shot tasks scored for each generative architecture (GPT, Transformer-XL, XLNet, BART, T5, "
                    "Switch) and its untrained floor: docstring_next (built from the held-out documents; scored by "
                    "lm-eval where installed, else by lmforge with lm-eval's definitions), a task YAML file, or an "
                    "lm-eval task name (these two need pip install 'lmforge[eval]'); empty: none")
    harness_questions: int = Field(200, ge=4, description="docstring_next: questions drawn from the held-out documents, "
                                                          "at most")
