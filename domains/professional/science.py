"""Science calculations (`domains.professional.calculations`): unit conversions, physics
and chemistry, answered by `pint` quantities and constants and `periodictable`'s standard
atomic weights.

    question, value, unit = convert("length")(random.Random(7), level=2)
"""

from __future__ import annotations

import functools
import math
import random


@functools.lru_cache(maxsize=1)
def units():
    """pint's unit registry (built once per process, ~0.3 s)."""
    import pint  # on first use: ~0.3 s to build the registry

    return pint.UnitRegistry()



# units (pint)

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


def convert(dimension: str):
    def draw(rng: random.Random, level: int):
        pool = [u for lv in range(level) for u in UNIT_SETS[dimension][lv]]
        src, dst = rng.sample(pool, 2)
        if level == 1:
            value = float(rng.choice([1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 75, 100, 250, 500]))
        else:
            value = round(rng.uniform(0.5, 5000), rng.choice([0, 1, 2]))
        u = units()
        out = u.Quantity(value, src).to(dst).magnitude
        return f"Convert {value:g} {spoken(src)} to {spoken(dst)}.", float(out), spoken(dst)
    return draw


def temperature(rng: random.Random, level: int):
    scales = ["degC", "degF", "kelvin"] + (["degR"] if level == 3 else [])
    names = {"degC": "degrees Celsius", "degF": "degrees Fahrenheit", "kelvin": "kelvin", "degR": "degrees Rankine"}
    src, dst = rng.sample(scales, 2)
    value = float(rng.randrange(-40, 120, 5)) if level == 1 else round(rng.uniform(-80, 400), 1)
    if src in ("kelvin", "degR"):
        value = abs(value) + 200
    out = units().Quantity(value, src).to(dst).magnitude
    return f"Convert {value:g} {names[src]} to {names[dst]}.", float(out), names[dst]



# ---------------------------------------------------------------- physics (pint quantities)

def kinetic_energy(rng: random.Random, level: int):
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


def electrical_power(rng: random.Random, level: int):
    u = units()
    volts = float(rng.choice([1.5, 3, 5, 6, 9, 12, 24, 48, 120, 230]) if level == 1 else rng.randrange(1, 500))
    ohms = float(rng.choice([1, 2, 4, 5, 8, 10, 20, 50, 100, 1000]) if level == 1 else rng.randrange(1, 2000))
    r_unit = "ohm" if level < 3 else rng.choice(["ohm", "kiloohm"])
    r = u.Quantity(ohms, r_unit)
    target = "watt" if level < 3 else rng.choice(["watt", "milliwatt", "kilowatt"])
    p = (u.Quantity(volts, "volt") ** 2 / r).to(target).magnitude
    return (f"A voltage of {volts:g} V is applied across a {ohms:g} {r_unit} resistor. What power does it dissipate, "
            f"in {target}?", float(p), target)


def pressure_from_force(rng: random.Random, level: int):
    u = units()
    force, f_unit = float(rng.randrange(10, 5000)), ("newton" if level == 1 else rng.choice(["newton", "kilonewton", "pound_force"]))
    area, a_unit = (float(rng.randrange(1, 50)), "meter ** 2") if level == 1 else (
        float(rng.randrange(1, 500)), rng.choice(["centimeter ** 2", "inch ** 2", "meter ** 2"]))
    target = "pascal" if level == 1 else rng.choice(["kilopascal", "psi", "bar"])
    p = (u.Quantity(force, f_unit) / u.Quantity(area, a_unit)).to(target).magnitude
    return (f"A force of {force:g} {spoken(f_unit)} acts evenly on an area of {area:g} {spoken(a_unit)}. "
            f"What is the pressure in {target}?", float(p), target)


def ideal_gas(rng: random.Random, level: int):
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


def molar_mass(rng: random.Random, level: int):
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


def moles_from_mass(rng: random.Random, level: int):
    name, formula, mass = _compound(rng, level)
    u = units()
    amount, unit = (float(rng.randrange(1, 200)), "gram") if level == 1 else (
        round(rng.uniform(0.1, 500), 2), rng.choice(["gram", "milligram", "kilogram"]))
    moles = (u.Quantity(amount, unit) / u.Quantity(mass, "gram / mole")).to("mole").magnitude
    return (f"How many moles are in {amount:g} {unit}s of {name} ({formula})? Use standard atomic weights.",
            float(moles), "moles")


def molarity(rng: random.Random, level: int):
    name, formula, mass = _compound(rng, level)
    u = units()
    grams = float(rng.randrange(1, 100)) if level == 1 else round(rng.uniform(0.1, 250), 2)
    volume, v_unit = (float(rng.randrange(1, 5)), "liter") if level == 1 else (
        float(rng.randrange(50, 2000, 50)), "milliliter")
    molar = (u.Quantity(grams, "gram") / u.Quantity(mass, "gram / mole") / u.Quantity(volume, v_unit)).to("mole / liter")
    return (f"{grams:g} grams of {name} ({formula}) are dissolved in water to make {volume:g} {v_unit}s of solution. "
            "What is its molarity, in moles per liter?", float(molar.magnitude), "mol/L")


def dilution(rng: random.Random, level: int):
    u = units()
    c1 = float(rng.choice([1, 2, 6, 12])) if level == 1 else round(rng.uniform(0.5, 18), 2)
    c2 = round(c1 * rng.uniform(0.05, 0.8), 3)
    v2, v_unit = (float(rng.randrange(100, 1000, 50)), "milliliter") if level < 3 else (
        round(rng.uniform(0.1, 5), 2), "liter")
    v1 = (u.Quantity(c2, "mole / liter") * u.Quantity(v2, v_unit) / u.Quantity(c1, "mole / liter")).to("milliliter")
    return (f"How many milliliters of a {c1:g} mol/L stock solution are needed to make {v2:g} {v_unit}s of a "
            f"{c2:g} mol/L solution?", float(v1.magnitude), "milliliters")



# ---------------------------------------------------------------- more physics (pint constants)

def gravity(rng: random.Random, level: int):
    u = units()
    m1, m2 = float(rng.randrange(1, 1000)), float(rng.randrange(1, 1000))
    r, r_unit = (float(rng.randrange(1, 20)), "meter") if level < 3 else (round(rng.uniform(0.1, 50), 2), "centimeter")
    force = (u.gravitational_constant * u.Quantity(m1, "kilogram") * u.Quantity(m2, "kilogram")
             / u.Quantity(r, r_unit) ** 2).to("nanonewton")
    return (f"Two masses of {m1:g} kg and {m2:g} kg are {r:g} {r_unit}s apart. What is the gravitational force "
            "between them, in nanonewtons?", float(force.magnitude), "nanonewtons")


def photon_energy(rng: random.Random, level: int):
    u = units()
    wavelength = float(rng.randrange(380, 750)) if level == 1 else float(rng.randrange(100, 3000))
    target = "electron_volt" if level < 3 else rng.choice(["electron_volt", "attojoule"])
    energy = (u.planck_constant * u.speed_of_light / u.Quantity(wavelength, "nanometer")).to(target)
    return (f"What is the energy of one photon of wavelength {wavelength:g} nm, in {spoken(target)}s?",
            float(energy.magnitude), spoken(target))


def heat(rng: random.Random, level: int):
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


def pendulum(rng: random.Random, level: int):
    u = units()
    length, l_unit = (rng.randrange(1, 41) / 2, "meter") if level == 1 else (
        float(rng.randrange(5, 500)), rng.choice(["centimeter", "inch", "foot"]))
    period = (2 * math.pi * (u.Quantity(length, l_unit) / u.standard_gravity) ** 0.5).to("second")
    return (f"What is the period of a simple pendulum of length {length:g} {l_unit}, for small swings, in seconds? "
            "Use standard gravity (9.80665 m/s^2).", float(period.magnitude), "seconds")
