"""One rank of a 2-process CPU SetPOTrainer run (started by tests/test_trl_multiprocess.py via ``accelerate launch``).

Usage: accelerate launch --cpu --num_processes 2 tests/trl_multiprocess_worker.py MODEL_DIR OUT_DIR
Each rank runs one generation step and writes ``rank{R}.json``: its local completions, base advantages A_bar,
final advantages, rewards of the gathered batch, the credits it computed and how often it called the group rewards.
A second one-step run with ``setpo_placebo=True`` records the batch's own credits and the permuted ones.
"""

from __future__ import annotations

import json
import os
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from trl_tiny import RUN, G, first_char, gapo_group_reward  # noqa: E402

from setpo.integrations.trl import GroupRewardFunction, SetPOConfig, SetPOTrainer  # noqa: E402
from setpo.tiny import load_tiny  # noqa: E402

PER_DEVICE = 6  # 2 ranks x 6 rows = 12 rows = 3 groups of 4; the middle group straddles the two ranks
LAMBDA = 0.7
VALID = list("abcdefghijklmnopqrstuvwxyz")


def length_reward(completions, **kwargs) -> list[float]:
    return [float(len(set(c))) for c in completions]


def make_args(output_dir: str, placebo: bool = False) -> SetPOConfig:
    return SetPOConfig(
        **{
            **RUN,
            "output_dir": output_dir,
            "max_steps": 1,
            "per_device_train_batch_size": PER_DEVICE,
            "max_completion_length": 6,
            "learning_rate": 1e-3,
            "setpo_lambda": LAMBDA,
            "setpo_embedder": "hashed",
            "setpo_kernel_clamp": False,  # random character strings rarely have positive cosine; keep credits non-zero
            "shuffle_dataset": False,
            "seed": 7,
            "setpo_placebo": placebo,
        }
    )


NOISY_CALLS: list[int] = []  # rows scored by each of this rank's calls to the noisy group reward


def noisy_group_reward(prompts, completions, group_size, **kwargs) -> list[float]:
    """A non-deterministic group reward (think of an LLM judge): each process would draw different numbers."""
    NOISY_CALLS.append(len(completions))
    rng = random.Random(1000 + int(os.environ.get("RANK", "0")))
    return [rng.random() for _ in completions]


def rank_rows(trainer) -> slice:
    """This process's slice of the gathered batch, as TRL slices the advantages."""
    start = trainer.accelerator.process_index * PER_DEVICE
    return slice(start, start + PER_DEVICE)


def main(model_dir: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    model, tokenizer = load_tiny(model_dir)
    prompts = ["ab", "cd", "ef"]  # 3 prompts x G = 12 rows
    ds = Dataset.from_dict({"prompt": prompts, "valid_answers": [VALID] * len(prompts)})
    args = make_args(os.path.join(out_dir, "trainer"))
    records: list[dict] = []

    class Recording(SetPOTrainer):
        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            self.local_completions = list(completions)  # this rank's rows, before any gathering
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            records.append(
                {
                    "completions": self.local_completions,
                    "advantages": out["advantages"].tolist(),
                    "gathered_completions": list(self._logs["completion"])[-PER_DEVICE * 2 :],
                    "gapo_rewards": list(self._logs["rewards"]["gapo"])[-PER_DEVICE * 2 :],
                    "noisy_rewards": list(self._logs["rewards"]["noisy"])[-PER_DEVICE * 2 :],
                    "length_rewards": list(self._logs["rewards"]["length_reward"])[-PER_DEVICE * 2 :],
                    "credits_all": self.method_last["term"].tolist(),  # SetPO's term u = s, after the placebo
                    "credits_local": self.method_last["term"][rank_rows(self)].tolist(),
                    "own_credits_all": self.method_last["own_term"].tolist(),
                }
            )
            return out

    trainer = Recording(
        model=model,
        reward_funcs=[
            length_reward,
            gapo_group_reward(first_char, valid_set_key="valid_answers"),
            GroupRewardFunction(noisy_group_reward, name="noisy"),
        ],
        args=args,
        train_dataset=ds,
        processing_class=tokenizer,
    )
    trainer.train()
    noisy_calls = list(NOISY_CALLS)

    # The placebo arm: same setup, credits permuted across groups.
    args_placebo = make_args(os.path.join(out_dir, "placebo"), placebo=True)
    model, tokenizer = load_tiny(model_dir)
    placebo = Recording(
        model=model, reward_funcs=[length_reward], args=args_placebo, train_dataset=ds, processing_class=tokenizer
    )
    placebo.train()
    rank = trainer.accelerator.process_index
    record = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "G": G,
        "lambda": LAMBDA,
        "reward_weights": trainer.reward_weights.tolist(),
        "noisy_calls": noisy_calls,
        **records[0],
        "placebo": records[1],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    # Left to interpreter exit, gloo's threads can be torn down while joinable ("terminate called without an active
    # exception", SIGABRT after a successful run) or block it; destroy_process_group hangs now and then in the same way.
    # Every collective is done and the record is on disk, so leave without running the C++ destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
