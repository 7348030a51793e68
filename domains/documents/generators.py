"""Generated business documents and one question each, with the answer computed from the
document's facts (`Decimal` money rounded half up to the cent, `datetime.date` calendar
arithmetic, `dateutil.relativedelta` for months).

Every generator is `(rng, fake, level) -> Drawn`: `rng` a seeded `random.Random`, `fake` a
`Faker` seeded from the same key (names, companies, addresses), `level` 1..3 (more lines,
more distractors, rarer terms). The document is plain text, as a user would paste it from
a PDF: an invoice, a services agreement, a sales ledger, a timesheet, a bank statement, a
balance sheet.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Callable

from dateutil.relativedelta import relativedelta

CENT = Decimal("0.01")
PRODUCTS = ("Ergonomic office chair", "Standing desk frame", "27-inch monitor", "Wireless keyboard",
            "Laser printer toner", "USB-C docking station", "Noise-cancelling headset", "Conference webcam",
            "Network switch (24 port)", "Laptop stand", "Whiteboard panel", "Desk lamp", "Paper shredder",
            "Filing cabinet", "External SSD 2 TB", "Ethernet cable pack", "Label printer", "Surge protector",
            "Document scanner", "Projector screen", "Ink cartridge set", "Wireless mouse", "Cable organizer",
            "Office plant service", "Printer paper (10 reams)", "Coffee machine service", "Software license seat",
            "On-site support hour", "Training session", "Installation service")
REGIONS = ("North", "South", "East", "West", "Central")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


@dataclass(frozen=True)
class Drawn:
    """One generated task: the document, the question, the answer and how it is compared.

    Attributes:
        document: The document text.
        question: What is asked about it, including how to write the answer.
        answer: The reference, as written ("1234.50", "2027-03-14", "Wireless keyboard", "7").
        kind: "amount" (money or hours, 2 decimals: within half a cent), "count" (an
            integer, exact), "date" (a calendar date, ISO 8601), "ratio" (2 decimals) or
            "text" (a name from the document, compared case- and space-insensitively).
    """

    document: str
    question: str
    answer: str
    kind: str


def money(x: Decimal) -> str:
    """"$1,234.50" (negative as "-$1,234.50")."""
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def cents(x: Decimal) -> Decimal:
    return x.quantize(CENT, rounding=ROUND_HALF_UP)


def _price(rng: random.Random, level: int) -> Decimal:
    whole = rng.choice((5, 10, 12, 15, 20, 25, 40, 50, 75, 80, 120, 150, 199, 250)) if level == 1 \
        else rng.randint(3, 400)
    return Decimal(whole) + (Decimal(rng.choice((0, 50, 99, 95, 25))) / 100 if level > 1 else 0)


def _day(rng: random.Random, start: int = 2024, end: int = 2027) -> dt.date:
    return dt.date(rng.randint(start, end), rng.randint(1, 12), rng.randint(1, 28))


def _long(d: dt.date) -> str:
    return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"


def _invoice(rng: random.Random, fake: Any, level: int) -> tuple[str, dict]:
    """An invoice and its facts: lines [(description, qty, unit price, total)], subtotal,
    discount, tax, shipping, total, date, terms."""
    n = {1: 3, 2: 5, 3: 7}[level] + rng.randint(0, 1)
    items = rng.sample(PRODUCTS, n)
    lines = []
    for i, item in enumerate(items):
        qty = rng.randint(1, 12)
        if level == 3 and i == n - 1:
            qty = -rng.randint(1, 2)  # a returned item, credited
        price = _price(rng, level)
        lines.append((item, qty, price, cents(qty * price)))
    subtotal = sum((t for *_, t in lines), Decimal(0))
    discount_pct = Decimal(rng.choice((0, 5, 10, 15))) if level > 1 else Decimal(0)
    discount = cents(subtotal * discount_pct / 100)
    tax_pct = Decimal(rng.choice(("5", "6.25", "7", "8.5", "10"))) if level > 1 else Decimal(rng.choice(("5", "10")))
    tax = cents((subtotal - discount) * tax_pct / 100)
    shipping = Decimal(rng.choice((0, 15, 25, 40))) if level == 3 else Decimal(0)
    total = subtotal - discount + tax + shipping
    date = _day(rng)
    terms = rng.choice((15, 30, 45, 60))
    early = rng.choice((10, 15)) if level == 3 else 0
    seller, buyer = fake.company(), fake.company()
    rows = [f"{d:<28} {q:>4} {money(p):>12} {money(t):>12}" for d, q, p, t in lines]
    text = "\n".join([
        f"INVOICE No. {rng.randint(10000, 99999)}", f"From: {seller}, {fake.address().replace(chr(10), ', ')}",
        f"Bill to: {buyer}, {fake.address().replace(chr(10), ', ')}", f"Invoice date: {_long(date)}",
        f"Payment terms: {f'2/{early} ' if early else ''}Net {terms}"
        + (f" (2% discount if paid within {early} days)" if early else ""), "",
        f"{'Description':<28} {'Qty':>4} {'Unit price':>12} {'Amount':>12}", *rows, "",
        f"Subtotal: {money(subtotal)}",
        *([f"Discount ({discount_pct}%): -{money(discount)}"] if discount else []),
        f"Sales tax ({tax_pct}% of the discounted subtotal): {money(tax)}",
        *([f"Shipping (not taxed): {money(shipping)}"] if shipping else [])])
    facts = {"lines": lines, "total": total, "date": date, "terms": terms, "early": early, "seller": seller,
             "buyer": buyer}
    return text, facts


def invoice_total(rng: random.Random, fake: Any, level: int) -> Drawn:
    text, f = _invoice(rng, fake, level)
    q = "What is the total amount due on this invoice? Give the amount in dollars with two decimals."
    return Drawn(text, q, f"{f['total']:.2f}", "amount")


def invoice_top_item(rng: random.Random, fake: Any, level: int) -> Drawn:
    text, f = _invoice(rng, fake, level)
    totals = sorted(((t, d) for d, _, _, t in f["lines"]), reverse=True)
    while totals[0][0] == totals[1][0]:  # a tie has two answers: draw another invoice
        text, f = _invoice(rng, fake, level)
        totals = sorted(((t, d) for d, _, _, t in f["lines"]), reverse=True)
    q = "Which line item has the largest amount (quantity times unit price)? Give its description exactly."
    return Drawn(text, q, totals[0][1], "text")


def invoice_due_date(rng: random.Random, fake: Any, level: int) -> Drawn:
    text, f = _invoice(rng, fake, level)
    if f["early"] and rng.random() < 0.5:
        due = f["date"] + dt.timedelta(days=f["early"])
        q = "What is the last day on which the buyer can pay and still take the early-payment discount?"
    else:
        due = f["date"] + dt.timedelta(days=f["terms"])
        q = "On what date is payment of this invoice due (the net term, counted in calendar days from the invoice date)?"
    return Drawn(text, q + " Give the date as YYYY-MM-DD.", due.isoformat(), "date")


def contract_notice_deadline(rng: random.Random, fake: Any, level: int) -> Drawn:
    provider, client = fake.company(), fake.company()
    start = _day(rng)
    term = rng.choice((12, 24, 36)) if level == 1 else rng.choice((6, 12, 18, 24, 36))
    renew = rng.choice((12, 24)) if level > 1 else 12
    notice = rng.choice((30, 60, 90)) if level < 3 else rng.choice((45, 60, 75, 90, 120))
    cure = rng.choice((10, 15, 30))
    pay = rng.choice((15, 30, 45))
    end = start + relativedelta(months=term) - dt.timedelta(days=1)
    renewals = rng.randint(0, 1) if level == 3 else 0
    end = end if not renewals else (end + dt.timedelta(days=1)) + relativedelta(months=renew) - dt.timedelta(days=1)
    deadline = end - dt.timedelta(days=notice)
    clauses = [
        f"MASTER SERVICES AGREEMENT between {provider} (\"Provider\") and {client} (\"Client\").",
        f"1. Term. This Agreement begins on {_long(start)} (the \"Effective Date\") and continues for an initial term "
        f"of {term} months, ending on the day before the {term}-month anniversary of the Effective Date.",
        f"2. Renewal. At the end of the initial term and of each renewal term, this Agreement renews automatically "
        f"for a further {renew} months unless either party gives written notice of non-renewal at least {notice} "
        "days before the last day of the then-current term.",
        f"3. Fees. Client pays each invoice within {pay} days of receipt.",
        f"4. Breach. A party in material breach has {cure} days after written notice to cure it.",
        f"5. Governing law. This Agreement is governed by the laws of the State of {fake.state()}."]
    if level > 1:
        rng.shuffle(clauses[2:])
    which = "the first renewal term" if renewals else "the initial term"
    q = (f"{'The Agreement renewed once. ' if renewals else ''}What is the last date on which a party can give "
         f"notice of non-renewal so that the Agreement ends at the end of {which} (count {notice} days back from "
         "the last day of that term)? Give the date as YYYY-MM-DD.")
    return Drawn("\n".join(clauses), q, deadline.isoformat(), "date")


def _ledger(rng: random.Random, fake: Any, level: int) -> list[dict]:
    n = {1: 8, 2: 14, 3: 22}[level]
    reps = [fake.first_name() for _ in range(4)]
    months = MONTHS[: 3 + level]
    rows = []
    for i in range(n):
        units = rng.randint(1, 40)
        price = Decimal(rng.choice((19, 25, 49, 75, 120))) + (Decimal(rng.choice((0, 50, 99))) / 100 if level > 1 else 0)
        status = "returned" if level == 3 and rng.random() < 0.15 else "shipped"
        rows.append({"order": f"SO-{1000 + 7 * i + rng.randint(0, 6)}", "month": rng.choice(months),
                     "region": rng.choice(REGIONS[: 2 + level]), "rep": rng.choice(reps), "units": units,
                     "revenue": cents(units * price), "status": status})
    return rows


def _table(rows: list[dict], with_status: bool) -> str:
    head = ["Order", "Month", "Region", "Sales rep", "Units", "Revenue"] + (["Status"] if with_status else [])
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        cells = [r["order"], r["month"], r["region"], r["rep"], str(r["units"]), money(r["revenue"])]
        lines.append(" | ".join(cells + ([r["status"]] if with_status else [])))
    return "SALES LEDGER\n" + "\n".join(lines)


def ledger_sum(rng: random.Random, fake: Any, level: int) -> Drawn:
    rows = _ledger(rng, fake, level)
    pick = rng.choice(rows)
    region, month = pick["region"], pick["month"]
    keep = [r for r in rows if r["region"] == region and (level == 1 or r["month"] == month)
            and r["status"] == "shipped"]
    total = sum((r["revenue"] for r in keep), Decimal(0))
    where = f"the {region} region" + (f" in {month}" if level > 1 else "")
    q = (f"What is the total revenue of {where}{', counting shipped orders only' if level == 3 else ''}? "
         "Give the amount in dollars with two decimals.")
    return Drawn(_table(rows, level == 3), q, f"{total:.2f}", "amount")


def ledger_count(rng: random.Random, fake: Any, level: int) -> Drawn:
    rows = _ledger(rng, fake, level)
    region = rng.choice(rows)["region"]
    threshold = Decimal(rng.choice((250, 500, 750, 1000, 1500)))
    n = sum(r["region"] == region and r["revenue"] > threshold and r["status"] == "shipped" for r in rows)
    q = (f"How many {'shipped ' if level == 3 else ''}orders in the {region} region have revenue above "
         f"{money(threshold)}? Give the count.")
    return Drawn(_table(rows, level == 3), q, str(n), "count")


def timesheet_hours(rng: random.Random, fake: Any, level: int) -> Drawn:
    start = _day(rng)
    start -= dt.timedelta(days=start.weekday())  # a Monday
    total = Decimal(0)
    lines = [f"WEEKLY TIMESHEET: {fake.name()}, {fake.job()}", f"Week of {_long(start)}",
             "Day | In | Out | Unpaid break (min)"]
    for k in range(5 if level < 3 else 6):
        day = start + dt.timedelta(days=k)
        t_in = dt.datetime.combine(day, dt.time(rng.choice((6, 7, 8, 9)), rng.choice((0, 15, 30, 45))))
        minutes = rng.randint(24, 40) * 15 if level > 1 else rng.randint(28, 36) * 15
        if level == 3 and k == 5:  # a night shift that ends the next day
            t_in = dt.datetime.combine(day, dt.time(rng.choice((20, 21, 22)), 0))
        t_out = t_in + dt.timedelta(minutes=minutes)
        brk = rng.choice((0, 30, 45, 60)) if level > 1 else 30
        total += Decimal(minutes - brk) / 60
        out = t_out.strftime("%H:%M") + (" (next day)" if t_out.date() != day else "")
        lines.append(f"{day.strftime('%A')} {day.isoformat()} | {t_in.strftime('%H:%M')} | {out} | {brk}")
    q = "How many hours were worked in total this week, not counting unpaid breaks? Give the number of hours with two decimals."
    return Drawn("\n".join(lines), q, f"{cents(total):.2f}", "amount")


def statement_balance(rng: random.Random, fake: Any, level: int) -> Drawn:
    opening = cents(Decimal(rng.randint(200, 9000)) + Decimal(rng.randint(0, 99)) / 100)
    month = rng.randint(1, 12)
    year = rng.randint(2024, 2027)
    balance, lowest = opening, None
    lines = [f"ACCOUNT STATEMENT: {fake.name()}, account ending {rng.randint(1000, 9999)}",
             f"Opening balance on {year}-{month:02d}-01: {money(opening)}", "Date | Description | Amount"]
    for day in sorted(rng.sample(range(2, 29), {1: 5, 2: 9, 3: 14}[level])):
        credit = rng.random() < 0.3
        amount = cents(Decimal(rng.randint(5, 2500 if credit else 900)) + Decimal(rng.randint(0, 99)) / 100)
        amount = amount if credit else -amount
        what = (rng.choice(("Salary", "Transfer in", "Refund")) if credit
                else rng.choice(("Card purchase", "Utility bill", "Rent", "ATM withdrawal", "Subscription")))
        balance += amount
        lowest = balance if lowest is None else min(lowest, balance)
        sign = "+" if amount > 0 else "-"
        lines.append(f"{year}-{month:02d}-{day:02d} | {what} {fake.company() if not credit else ''}".rstrip()
                     + f" | {sign}{money(abs(amount))}")
    if level == 3 and rng.random() < 0.5:
        q, answer = "What was the lowest balance of the account during the statement period (after any transaction)?", lowest
    else:
        q, answer = "What is the closing balance after the last transaction?", balance
    return Drawn("\n".join(lines), q + " Give the amount in dollars with two decimals (negative if overdrawn).",
                 f"{answer:.2f}", "amount")


def balance_sheet_ratio(rng: random.Random, fake: Any, level: int) -> Drawn:
    def amt(lo: int, hi: int) -> int:
        return rng.randint(lo, hi) * 1000

    current = {"Cash and cash equivalents": amt(50, 900), "Accounts receivable": amt(40, 700),
               "Inventories": amt(20, 800)}
    if level > 1:
        current["Prepaid expenses"] = amt(5, 90)
    liabilities = {"Accounts payable": amt(30, 600), "Accrued expenses": amt(10, 200)}
    if level > 1:
        liabilities["Current portion of long-term debt"] = amt(10, 300)
    noncurrent = {"Property, plant and equipment, net": amt(200, 5000), "Goodwill": amt(0, 900)}
    long_debt = amt(100, 3000)
    ca, cl = sum(current.values()), sum(liabilities.values())
    ask = "current" if level < 3 else rng.choice(("current", "quick"))
    num = ca if ask == "current" else ca - current["Inventories"] - current.get("Prepaid expenses", 0)
    ratio = (Decimal(num) / Decimal(cl)).quantize(CENT, rounding=ROUND_HALF_UP)
    lines = [f"{fake.company()}: CONDENSED BALANCE SHEET (in thousands of dollars)", "Current assets:"]
    lines += [f"  {k}: {v // 1000:,}" for k, v in current.items()]
    lines += ["Non-current assets:"] + [f"  {k}: {v // 1000:,}" for k, v in noncurrent.items()]
    lines += ["Current liabilities:"] + [f"  {k}: {v // 1000:,}" for k, v in liabilities.items()]
    lines += ["Non-current liabilities:", f"  Long-term debt, less current portion: {long_debt // 1000:,}"]
    if ask == "current":
        q = "What is the current ratio (total current assets divided by total current liabilities)?"
    else:
        q = ("What is the quick ratio (current assets less inventories and prepaid expenses, divided by total "
             "current liabilities)?")
    return Drawn("\n".join(lines), q + " Round to two decimals.", f"{ratio:.2f}", "ratio")


@dataclass(frozen=True)
class DocumentKind:
    """One document question type: its domain name, description and generator."""

    name: str
    description: str
    draw: Callable[[random.Random, Any, int], Drawn]


DOCUMENT_KINDS: tuple[DocumentKind, ...] = (
    DocumentKind("doc_invoice_total", "Read an invoice and compute the total due (discount, sales tax, shipping, "
                 "credited returns).", invoice_total),
    DocumentKind("doc_invoice_top_item", "Find the invoice line with the largest amount.", invoice_top_item),
    DocumentKind("doc_invoice_due_date", "Work out an invoice's payment or early-discount date from its terms.",
                 invoice_due_date),
    DocumentKind("doc_contract_notice", "Find the last day to give notice of non-renewal under a services "
                 "agreement's term and renewal clauses.", contract_notice_deadline),
    DocumentKind("doc_ledger_sum", "Sum the revenue of a sales ledger's rows that match a region and month.",
                 ledger_sum),
    DocumentKind("doc_ledger_count", "Count a sales ledger's orders above an amount in a region.", ledger_count),
    DocumentKind("doc_timesheet_hours", "Total the hours on a weekly timesheet, less unpaid breaks.",
                 timesheet_hours),
    DocumentKind("doc_statement_balance", "Follow a bank statement to its closing (or lowest) balance.",
                 statement_balance),
    DocumentKind("doc_balance_sheet_ratio", "Compute a current or quick ratio from a condensed balance sheet.",
                 balance_sheet_ratio),
)
