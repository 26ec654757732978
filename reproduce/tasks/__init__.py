"""What experiments share: the tasks (data, prompts, rewards, answer embedders) they train and evaluate on, code the
installed package does not ship."""
