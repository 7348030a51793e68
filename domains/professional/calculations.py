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

The draws live by subject in `finance`, `science` (units, physics, chemistry) and
`probability`; this module is their table. Every calculation has three levels: 1 uses round inputs and the common units, 2 less
round inputs and rarer units or options, 3 the rarest units, longer horizons and more
cash flows. An answer is a number; `Calculation.written(value)` writes the reference with
at least 4 significant digits (scientific notation below 0.001).

    calc = CALCULATIONS["fin_loan_payment"]
    question, value, unit = calc.draw(random.Random(7), level=2)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from domains.professional import finance, probability, science


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
    def written(value: float) -> str:
        """`value` as the reference is written, with 4 significant digits at least: fixed
        point from 0.001 up to 10^12 ("1234.57", "0.003142"), else scientific ("3.333e-06")."""
        if value == 0 or not math.isfinite(value):
            return f"{value:g}"
        if 1e-3 <= abs(value) < 1e12:
            return f"{value:.{max(0, 3 - math.floor(math.log10(abs(value))))}f}"
        return f"{value:.3e}"

    @staticmethod
    def half_unit(written: str) -> float:
        """Half a unit of the last place `written` shows: 0.005 for "12.34", 5e-10 for
        "3.333e-06" (an answer rounded as the reference is passes)."""
        mantissa, _, exponent = written.lower().partition("e")
        places = len(mantissa.partition(".")[2])
        return 0.5 * 10.0 ** (int(exponent or 0) - places)


_UNIT_NAMES = {"length": "Convert a length", "mass": "Convert a mass", "pressure": "Convert a pressure",
               "energy": "Convert an energy", "speed": "Convert a speed", "volume": "Convert a volume",
               "area": "Convert an area", "power": "Convert a power", "flow": "Convert a volumetric flow rate",
               "density": "Convert a density", "data": "Convert an amount of digital data (SI and binary prefixes)",
               "angle": "Convert an angle", "force": "Convert a force", "time": "Convert a duration",
               "frequency": "Convert a frequency"}

CALCULATIONS: dict[str, Calculation] = {c.name: c for c in [
    Calculation("fin_loan_payment", "finance", "The monthly payment of an amortising loan (with a balloon at level 3).",
                "numpy_financial.pmt", finance.loan_payment),
    Calculation("fin_future_value", "finance", "The future value of monthly deposits (and a starting balance).",
                "numpy_financial.fv", finance.future_value),
    Calculation("fin_present_value", "finance", "The present value of an annuity (paid in arrears or in advance).",
                "numpy_financial.pv", finance.present_value),
    Calculation("fin_npv", "finance", "The net present value of a project's yearly cash flows.",
                "numpy_financial.npv", finance.npv),
    Calculation("fin_irr", "finance", "The internal rate of return of a project's yearly cash flows.",
                "numpy_financial.irr", finance.irr),
    Calculation("fin_loan_periods", "finance", "How many monthly payments repay a loan at a given payment.",
                "numpy_financial.nper", finance.periods),
    Calculation("fin_interest_part", "finance", "The interest part of one payment of an amortising loan.",
                "numpy_financial.ipmt", finance.interest_part),
    Calculation("fin_loan_rate", "finance", "The annual interest rate implied by a loan's monthly payment.",
                "numpy_financial.rate", finance.rate),
    Calculation("fin_growth_rate", "finance", "The compound annual growth rate between a start and an end value.",
                "numpy_financial.rate", finance.growth_rate),
    Calculation("fin_bond_price", "finance", "The price of a coupon bond at a yield to maturity.",
                "numpy_financial.pv", finance.bond_price),
    Calculation("fin_loan_balance", "finance", "The balance still owed on a loan after k payments.",
                "numpy_financial.fv", finance.loan_balance),
    Calculation("fin_principal_part", "finance", "The principal part of one payment of an amortising loan.",
                "numpy_financial.ppmt", finance.principal_part),
    Calculation("fin_mirr", "finance", "The modified internal rate of return of a project's cash flows.",
                "numpy_financial.mirr", finance.mirr),
    *[Calculation(f"units_{dim}", "units", f"{text} between units.", "pint Quantity.to", science.convert(dim))
      for dim, text in _UNIT_NAMES.items()],
    Calculation("units_temperature", "units", "Convert a temperature between Celsius, Fahrenheit, kelvin and Rankine.",
                "pint Quantity.to (offset units)", science.temperature),
    Calculation("phys_kinetic_energy", "physics", "Kinetic energy from a mass and a speed in mixed units.",
                "pint quantities", science.kinetic_energy),
    Calculation("phys_electrical_power", "physics", "Power dissipated in a resistor (V^2 / R) in mixed units.",
                "pint quantities", science.electrical_power),
    Calculation("phys_pressure", "physics", "Pressure from a force on an area, in mixed units.",
                "pint quantities", science.pressure_from_force),
    Calculation("phys_ideal_gas", "physics", "Moles of an ideal gas from pressure, volume and temperature.",
                "pint quantities, molar gas constant", science.ideal_gas),
    Calculation("stats_normal_probability", "statistics", "A normal distribution's probability of an interval.",
                "scipy.stats.norm", probability.normal_probability),
    Calculation("stats_binomial_probability", "statistics", "A binomial probability of k successes (or at least k).",
                "scipy.stats.binom", probability.binomial_probability),
    Calculation("stats_poisson_probability", "statistics", "A Poisson probability of k events (or at most k).",
                "scipy.stats.poisson", probability.poisson_probability),
    Calculation("stats_t_test", "statistics", "The p-value of a one- or two-sided one-sample t-test.",
                "scipy.stats.t", probability.t_test),
    Calculation("stats_exponential_probability", "statistics", "An exponential distribution's probability of an "
                "interval.", "scipy.stats.expon", probability.exponential_probability),
    Calculation("stats_correlation", "statistics", "The Pearson correlation coefficient of paired data.",
                "scipy.stats.pearsonr", probability.correlation),
    Calculation("stats_regression", "statistics", "The slope or intercept of a least-squares line.",
                "scipy.stats.linregress", probability.regression_slope),
    Calculation("stats_chi_square", "statistics", "The p-value of a chi-square test of independence.",
                "scipy.stats.chi2_contingency", probability.chi_square),
    Calculation("stats_hypergeometric", "statistics", "A hypergeometric probability (drawing without replacement).",
                "scipy.stats.hypergeom", probability.hypergeometric),
    Calculation("stats_confidence_interval", "statistics", "The half-width of a t confidence interval for a mean.",
                "scipy.stats.t.ppf", probability.confidence_interval),
    Calculation("chem_molar_mass", "chemistry", "Molar mass, the mass of some moles, and an element's mass share.",
                "periodictable.formula(...).mass", science.molar_mass),
    Calculation("chem_moles", "chemistry", "Moles of a compound in a given mass.", "periodictable, pint", science.moles_from_mass),
    Calculation("chem_molarity", "chemistry", "The molarity of a solution from a dissolved mass and a volume.",
                "periodictable, pint", science.molarity),
    Calculation("chem_dilution", "chemistry", "The stock volume a dilution needs (c1 V1 = c2 V2).", "pint", science.dilution),
    Calculation("phys_gravity", "physics", "Newton's gravitational force between two masses.",
                "pint, gravitational_constant", science.gravity),
    Calculation("phys_photon_energy", "physics", "The energy of a photon of a given wavelength.",
                "pint, planck_constant and speed_of_light", science.photon_energy),
    Calculation("phys_heat", "physics", "The heat that warms a mass of a material by some degrees.",
                "pint quantities", science.heat),
    Calculation("phys_pendulum", "physics", "The small-swing period of a simple pendulum.",
                "pint, standard_gravity", science.pendulum),
    Calculation("stats_sample_std", "statistics", "The sample standard deviation of a list of values.",
                "numpy.std(ddof=1)", probability.sample_std),
    Calculation("stats_z_test", "statistics", "The p-value of a one- or two-sided z-test of a mean.",
                "scipy.stats.norm", probability.z_test),
]}
