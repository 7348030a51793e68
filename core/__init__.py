"""The ground floor: exceptions, choice lists and on-disk paths that every other package
may import. Nothing here imports anything of the project, so no import from `core`
runs back up a floor (domains, sandboxes and retrieval stand on it as well as the trainer
and the backend)."""
