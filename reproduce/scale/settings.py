"""Every full-scale paper run (Tables 4-8) as one table: settings, the verl overrides of each, a GPU-hour estimate.

Hyperparameters are the paper's (spec section 4 table); resources (GPUs, tensor parallelism, micro-batches)
and everything the paper does not state are this project's choices, marked ``# choice`` below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from setpo.integrations.verl.config import PAPER_EMBEDDER, PAPER_LAMBDA

SEEDS = (1, 2, 3, 4, 5)
REWARD = ["reward.custom_reward_function.path=pkg://setpo.integrations.verl.reward"]
REWARD.append("reward.custom_reward_function.name=compute_score")

#: Training-set sizes behind the step counts (GSM8K train; SimpleRL-Zoo MATH level 3-5, approximate;
#: the paper's 86,400 Countdown samples).
TRAIN_ROWS = {"gsm8k": 7473, "simplerl_hard": 8523, "countdown": 86_400}
#: Mean prompt length in tokens (chat template + instruction), an estimate per dataset.
PROMPT_TOKENS = {"gsm8k": 150, "simplerl_hard": 200, "countdown": 200}
PARAMS_B = {
    "Qwen/Qwen2.5-Math-1.5B": 1.54,
    "Qwen/Qwen2.5-Math-7B": 7.6,
    "Qwen/Qwen2.5-32B": 32.8,
    "Qwen/Qwen2.5-3B": 3.1,
}


@dataclass(frozen=True)
class Resources:
    """Where a run goes: nodes x GPUs (80 GB H100/A100 class), rollout tensor parallelism, micro-batches, offload."""

    nnodes: int = 1
    gpus_per_node: int = 8
    rollout_tp: int = 1
    micro_batch_per_gpu: int = 16
    gpu_memory_utilization: float = 0.55  # choice: leaves room for the SetPO embedder on GPU 0 of the head node
    ref_param_offload: bool = False
    actor_param_offload: bool = False

    @property
    def gpus(self) -> int:
        return self.nnodes * self.gpus_per_node


@dataclass(frozen=True)
class ScaleSetting:
    """One launch script: a paper table's run for one base method, model and (optional) SetPO lambda."""

    name: str
    table: int
    base: str  # grpo | gspo | dapo
    model: str
    train: str  # dataset key under DATA_DIR
    val: tuple[str, ...]
    batch: int
    mini_batch: int
    lr: float
    kl: float
    epochs: int
    n: int  # rollouts per prompt, G
    temperature: float
    clip_low: float
    clip_high: float
    max_prompt: int
    max_response: int
    lam: float | None  # None: the baseline (verl's own trainer, no SetPO)
    resources: Resources = field(default_factory=Resources)
    train_max_samples: int = -1
    val_temperature: float = 0.5  # paper's evaluation sampling: T=0.5, top-p 0.9
    val_top_p: float = 0.9

    @property
    def method(self) -> str:
        return self.base if self.lam is None else f"setpo+{self.base}"

    @property
    def steps(self) -> int:
        rows = TRAIN_ROWS[self.train] if self.train_max_samples < 0 else self.train_max_samples
        return (rows // self.batch) * self.epochs  # verl drops the last partial batch


def _math(table, base, model, size, lam, **kw) -> ScaleSetting:
    gsm8k = dict(train="gsm8k", val=("gsm8k", "math500"), batch=64, mini_batch=64, epochs=2, n=6, temperature=0.9)
    gsm8k.update(max_prompt=512, max_response=756, kl=1e-4)
    gsm8k.update(kw)
    tag = "setpo_" + base if lam is not None else base
    return ScaleSetting(name=f"table{table}_{tag}_math{size}", table=table, base=base, model=model, lam=lam, **gsm8k)


def _settings() -> list[ScaleSetting]:
    out: list[ScaleSetting] = []
    small = Resources(rollout_tp=1, micro_batch_per_gpu=16)
    seven = Resources(rollout_tp=2, micro_batch_per_gpu=8, ref_param_offload=True)
    for size, model, res in (("1.5b", "Qwen/Qwen2.5-Math-1.5B", small), ("7b", "Qwen/Qwen2.5-Math-7B", seven)):
        for lam in (None, PAPER_LAMBDA["grpo"]):  # Table 4
            out.append(_math(4, "grpo", model, size, lam, lr=3e-6, clip_low=0.2, clip_high=0.2, resources=res))
        for lam in (None, PAPER_LAMBDA["gspo"]):  # Table 5
            out.append(_math(5, "gspo", model, size, lam, lr=1e-6, clip_low=3e-4, clip_high=4e-4, resources=res))
        for lam in (None, PAPER_LAMBDA["dapo"]):  # Table 6
            out.append(_math(6, "dapo", model, size, lam, lr=1e-6, clip_low=0.2, clip_high=0.28, resources=res))
    big = Resources(nnodes=4, rollout_tp=4, micro_batch_per_gpu=2, ref_param_offload=True)
    for lam in (None, PAPER_LAMBDA["grpo_32b"]):  # Table 7 (rollout temperature 1.0 as its table lists)
        tag = "setpo_grpo" if lam is not None else "grpo"
        out.append(
            ScaleSetting(
                name=f"table7_{tag}_qwen32b", table=7, base="grpo", model="Qwen/Qwen2.5-32B", train="simplerl_hard",
                val=("math500", "aime24"), batch=1024, mini_batch=256, lr=1e-6, kl=1e-3, epochs=15, n=6,
                temperature=1.0, clip_low=0.2, clip_high=0.2, max_prompt=1024, max_response=4096, lam=lam,
                resources=big,
            )
        )  # fmt: skip
    three = Resources(rollout_tp=1, micro_batch_per_gpu=8)
    for g in (3, 7):  # Table 8: Countdown, Qwen2.5-3B, G in {3, 7}, KL in {1e-3, 5e-3}
        for kl in (1e-3, 5e-3):
            for lam in (None, PAPER_LAMBDA["countdown"]):
                tag = "setpo_grpo" if lam is not None else "grpo"
                out.append(
                    ScaleSetting(
                        name=f"table8_{tag}_countdown_g{g}_kl{kl:g}", table=8, base="grpo", model="Qwen/Qwen2.5-3B",
                        train="countdown", val=("countdown",), batch=128, mini_batch=128, lr=1e-6, kl=kl, epochs=1,
                        n=g, temperature=1.0, clip_low=0.2, clip_high=0.2, max_prompt=512, max_response=2048,
                        lam=lam, resources=three, train_max_samples=TRAIN_ROWS["countdown"], val_temperature=1.0,
                        val_top_p=1.0,
                    )
                )  # fmt: skip
    return out


SETTINGS: dict[str, ScaleSetting] = {s.name: s for s in _settings()}


def base_method_overrides(s: ScaleSetting) -> list[str]:
    """GRPO: clipped surrogate, token-mean loss. GSPO: sequence-level ratio (loss_mode=gspo), tiny clip range.
    DAPO: decoupled clip 0.2/0.28, token-mean loss, dynamic sampling (groups with equal rewards re-drawn)."""
    actor = "actor_rollout_ref.actor"
    out = [f"{actor}.clip_ratio_low={s.clip_low:g}", f"{actor}.clip_ratio_high={s.clip_high:g}"]
    if s.base == "grpo":
        out += [f"{actor}.policy_loss.loss_mode=vanilla", f"{actor}.loss_agg_mode=token-mean"]
    elif s.base == "gspo":
        out += [f"{actor}.policy_loss.loss_mode=gspo", f"{actor}.loss_agg_mode=seq-mean-token-mean"]
    elif s.base == "dapo":
        out += [f"{actor}.policy_loss.loss_mode=vanilla", f"{actor}.loss_agg_mode=token-mean"]
        # verl 0.9.1's V1 replay buffer refills filtered groups until the batch is full, with no cap on the number
        # of generation batches (it ignores max_num_gen_batches); max_inflight_gen_batches (default 1) bounds
        # how many train batches of prompts are generated at once.
        out += [f"{actor}.clip_ratio_c=10.0", "algorithm.filter_groups.enable=true"]
        out += ["algorithm.filter_groups.metric=reward"]
    else:
        raise ValueError(f"unknown base method {s.base!r}; use grpo, gspo or dapo")
    return out


def overrides(s: ScaleSetting, data_dir: str, seed: str | int, run_dir: str) -> list[str]:
    """The hydra overrides of one run (paths and seed may be shell variables such as ``$DATA_DIR``)."""
    r = s.resources
    files = lambda keys, split: "[" + ",".join(f"{data_dir}/{k}/{split}.parquet" for k in keys) + "]"  # noqa: E731
    actor, rollout, ref = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"
    out = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={files([s.train], 'train')}",
        f"data.val_files={files(s.val, 'test')}",
        f"data.train_batch_size={s.batch}",
        f"data.train_max_samples={s.train_max_samples}",
        f"data.max_prompt_length={s.max_prompt}",
        f"data.max_response_length={s.max_response}",
        "data.filter_overlong_prompts=true",
        "data.truncation=error",
        f"data.seed={seed}",
        f"actor_rollout_ref.model.path={s.model}",
        "actor_rollout_ref.model.use_remove_padding=true",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        f"{actor}.optim.lr={s.lr:g}",
        f"{actor}.ppo_mini_batch_size={s.mini_batch}",
        f"{actor}.ppo_micro_batch_size_per_gpu={r.micro_batch_per_gpu}",
        f"{actor}.use_kl_loss={'true' if s.kl > 0 else 'false'}",
        f"{actor}.kl_loss_coef={s.kl:g}",
        f"{actor}.kl_loss_type=low_var_kl",
        f"{actor}.entropy_coeff=0",
        f"{actor}.data_loader_seed={seed}",
        f"{actor}.fsdp_config.param_offload={'true' if r.actor_param_offload else 'false'}",
        *base_method_overrides(s),
        f"{rollout}.name=vllm",
        f"{rollout}.n={s.n}",
        f"{rollout}.temperature={s.temperature:g}",
        f"{rollout}.tensor_model_parallel_size={r.rollout_tp}",
        f"{rollout}.gpu_memory_utilization={r.gpu_memory_utilization:g}",
        f"{rollout}.log_prob_micro_batch_size_per_gpu={2 * r.micro_batch_per_gpu}",
        f"{rollout}.seed={seed}",
        f"{rollout}.val_kwargs.do_sample=true",
        f"{rollout}.val_kwargs.n=4",
        f"{rollout}.val_kwargs.temperature={s.val_temperature:g}",
        f"{rollout}.val_kwargs.top_p={s.val_top_p:g}",
        f"{ref}.log_prob_micro_batch_size_per_gpu={2 * r.micro_batch_per_gpu}",
        f"{ref}.fsdp_config.param_offload={'true' if r.ref_param_offload else 'false'}",
        *REWARD,
        f"trainer.nnodes={r.nnodes}",
        f"trainer.n_gpus_per_node={r.gpus_per_node}",
        f"trainer.total_epochs={s.epochs}",
        "critic.enable=false",
        "trainer.critic_warmup=0",
        "trainer.project_name=setpo",
        f"trainer.experiment_name={s.name}_seed{seed}",
        "trainer.logger=[console]",
        "trainer.val_before_train=true",
        f"trainer.test_freq={max(1, s.steps // 10)}",
        f"trainer.save_freq={max(1, s.steps // 10)}",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={run_dir}/checkpoints",
        f"trainer.validation_data_dir={run_dir}/val_generations",
    ]
    if s.lam is not None:
        out += [
            "trainer.v1.trainer_mode=setpo_sync",
            f"+setpo.lambda={s.lam:g}",
            f"+setpo.embedder={PAPER_EMBEDDER}",
            "+setpo.embed_device=cuda",
            "+setpo.embedder_kwargs.batch_size=64",
        ]
    return out


# ----------------------------------------------------------------------------- GPU-hour estimate

#: Assumptions of the estimate (a compute model, not a measurement; calibrate with the first run's
#: ``timing_s/step``). Peak dense bf16 of one H100 SXM; model FLOP utilisation of the training passes and of
#: vLLM decoding; mean response length as a fraction of the cap; fixed seconds per step (weight sync,
#: scheduling, rewards); validation share of the time; extra generation of DAPO's dynamic sampling.
ESTIMATE = dict(
    peak_tflops=989.0,
    mfu_train=0.30,
    mfu_generate=0.08,
    response_fraction=0.5,
    fixed_s_per_step=20.0,
    validation_share=0.10,
    dapo_generation_factor=2.0,
    embed_mfu=0.25,
)


@dataclass(frozen=True)
class Estimate:
    steps: int
    seconds_per_step: float
    hours_per_seed: float
    gpu_hours_per_seed: float
    gpu_hours_all_seeds: float
    setpo_embed_s_per_step: float


def estimate(s: ScaleSetting, seeds: int = len(SEEDS), a: dict | None = None) -> Estimate:
    """GPU-hours of one setting: FLOPs of generation (2 N per token), old/ref log-probs (2 N each) and the actor
    update with recomputation (8 N) at the assumed utilisations, plus fixed per-step time; SetPO adds the
    embedder's forward pass (2 x 0.6e9 per response token) on one GPU."""
    a = {**ESTIMATE, **(a or {})}
    n_params = PARAMS_B[s.model] * 1e9
    responses = s.batch * s.n
    resp_tokens = responses * math.ceil(a["response_fraction"] * s.max_response)
    all_tokens = responses * PROMPT_TOKENS[s.train] + resp_tokens
    cluster = s.resources.gpus * a["peak_tflops"] * 1e12
    gen_factor = a["dapo_generation_factor"] if s.base == "dapo" else 1.0
    t_gen = gen_factor * 2 * n_params * resp_tokens / (cluster * a["mfu_generate"])
    t_train = (2 + 2 + 8) * n_params * all_tokens / (cluster * a["mfu_train"])
    t_embed = 0.0
    if s.lam is not None:
        t_embed = 2 * 0.6e9 * resp_tokens / (a["peak_tflops"] * 1e12 * a["embed_mfu"])
    step = (t_gen + t_train + t_embed + a["fixed_s_per_step"]) * (1 + a["validation_share"])
    hours = s.steps * step / 3600
    gpu_hours = hours * s.resources.gpus
    return Estimate(s.steps, step, hours, gpu_hours, gpu_hours * seeds, t_embed)
