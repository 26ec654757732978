"""Where each dataset comes from: its Hugging Face Hub name and the mapping of its fields, in one table.

Local copies follow ``<local_dir>/<folder>/<split>.jsonl`` (or ``.parquet``); the folder names match the
evaluation copies described in the benchmarks' SOURCES.md. Splits marked Hub-only have no local copy there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from setpo._validate import check_choice


@dataclass(frozen=True)
class HubSource:
    """How to load one split from the Hub: ``datasets.load_dataset(name, config, split=split, data_files=...)``.

    ``rows`` optionally keeps a [start, stop) row range (TinyZero's Countdown train/test cut).
    """

    name: str
    split: str
    config: str | None = None
    data_files: str | None = None
    rows: tuple[int, int] | None = None


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: fields holding the problem and answer (first present wins), its task and where it lives."""

    key: str
    task: str  # "math" or "countdown"
    problem_fields: tuple[str, ...]
    answer_fields: tuple[str, ...]
    answer_format: str  # plain | gsm8k (after ####) | list (all acceptable) | boxed_solution | minerva | countdown
    hub: dict[str, HubSource]
    local_folder: str
    local_splits: tuple[str, ...]
    extra_fields: tuple[str, ...] = field(default_factory=tuple)

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.hub)

    def hub_only(self, split: str) -> bool:
        """True when the shipped local copies do not include this split."""
        return split not in self.local_splits


_TINYZERO_TRAIN = 327_680  # TinyZero: first 327,680 rows train, the next 1,024 test
_GSM = "openai/gsm8k"
_CD = "Jiayi-Pan/Countdown-Tasks-3to4"
_ZOO = "hkust-nlp/SimpleRL-Zoo-Data"
_MATH = dict(task="math", answer_format="plain")
SPECS: dict[str, DatasetSpec] = {
    s.key: s
    for s in [
        DatasetSpec(
            key="gsm8k", task="math", problem_fields=("question",), answer_fields=("answer",), answer_format="gsm8k",
            hub={"train": HubSource(_GSM, "train", "main"), "test": HubSource(_GSM, "test", "main")},
            local_folder="gsm8k", local_splits=("test",), extra_fields=("idx",),
        ),
        DatasetSpec(
            key="math500", **_MATH, problem_fields=("problem",), answer_fields=("answer",),
            hub={"test": HubSource("HuggingFaceH4/MATH-500", "test")},
            local_folder="math500", local_splits=("test",), extra_fields=("subject", "level", "unique_id"),
        ),
        DatasetSpec(
            key="college_math", **_MATH, problem_fields=("question", "problem"), answer_fields=("answer",),
            hub={"test": HubSource("qq8933/College_Math_Test", "train")},
            local_folder="college_math", local_splits=(), extra_fields=("data_topic",),
        ),
        DatasetSpec(
            key="amc23", **_MATH, problem_fields=("problem", "question"), answer_fields=("answer",),
            hub={"test": HubSource("math-ai/amc23", "test")},
            local_folder="amc23", local_splits=("test",), extra_fields=("id", "url"),
        ),
        DatasetSpec(
            key="aime24", **_MATH, problem_fields=("problem", "question"), answer_fields=("answer",),
            hub={"test": HubSource("HuggingFaceH4/aime_2024", "train")},
            local_folder="aime24", local_splits=("test",), extra_fields=("id", "url"),
        ),
        DatasetSpec(
            key="aime25", **_MATH, problem_fields=("problem", "question"), answer_fields=("answer",),
            hub={"test": HubSource("math-ai/aime25", "test")},
            local_folder="aime25", local_splits=("test",), extra_fields=("id",),
        ),
        DatasetSpec(
            key="minerva", task="math", problem_fields=("problem", "question"), answer_fields=("answer",),
            answer_format="minerva", hub={"test": HubSource("math-ai/minervamath", "test")},
            local_folder="minerva_math", local_splits=("test",), extra_fields=("type", "idx"),
        ),
        DatasetSpec(
            key="olympiadbench", task="math", problem_fields=("question", "problem"),
            answer_fields=("final_answer", "answer"), answer_format="list",
            hub={"test": HubSource("Hothan/OlympiadBench", "train", "OE_TO_maths_en_COMP")},
            local_folder="olympiadbench", local_splits=("test",),
            extra_fields=("id", "subfield", "answer_type", "is_multiple_answer", "unit"),
        ),
        DatasetSpec(
            key="simplerl_hard", **_MATH, problem_fields=("question", "problem"),
            answer_fields=("gt_answer", "answer", "extra_info.answer"),
            hub={"train": HubSource(_ZOO, "train", data_files="simplelr_qwen_level3to5/train.parquet")},
            local_folder="simplerl_hard", local_splits=(), extra_fields=("level", "subject"),
        ),
        DatasetSpec(
            key="countdown", task="countdown", problem_fields=(), answer_fields=("target", "nums"),
            answer_format="countdown",
            hub={
                "train": HubSource(_CD, "train", rows=(0, _TINYZERO_TRAIN)),
                "test": HubSource(_CD, "train", rows=(_TINYZERO_TRAIN, _TINYZERO_TRAIN + 1024)),
            },
            local_folder="countdown", local_splits=("train", "test"),
        ),
    ]
}  # fmt: skip

# The paper's evaluation benchmarks (Tables 1-2 columns plus those used in figures only).
EVAL_BENCHMARKS = ("gsm8k", "math500", "college_math", "amc23", "aime24", "aime25", "minerva", "olympiadbench")


def get_spec(key: str) -> DatasetSpec:
    """The spec of dataset `key`, with a clear error listing the known names."""
    return SPECS[check_choice(key, "dataset", list(SPECS))]


def source_table() -> str:
    """The table above as markdown (dataset, split, Hub name, problem/answer fields, local copy)."""
    lines = ["| dataset | split | Hub dataset | problem field | answer field | local copy |", "|---" * 6 + "|"]
    for s in SPECS.values():
        for split, h in s.hub.items():
            hub = h.name + (f" ({h.config})" if h.config else "") + (f" [{h.data_files}]" if h.data_files else "")
            hub += f" split={h.split}" + (f" rows {h.rows[0]}:{h.rows[1]}" if h.rows else "")
            local = f"{s.local_folder}/{split}.jsonl" if not s.hub_only(split) else "Hub only"
            lines.append(
                f"| {s.key} | {split} | {hub} | {'/'.join(s.problem_fields) or '(nums, target)'} | "
                f"{'/'.join(s.answer_fields)} ({s.answer_format}) | {local} |"
            )
    return "\n".join(lines)
