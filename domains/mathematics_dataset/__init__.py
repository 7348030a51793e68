"""The mathematics-dataset family: every module of DeepMind's `mathematics-dataset` package
(1.0.1, Apache-2.0; algebra, arithmetic, calculus, comparison, measurement, numbers,
polynomials, probability) as a single-turn `TextDomain`, one domain per module named like
the module (`algebra__linear_1d`): the 56 training modules with levels 1-3 = train-easy,
train-medium, train-hard, and the 14 extrapolation-only modules with one level (their
extrapolate settings). Tasks are generated deterministically from (module, level, seed)
with upstream patched for sympy 1.14 / numpy 2 and for hash-order independence
(`domains.mathematics_dataset.shim`), and answers are checked by exact rational equality
or sympy equivalence under a safety whitelist (`domains.mathematics_dataset.checker`);
the catalogue is `domains.mathematics_dataset.catalogue`, built on
`domains.mathematics_dataset.domain`."""
