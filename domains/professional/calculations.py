"""The calculations of the professional family: a word problem drawn from a seed, and its
answer computed by the field's own library (the oracle), never by hand-written formulas
where a library has one.

| family | oracle | calculations |
|---|---|---|
| finance | `numpy-financial` (numpy's former financial functions) | loan payment, balance, interest and principal parts, rate and periods; future and present value; NPV, IRR, MIRR; growth rate; bond price |
| units | `pint` (unit registry with SI definitions) | length, mass, temperature, pressure, energy, speed, volume, area, power, flow, density, data, angle, force, time, frequency |
| physics | `pint` quantities and constants | kinetic energy, electrical power, pressure from force, ideal gas amount, gravity, photon energy, heat, pendulum period |
| chemistry | `periodictable` (standard atomic weights), `pint` | molar mass, moles from mass, molarity, dilution |
| statistics | `scipy.stats` | normal, binomial, Poisson, exponential and hypergeometric probabilities, sample standard deviation, z-, t- and chi-square test p-values, correlation, regression, confidence intervals |

Every calculation has three levels: 1 uses round inputs and the common units, 2 less
round inputs and rarer units or options, 3 the rarest units, longer horizons and more
cash flows. An answer is a number; `Calculation.decimals(value)` gives the places the
reference is written to (at least 4 significant digits).

    calc = CALCULATIONS["fin_loan_payment"]
    question, value, unit = calc.draw(random.Random(7), level=2)
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Calculation:
    """One kind of professional calculation.

    Attributes:
        name: Domain name, e.g. "fin_npv".
        family: "finance", "units", "physics", "chemistry" or "statistics".
        description: One line for the page.
        oracle: The library call that computes the answer, for the catalogue.
        draw: (rng, level 1..3) -> (question text, answer value, unit of the answer).
        rel_tol: Relative tolerance of a correct answer (beyond half a unit of the
            reference's last written place).
    """

    name: str
    family: str
    description: str
    oracle: str
    draw: Callable[[random.Random, int], tuple[str, float, str]]
    rel_tol: float = 1e-3

    @staticmethod
    def decimals(value: float) -> int:
        """Decimal places that write `value` with at least 4 significant digits (0..6)."""
        if value == 0 or not math.isfinite(value):
            return 2
        return max(0, min(6, 3 - math.floor(math.log10(abs(value)))))


@functools.lru_cache(maxsize=1)
def units():
    """pint's unit registry (built once per process, ~0.3 s)."""
    import pint  # on first use: ~0.3 s to build the registry

    return pint.UnitRegistry()


def _money(x: float) -> str:
    return f"${x:,.2f}"


# ---------------------------------------------------------------- finance (numpy-financial)

def _loan(rng: random.Random, level: int) -> tuple[float, float, int]:
    principal = rng.choice([5, 10, 20, 25, 50]) * 1000 if level == 1 else rng.randrange(3000, 400000, 250)
    rate = rng.choice([3, 4, 5, 6, 8]) if level == 1 else round(rng.uniform(1.5, 11.5), 2)
    years = rng.choice([1, 2, 3, 5]) if level == 1 else rng.choice([5, 7, 10, 15, 20, 25, 30])
    return principal, rate, years


def _loan_payment(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    balloon = rng.randrange(1000, int(principal * 0.4), 500) if level == 3 else 0
    pay = -npf.pmt(rate / 100 / 12, years * 12, principal, -balloon)
    q = (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at an annual "
         f"interest rate of {rate}%, compounded monthly"
         + (f", with a balloon payment of {_money(balloon)} due with the last payment" if balloon else "")
         + ". What is the monthly payment in dollars?")
    return q, float(pay), "dollars"


def _future_value(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    deposit = rng.choice([100, 200, 250, 500]) if level == 1 else rng.randrange(50, 3000, 25)
    rate = rng.choice([2, 4, 5, 6]) if level == 1 else round(rng.uniform(1, 9), 2)
    years = rng.choice([5, 10]) if level == 1 else rng.randrange(3, 41)
    start = 0 if level < 3 else rng.randrange(1000, 50000, 500)
    fv = npf.fv(rate / 100 / 12, years * 12, -deposit, -start)
    q = (f"Someone deposits {_money(deposit)} at the end of every month into an account paying {rate}% a year, "
         f"compounded monthly" + (f", which already holds {_money(start)}" if start else "")
         + f". How much is in the account after {years} years, in dollars?")
    return q, float(fv), "dollars"


def _present_value(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    payment = rng.choice([1000, 2000, 5000]) if level == 1 else rng.randrange(500, 25000, 100)
    rate = rng.choice([3, 5, 8, 10]) if level == 1 else round(rng.uniform(1, 12), 2)
    years = rng.choice([5, 10, 20]) if level == 1 else rng.randrange(3, 31)
    when = "end" if level < 3 else rng.choice(["end", "begin"])
    pv = -npf.pv(rate / 100, years, payment, when=when)
    q = (f"An annuity pays {_money(payment)} at the {'start' if when == 'begin' else 'end'} of each year for "
         f"{years} years. At a discount rate of {rate}% a year, what is its present value in dollars?")
    return q, float(pv), "dollars"


def _cash_flows(rng: random.Random, level: int) -> list[float]:
    n = {1: 3, 2: 5, 3: 8}[level]
    outlay = rng.randrange(5, 100) * 1000
    flows = [rng.randrange(outlay // (2 * n), outlay // max(1, n - 2) + 1, 100) for _ in range(n)]
    return [-float(outlay)] + [float(f) for f in flows]


def _npv(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    flows = _cash_flows(rng, level)
    rate = rng.choice([5, 8, 10, 12]) if level == 1 else round(rng.uniform(2, 15), 1)
    listed = ", ".join(f"year {t}: {_money(f)}" for t, f in enumerate(flows))
    q = (f"A project has these cash flows (year 0 is today; negative is an outlay): {listed}. "
         f"At a discount rate of {rate}% a year, what is its net present value in dollars?")
    return q, float(npf.npv(rate / 100, flows)), "dollars"


def _irr(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    while True:
        flows = _cash_flows(rng, level)
        r = npf.irr(flows)
        if math.isfinite(r) and -0.5 < r < 1.0:
            break
    listed = ", ".join(f"year {t}: {_money(f)}" for t, f in enumerate(flows))
    q = (f"A project has these cash flows (year 0 is today; negative is an outlay): {listed}. "
         "What is its internal rate of return, in percent per year?")
    return q, float(r * 100), "percent"


def _periods(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    payment = -npf.pmt(rate / 100 / 12, years * 12, principal) * rng.choice([1.1, 1.25, 1.5, 2.0])
    payment = round(payment, 0 if level == 1 else 2)
    n = npf.nper(rate / 100 / 12, -payment, principal)
    q = (f"A loan of {_money(principal)} at {rate}% a year, compounded monthly, is repaid at {_money(payment)} a "
         "month. How many monthly payments does it take to repay it (a fractional number of months)?")
    return q, float(n), "months"


def _interest_part(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    k = rng.randrange(1, years * 12 + 1) if level > 1 else 1
    interest = -npf.ipmt(rate / 100 / 12, k, years * 12, principal)
    q = (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at {rate}% a year, "
         f"compounded monthly. How much of payment number {k} is interest, in dollars?")
    return q, float(interest), "dollars"


def _rate(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    payment = round(-npf.pmt(rate / 100 / 12, years * 12, principal), 2)
    r = npf.rate(years * 12, -payment, principal, 0) * 12 * 100
    q = (f"A loan of {_money(principal)} is repaid at {_money(payment)} a month for {years} years. What is the "
         "annual interest rate (monthly compounding, the monthly rate times 12), in percent?")
    return q, float(r), "percent"


def _growth_rate(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    start = float(rng.choice([100, 1000, 10000])) if level == 1 else float(rng.randrange(500, 900000, 50))
    years = rng.choice([2, 5, 10]) if level == 1 else rng.randrange(2, 31)
    end = round(start * rng.uniform(0.4, 4.0), 0 if level == 1 else 2)
    r = npf.rate(years, 0, -start, end) * 100
    return (f"An investment grew from {_money(start)} to {_money(end)} in {years} years. What is its compound annual "
            "growth rate, in percent per year?", float(r), "percent")


def _bond_price(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    face = 1000.0
    coupon = rng.choice([3, 4, 5, 6]) if level == 1 else round(rng.uniform(1, 9), 2)
    ytm = rng.choice([3, 4, 5, 6, 7]) if level == 1 else round(rng.uniform(1, 10), 2)
    years = rng.choice([2, 5, 10]) if level == 1 else rng.randrange(1, 31)
    per_year = 1 if level < 3 else 2
    price = -npf.pv(ytm / 100 / per_year, years * per_year, face * coupon / 100 / per_year, face)
    how = "annually" if per_year == 1 else "semi-annually"
    return (f"A bond with a face value of {_money(face)} pays a {coupon}% coupon {how} and matures in {years} years. "
            f"At a yield to maturity of {ytm}% a year (compounded {how}), what is its price in dollars?",
            float(price), "dollars")


def _loan_balance(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    k = rng.randrange(1, years * 12)
    payment = npf.pmt(rate / 100 / 12, years * 12, principal)
    balance = -npf.fv(rate / 100 / 12, k, payment, principal)
    return (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at {rate}% a year, "
            f"compounded monthly. What balance is still owed right after payment number {k}, in dollars?",
            float(balance), "dollars")


def _principal_part(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    k = rng.randrange(1, years * 12 + 1) if level > 1 else 1
    part = -npf.ppmt(rate / 100 / 12, k, years * 12, principal)
    return (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at {rate}% a year, "
            f"compounded monthly. How much of payment number {k} repays principal, in dollars?", float(part), "dollars")


def _mirr(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    while True:
        flows = _cash_flows(rng, level)
        finance, reinvest = round(rng.uniform(3, 10), 1), round(rng.uniform(3, 12), 1)
        r = npf.mirr(flows, finance / 100, reinvest / 100)
        if math.isfinite(r):
            break
    listed = ", ".join(f"year {t}: {_money(f)}" for t, f in enumerate(flows))
    return (f"A project has these cash flows (year 0 is today; negative is an outlay): {listed}. With a finance rate "
            f"of {finance}% and a reinvestment rate of {reinvest}% a year, what is its modified internal rate of "
            "return (MIRR), in percent per year?", float(r * 100), "percent")


# ---------------------------------------------------------------- units (pint)

# dimension -> units by level (1: common, 2: less common, 3: rare or prefixed)
UNIT_SETS = {
    "length": (["meter", "kilometer", "centimeter", "foot", "inch", "mile"],
               ["yard", "millimeter", "nautical_mile", "micrometer"], ["furlong", "fathom", "angstrom", "light_year"]),
    "mass": (["kilogram", "gram", "pound", "ounce"], ["tonne", "milligram", "stone"], ["grain", "carat", "slug"]),
    "pressure": (["pascal", "kilopascal", "bar", "psi"], ["atmosphere", "millibar", "mmHg"], ["torr", "inHg", "hectopascal"]),
    "energy": (["joule", "kilojoule", "calorie", "kilowatt_hour"], ["kilocalorie", "watt_hour", "BTU"],
               ["electron_volt", "erg", "therm", "foot_pound"]),
    "speed": (["meter / second", "kilometer / hour", "mile / hour"], ["foot / second", "knot"],
              ["inch / minute", "centimeter / second"]),
    "volume": (["liter", "milliliter", "gallon", "meter ** 3"], ["quart", "pint", "foot ** 3", "fluid_ounce"],
               ["imperial_gallon", "barrel", "inch ** 3", "tablespoon"]),
    "area": (["meter ** 2", "hectare", "foot ** 2"], ["acre", "kilometer ** 2", "mile ** 2"],
             ["inch ** 2", "are", "yard ** 2"]),
    "power": (["watt", "kilowatt", "horsepower"], ["megawatt", "BTU / hour"], ["erg / second", "foot_pound / second"]),
    "flow": (["liter / second", "meter ** 3 / hour"], ["gallon / minute", "liter / minute"],
             ["foot ** 3 / second", "milliliter / second"]),
    "density": (["kilogram / meter ** 3", "gram / centimeter ** 3"], ["pound / foot ** 3", "gram / liter"],
                ["ounce / inch ** 3", "pound / gallon"]),
    "data": (["byte", "kilobyte", "megabyte"], ["kibibyte", "mebibyte", "gigabyte"], ["bit", "gibibyte", "terabyte"]),
    "angle": (["degree", "radian"], ["gradian", "turn"], ["arcminute", "arcsecond", "milliradian"]),
    "force": (["newton", "kilonewton", "pound_force"], ["dyne", "kilogram_force"], ["kip", "poundal", "ounce_force"]),
    # no month or year: pint's are averages (30.4375 and 365.25 days), which a reader would not assume
    "time": (["second", "minute", "hour", "day"], ["week", "millisecond", "microsecond"],
             ["fortnight", "nanosecond", "kilosecond"]),
    # no rpm: pint's revolution is 2 pi radians, so 1 rpm would be 2 pi / 60 Hz, not the 1/60 Hz engineers mean
    "frequency": (["hertz", "kilohertz", "megahertz"], ["gigahertz", "millihertz"], ["terahertz", "microhertz"]),
}


def spoken(unit: str) -> str:
    """A pint unit expression as words: "meter ** 3 / hour" -> "cubic meter per hour"."""
    words = []
    for part in unit.split(" / "):
        base, _, power = part.partition(" ** ")
        words.append({"2": "square ", "3": "cubic "}.get(power, "") + base.replace("_", " "))
    return " per ".join(words)


def _convert(dimension: str):
    def draw(rng: random.Random, level: int):
        pool = [u for lv in range(level) for u in UNIT_SETS[dimension][lv]]
        src, dst = rng.sample(pool, 2)
        if level == 1:
            value = float(rng.choice([1, 2, 5, 10, 12, 20, 25, 50, 100, 250]))
        else:
            value = round(rng.uniform(0.5, 5000), rng.choice([0, 1, 2]))
        u = units()
        out = u.Quantity(value, src).to(dst).magnitude
        return f"Convert {value:g} {spoken(src)} to {spoken(dst)}.", float(out), spoken(dst)
    return draw


def _temperature(rng: random.Random, level: int):
    scales = ["degC", "degF", "kelvin"] + (["degR"] if level == 3 else [])
    names = {"degC": "degrees Celsius", "degF": "degrees Fahrenheit", "kelvin": "kelvin", "degR": "degrees Rankine"}
    src, dst = rng.sample(scales, 2)
    value = float(rng.randrange(-40, 120, 5)) if level == 1 else round(rng.uniform(-80, 400), 1)
    if src in ("kelvin", "degR"):
        value = abs(value) + 200
    out = units().Quantity(value, src).to(dst).magnitude
    return f"Convert {value:g} {names[src]} to {names[dst]}.", float(out), names[dst]


# ---------------------------------------------------------------- physics (pint quantities)

def _kinetic_energy(rng: random.Random, level: int):
    u = units()
    masses = [("kilogram", 1, 2000), ("gram", 10, 5000), ("pound", 1, 4000), ("tonne", 1, 40)]
    speeds = [("meter / second", 1, 100), ("kilometer / hour", 5, 300), ("mile / hour", 5, 200), ("knot", 5, 60)]
    mu, mlo, mhi = masses[0] if level == 1 else rng.choice(masses)
    su, slo, shi = speeds[0] if level == 1 else rng.choice(speeds)
    m = float(rng.randrange(mlo, mhi + 1))
    v = float(rng.randrange(slo, shi + 1))
    target = "joule" if level < 3 else rng.choice(["kilojoule", "kilowatt_hour", "kilocalorie"])
    e = (0.5 * u.Quantity(m, mu) * u.Quantity(v, su) ** 2).to(target).magnitude
    q = f"An object of mass {m:g} {spoken(mu)} moves at {v:g} {spoken(su)}. What is its kinetic energy in {spoken(target)}?"
    return q, float(e), target


def _electrical_power(rng: random.Random, level: int):
    u = units()
    volts = float(rng.choice([5, 12, 120, 230]) if level == 1 else rng.randrange(1, 500))
    ohms = float(rng.choice([2, 4, 10, 100]) if level == 1 else rng.randrange(1, 2000))
    r_unit = "ohm" if level < 3 else rng.choice(["ohm", "kiloohm"])
    r = u.Quantity(ohms, r_unit)
    target = "watt" if level < 3 else rng.choice(["watt", "milliwatt", "kilowatt"])
    p = (u.Quantity(volts, "volt") ** 2 / r).to(target).magnitude
    return (f"A voltage of {volts:g} V is applied across a {ohms:g} {r_unit} resistor. What power does it dissipate, "
            f"in {target}?", float(p), target)


def _pressure_from_force(rng: random.Random, level: int):
    u = units()
    force, f_unit = float(rng.randrange(10, 5000)), ("newton" if level == 1 else rng.choice(["newton", "kilonewton", "pound_force"]))
    area, a_unit = (float(rng.randrange(1, 50)), "meter ** 2") if level == 1 else (
        float(rng.randrange(1, 500)), rng.choice(["centimeter ** 2", "inch ** 2", "meter ** 2"]))
    target = "pascal" if level == 1 else rng.choice(["kilopascal", "psi", "bar"])
    p = (u.Quantity(force, f_unit) / u.Quantity(area, a_unit)).to(target).magnitude
    return (f"A force of {force:g} {spoken(f_unit)} acts evenly on an area of {area:g} {spoken(a_unit)}. "
            f"What is the pressure in {target}?", float(p), target)


def _ideal_gas(rng: random.Random, level: int):
    u = units()
    p_unit = "kilopascal" if level == 1 else rng.choice(["kilopascal", "atmosphere", "bar", "psi"])
    pressure = float(rng.randrange(50, 500)) if p_unit == "kilopascal" else round(rng.uniform(0.5, 20), 2)
    v_unit = "liter" if level < 3 else rng.choice(["liter", "meter ** 3", "gallon"])
    volume = float(rng.randrange(1, 100))
    temp_c = float(rng.randrange(-20, 200))
    n = (u.Quantity(pressure, p_unit) * u.Quantity(volume, v_unit)
         / (u.molar_gas_constant * u.Quantity(temp_c, "degC").to("kelvin"))).to("mole").magnitude
    return (f"An ideal gas at {pressure:g} {p_unit} fills {volume:g} {spoken(v_unit)} at {temp_c:g} "
            "degrees Celsius. How many moles of gas are there?", float(n), "moles")


# ---------------------------------------------------------------- statistics (scipy.stats)

def _normal_probability(rng: random.Random, level: int):
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


def _binomial_probability(rng: random.Random, level: int):
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


def _poisson_probability(rng: random.Random, level: int):
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


def _t_test(rng: random.Random, level: int):
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


def _exponential_probability(rng: random.Random, level: int):
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


def _sample_std(rng: random.Random, level: int):
    n = {1: 5, 2: 9, 3: 15}[level]
    data = [rng.randrange(1, 100) if level == 1 else round(rng.uniform(-50, 500), 1) for _ in range(n)]
    sd = float(np.std(data, ddof=1))
    return (f"What is the sample standard deviation (dividing by n - 1) of these values: "
            f"{', '.join(f'{x:g}' for x in data)}?", sd, "")


def _z_test(rng: random.Random, level: int):
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


def _correlation(rng: random.Random, level: int):
    from scipy import stats  # on first use

    while True:
        xs, ys = _paired_data(rng, level)
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            break
    r = stats.pearsonr(xs, ys).statistic
    return (f"What is the Pearson correlation coefficient of these (x, y) pairs: {_listed_pairs(xs, ys)}?", float(r), "")


def _regression_slope(rng: random.Random, level: int):
    from scipy import stats  # on first use

    while True:
        xs, ys = _paired_data(rng, level)
        if len(set(xs)) > 1:
            break
    fit = stats.linregress(xs, ys)
    which = "slope" if level < 3 or rng.random() < 0.5 else "intercept"
    return (f"Fit y = a + b x by least squares to these (x, y) pairs: {_listed_pairs(xs, ys)}. What is the "
            f"{'slope b' if which == 'slope' else 'intercept a'}?", float(getattr(fit, which)), "")


def _chi_square(rng: random.Random, level: int):
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


def _hypergeometric(rng: random.Random, level: int):
    from scipy import stats  # on first use

    total = rng.choice([20, 30, 52]) if level == 1 else rng.randrange(20, 200)
    good = rng.randrange(2, total // 2)
    draws = rng.randrange(2, min(15, total - 1))
    k = rng.randrange(0, min(good, draws) + 1)
    p = stats.hypergeom.pmf(k, total, good, draws)
    return (f"A box holds {total} items, {good} of them defective. {draws} items are drawn without replacement. "
            f"What is P(exactly {k} defective among them), in percent?", float(p * 100), "percent")


def _confidence_interval(rng: random.Random, level: int):
    from scipy import stats  # on first use

    n = rng.choice([16, 25, 36]) if level == 1 else rng.randrange(5, 120)
    s_dev = float(rng.choice([4, 10, 12])) if level == 1 else round(rng.uniform(0.5, 40), 2)
    conf = 95 if level == 1 else rng.choice([90, 95, 99])
    half = stats.t.ppf(0.5 + conf / 200, n - 1) * s_dev / math.sqrt(n)
    return (f"A sample of {n} has sample standard deviation {s_dev:g}. What is the half-width of the {conf}% "
            "t confidence interval for the mean?", float(half), "")


# ---------------------------------------------------------------- chemistry (periodictable, pint)

COMPOUNDS = {
    "water": "H2O", "carbon dioxide": "CO2", "glucose": "C6H12O6", "sodium chloride": "NaCl", "ammonia": "NH3",
    "methane": "CH4", "ethanol": "C2H5OH", "sulfuric acid": "H2SO4", "calcium carbonate": "CaCO3",
    "sodium hydroxide": "NaOH", "nitric acid": "HNO3", "potassium permanganate": "KMnO4", "acetic acid": "CH3COOH",
    "sucrose": "C12H22O11", "calcium hydroxide": "Ca(OH)2", "iron(III) oxide": "Fe2O3", "ammonium nitrate": "NH4NO3",
    "copper(II) sulfate pentahydrate": "CuSO4(H2O)5", "aspirin": "C9H8O4", "caffeine": "C8H10N4O2",
    "magnesium sulfate": "MgSO4", "potassium dichromate": "K2Cr2O7", "sodium bicarbonate": "NaHCO3",
    "aluminium sulfate": "Al2(SO4)3", "phosphoric acid": "H3PO4", "benzene": "C6H6", "urea": "CO(NH2)2",
    "silver nitrate": "AgNO3", "barium chloride": "BaCl2", "hydrogen peroxide": "H2O2",
}


def _compound(rng: random.Random, level: int) -> tuple[str, str, float]:
    import periodictable  # on first use: element tables, ~0.1 s

    names = sorted(COMPOUNDS)
    name = rng.choice(names[:10] if level == 1 else names)
    return name, COMPOUNDS[name], float(periodictable.formula(COMPOUNDS[name]).mass)


def _molar_mass(rng: random.Random, level: int):
    import periodictable  # on first use

    name, formula, mass = _compound(rng, 2)
    if level == 1:
        return (f"What is the molar mass of {formula} ({name}), in grams per mole? Use standard atomic weights.",
                mass, "g/mol")
    if level == 2:
        moles = round(rng.uniform(0.05, 20), 2)
        return (f"What is the mass of {moles:g} moles of {name} ({formula}), in grams? Use standard atomic weights.",
                moles * mass, "grams")
    parsed = periodictable.formula(formula)
    element = rng.choice(sorted(str(e) for e in parsed.atoms))
    share = parsed.mass_fraction[periodictable.elements.symbol(element)] * 100
    return (f"What percentage of the mass of {name} ({formula}) is {element}? Use standard atomic weights.",
            float(share), "percent")


def _moles_from_mass(rng: random.Random, level: int):
    name, formula, mass = _compound(rng, level)
    u = units()
    amount, unit = (float(rng.randrange(1, 200)), "gram") if level == 1 else (
        round(rng.uniform(0.1, 500), 2), rng.choice(["gram", "milligram", "kilogram"]))
    moles = (u.Quantity(amount, unit) / u.Quantity(mass, "gram / mole")).to("mole").magnitude
    return (f"How many moles are in {amount:g} {unit}s of {name} ({formula})? Use standard atomic weights.",
            float(moles), "moles")


def _molarity(rng: random.Random, level: int):
    name, formula, mass = _compound(rng, level)
    u = units()
    grams = float(rng.randrange(1, 100)) if level == 1 else round(rng.uniform(0.1, 250), 2)
    volume, v_unit = (float(rng.randrange(1, 5)), "liter") if level == 1 else (
        float(rng.randrange(50, 2000, 50)), "milliliter")
    molar = (u.Quantity(grams, "gram") / u.Quantity(mass, "gram / mole") / u.Quantity(volume, v_unit)).to("mole / liter")
    return (f"{grams:g} grams of {name} ({formula}) are dissolved in water to make {volume:g} {v_unit}s of solution. "
            "What is its molarity, in moles per liter?", float(molar.magnitude), "mol/L")


def _dilution(rng: random.Random, level: int):
    u = units()
    c1 = float(rng.choice([1, 2, 6, 12])) if level == 1 else round(rng.uniform(0.5, 18), 2)
    c2 = round(c1 * rng.uniform(0.05, 0.8), 3)
    v2, v_unit = (float(rng.randrange(100, 1000, 50)), "milliliter") if level < 3 else (
        round(rng.uniform(0.1, 5), 2), "liter")
    v1 = (u.Quantity(c2, "mole / liter") * u.Quantity(v2, v_unit) / u.Quantity(c1, "mole / liter")).to("milliliter")
    return (f"How many milliliters of a {c1:g} mol/L stock solution are needed to make {v2:g} {v_unit}s of a "
            f"{c2:g} mol/L solution?", float(v1.magnitude), "milliliters")


# ---------------------------------------------------------------- more physics (pint constants)

def _gravity(rng: random.Random, level: int):
    u = units()
    m1, m2 = float(rng.randrange(1, 1000)), float(rng.randrange(1, 1000))
    r, r_unit = (float(rng.randrange(1, 20)), "meter") if level < 3 else (round(rng.uniform(0.1, 50), 2), "centimeter")
    force = (u.gravitational_constant * u.Quantity(m1, "kilogram") * u.Quantity(m2, "kilogram")
             / u.Quantity(r, r_unit) ** 2).to("nanonewton")
    return (f"Two masses of {m1:g} kg and {m2:g} kg are {r:g} {r_unit}s apart. What is the gravitational force "
            "between them, in nanonewtons?", float(force.magnitude), "nanonewtons")


def _photon_energy(rng: random.Random, level: int):
    u = units()
    wavelength = float(rng.randrange(380, 750)) if level == 1 else float(rng.randrange(100, 3000))
    target = "electron_volt" if level < 3 else rng.choice(["electron_volt", "attojoule"])
    energy = (u.planck_constant * u.speed_of_light / u.Quantity(wavelength, "nanometer")).to(target)
    return (f"What is the energy of one photon of wavelength {wavelength:g} nm, in {spoken(target)}s?",
            float(energy.magnitude), spoken(target))


def _heat(rng: random.Random, level: int):
    u = units()
    materials = {"water": 4.186, "aluminium": 0.897, "copper": 0.385, "iron": 0.449}
    name = "water" if level == 1 else rng.choice(sorted(materials))
    mass, m_unit = (float(rng.randrange(1, 10)), "kilogram") if level == 1 else (float(rng.randrange(50, 5000)), "gram")
    dt = float(rng.randrange(1, 80))
    target = "kilojoule" if level < 3 else rng.choice(["kilojoule", "kilocalorie", "watt_hour"])
    heat = (u.Quantity(mass, m_unit) * u.Quantity(materials[name], "joule / gram / kelvin")
            * u.Quantity(dt, "delta_degC")).to(target)
    return (f"How much heat raises {mass:g} {m_unit}s of {name} (specific heat {materials[name]} J/(g K)) by {dt:g} "
            f"degrees Celsius, in {spoken(target)}s?", float(heat.magnitude), spoken(target))


def _pendulum(rng: random.Random, level: int):
    u = units()
    length, l_unit = (float(rng.randrange(1, 10)), "meter") if level == 1 else (
        float(rng.randrange(5, 500)), rng.choice(["centimeter", "inch", "foot"]))
    period = (2 * math.pi * (u.Quantity(length, l_unit) / u.standard_gravity) ** 0.5).to("second")
    return (f"What is the period of a simple pendulum of length {length:g} {l_unit}, for small swings, in seconds? "
            "Use standard gravity (9.80665 m/s^2).", float(period.magnitude), "seconds")


_UNIT_NAMES = {"length": "Convert a length", "mass": "Convert a mass", "pressure": "Convert a pressure",
               "energy": "Convert an energy", "speed": "Convert a speed", "volume": "Convert a volume",
               "area": "Convert an area", "power": "Convert a power", "flow": "Convert a volumetric flow rate",
               "density": "Convert a density", "data": "Convert an amount of digital data (SI and binary prefixes)",
               "angle": "Convert an angle", "force": "Convert a force", "time": "Convert a duration",
               "frequency": "Convert a frequency"}

CALCULATIONS: dict[str, Calculation] = {c.name: c for c in [
    Calculation("fin_loan_payment", "finance", "The monthly payment of an amortising loan (with a balloon at level 3).",
                "numpy_financial.pmt", _loan_payment),
    Calculation("fin_future_value", "finance", "The future value of monthly deposits (and a starting balance).",
                "numpy_financial.fv", _future_value),
    Calculation("fin_present_value", "finance", "The present value of an annuity (paid in arrears or in advance).",
                "numpy_financial.pv", _present_value),
    Calculation("fin_npv", "finance", "The net present value of a project's yearly cash flows.",
                "numpy_financial.npv", _npv),
    Calculation("fin_irr", "finance", "The internal rate of return of a project's yearly cash flows.",
                "numpy_financial.irr", _irr),
    Calculation("fin_loan_periods", "finance", "How many monthly payments repay a loan at a given payment.",
                "numpy_financial.nper", _periods),
    Calculation("fin_interest_part", "finance", "The interest part of one payment of an amortising loan.",
                "numpy_financial.ipmt", _interest_part),
    Calculation("fin_loan_rate", "finance", "The annual interest rate implied by a loan's monthly payment.",
                "numpy_financial.rate", _rate),
    Calculation("fin_growth_rate", "finance", "The compound annual growth rate between a start and an end value.",
                "numpy_financial.rate", _growth_rate),
    Calculation("fin_bond_price", "finance", "The price of a coupon bond at a yield to maturity.",
                "numpy_financial.pv", _bond_price),
    Calculation("fin_loan_balance", "finance", "The balance still owed on a loan after k payments.",
                "numpy_financial.fv", _loan_balance),
    Calculation("fin_principal_part", "finance", "The principal part of one payment of an amortising loan.",
                "numpy_financial.ppmt", _principal_part),
    Calculation("fin_mirr", "finance", "The modified internal rate of return of a project's cash flows.",
                "numpy_financial.mirr", _mirr),
    *[Calculation(f"units_{dim}", "units", f"{text} between units.", "pint Quantity.to", _convert(dim))
      for dim, text in _UNIT_NAMES.items()],
    Calculation("units_temperature", "units", "Convert a temperature between Celsius, Fahrenheit, kelvin and Rankine.",
                "pint Quantity.to (offset units)", _temperature),
    Calculation("phys_kinetic_energy", "physics", "Kinetic energy from a mass and a speed in mixed units.",
                "pint quantities", _kinetic_energy),
    Calculation("phys_electrical_power", "physics", "Power dissipated in a resistor (V^2 / R) in mixed units.",
                "pint quantities", _electrical_power),
    Calculation("phys_pressure", "physics", "Pressure from a force on an area, in mixed units.",
                "pint quantities", _pressure_from_force),
    Calculation("phys_ideal_gas", "physics", "Moles of an ideal gas from pressure, volume and temperature.",
                "pint quantities, molar gas constant", _ideal_gas),
    Calculation("stats_normal_probability", "statistics", "A normal distribution's probability of an interval.",
                "scipy.stats.norm", _normal_probability),
    Calculation("stats_binomial_probability", "statistics", "A binomial probability of k successes (or at least k).",
                "scipy.stats.binom", _binomial_probability),
    Calculation("stats_poisson_probability", "statistics", "A Poisson probability of k events (or at most k).",
                "scipy.stats.poisson", _poisson_probability),
    Calculation("stats_t_test", "statistics", "The p-value of a one- or two-sided one-sample t-test.",
                "scipy.stats.t", _t_test),
    Calculation("stats_exponential_probability", "statistics", "An exponential distribution's probability of an "
                "interval.", "scipy.stats.expon", _exponential_probability),
    Calculation("stats_correlation", "statistics", "The Pearson correlation coefficient of paired data.",
                "scipy.stats.pearsonr", _correlation),
    Calculation("stats_regression", "statistics", "The slope or intercept of a least-squares line.",
                "scipy.stats.linregress", _regression_slope),
    Calculation("stats_chi_square", "statistics", "The p-value of a chi-square test of independence.",
                "scipy.stats.chi2_contingency", _chi_square),
    Calculation("stats_hypergeometric", "statistics", "A hypergeometric probability (drawing without replacement).",
                "scipy.stats.hypergeom", _hypergeometric),
    Calculation("stats_confidence_interval", "statistics", "The half-width of a t confidence interval for a mean.",
                "scipy.stats.t.ppf", _confidence_interval),
    Calculation("chem_molar_mass", "chemistry", "Molar mass, the mass of some moles, and an element's mass share.",
                "periodictable.formula(...).mass", _molar_mass),
    Calculation("chem_moles", "chemistry", "Moles of a compound in a given mass.", "periodictable, pint", _moles_from_mass),
    Calculation("chem_molarity", "chemistry", "The molarity of a solution from a dissolved mass and a volume.",
                "periodictable, pint", _molarity),
    Calculation("chem_dilution", "chemistry", "The stock volume a dilution needs (c1 V1 = c2 V2).", "pint", _dilution),
    Calculation("phys_gravity", "physics", "Newton's gravitational force between two masses.",
                "pint, gravitational_constant", _gravity),
    Calculation("phys_photon_energy", "physics", "The energy of a photon of a given wavelength.",
                "pint, planck_constant and speed_of_light", _photon_energy),
    Calculation("phys_heat", "physics", "The heat that warms a mass of a material by some degrees.",
                "pint quantities", _heat),
    Calculation("phys_pendulum", "physics", "The small-swing period of a simple pendulum.",
                "pint, standard_gravity", _pendulum),
    Calculation("stats_sample_std", "statistics", "The sample standard deviation of a list of values.",
                "numpy.std(ddof=1)", _sample_std),
    Calculation("stats_z_test", "statistics", "The p-value of a one- or two-sided z-test of a mean.",
                "scipy.stats.norm", _z_test),
]}
