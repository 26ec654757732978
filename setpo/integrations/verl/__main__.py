"""``python -m setpo.integrations.verl <hydra overrides>``: verl's PPO trainer with the SetPO credit."""

from setpo.integrations.verl.runner import main

if __name__ == "__main__":
    main()
