"""One of the paper's verl launches, rendered from the table of its runs, without verl installed.

    python examples/verl_paper_launch.py [RUN]      (RUN: a name from setpo.paper_runs, default table4_grpo_1.5b)

`setpo.paper_runs` holds every run of the paper with its hyperparameters; `reproduce.scale` (in the repository,
not in the wheel: run this from a checkout) translates one into verl 0.9.1 hydra overrides and a launch script.
On a cluster, `DATA_DIR=... python -m reproduce.scale RUN --run` runs what is printed here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout holding reproduce/

from reproduce.scale.__main__ import script_text  # noqa: E402
from reproduce.scale.settings import setting  # noqa: E402
from setpo.paper_runs import get_run  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "table4_grpo_1.5b"
run = get_run(name)
print(f"{run.name}: {run.model} on {run.dataset}, G {run.group_size}, lambda {run.lam}, lr {run.lr}, KL {run.kl}")
script = script_text(setting(name))
print(script)

# the launch enters through the SetPO trainer mode with the paper's lambda, group size and model
assert "-m setpo.integrations.verl" in script
assert "trainer.v1.trainer_mode=setpo_sync" in script
assert f"+setpo.lambda={run.lam:g}" in script
assert f"actor_rollout_ref.rollout.n={run.group_size}" in script
assert f"actor_rollout_ref.model.path={run.model}" in script
print("ok")
