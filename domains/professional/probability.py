"""Probability and statistics calculations (`domains.professional.calculations`),
answered by `scipy.stats` (and numpy).

    question, value, unit = t_test(random.Random(7), level=2)
"""

from __future__ import annotations

import math
import random

import numpy as np


# ---------------------------------------------------------------- statistics (scipy.stats)

def normal_probability(rng: random.Random, level: int):
    from scipy import stats  # on first use: ~0.5 s

    mean = float(rng.choice([50, 100, 500])) if level == 1 else round(rng.uniform(10, 1000), 1)
    sd = float(rng.choice([5, 10, 15])) if level == 1 else round(rng.uniform(1, mean / 3), 1)
    a = round(mean + sd * rng.uniform(-2.5, 2.5), 1)
    if level < 3:
        p = stats.norm.cdf(a, mean, sd)
        q = f"X is normally distributed with mean {mean:g} and standard deviation {sd:g}. What is P(X < {a:g}), in percent?"
    else:
        b = round(a + sd * rng.uniform(0.2, 2.0), 1)
        p = stats.norm.cdf(b, mean, sd) - stats.norm.cdf(a, mean, sd)
        q = (f"X is normally distributed with mean {mean:g} and standard deviation {sd:g}. What is "
             f"P({a:g} < X < {b:g}), in percent?")
    return q, float(p * 100), "percent"


def binomial_probability(rng: random.Random, level: int):
    from scipy import stats  # on first use

    n = rng.randrange(5, 12) if level == 1 else rng.randrange(10, 60)
    p = rng.choice([0.5, 0.25, 0.1]) if level == 1 else round(rng.uniform(0.05, 0.95), 2)
    spread = 2 * math.sqrt(n * p * (1 - p)) + 1  # k within about 2 standard deviations: no vanishing tails
    k = rng.randrange(max(0, int(n * p - spread)), min(n, int(n * p + spread)) + 1)
    if level < 3:
        prob = stats.binom.pmf(k, n, p)
        q = f"A coin-like trial succeeds with probability {p:g}. In {n} independent trials, what is P(exactly {k} successes), in percent?"
    else:
        prob = stats.binom.sf(k - 1, n, p)
        q = f"A trial succeeds with probability {p:g}. In {n} independent trials, what is P(at least {k} successes), in percent?"
    return q, float(prob * 100), "percent"


def poisson_probability(rng: random.Random, level: int):
    from scipy import stats  # on first use

    lam = float(rng.choice([1, 2, 3, 4])) if level == 1 else round(rng.uniform(0.5, 20), 1)
    k = rng.randrange(0, int(lam * 2) + 3)
    if level < 3:
        prob = stats.poisson.pmf(k, lam)
        q = f"Calls arrive as a Poisson process with a mean of {lam:g} per hour. What is P(exactly {k} calls in an hour), in percent?"
    else:
        prob = stats.poisson.cdf(k, lam)
        q = f"Calls arrive as a Poisson process with a mean of {lam:g} per hour. What is P(at most {k} calls in an hour), in percent?"
    return q, float(prob * 100), "percent"


def t_test(rng: random.Random, level: int):
    from scipy import stats  # on first use

    n = rng.choice([10, 16, 25]) if level == 1 else rng.randrange(5, 60)
    mu0 = float(rng.choice([10, 50, 100])) if level == 1 else round(rng.uniform(5, 500), 1)
    s_dev = float(rng.choice([2, 5, 10])) if level == 1 else round(rng.uniform(0.5, mu0 / 3), 2)
    xbar = round(mu0 + s_dev / math.sqrt(n) * rng.uniform(-3, 3), 2)
    t = (xbar - mu0) / (s_dev / math.sqrt(n))
    two_sided = level >= 2 and rng.random() < 0.5
    p = 2 * stats.t.sf(abs(t), n - 1) if two_sided else stats.t.sf(t, n - 1)
    return (f"A sample of {n} has mean {xbar:g} and sample standard deviation {s_dev:g}. Test H0: mean = {mu0:g} "
            f"against H1: mean {'!=' if two_sided else '>'} {mu0:g} with a one-sample t-test. What is the p-value, "
            "in percent?", float(p * 100), "percent")


def exponential_probability(rng: random.Random, level: int):
    from scipy import stats  # on first use

    mean = float(rng.choice([2, 5, 10])) if level == 1 else round(rng.uniform(0.5, 50), 1)
    x = round(mean * rng.uniform(0.1, 3), 1)
    if level < 3:
        p = stats.expon.cdf(x, scale=mean)
        q = f"A lifetime is exponentially distributed with mean {mean:g} hours. What is P(lifetime < {x:g} hours), in percent?"
    else:
        y = round(x + mean * rng.uniform(0.2, 2), 1)
        p = stats.expon.cdf(y, scale=mean) - stats.expon.cdf(x, scale=mean)
        q = (f"A lifetime is exponentially distributed with mean {mean:g} hours. What is P({x:g} < lifetime < {y:g} "
             "hours), in percent?")
    return q, float(p * 100), "percent"


def sample_std(rng: random.Random, level: int):
    n = {1: 5, 2: 9, 3: 15}[level]
    data = [rng.randrange(1, 100) if level == 1 else round(rng.uniform(-50, 500), 1) for _ in range(n)]
    sd = float(np.std(data, ddof=1))
    return (f"What is the sample standard deviation (dividing by n - 1) of these values: "
            f"{', '.join(f'{x:g}' for x in data)}?", sd, "")


def z_test(rng: random.Random, level: int):
    from scipy import stats  # on first use

    mu0 = float(rng.choice([100, 50, 20])) if level == 1 else round(rng.uniform(5, 500), 1)
    sigma = float(rng.choice([10, 15, 5])) if level == 1 else round(rng.uniform(1, mu0 / 2), 1)
    n = rng.choice([25, 36, 49, 100]) if level == 1 else rng.randrange(10, 400)
    xbar = round(mu0 + sigma / math.sqrt(n) * rng.uniform(-3, 3), 2)
    z = (xbar - mu0) / (sigma / math.sqrt(n))
    two_sided = level >= 2 and rng.random() < 0.5
    p = 2 * stats.norm.sf(abs(z)) if two_sided else stats.norm.sf(z)
    q = (f"A sample of {n} has mean {xbar:g}; the population standard deviation is {sigma:g}. Test H0: mean = {mu0:g} "
         f"against H1: mean {'!=' if two_sided else '>'} {mu0:g} with a z-test. What is the p-value, in percent?")
    return q, float(p * 100), "percent"



# ---------------------------------------------------------------- more statistics (scipy.stats)

def _paired_data(rng: random.Random, level: int) -> tuple[list[float], list[float]]:
    n = {1: 5, 2: 8, 3: 12}[level]
    slope, intercept = rng.uniform(-3, 3), rng.uniform(-20, 20)
    xs = [float(rng.randrange(0, 50)) for _ in range(n)]
    ys = [round(slope * x + intercept + rng.gauss(0, 5 + 10 * (level - 1)), 1) for x in xs]
    return xs, ys


def _listed_pairs(xs: list[float], ys: list[float]) -> str:
    return "; ".join(f"({x:g}, {y:g})" for x, y in zip(xs, ys))


def correlation(rng: random.Random, level: int):
    from scipy import stats  # on first use

    while True:
        xs, ys = _paired_data(rng, level)
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            break
    r = stats.pearsonr(xs, ys).statistic
    return (f"What is the Pearson correlation coefficient of these (x, y) pairs: {_listed_pairs(xs, ys)}?", float(r), "")


def regression_slope(rng: random.Random, level: int):
    from scipy import stats  # on first use

    while True:
        xs, ys = _paired_data(rng, level)
        if len(set(xs)) > 1:
            break
    fit = stats.linregress(xs, ys)
    which = "slope" if level < 3 or rng.random() < 0.5 else "intercept"
    return (f"Fit y = a + b x by least squares to these (x, y) pairs: {_listed_pairs(xs, ys)}. What is the "
            f"{'slope b' if which == 'slope' else 'intercept a'}?", float(getattr(fit, which)), "")


def chi_square(rng: random.Random, level: int):
    from scipy import stats  # on first use

    rows, cols = (2, 2) if level == 1 else (rng.choice([2, 3]), 3)
    # near-independent counts (margins times a small perturbation), so p-values spread over (0, 100%)
    row_w = [rng.uniform(0.5, 1.5) for _ in range(rows)]
    col_w = [rng.uniform(0.5, 1.5) for _ in range(cols)]
    size = rng.randrange(10, 40)
    table = [[max(1, round(size * a * b * rng.uniform(0.7, 1.3))) for b in col_w] for a in row_w]
    p = stats.chi2_contingency(table, correction=False).pvalue
    shown = "; ".join(" ".join(str(v) for v in row) for row in table)
    return (f"A contingency table of counts has rows {shown} (rows separated by semicolons). What is the p-value "
            "of Pearson's chi-square test of independence (no continuity correction), in percent?",
            float(p * 100), "percent")


def hypergeometric(rng: random.Random, level: int):
    from scipy import stats  # on first use

    total = rng.choice([20, 30, 52]) if level == 1 else rng.randrange(20, 200)
    good = rng.randrange(2, total // 2)
    draws = rng.randrange(2, min(15, total - 1))
    k = rng.randrange(0, min(good, draws) + 1)
    p = stats.hypergeom.pmf(k, total, good, draws)
    return (f"A box holds {total} items, {good} of them defective. {draws} items are drawn without replacement. "
            f"What is P(exactly {k} defective among them), in percent?", float(p * 100), "percent")


def confidence_interval(rng: random.Random, level: int):
    from scipy import stats  # on first use

    n = rng.choice([9, 16, 25, 36, 49, 64, 81, 100]) if level == 1 else rng.randrange(5, 120)
    s_dev = float(rng.randrange(2, 21)) if level == 1 else round(rng.uniform(0.5, 40), 2)
    conf = 95 if level == 1 else rng.choice([90, 95, 99])
    half = stats.t.ppf(0.5 + conf / 200, n - 1) * s_dev / math.sqrt(n)
    return (f"A sample of {n} has sample standard deviation {s_dev:g}. What is the half-width of the {conf}% "
            "t confidence interval for the mean?", float(half), "")
