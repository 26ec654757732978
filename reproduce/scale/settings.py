"""The verl translation of the paper's runs (``setpo.paper_runs``): settings, hydra overrides, a GPU-hour estimate.

Hyperparameters come from ``PAPER_RUNS``; resources (GPUs, tensor parallelism, micro-batches), validation sets
and everything the paper does not state are this project's choices, defined here. Each paper run gives two
settings: the baseline (verl's own trainer) and SetPO with the paper's lambda.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from setpo.paper_runs import PAPER_EMBEDDER, PAPER_RUNS, PaperRun, get_run

SEEDS = (1, 2, 3, 4, 5)
REWARD = ["reward.custom_reward_function.path=pkg://setpo.integrations.verl.reward"]
REWARD.append("reward.custom_reward_function.name=compute_score")

#: Training-set sizes behind the step counts when a run uses the whole set (GSM8K train; SimpleRL-Zoo MATH
#: level 3-5, approximate). Countdown runs read ``train_max_samples`` rows of the training split: with
#: ``data.shuffle=true`` (verl's default) verl 0.9.1 draws them at random with ``data.seed``
#: (``verl/utils/dataset/rl_dataset.py``), so each seed trains on its own subset of that size.
TRAIN_ROWS = {"gsm8k": 7473, "simplerl_hard": 8523}
#: Mean prompt length in tokens (chat template + instruction), an estimate per dataset.
PROMPT_TOKENS = {"gsm8k": 150, "simplerl_hard": 200, "countdown": 200}
PARAMS_B = {
    "Qwen/Qwen2.5-Math-1.5B": 1.54,
    "Qwen/Qwen2.5-Math-7B": 7.6,
    "Qwen/Qwen2.5-32B": 32.8,
    "Qwen/Qwen2.5-3B": 3.1,
}
#: Choices per dataset: the in-training validation sets (the paper's Pass@k is computed afterwards), the prompt
#: cap where the paper gives none, and the run-name stem ({size}: the model's size; names are checkpoint folders).
VAL_SETS = {"gsm8k": ("gsm8k", "math500"), "simplerl_hard": ("math500", "aime24"), "countdown": ("countdown",)}
MAX_PROMPT = {"gsm8k": 512, "simplerl_hard": 1024}
_NAME_STEM = {"gsm8k": "math{size}", "simplerl_hard": "qwen{size}", "countdown": "countdown_g{g}_kl{kl:g}"}
VERL_DEFAULT_CLIP = 0.2  # verl's clip_ratio, for a paper table that gives no clip range (Table 8)
#: Chat template for datasets whose prompts the paper feeds raw (TinyZero's "base" Countdown prompt): the message
#: contents as they are. verl 0.9.1 renders every prompt with the tokenizer's chat template
#: (``verl/utils/tokenizer/continuous_token.py``, ``_render_tokens``); ``actor_rollout_ref.model.custom_chat_template``
#: replaces that template (``verl/workers/config/model.py``), and apply_chat_template tokenizes without special
#: tokens, as TinyZero's ``tokenizer(prompt, add_special_tokens=False)`` does.
RAW_PROMPT_TEMPLATE = "{% for message in messages %}{{ message.content }}{% endfor %}"
RAW_PROMPTS = {"countdown"}
#: SetPO embedder batch (responses per forward pass) per dataset: 64, and 8 for Table 7's 4,096-token responses
#: (activations grow with batch x length; docs/scale.md section 6).
EMBED_BATCH = {"gsm8k": 64, "countdown": 64, "simplerl_hard": 8}
#: Actor checkpoints kept on disk (``trainer.max_actor_ckpt_to_keep``): the last one, which resume reads.
KEEP_CHECKPOINTS = 1


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


#: Resources per model (choice).
RESOURCES = {
    "Qwen/Qwen2.5-Math-1.5B": Resources(rollout_tp=1, micro_batch_per_gpu=16),
    "Qwen/Qwen2.5-Math-7B": Resources(rollout_tp=2, micro_batch_per_gpu=8, ref_param_offload=True),
    "Qwen/Qwen2.5-32B": Resources(nnodes=4, rollout_tp=4, micro_batch_per_gpu=2, ref_param_offload=True),
    "Qwen/Qwen2.5-3B": Resources(rollout_tp=1, micro_batch_per_gpu=8),
}


@dataclass(frozen=True)
class ScaleSetting:
    """One launch script: a paper table's run for one base method, model and (optional) SetPO lambda."""

    name: str
    run: str  # the paper run's name (setpo.paper_runs.PAPER_RUNS)
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
    val_temperature: float = 0.5
    val_top_p: float = 0.9

    @property
    def method(self) -> str:
        return self.base if self.lam is None else f"setpo+{self.base}"

    @property
    def steps(self) -> int:
        rows = TRAIN_ROWS[self.train] if self.train_max_samples < 0 else self.train_max_samples
        return (rows // self.batch) * self.epochs  # verl drops the last partial batch


def has_verl_setting(run: PaperRun) -> bool:
    """Whether the run has verl launch settings: a SetPO paper table (lambda > 0, a base method) on a dataset
    that ``setpo.data.prepare`` writes."""
    return run.table is not None and run.base is not None and run.lam > 0 and run.dataset in VAL_SETS


def to_setting(run: PaperRun, setpo: bool) -> ScaleSetting:
    """The verl setting of a paper run: with SetPO at the paper's lambda, or its baseline (``setpo=False``)."""
    if not has_verl_setting(run):
        raise ValueError(f"paper run {run.name!r} has no verl launch setting (TRL only: {run.source})")
    needed = ("epochs", "temperature", "max_response", "val_temperature", "val_top_p")
    missing = [k for k in needed if getattr(run, k) is None]
    if missing:
        raise ValueError(f"paper run {run.name!r} lacks {missing}, which a verl launch needs")
    if run.model not in RESOURCES or run.model not in PARAMS_B:
        raise ValueError(f"paper run {run.name!r}: model {run.model!r} needs an entry in RESOURCES and PARAMS_B")
    size = run.model.rsplit("-", 1)[1].lower()
    stem = _NAME_STEM[run.dataset].format(size=size, g=run.group_size, kl=run.kl)
    clip_low = run.clip_low if run.clip_low is not None else VERL_DEFAULT_CLIP
    return ScaleSetting(
        name=f"table{run.table}_{'setpo_' if setpo else ''}{run.base}_{stem}", run=run.name, table=run.table,
        base=run.base, model=run.model, train=run.dataset, val=VAL_SETS[run.dataset], batch=run.prompts_per_step,
        mini_batch=run.mini_batch or run.prompts_per_step, lr=run.lr, kl=run.kl, epochs=run.epochs,
        n=run.group_size, temperature=run.temperature, clip_low=clip_low,
        clip_high=run.clip_high if run.clip_high is not None else clip_low,
        max_prompt=run.max_prompt or MAX_PROMPT[run.dataset], max_response=run.max_response,
        lam=run.lam if setpo else None, resources=RESOURCES[run.model],
        train_max_samples=run.train_max_samples if run.train_max_samples is not None else -1,
        val_temperature=run.val_temperature, val_top_p=run.val_top_p,
    )  # fmt: skip


SETTINGS: dict[str, ScaleSetting] = {
    s.name: s
    for run in PAPER_RUNS.values()
    if has_verl_setting(run)
    for s in (to_setting(run, False), to_setting(run, True))
}


def setting(run: str, baseline: bool = False) -> ScaleSetting:
    """The verl setting of the paper run called ``run`` (``setpo.paper_runs`` name): SetPO, or its baseline."""
    return to_setting(get_run(run), setpo=not baseline)


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
        f"trainer.max_actor_ckpt_to_keep={KEEP_CHECKPOINTS}",
        f"trainer.default_local_dir={run_dir}/checkpoints",
        f"trainer.validation_data_dir={run_dir}/val_generations",
    ]
    if s.train in RAW_PROMPTS:
        out.append(f"actor_rollout_ref.model.custom_chat_template='{RAW_PROMPT_TEMPLATE}'")
    if s.lam is not None:
        out += [
            "trainer.v1.trainer_mode=setpo_sync",
            f"+setpo.lambda={s.lam:g}",
            f"+setpo.embedder={PAPER_EMBEDDER}",
            "+setpo.embed_device=cuda",
            f"+setpo.embedder_kwargs.batch_size={EMBED_BATCH[s.train]}",
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


# ----------------------------------------------------------------------------- disk

#: Bytes per parameter of one verl actor checkpoint (sharded FSDP state): fp32 weights (4) + Adam's two fp32
#: moments (8); the "extra" state (RNG, scheduler) and the dataloader state are small beside them.
CHECKPOINT_BYTES_PER_PARAM = 12
#: Bytes per parameter of the merged Hugging Face model (bf16, ``python -m setpo.eval.checkpoint ... --merge``).
MERGED_BYTES_PER_PARAM = 2


def checkpoint_gb(s: ScaleSetting) -> float:
    """GB of one actor checkpoint of a setting (``CHECKPOINT_BYTES_PER_PARAM`` x parameters)."""
    return CHECKPOINT_BYTES_PER_PARAM * PARAMS_B[s.model]


def disk_gb_per_seed(s: ScaleSetting) -> float:
    """Peak GB of one seed's run folder: two actor checkpoints while a save is under way (verl writes the new one
    before it removes the old, ``verl/utils/checkpoint/checkpoint_manager.py``), plus the merged model."""
    return 2 * checkpoint_gb(s) + MERGED_BYTES_PER_PARAM * PARAMS_B[s.model]
