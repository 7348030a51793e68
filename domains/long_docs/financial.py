"""Seeded annual-report-like documents with one question each, for the long-document
`financial_report` domain.

    from domains.long_docs.financial import make_report_task
    task = make_report_task(seed=3, level=2)   # about 30 pages
    task.document   # "# Norvale Industries plc - Annual Report 2025\n\n[Page 1]\n\n## Letter ..."
    task.question   # "What was the operating margin ... Answer in percent, rounded to one decimal."
    task.evidence   # the table rows / sentences (verbatim substrings) that hold the facts
    score_report_answer(task, "12.3%")   # (True, ...): domains.long_docs.report_scoring

A document is plain markdown: a `# <Company> - Annual Report <Year>` title, `## ` sections
(letter, highlights, business overview, one `## Segment review: <name>` per segment, risk
factors, outlook, sustainability, governance, financial statements, notes), `### `
subsections, blank-line-separated paragraphs, markdown tables of quarterly figures per
segment and fiscal year, and `[Page N]` markers (own paragraph) about every 450-550 words
(whitespace-separated tokens, table pipes included). Money is in `<CUR> million` with one
decimal and is kept as integer tenths internally, so the quarterly tables sum exactly to
the annual segment table, whose totals equal the income statement. Year-end headcount,
sites per segment and one-off charges appear only in narrative sentences, which
`cross_paragraph` questions combine with a table figure. Distractors: a mid-year
headcount, next year's revenue guidance, a dividend per share. Derived answers are rounded
half away from zero; a question whose exact value sits on a rounding tie, or a comparison
whose top two segments are within 1% (or 0.3), is skipped for another. The same (seed,
level) always gives the same task; only a `random.Random` seeded from (seed, level) is used.

Not covered: the companies and text are fictional and not accounting-standard compliant.
Filler numbers (survey scores, emissions, project counts) are colour: each is fixed for
its sentence template and context but is never asked about. This module builds no prompt,
extracts nothing from a model's reply (the caller passes the extracted answer string) and
shapes no reward (`domains.long_docs.report_scoring` judges answers).
"""

from __future__ import annotations

import hashlib
import random
import string
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import NamedTuple

from domains.long_docs import financial_text as T
from core.errors import ConfigError

LEVELS = {1: 10, 2: 30, 3: 100, 4: 250}  # level -> approximate pages (~500 words each)
LEVEL_NOTES = {
    1: "about 10 pages, 3-4 segments, 2 fiscal years",
    2: "about 30 pages, 3-5 segments, 2-3 fiscal years",
    3: "about 100 pages, 4-6 segments, 3 fiscal years",
    4: "about 250 pages, 4-6 segments, 3 fiscal years",
}
QUESTION_TYPES = ("extraction", "sum", "growth", "comparison", "cross_paragraph", "ratio")
WORDS_PER_PAGE = (450, 550)  # each page's word budget is drawn from this range
MAX_ANSWER_CHARS = 1000  # longer extracted answers are rejected, not searched

_SEGMENTS = {1: (3, 4), 2: (3, 5), 3: (4, 6), 4: (4, 6)}
_YEARS = {1: (2, 2), 2: (2, 3), 3: (3, 3), 4: (3, 3)}
_DERIVED_TOL = 0.001  # relative tolerance for computed answers (growth, ratio, cross_paragraph)


@dataclass(frozen=True)
class ReportTask:
    """One report and one question about it.

    Attributes:
        document: the full report (markdown text with `[Page N]` markers).
        title: e.g. "Norvale Industries plc - Annual Report 2025".
        question: the question, naming the unit and rounding expected.
        answer: canonical answer: a plain number ("1234.5", "-3.2", "418") or a segment name.
        answer_kind: "number" | "percent" | "name".
        unit: e.g. "EUR million", "EUR thousand", "thousand", "%"; "" for names.
        tolerance: relative tolerance for numbers: 0.0 for extraction and sum (exact table
            figures), 0.001 for growth, ratio and cross_paragraph; 0.0 for names. On top of
            it, half a unit of the answer's last decimal is always allowed; see
            `score_report_answer`.
        question_type: one of QUESTION_TYPES.
        evidence: verbatim substrings of `document` (table captions, header and data rows,
            sentences; each under 300 chars) that together hold every fact needed.
        pages: number of `[Page N]` markers in the document.
    """

    document: str
    title: str
    question: str
    answer: str
    answer_kind: str
    unit: str
    tolerance: float
    question_type: str
    evidence: tuple[str, ...]
    pages: int


# ---- company figures -----------------------------------------------------------------------

@dataclass
class _Company:
    """Everything the document states: names, figures (integer tenths of a million) and the
    rendered evidence lines (captions, headers, rows, sentences)."""

    name: str
    short: str
    cur: str
    sector: dict
    years: list[int]
    segs: list[str]
    rev: dict = field(default_factory=dict)  # (seg, year) -> [Q1..Q4] tenths
    oi: dict = field(default_factory=dict)
    vol: dict = field(default_factory=dict)  # (seg, year) -> [Q1..Q4] thousands
    inc: dict = field(default_factory=dict)  # year -> {line item: tenths}
    heads: dict = field(default_factory=dict)  # year -> year-end headcount
    sites: dict = field(default_factory=dict)  # seg -> (end of last year, end of year before)
    charges: dict = field(default_factory=dict)  # (seg, year) -> (tenths, sentence)
    qtab: dict = field(default_factory=dict)  # (seg, year) -> {"caption", "header", "rev", "oi", "vol", "block"}
    atab: dict = field(default_factory=dict)  # {"caption", "header", seg..., "total", "block"}
    itab: dict = field(default_factory=dict)  # {"caption", "header", line item..., "block"}
    facts: dict = field(default_factory=dict)  # "heads" | ("sites", seg) | "mid" -> sentence

    @property
    def Y(self) -> int:
        return self.years[-1]

    def annual(self, metric: str, seg: str, year: int) -> int:
        return sum(getattr(self, metric)[(seg, year)])


def _m(t: int) -> str:
    """Integer tenths -> "1,234.5" / "-12.3"."""
    s = f"{abs(t) // 10:,}.{abs(t) % 10}"
    return "-" + s if t < 0 else s


def _table(header: list[str], rows: list[list[str]]) -> tuple[str, list[str], str]:
    lines = ["| " + " | ".join(r) + " |" for r in [header] + rows]
    sep = "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"
    return lines[0], lines[1:], "\n".join([lines[0], sep] + lines[1:])


def _make_company(rng: random.Random, level: int) -> _Company:
    sector = rng.choice(T.SECTORS)
    n_years = rng.randint(*_YEARS[level])
    last = rng.randint(2019, 2026)
    short = f"{rng.choice(T.ROOTS)} {rng.choice(sector['suffix'])}"
    co = _Company(name=f"{short} {rng.choice(T.LEGAL)}", short=short, cur=rng.choice(T.CURRENCIES),
                  sector=sector, years=list(range(last - n_years + 1, last + 1)),
                  segs=rng.sample(sector["segs"], rng.randint(*_SEGMENTS[level])))
    season = [rng.uniform(0.85, 1.15) for _ in range(4)]
    for seg in co.segs:
        base, margin, per_m = rng.uniform(40, 900), rng.uniform(-0.04, 0.22), rng.uniform(0.3, 25)
        for y in co.years:
            rq = [max(50, round(base * s * rng.uniform(0.93, 1.07) * 10)) for s in season]
            co.rev[(seg, y)] = rq
            co.oi[(seg, y)] = [round(r * (margin + rng.uniform(-0.03, 0.03))) for r in rq]
            co.vol[(seg, y)] = [max(1, round(r / 10 * per_m)) for r in rq]
            base *= 1 + rng.uniform(-0.12, 0.18)
            margin = min(0.26, max(-0.08, margin + rng.uniform(-0.03, 0.03)))
    for y in co.years:
        r = sum(co.annual("rev", s, y) for s in co.segs)
        oi = sum(co.annual("oi", s, y) for s in co.segs)
        opex = round(r * rng.uniform(0.08, 0.2))
        fin = round(r * rng.uniform(0.002, 0.02))
        pbt = oi - fin
        tax = round(max(pbt, 0) * rng.uniform(0.19, 0.29))
        co.inc[y] = {"Revenue": r, "Cost of sales": r - oi - opex, "Gross profit": oi + opex,
                     "Operating expenses": opex, "Operating income": oi, "Net finance costs": fin,
                     "Profit before tax": pbt, "Income tax": tax, "Net profit": pbt - tax}
        co.heads[y] = max(50, round(r * 100 / rng.uniform(150, 450)))  # revenue in thousands / per head
    lo, hi = T.SITE_RANGE[sector["site"][0]]
    for seg in co.segs:
        n = rng.randint(lo, hi)
        co.sites[seg] = (n, max(1, n + rng.choice((-3, -2, -1, 1, 2, 4))))
    for seg, y in rng.sample([(s, y) for s in co.segs for y in co.years], 2):
        kind, why = rng.choice(T.CHARGES)
        amount = rng.randint(50, max(60, co.annual("rev", seg, y) // 25))
        why = why.format(mkt=rng.choice(T.POOLS["mkt"]))
        sentence = (f"Operating income of the {seg} segment in {y} includes a one-off {kind} charge of "
                    f"{co.cur} {_m(amount)} million {why}.")
        co.charges[(seg, y)] = (amount, sentence)
    _render(rng, co)
    return co


def _render(rng: random.Random, co: _Company) -> None:
    """Fill co.qtab / atab / itab / facts with the exact lines the document will contain."""
    cur, Y, k = co.cur, co.Y, 0
    for seg in co.segs:
        for y in co.years:
            k += 1
            header, rows, block = _table(
                ["Quarter"] + [f"Q{q} {y}" for q in (1, 2, 3, 4)],
                [[f"Revenue ({cur} million)"] + [_m(v) for v in co.rev[(seg, y)]],
                 [f"Operating income ({cur} million)"] + [_m(v) for v in co.oi[(seg, y)]],
                 [co.sector["vol"][0]] + [f"{v:,}" for v in co.vol[(seg, y)]]])
            cap = f"Table {k}: {seg} - quarterly results, fiscal {y}"
            co.qtab[(seg, y)] = {"caption": cap, "header": header, "rev": rows[0], "oi": rows[1],
                                 "vol": rows[2], "block": f"{cap}\n\n{block}"}
    rows = [[s] + [_m(co.annual(m, s, y)) for m in ("rev", "oi") for y in co.years] for s in co.segs]
    rows.append(["Group total"] + [_m(co.inc[y][m]) for m in ("Revenue", "Operating income") for y in co.years])
    header, lines, block = _table(["Segment"] + [f"{m} {y}" for m in ("Revenue", "Operating income")
                                                 for y in co.years], rows)
    cap = f"Table {k + 2}: Revenue and operating income by segment ({cur} million)"
    co.atab = dict(zip(co.segs + ["total"], lines), caption=cap, header=header, block=f"{cap}\n\n{block}")
    items = list(co.inc[Y])
    header, lines, block = _table(["Line item"] + [str(y) for y in co.years],
                                  [[i] + [_m(co.inc[y][i]) for y in co.years] for i in items])
    cap = f"Table {k + 1}: Consolidated income statement ({cur} million)"
    co.itab = dict(zip(items, lines), caption=cap, header=header, block=f"{cap}\n\n{block}")
    co.facts["heads"] = (f"At 31 December {Y} the group employed {co.heads[Y]:,} people "
                         f"(31 December {Y - 1}: {co.heads[Y - 1]:,}).")
    mid = round((co.heads[Y] + co.heads[Y - 1]) / 2) + rng.randint(20, 400)
    co.facts["mid"] = f"At 30 June {Y} the workforce numbered {mid:,}, reflecting seasonal hiring."
    for seg, (n, m) in co.sites.items():
        co.facts[("sites", seg)] = (f"At the end of {Y}, the {seg} segment operated {n} "
                                    f"{co.sector['site'][0]} ({Y - 1}: {m}).")


# ---- questions -----------------------------------------------------------------------------

_METRIC = {"rev": "revenue", "oi": "operating income"}


class _Q(NamedTuple):
    question: str
    answer: str
    kind: str
    unit: str
    tolerance: float
    evidence: tuple[str, ...]


def _round(x: Fraction, decimals: int) -> str | None:
    """Round half away from zero to a plain string; None on an exact tie (ambiguous)."""
    scaled = abs(x) * 10 ** decimals
    whole = scaled.numerator // scaled.denominator
    rest = scaled - whole
    if rest == Fraction(1, 2):
        return None
    n = whole + (rest > Fraction(1, 2))
    s = str(n // 10 ** decimals) + (f".{n % 10 ** decimals:0{decimals}d}" if decimals else "")
    return "-" + s if x < 0 and n else s


def _money(co: _Company, text: str, tenths: int, evidence, tol: float = 0.0) -> _Q:
    """A question whose answer is an exact table amount (integer tenths of a million)."""
    return _Q(f"{text} Answer in {co.cur} million, rounded to one decimal.", _m(tenths).replace(",", ""),
              "number", f"{co.cur} million", tol, tuple(dict.fromkeys(evidence)))


def _count(text: str, n: int, evidence) -> _Q:
    return _Q(f"{text} Answer in thousands, as a whole number.", str(n), "number", "thousand", 0.0,
              tuple(evidence))


def _percent(text: str, x: Fraction, evidence) -> _Q | None:
    ans = _round(100 * x, 1)
    return ans and _Q(f"{text} Answer in percent, rounded to one decimal.", ans, "percent", "%",
                      _DERIVED_TOL, tuple(evidence))


def _q_extraction(rng: random.Random, co: _Company) -> _Q:
    seg, y, q = rng.choice(co.segs), rng.choice(co.years), rng.randrange(4)
    t, metric = co.qtab[(seg, y)], rng.choice(("rev", "oi", "vol"))
    ev = (t["caption"], t["header"], t[metric])
    if metric == "vol":
        text = f"What figure does the report give for {co.sector['vol'][1]} by the {seg} segment in Q{q + 1} {y}?"
        return _count(text, co.vol[(seg, y)][q], ev)
    text = f"What was the {_METRIC[metric]} of the {seg} segment in Q{q + 1} {y}?"
    return _money(co, text, getattr(co, metric)[(seg, y)][q], ev)


def _q_sum(rng: random.Random, co: _Company) -> _Q:
    seg, y, q = rng.choice(co.segs), rng.choice(co.years), rng.randrange(4)
    metric, variant, half = rng.choice(("rev", "oi")), rng.randrange(3), rng.randrange(2)
    t = co.qtab[(seg, y)]
    if variant == 0:
        text = f"What was the combined {_METRIC[metric]} of all {len(co.segs)} segments in Q{q + 1} {y}?"
        ev = [x for s in co.segs for x in (co.qtab[(s, y)]["caption"], co.qtab[(s, y)]["header"],
                                            co.qtab[(s, y)][metric])]
        return _money(co, text, sum(getattr(co, metric)[(s, y)][q] for s in co.segs), ev)
    if variant == 1:
        text = (f"What was the {_METRIC[metric]} of the {seg} segment in the {('first', 'second')[half]} half "
                f"of {y} (Q{2 * half + 1} and Q{2 * half + 2} combined)?")
        return _money(co, text, sum(getattr(co, metric)[(seg, y)][2 * half:2 * half + 2]),
                      (t["caption"], t["header"], t[metric]))
    text = (f"How many {co.sector['vol'][1]} did the {seg} segment report for the full year {y}, "
            f"adding up the four quarters?")
    return _count(text, sum(co.vol[(seg, y)]), (t["caption"], t["header"], t["vol"]))


def _q_growth(rng: random.Random, co: _Company) -> _Q | None:
    i = rng.randrange(1, len(co.years))
    y0, y1 = co.years[i - 1], co.years[i]
    if rng.random() < 0.25:
        a, b, who = co.inc[y0]["Revenue"], co.inc[y1]["Revenue"], "group revenue"
        ev = (co.itab["header"], co.itab["Revenue"])
    else:
        seg = rng.choice(co.segs)
        a, b = co.annual("rev", seg, y0), co.annual("rev", seg, y1)
        who, ev = f"the annual revenue of the {seg} segment", (co.atab["header"], co.atab[seg])
    text = f"By what percentage did {who} change from {y0} to {y1}? Negative for a decline."
    return _percent(text, Fraction(b - a, a), ev)


def _q_ratio(rng: random.Random, co: _Company) -> _Q | None:
    seg, y, q = rng.choice(co.segs), rng.choice(co.years), rng.randrange(4)
    variant, t = rng.randrange(3), co.qtab[(seg, y)]
    if variant == 0:
        x, who = Fraction(co.annual("oi", seg, y), co.annual("rev", seg, y)), f"the {seg} segment in {y}"
        ev = (co.atab["header"], co.atab[seg])
    elif variant == 1:
        x, who = Fraction(co.inc[y]["Operating income"], co.inc[y]["Revenue"]), f"the group in {y}"
        ev = (co.itab["header"], co.itab["Revenue"], co.itab["Operating income"])
    else:
        x, who = Fraction(co.oi[(seg, y)][q], co.rev[(seg, y)][q]), f"the {seg} segment in Q{q + 1} {y}"
        ev = (t["caption"], t["header"], t["rev"], t["oi"])
    return _percent(f"What was the operating margin (operating income as a percentage of revenue) of {who}?", x, ev)


def _q_comparison(rng: random.Random, co: _Company) -> _Q | None:
    y, q, variant, hi = rng.choice(co.years), rng.randrange(4), rng.randrange(4), rng.random() < 0.5
    if variant == 0:
        vals, what = {s: Fraction(co.annual("rev", s, y)) for s in co.segs}, f"annual revenue in {y}"
    elif variant == 1:
        vals, what = {s: Fraction(co.annual("oi", s, y)) for s in co.segs}, f"annual operating income in {y}"
    elif variant == 2:
        vals = {s: Fraction(co.annual("oi", s, y) * 1000, co.annual("rev", s, y)) for s in co.segs}
        what = f"operating margin (operating income as a percentage of revenue) in {y}"
    else:
        vals, what = {s: Fraction(co.rev[(s, y)][q]) for s in co.segs}, f"revenue in Q{q + 1} {y}"
    ranked = sorted(vals.items(), key=lambda kv: kv[1], reverse=hi)
    if abs(ranked[0][1] - ranked[1][1]) < max(3, abs(ranked[0][1]) / 100):
        return None  # near-tie: the winner must lead by >= 0.3 (million or margin points) and >= 1%
    if variant == 3:
        ev = [x for s in co.segs for x in (co.qtab[(s, y)]["caption"], co.qtab[(s, y)]["header"],
                                            co.qtab[(s, y)]["rev"])]
    else:
        ev = [co.atab["header"]] + [co.atab[s] for s in co.segs]
    text = f"Which segment reported the {'highest' if hi else 'lowest'} {what}? Answer with the segment name only."
    return _Q(text, ranked[0][0], "name", "", 0.0, tuple(dict.fromkeys(ev)))


def _q_cross(rng: random.Random, co: _Company) -> _Q | None:
    variant, seg, i = rng.randrange(3), rng.choice(co.segs), rng.randrange(2)
    y = co.years[-1 - i]
    if variant == 0:
        ans = _round(Fraction(co.inc[y]["Revenue"] * 100, co.heads[y]), 1)  # tenths of a million -> thousands
        text = (f"Using the year-end headcount, what was group revenue per employee in {y}? "
                f"Answer in {co.cur} thousand, rounded to one decimal.")
        ev = (co.facts["heads"], co.itab["header"], co.itab["Revenue"])
        return ans and _Q(text, ans, "number", f"{co.cur} thousand", _DERIVED_TOL, ev)
    if variant == 1:
        plural, single = co.sector["site"]
        ans = _round(Fraction(co.annual("rev", seg, y), 10 * co.sites[seg][i]), 2)
        text = (f"What was the average annual revenue per {single} of the {seg} segment in {y}, based on the "
                f"number of {plural} it operated at the end of that year? Answer in {co.cur} million, "
                f"rounded to two decimals.")
        ev = (co.facts[("sites", seg)], co.atab["header"], co.atab[seg])
        return ans and _Q(text, ans, "number", f"{co.cur} million", _DERIVED_TOL, ev)
    (seg, y), (amount, sentence) = rng.choice(sorted(co.charges.items()))
    text = (f"Excluding the one-off charge disclosed in the report, what was the operating income of the "
            f"{seg} segment in {y}?")
    return _money(co, text, co.annual("oi", seg, y) + amount, (sentence, co.atab["header"], co.atab[seg]),
                  _DERIVED_TOL)


_BUILDERS = {"extraction": _q_extraction, "sum": _q_sum, "growth": _q_growth, "comparison": _q_comparison,
             "cross_paragraph": _q_cross, "ratio": _q_ratio}


def _make_question(rng: random.Random, co: _Company, qtype: str) -> tuple[str, _Q]:
    """(question type, question); builders return None on a rounding tie or near-tied ranking."""
    for _ in range(200):
        q = _BUILDERS[qtype](rng, co)
        if q:
            return qtype, q
    return "extraction", _q_extraction(rng, co)  # not reached in practice


# ---- narrative -----------------------------------------------------------------------------

@cache
def _parsed_templates() -> dict[str, list[tuple[str, tuple[str, ...], tuple[str, ...]]]]:
    """cat -> [(template, random text slots, random number slots)]."""
    out = {}
    for cat, tpls in T.TEMPLATES.items():
        out[cat] = []
        for tpl in tpls:
            names = [f for _, f, _, _ in string.Formatter().parse(tpl) if f]
            out[cat].append((tpl, tuple(n for n in names if n in T.POOLS or n in ("seg", "topic2", "mkt2", "person")),
                             tuple(n for n in names if n in T.NUMS)))
    return out


class _Filler:
    """Seeded narrative: paragraphs of 3-6 sentence templates. Numbers are memoised per
    (template, text slots) so a statement repeated in one document repeats its numbers."""

    def __init__(self, rng: random.Random, co: _Company):
        self.rng, self.co, self.seen, self.memo, self.titles = rng, co, set(), {}, {}
        self.fixed = {"co": co.short, "cur": co.cur, "Y": co.Y, "Y1": co.Y + 1, "Y0": co.years[0],
                      "founded": rng.randint(1890, 1995), "hq": rng.choice(T.CITIES),
                      "countries": rng.randint(25, 120), "agm": rng.choice(("April", "May", "June"))}

    def _slot(self, name: str, vals: dict, seg: str | None) -> str:
        r = self.rng
        if name == "seg":
            return seg or r.choice(self.co.segs)
        if name == "person":
            return f"{r.choice(T.FIRST)} {r.choice(T.LAST)}"
        if name in ("topic2", "mkt2"):
            pool = T.POOLS[name[:-1]]
            i = (pool.index(vals[name[:-1]]) + r.randint(1, len(pool) - 1)) % len(pool)
            return pool[i]
        return r.choice(T.POOLS[name])

    def paragraph(self, cat: str, seg: str | None = None) -> tuple[list[str], int]:
        """Sentences of a new paragraph (never an exact repeat in this document) and its words."""
        r, tpls = self.rng, _parsed_templates()
        for _ in range(20):
            k = r.randint(3, 6)
            own = r.sample(tpls[cat], min(len(tpls[cat]), r.randint(1, k - 1)))
            picked = own + r.sample(tpls["gen"], k - len(own))
            r.shuffle(picked)
            sents = []
            for tpl, text_slots, num_slots in picked:
                vals = {}
                for n in text_slots:
                    vals[n] = self._slot(n, vals, seg)
                key = (tpl, *vals.values())
                nums = self.memo.get(key)
                if nums is None:
                    nums = self.memo[key] = {n: T.NUMS[n](r) for n in num_slots}
                sents.append(tpl.format(**self.fixed, **vals, **nums))
            sents[0] = sents[0][0].upper() + sents[0][1:]
            text = " ".join(sents)
            if text not in self.seen:
                self.seen.add(text)
                return sents, len(text.split())
        raise AssertionError("filler could not produce a new paragraph")

    def subtitle(self, cat: str) -> str:
        pool = T.SUBTITLES[cat]
        i = self.titles[cat] = self.titles.get(cat, -1) + 1
        base = pool[i % len(pool)]
        return base if i < len(pool) else f"{base}: {T.POOLS['mkt'][(i // len(pool) * 7) % len(T.POOLS['mkt'])]}"


def _section(fill: _Filler, heading: str, cat: str, budget: int, head=(), floats=(), tail=(), facts=(),
             seg: str | None = None, split: bool = True) -> list[str]:
    """One `## ` section: head units, ~budget words of filler (in `### ` subsections when long)
    with `floats` (tables) spread through it in order, then tail units. Each fact sentence is
    placed inside a random narrative paragraph of the section."""
    rng, paras, words = fill.rng, [], 0
    while words < budget:
        sents, w = fill.paragraph(cat, seg)
        paras.append(sents)
        words += w
    if split and cat in T.SUBTITLES and len(paras) >= 6:
        chunked, i = [], 0
        while i < len(paras):
            k = rng.randint(4, 10)
            chunked += [f"### {fill.subtitle(cat)}"] + paras[i:i + k]
            i += k
        paras = chunked
    spots = sorted(rng.randint(0, len(paras)) for _ in floats)
    body = []
    for i, p in enumerate(paras + [None]):
        body += [f for f, at in zip(floats, spots) if at == i]
        if p is not None:
            body.append(p)
    units = [f"## {heading}"] + [list(h) for h in head] + body + list(tail)
    lists = [u for u in units if isinstance(u, list)]
    for fact in facts:
        if lists:
            p = rng.choice(lists)
            p.insert(rng.randint(1, len(p)), fact)
        else:
            units.append([fact])
    return [" ".join(u) if isinstance(u, list) else u for u in units]


def _build_units(rng: random.Random, co: _Company, level: int) -> list[str]:
    """All paragraphs/blocks of the report, in order, sized to about LEVELS[level] pages."""
    fill, Y, cur = _Filler(rng, co), co.Y, co.cur
    R, OI = co.inc[Y]["Revenue"], co.inc[Y]["Operating income"]
    R0 = co.inc[Y - 1]["Revenue"]
    ceo = f"{rng.choice(T.FIRST)} {rng.choice(T.LAST)}"
    grew = "rose" if R >= R0 else "fell"
    letter = [f"Dear shareholders, {Y} tested our organisation in many ways.",
              (f"Group revenue {grew} to {cur} {_m(R)} million from {cur} {_m(R0)} million in {Y - 1}, "
               f"and operating income came to {cur} {_m(OI)} million.")]
    highlights = "\n".join([f"- Group revenue: {cur} {_m(R)} million ({Y - 1}: {cur} {_m(R0)} million)",
                            f"- Operating income: {cur} {_m(OI)} million",
                            f"- Net profit: {cur} {_m(co.inc[Y]['Net profit'])} million",
                            f"- Proposed dividend per share: {cur} {rng.uniform(0.2, 3):.2f}"])
    lo, hi = sorted((round(R * rng.uniform(0.96, 1.02)), round(R * rng.uniform(1.03, 1.1))))
    outlook = [(f"For {Y + 1}, the board expects group revenue of between {cur} {_m(lo)} million and "
                f"{cur} {_m(hi)} million, assuming stable exchange rates.")]
    intro = {s: [f"The {s} segment accounted for {100 * co.annual('rev', s, Y) / R:.0f}% of group revenue in {Y}.",
                 (f"Its revenue was {cur} {_m(co.annual('rev', s, Y))} million and its operating income "
                  f"{cur} {_m(co.annual('oi', s, Y))} million.")] for s in co.segs}
    charges = " ".join(sentence for _, sentence in sorted(co.charges.values()))
    exceptional = [(f"### Note: Exceptional items\n\nExceptional items are included in operating income and "
                    f"are disclosed separately to aid comparison. {charges}")]
    fs_tail = ["### Consolidated income statement", co.itab["block"], "### Segment information", co.atab["block"]]
    f = fill.fixed
    about = [(f"{co.name} was founded in {f['founded']} and serves customers in more than {f['countries']} "
              f"countries from its headquarters in {f['hq']}.")]
    # (heading, filler category, share of the filler budget, _section keywords)
    plan = [("Letter to shareholders", "letter", 3,
             {"head": [letter], "facts": [co.facts["mid"]], "tail": [f"{ceo}, Chief Executive Officer"]}),
            ("Highlights", "gen", 0, {"tail": [highlights]}),
            ("Business overview", "overview", 8, {"head": [about], "facts": [co.facts["heads"]]})]
    plan += [(f"Segment review: {s}", "segment", 36 / len(co.segs),
              {"head": [intro[s]], "floats": [co.qtab[(s, y)]["block"] for y in co.years],
               "facts": [co.facts[("sites", s)]], "seg": s}) for s in co.segs]
    plan += [("Risk factors", "risk", 12, {}), ("Outlook", "outlook", 4, {"head": [outlook]}),
             ("Sustainability", "sust", 10, {}), ("Governance", "gov", 10, {}),
             ("Financial statements", "notes", 2, {"tail": fs_tail, "split": False}),
             ("Notes to the financial statements", "notes", 15, {"floats": exceptional})]
    core = sum(len(" ".join(map(str, kw.get("head", []) + kw.get("tail", []) + kw.get("floats", []))).split())
               for *_, kw in plan) + 60 * len(plan)
    budget = max(0, LEVELS[level] * 500 - core)
    total_w = sum(w for _, _, w, _ in plan)
    units = []
    for heading, cat, w, kw in plan:
        units += _section(fill, heading, cat, round(budget * w / total_w), **kw)
    k = 0
    for i, u in enumerate(units):  # number the notes in order
        if u.startswith("### Note: "):
            k += 1
            units[i] = f"### Note {k}: " + u[len("### Note: "):]
    return units


def _paginate(rng: random.Random, title: str, units: list[str]) -> tuple[str, int]:
    """Join units with blank lines, inserting `[Page N]` before a unit whose midpoint would
    overflow the page's word budget (so pages average the budget)."""
    out, page, used = [f"# {title}", "[Page 1]"], 1, 0
    target = rng.randint(*WORDS_PER_PAGE)
    for u in units:
        w = len(u.split())
        if used and used + w / 2 > target and not out[-1].startswith("#"):
            page += 1
            out.append(f"[Page {page}]")
            used, target = 0, rng.randint(*WORDS_PER_PAGE)
        out.append(u)
        used += w
    return "\n\n".join(out) + "\n", page


# ---- public API ----------------------------------------------------------------------------

def make_report_task(seed: int, level: int) -> ReportTask:
    """Generate one report and one question; the same (seed, level) gives the same task.

    Args:
        seed: any int; picks the company, figures, question type and wording.
        level: 1..4, document length (LEVELS: about 10, 30, 100, 250 pages of ~500 words).

    Returns:
        A ReportTask whose evidence strings all occur verbatim in its document.

    Raises:
        ConfigError: level is not one of LEVELS, or seed is not an int.
    """
    if isinstance(level, bool) or level not in LEVELS:
        raise ConfigError(f"level must be one of {sorted(LEVELS)} (pages: {LEVELS}); got {level!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an int; got {seed!r}")
    digest = hashlib.sha256(f"financial_report:{seed}:{level}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    co = _make_company(rng, level)
    qtype, q = _make_question(rng, co, rng.choice(QUESTION_TYPES))
    title = f"{co.name} - Annual Report {co.Y}"
    document, pages = _paginate(rng, title, _build_units(rng, co, level))
    assert all(e in document for e in q.evidence), "evidence must be verbatim in the document"
    return ReportTask(document=document, title=title, question=q.question, answer=q.answer, answer_kind=q.kind,
                      unit=q.unit, tolerance=q.tolerance, question_type=qtype, evidence=q.evidence, pages=pages)
