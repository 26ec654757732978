"""Tables 1-2 route without a Ray cluster: prepare data -> train with SetPOTrainer (TRL) -> sample -> verify -> tables.

    python -m reproduce math_pipeline --profile cpu-smoke|quick|full|full_<preset> [--config FILE] [--print-config]
                                      [--local-dir DIR] [--seeds N] [--out DIR] [--overwrite] [--publish]

For every seed and method (the base model, the preset's base algorithm with lambda = 0, and SetPO on top of
it) the script trains on the prepared GSM8K parquet with a paper preset (default: Table 4, GRPO, 1.5B), then
samples n completions per benchmark problem, checks them with math-verify and reports Avg@n (= Pass@1) and
unbiased pass@k. Written under the run folder: data/ (verl parquet), models/, eval/<method>_s<seed>/
(generations JSONL + results JSON per benchmark), tables/pass1.md|csv and passk.md (measured beside the
paper's Table 1/2 numbers, with the run's scale stated), figures/passk.png|csv and train_curves.png|csv.

Profiles: cpu-smoke and quick run a tiny random model (setpo.tiny) on a handful of real problems from local
benchmark copies (--local-dir): they test the plumbing and say nothing about accuracy. cpu-smoke adds the
"oracle" method, scripted samples of which exactly half are correct (each correct one after a wrong first box),
so generation -> verification -> pass@k -> tables is checked on known non-zero numbers. full is the paper's
scale (Qwen2.5-Math-1.5B, the whole GSM8K train split from the Hub, n = 64, 5 seeds) and needs GPUs; the
full_<preset> profiles are the same scale for the other row pairs (Table 4 on the 7B model, Tables 5 and 6).
`--print-config` writes the chosen profile as YAML; edit it and pass it back with `--config FILE`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from reproduce.common import (
    PAPER_FIGURES,
    Parser,
    RunDir,
    RunPlan,
    chosen_config,
    cli,
    experiment_parser,
    print_config,
    save_figure,
    write_json,
)
from setpo.data import DatasetUnavailableError, get_spec, prepare_split, read_prepared
from setpo.eval import (
    PAPER_COLUMNS,
    REPORTED,
    HFGenerator,
    SamplingConfig,
    evaluate_benchmark,
    make_generator,
    math_accuracy_reward,
    math_checker,
    pass1_table,
    pass_at_k_table,
)
from setpo.integrations.trl import get_preset
from setpo.tasks.math.verify import MathVerifier

NAME = "math_pipeline"
PAPER_METHODS = ("base", "baseline", "setpo")
METHODS = (*PAPER_METHODS, "oracle")  # oracle: scripted samples, half of them correct (a plumbing check)


@dataclass
class MathPipelineConfig:
    """One pipeline run. ``model="tiny"`` builds a setpo.tiny model from ``tiny`` (TinyModelConfig fields).

    ``train_overrides`` are SetPOConfig fields applied on top of ``preset``; ``methods`` is a subset of
    base (no training), baseline (preset with setpo_lambda = 0), setpo (the preset as is) and oracle (no model:
    scripted samples, exactly half of them correct; checks the scoring and tables on known numbers).
    When the training split is also evaluated, evaluation uses the rows after the ``train_limit`` training rows.
    """

    model: str = "tiny"
    tiny: dict[str, Any] = field(default_factory=dict)
    preset: str = "table4_grpo_1.5b"
    methods: tuple[str, ...] = PAPER_METHODS
    train_dataset: str = "gsm8k"
    train_split: str = "train"
    train_limit: int | None = None
    train_overrides: dict[str, Any] = field(default_factory=dict)
    eval_benchmarks: tuple[str, ...] = PAPER_COLUMNS
    eval_limit: int | None = None
    n: int = 64
    # paper: College Math Avg@16; AIME24 256 samples for Fig. 8's pass@256 (Avg@256 estimates the same Pass@1)
    n_overrides: dict[str, int] = field(default_factory=lambda: {"college_math": 16, "aime24": 256})
    temperature: float = 0.5
    top_p: float = 0.9
    max_new_tokens: int = 3072
    gen_batch_size: int = 64
    backend: str = "auto"
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    verify_workers: int = 0
    require_boxed: bool = False  # True: score only the last \\boxed{} (default: math-verify's own extraction)

    def __post_init__(self):
        self.methods, self.seeds = tuple(self.methods), tuple(self.seeds)
        self.eval_benchmarks = tuple(self.eval_benchmarks)
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods or len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods must be distinct names from {METHODS}, got {self.methods}")
        for b in (*self.eval_benchmarks, self.train_dataset):
            get_spec(b)  # raises on an unknown dataset name
        if self.train_split not in get_spec(self.train_dataset).splits:
            raise ValueError(f"{self.train_dataset} has no split {self.train_split!r}")
        if not self.seeds or any(not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds must be non-negative integers, got {self.seeds}")
        for name in ("train_limit", "eval_limit"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be None or a positive integer, got {v!r}")
        if self.backend not in ("auto", "hf", "vllm"):
            raise ValueError(f"backend must be auto, hf or vllm, got {self.backend!r}")
        base_algorithm(self.preset)
        SamplingConfig(self.n, self.temperature, self.top_p, self.max_new_tokens, self.gen_batch_size)  # validates


def base_algorithm(preset: str) -> str:
    """GRPO / GSPO / DAPO: the base method a math preset trains (its setpo_lambda = 0 row)."""
    p = get_preset(preset)
    algo = p.name.split("_")[1].upper() if p.name.startswith("table") else ""
    if algo not in ("GRPO", "GSPO", "DAPO") or "countdown" in p.name:
        raise ValueError(f"preset {preset!r} is not a math preset (use table4_*, table5_*, table6_* or table7_*)")
    return algo


def method_label(method: str, preset: str) -> str:
    """The row name used in the paper's tables."""
    algo = base_algorithm(preset)
    return {"base": "base model", "baseline": algo, "setpo": f"SetPO+{algo}", "oracle": "oracle (half correct)"}[method]


class OracleGenerator:
    """Scripted samples with a known share of correct answers: sample j of problem i is correct when i + j is even
    (exactly half for even n). A correct sample boxes a wrong number first and the gold last, so the last-box rule
    is exercised; a wrong one boxes only the wrong number."""

    WRONG = "-987654321"

    def __init__(self, rows: list[dict], n: int):
        from setpo.tasks.math.verify import gold_to_latex

        self.golds = [gold_to_latex(r["reward_model"]["ground_truth"]) for r in rows]
        self.n = n

    def __call__(self, prompts) -> list[list[str]]:
        if len(prompts) != len(self.golds):
            raise ValueError(f"oracle built for {len(self.golds)} problems, asked for {len(prompts)}")
        first = f"First guess \\boxed{{{self.WRONG}}}."
        return [
            [f"{first} Checking again, the answer is {g}." if (i + j) % 2 == 0 else first for j in range(self.n)]
            for i, g in enumerate(self.golds)
        ]


_TINY = {"family": "qwen2", "hidden_size": 64, "num_layers": 2, "num_heads": 4, "max_position_embeddings": 2048}
_CPU_TRAIN = {
    "per_device_train_batch_size": 6,
    "generation_batch_size": 6,
    "max_completion_length": 16,
    "max_steps": 2,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "use_cpu": True,
    "bf16": False,
    "gradient_checkpointing": False,
    "setpo_embedder": "hashed",
}
# The paper's scale (Table 4 settings, compare with Table 2): GPUs, Hub access and days of compute.
_FULL = MathPipelineConfig(
    model="Qwen/Qwen2.5-Math-1.5B",
    preset="table4_grpo_1.5b",
    train_split="train",
    train_overrides={
        "per_device_train_batch_size": 12,
        "gradient_accumulation_steps": 32,
        "bf16": True,
        "gradient_checkpointing": True,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 50,
        "report_to": "none",
    },
    eval_benchmarks=(*PAPER_COLUMNS, "olympiadbench"),
    n=64,
    max_new_tokens=3072,
    backend="auto",
    seeds=(0, 1, 2, 3, 4),
    verify_workers=8,
)
PROFILES: dict[str, MathPipelineConfig] = {
    # Plumbing check in well under a minute on 2 CPU cores (the test runs it).
    "cpu-smoke": MathPipelineConfig(
        model="tiny",
        tiny=_TINY,
        methods=("oracle", "baseline", "setpo"),
        train_split="test",
        train_limit=4,
        train_overrides=_CPU_TRAIN,
        eval_limit=2,
        n=4,
        n_overrides={},
        max_new_tokens=16,
        gen_batch_size=32,
        backend="hf",
        seeds=(0,),
    ),
    # What the main job runs on 2 CPU cores: all three methods, the offline MiniLM embedder, pass@k up to 8.
    "quick": MathPipelineConfig(
        model="tiny",
        tiny=_TINY,
        train_split="test",
        train_limit=16,
        train_overrides={
            **_CPU_TRAIN,
            "per_device_train_batch_size": 12,
            "generation_batch_size": 12,
            "max_completion_length": 24,
            "max_steps": 4,
            "setpo_embedder": "minilm",
        },
        eval_limit=4,
        n=8,
        n_overrides={},
        max_new_tokens=24,
        backend="hf",
        seeds=(0,),
    ),
    "full": _FULL,
}
# The other row pairs at the paper's scale: Table 4's settings on the 7B model (Table 1), Tables 5 and 6 (GSPO, DAPO).
PROFILES.update(
    {
        f"full_{preset}": replace(_FULL, model=get_preset(preset).model, preset=preset)
        for preset in ("table4_grpo_7b", "table5_gspo_1.5b", "table6_dapo_1.5b")
    }
)


# -- steps ------------------------------------------------------------------------------------------------------


def _prepare(run: RunDir, cfg: MathPipelineConfig, local_dir: str | None, use_hub: bool) -> dict:
    if run.done("prepare"):
        return run.load("prepare")
    data = run.tree("data")
    train = prepare_split(cfg.train_dataset, cfg.train_split, data, local_dir, use_hub=use_hub)
    available, missing = {}, {}
    for b in tqdm(cfg.eval_benchmarks, desc="prepare", leave=False):
        try:
            available[b] = prepare_split(b, "test", data, local_dir, use_hub=use_hub)["path"]
        except DatasetUnavailableError as e:
            missing[b] = str(e)
    if not available:
        raise DatasetUnavailableError("no evaluation benchmark could be loaded: " + "; ".join(missing.values()))
    result = {"train": train["path"], "available": available, "missing": missing}
    return run.save("prepare", result)


def _train_rows(run: RunDir, cfg: MathPipelineConfig, prep: dict) -> list[dict]:
    rows = read_prepared(run.path / "data" / prep["train"])
    return rows[: cfg.train_limit] if cfg.train_limit else rows


def _eval_rows(run: RunDir, cfg: MathPipelineConfig, prep: dict, bench: str) -> list[dict]:
    rows = read_prepared(run.path / "data" / prep["available"][bench])
    start = 0
    if bench == cfg.train_dataset and cfg.train_split == "test":
        start = cfg.train_limit or len(rows)  # never evaluate on the training problems
    rows = rows[start:]
    rows = rows[: cfg.eval_limit] if cfg.eval_limit else rows
    if not rows:
        raise ValueError(f"{bench}: no evaluation rows left after the {start} training rows")
    return rows


def _base_model(run: RunDir, cfg: MathPipelineConfig) -> str:
    if cfg.model != "tiny":
        return cfg.model
    if not run.done("base_model"):
        from setpo.tiny import build_tiny_model

        path = build_tiny_model(run.tree("models/base"), overwrite=True, **cfg.tiny)
        run.save("base_model", {"path": str(path)})
    return run.load("base_model")["path"]


def _load_model(cfg: MathPipelineConfig, path: str):
    if cfg.model == "tiny":
        from setpo.tiny import load_tiny

        return load_tiny(path)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path, dtype="auto"), AutoTokenizer.from_pretrained(path)


def _numbers(d: dict) -> dict:
    return {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _train(run: RunDir, cfg: MathPipelineConfig, method: str, seed: int, base: str, train_rows: list[dict]) -> dict:
    step = f"train_{method}_s{seed}"
    if run.done(step):
        return run.load(step)
    from datasets import Dataset

    from setpo.integrations.trl import SetPOConfig, SetPOTrainer

    out = run.tree(f"models/{method}_s{seed}")
    overrides = {**cfg.train_overrides, "seed": seed}
    if method == "baseline":
        overrides["setpo_lambda"] = 0.0
    args = SetPOConfig.from_preset(cfg.preset, output_dir=str(out / "trainer"), **overrides)
    model, tok = _load_model(cfg, base)
    trainer = SetPOTrainer(
        model,
        reward_funcs=[math_accuracy_reward],
        args=args,
        train_dataset=Dataset.from_list(train_rows),
        processing_class=tok,
    )
    has_ckpt = any((out / "trainer").glob("checkpoint-*"))
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=True if has_ckpt else None)
    trainer.save_model(str(out / "final"))
    tok.save_pretrained(str(out / "final"))
    if cfg.model == "tiny":  # marks the folder as a setpo.tiny model for `python -m setpo.eval`
        from setpo.tiny.model import META_FILE

        shutil.copy2(Path(base) / META_FILE, out / "final" / META_FILE)
    result = {
        "model_dir": str(out / "final"),
        "setpo_lambda": args.setpo_lambda,
        "steps": trainer.state.global_step,
        "train_wall_s": time.perf_counter() - t0,
        "log_history": [_numbers(h) for h in trainer.state.log_history],
    }
    return run.save(step, result)


def _evaluate(run: RunDir, cfg: MathPipelineConfig, prep: dict, method: str, seed: int, model_dir: str) -> dict:
    step = f"eval_{method}_s{seed}"
    if run.done(step):
        return run.load(step)
    results = {}
    model = tok = None
    for bench in tqdm(prep["available"], desc=f"eval {method} s{seed}", leave=False):
        sampling = SamplingConfig(
            n=cfg.n_overrides.get(bench, cfg.n),
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            batch_size=cfg.gen_batch_size,
            seed=seed,
        )
        rows = _eval_rows(run, cfg, prep, bench)
        if method == "oracle":
            generate = OracleGenerator(rows, sampling.n)
        elif cfg.model == "tiny" or cfg.backend == "hf":
            if model is None:
                model, tok = _load_model(cfg, model_dir)
            generate = HFGenerator(model, tok, sampling)
        else:
            generate = make_generator(model_dir, sampling, backend=cfg.backend)
        res = evaluate_benchmark(
            bench,
            rows,
            generate,
            run.tree(f"eval/{method}_s{seed}"),
            config={"model_dir": model_dir, "sampling": asdict(sampling)},
            checker=math_checker(MathVerifier(require_boxed=cfg.require_boxed), workers=cfg.verify_workers),
        )
        results[bench] = {k: v for k, v in res.items() if k != "config"}
    return run.save(step, results)


# -- report -----------------------------------------------------------------------------------------------------


def _scale(cfg: MathPipelineConfig, prep: dict, trained: dict, n_train: int) -> str:
    steps = sorted({t["steps"] for t in trained.values()})
    ov = cfg.train_overrides
    G = ov.get("num_generations") or _preset_value(cfg.preset, "num_generations")
    gen_batch = ov.get("generation_batch_size") or _preset_value(cfg.preset, "generation_batch_size")
    if cfg.model == "tiny":
        from setpo.tiny import TinyModelConfig

        t = TinyModelConfig(**cfg.tiny)
        model = f"a tiny random {t.family} model ({t.num_layers} layers, width {t.hidden_size}, character tokenizer)"
    else:
        model = cfg.model
    n_eval = prep["counts"]
    missing = f"; not evaluated (not available): {', '.join(prep['missing'])}" if prep["missing"] else ""
    text = (
        f"{model}; preset {cfg.preset} with overrides {ov or 'none'}; {'/'.join(map(str, steps)) or 0} RL steps of "
        f"{gen_batch} completions (G={G}) on {n_train} {cfg.train_dataset}/{cfg.train_split} problems; "
        f"evaluation: {n_eval} problems, n={cfg.n} samples, T={cfg.temperature}, top-p={cfg.top_p}, "
        f"max {cfg.max_new_tokens} new tokens; seeds {list(cfg.seeds)}{missing}"
    )
    if cfg.model == "tiny":
        text += ". Plumbing run: these numbers test the pipeline, not the method"
    return text


def _preset_value(preset: str, key: str):
    return get_preset(preset).values.get(key)


def _report(run: RunDir, cfg: MathPipelineConfig, evals: dict, trained: dict, scale: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    labels = {m: method_label(m, cfg.preset) for m in cfg.methods}
    colour = {labels[m]: f"C{i}" for i, m in enumerate(cfg.methods)}  # one colour per method in every panel
    benches = list(next(iter(evals.values())))
    pass1, passk_rows, passk = {}, [], {}
    for m in cfg.methods:
        per_seed = [evals[(m, s)] for s in cfg.seeds]
        pass1[labels[m]] = {b: 100 * sum(r[b]["avg@n"] for r in per_seed) / len(per_seed) for b in benches}
        passk[labels[m]] = {}
        for b in benches:
            ks = list(per_seed[0][b]["pass@k"])
            mean = {k: sum(r[b]["pass@k"][k] for r in per_seed) / len(per_seed) for k in ks}
            passk[labels[m]][b] = {"n": per_seed[0][b]["n"], "pass@k": mean}
            passk_rows += [
                {"method": labels[m], "benchmark": b, "k": int(k), "pass_at_k": v, "seeds": len(per_seed)}
                for k, v in mean.items()
            ]
    reported = get_preset_model(cfg.preset)
    tables = run.path / "tables"
    run.write_text("tables/pass1.md", pass1_table(pass1, scale, reported_model=reported))
    run.write_csv("tables/pass1.csv", pd.DataFrame([{"method": m, **row} for m, row in pass1.items()]))
    run.write_text("tables/passk.md", pass_at_k_table(passk, scale))

    df = pd.DataFrame(passk_rows)
    fig, axes = plt.subplots(1, len(benches), figsize=(3.2 * len(benches), 3), squeeze=False)
    for ax, b in zip(axes[0], benches):
        for label, sub in df[df.benchmark == b].groupby("method", sort=False):
            ax.plot(sub.k, 100 * sub.pass_at_k, marker="o", label=label, color=colour[label])
        ax.set_xscale("log", base=2)
        ax.set_title(b)
        ax.set_xlabel("k")
    axes[0][0].set_ylabel("pass@k (%)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.suptitle("Measured pass@k (see tables/pass1.md for the run's scale)", fontsize=8)
    passk_png = save_figure(fig, run.path / "figures" / "passk", df)
    plt.close(fig)

    curves = [
        {"method": labels[m], "seed": s, "step": h["step"], "metric": key, "value": h[key]}
        for (m, s), t in trained.items()
        for h in t["log_history"]
        if "step" in h
        for key in ("reward", "setpo/diversity", "loss")
        if key in h
    ]
    curves_df = pd.DataFrame(curves, columns=["method", "seed", "step", "metric", "value"])
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    for ax, key in zip(axes, ("reward", "setpo/diversity", "loss")):
        for (label, seed), sub in curves_df[curves_df.metric == key].groupby(["method", "seed"], sort=False):
            ax.plot(sub.step, sub.value, marker=".", label=f"{label} s{seed}", color=colour[label])
        ax.set_title(key)
        ax.set_xlabel("RL step")
    if not curves_df.empty:
        axes[0].legend(fontsize=7)
    fig.tight_layout()
    curves_png = save_figure(fig, run.path / "figures" / "train_curves", curves_df)
    plt.close(fig)
    write_json(run.path / "results.json", {"scale": scale, "pass1_percent": pass1, "passk": passk})
    return [tables / "pass1.md", tables / "pass1.csv", tables / "passk.md", passk_png, curves_png]


def get_preset_model(preset: str) -> str | None:
    """The paper table (by model name) whose rows correspond to this preset, if any."""
    name = get_preset(preset).model.split("/")[-1]
    return name if name in REPORTED else None


def run_pipeline(
    run: RunDir, cfg: MathPipelineConfig, local_dir: str | None, use_hub: bool, profile: str
) -> list[Path]:
    """Every step of the pipeline in `run` (each finished step is skipped on a rerun); returns its outputs."""
    prep = _prepare(run, cfg, local_dir, use_hub)
    prep["counts"] = {b: len(_eval_rows(run, cfg, prep, b)) for b in prep["available"]}
    train_rows = _train_rows(run, cfg, prep)
    base = _base_model(run, cfg)
    evals, trained = {}, {}
    jobs = [(s, m) for s in cfg.seeds for m in cfg.methods]
    for seed, method in tqdm(jobs, desc=f"{NAME} ({profile})", unit="run"):
        model_dir = "oracle (scripted samples)" if method == "oracle" else base
        if method not in ("base", "oracle"):
            trained[(method, seed)] = _train(run, cfg, method, seed, base, train_rows)
            model_dir = trained[(method, seed)]["model_dir"]
        evals[(method, seed)] = _evaluate(run, cfg, prep, method, seed, model_dir)
    scale = _scale(cfg, prep, trained, len(train_rows))
    return _report(run, cfg, evals, trained, scale)


def build_parser() -> Parser:
    """The command-line options."""
    p = experiment_parser(
        NAME,
        __doc__,
        PROFILES,
        config="YAML of MathPipelineConfig fields (--print-config writes one)",
        seeds="N seeds 0..N-1 (default: the profile's)",
    )
    p.add_argument(
        "--local-dir",
        default=os.environ.get("SETPO_BENCHMARK_DIR") or None,
        help="folder of local dataset copies (<name>/<split>.jsonl; default: $SETPO_BENCHMARK_DIR)",
    )
    p.add_argument("--no-hub", action="store_true", help="never contact the Hugging Face Hub")
    return p


def _size(cfg: MathPipelineConfig) -> dict[str, int]:
    """What a published result's scale is judged by (see `reproduce.common.check_publish`)."""
    return {"seeds": len(cfg.seeds), "methods": len(cfg.methods)}


def prepare(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check every option and the run folder (writing nothing); returns the run to start."""
    p = build_parser()
    args = p.parse_args(argv)
    cfg = chosen_config(p, args, PROFILES, "math pipeline", seeds=lambda c, n: replace(c, seeds=tuple(range(n))))
    if args.print_config:
        return print_config(cfg, NAME, args)
    if args.local_dir is not None and not Path(args.local_dir).is_dir():
        p.error(f"--local-dir {args.local_dir!r} is not a folder (set by --local-dir or $SETPO_BENCHMARK_DIR)")
    label = args.config.stem if args.config else args.profile
    local = None if args.local_dir is None else str(Path(args.local_dir).resolve())
    config = {"profile": label, "pipeline": asdict(cfg), "local_dir": local, "use_hub": not args.no_hub}
    plan = RunPlan.check(args, NAME, label, config, _size(cfg), PAPER_FIGURES)
    return lambda: _execute(args, cfg, plan)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    return prepare(argv)()


def _execute(args: argparse.Namespace, cfg: MathPipelineConfig, plan: RunPlan) -> int:
    t0 = time.perf_counter()
    run = plan.start()
    files = run_pipeline(run, cfg, plan.config["local_dir"], not args.no_hub, plan.label)
    return plan.finish(run, t0, run.path / "tables" / "pass1.md", files)


if __name__ == "__main__":
    raise SystemExit(cli(main, prog=f"python -m reproduce {NAME}"))
