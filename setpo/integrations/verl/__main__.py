"""``python -m setpo.integrations.verl <hydra overrides>``: verl's PPO trainer with the SetPO credit."""

import sys


def _main() -> None:
    """Run verl's trainer; without verl (or its hydra, ray), one line saying what to install."""
    try:
        from setpo.integrations.verl.runner import main
    except ImportError as err:
        missing = getattr(err, "name", None) or str(err)
        print(
            f"python -m setpo.integrations.verl: error: {missing} is not installed; install verl "
            "(pip install 'setpo[verl]'; on a GPU cluster verl[vllm], see docs/scale.md)",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    main()


if __name__ == "__main__":
    _main()
