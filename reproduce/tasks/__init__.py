"""What the experiments share: task code that the installed package does not ship."""
