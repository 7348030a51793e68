"""Multi-turn games from TextArena (`textarena`, MIT) played as episodes in Gymnasium envs."""
