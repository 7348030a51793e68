"""User domains: the user's own task data, a verifier picked from a list, stored and
versioned (`domains.user.library`), registered beside the built-in domains."""
