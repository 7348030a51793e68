"""Finance calculations (`domains.professional.calculations`): loans, annuities, cash flows
and bonds, each answered by `numpy-financial`.

    question, value, unit = loan_payment(random.Random(7), level=2)
"""

from __future__ import annotations

import math
import random


def _money(x: float) -> str:
    return f"${x:,.2f}"



def _loan(rng: random.Random, level: int) -> tuple[float, float, int]:
    principal = rng.choice([5, 10, 20, 25, 50]) * 1000 if level == 1 else rng.randrange(3000, 400000, 250)
    rate = rng.choice([3, 4, 5, 6, 8]) if level == 1 else round(rng.uniform(1.5, 11.5), 2)
    years = rng.choice([1, 2, 3, 5]) if level == 1 else rng.choice([5, 7, 10, 15, 20, 25, 30])
    return principal, rate, years


def loan_payment(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    balloon = rng.randrange(1000, int(principal * 0.4), 500) if level == 3 else 0
    pay = -npf.pmt(rate / 100 / 12, years * 12, principal, -balloon)
    q = (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at an annual "
         f"interest rate of {rate}%, compounded monthly"
         + (f", with a balloon payment of {_money(balloon)} due with the last payment" if balloon else "")
         + ". What is the monthly payment in dollars?")
    return q, float(pay), "dollars"


def future_value(rng: random.Random, level: int):
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


def present_value(rng: random.Random, level: int):
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


def npv(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    flows = _cash_flows(rng, level)
    rate = rng.choice([5, 8, 10, 12]) if level == 1 else round(rng.uniform(2, 15), 1)
    listed = ", ".join(f"year {t}: {_money(f)}" for t, f in enumerate(flows))
    q = (f"A project has these cash flows (year 0 is today; negative is an outlay): {listed}. "
         f"At a discount rate of {rate}% a year, what is its net present value in dollars?")
    return q, float(npf.npv(rate / 100, flows)), "dollars"


def irr(rng: random.Random, level: int):
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


def periods(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    payment = -npf.pmt(rate / 100 / 12, years * 12, principal) * rng.choice([1.1, 1.25, 1.5, 2.0])
    payment = round(payment, 0 if level == 1 else 2)
    n = npf.nper(rate / 100 / 12, -payment, principal)
    q = (f"A loan of {_money(principal)} at {rate}% a year, compounded monthly, is repaid at {_money(payment)} a "
         "month. How many monthly payments does it take to repay it (a fractional number of months)?")
    return q, float(n), "months"


def interest_part(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    k = rng.randrange(1, years * 12 + 1) if level > 1 else 1
    interest = -npf.ipmt(rate / 100 / 12, k, years * 12, principal)
    q = (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at {rate}% a year, "
         f"compounded monthly. How much of payment number {k} is interest, in dollars?")
    return q, float(interest), "dollars"


def rate(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    payment = round(-npf.pmt(rate / 100 / 12, years * 12, principal), 2)
    r = npf.rate(years * 12, -payment, principal, 0) * 12 * 100
    q = (f"A loan of {_money(principal)} is repaid at {_money(payment)} a month for {years} years. What is the "
         "annual interest rate (monthly compounding, the monthly rate times 12), in percent?")
    return q, float(r), "percent"


def growth_rate(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    start = float(rng.choice([100, 1000, 10000])) if level == 1 else float(rng.randrange(500, 900000, 50))
    years = rng.choice([2, 5, 10]) if level == 1 else rng.randrange(2, 31)
    end = round(start * rng.uniform(0.4, 4.0), 0 if level == 1 else 2)
    r = npf.rate(years, 0, -start, end) * 100
    return (f"An investment grew from {_money(start)} to {_money(end)} in {years} years. What is its compound annual "
            "growth rate, in percent per year?", float(r), "percent")


def bond_price(rng: random.Random, level: int):
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


def loan_balance(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    k = rng.randrange(1, years * 12)
    payment = npf.pmt(rate / 100 / 12, years * 12, principal)
    balance = -npf.fv(rate / 100 / 12, k, payment, principal)
    return (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at {rate}% a year, "
            f"compounded monthly. What balance is still owed right after payment number {k}, in dollars?",
            float(balance), "dollars")


def principal_part(rng: random.Random, level: int):
    import numpy_financial as npf  # on first use

    principal, rate, years = _loan(rng, level)
    k = rng.randrange(1, years * 12 + 1) if level > 1 else 1
    part = -npf.ppmt(rate / 100 / 12, k, years * 12, principal)
    return (f"A loan of {_money(principal)} is repaid in equal monthly payments over {years} years at {rate}% a year, "
            f"compounded monthly. How much of payment number {k} repays principal, in dollars?", float(part), "dollars")


def mirr(rng: random.Random, level: int):
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
