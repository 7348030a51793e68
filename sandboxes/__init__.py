"""Sandboxes: isolated execution places for multi-turn domains (Docker backend, local
fallback, warm pool, scheduler). Not built yet; single-turn domains don't need one."""
