"""Full-scale launch scripts for every paper setting (Tables 4-8), generated from one table of settings."""
