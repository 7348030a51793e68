"""The code family: HumanEval, scored by its unit tests in a sandbox (`humaneval`; the judge
that runs inside the sandbox is `humaneval_runner`)."""
