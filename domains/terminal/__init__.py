"""The terminal family: multi-turn shell tasks in a sandbox (`env`), their seeded templates
(`tasks`) and the checker scripts that decide the reward (`checkers`)."""
