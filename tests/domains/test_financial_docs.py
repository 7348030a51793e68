"""Tests for the annual-report generator and scorer (domains/long_docs/financial.py). No model.

The answer checks do not trust the generator: a small line parser reads the markdown
tables and the narrative fact sentences back out of the text, and `_recompute` derives the
answer from the question wording alone. It runs twice per task: on the whole document and
on the evidence strings only, so the evidence must really hold every fact needed.
"""

import random
import re
import time
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import pytest

from domains.long_docs import financial as F
from domains.long_docs import report_scoring as S
from core.errors import ConfigError

SEEDS = range(60)

_QCAP = re.compile(r"^Table \d+: (.+) - quarterly results, fiscal (\d{4})$")
_HEADS = re.compile(r"At 31 December (\d{4}) the group employed ([\d,]+) people \(31 December (\d{4}): ([\d,]+)\)")
_SITES = re.compile(r"At the end of (\d{4}), the (.+?) segment operated (\d+) [a-z ]+ \((\d{4}): (\d+)\)\.")
_CHARGE = re.compile(r"Operating income of the (.+?) segment in (\d{4}) includes a one-off [a-z-]+ charge "
                     r"of [A-Z]{3} ([\d,]+\.\d) million")


def _num(cell: str) -> Fraction:
    return Fraction(cell.replace(",", ""))


def _facts(text: str) -> dict:
    """Tables and fact sentences found in text (a whole document or joined evidence lines)."""
    f = {"q": {}, "annual": {}, "inc": {}, "heads": {}, "sites": {}, "charge": {}}
    ctx, cols = None, []
    for line in text.splitlines():
        if m := _QCAP.match(line):
            ctx = ("q", m.group(1), int(m.group(2)))  # columns come from a "| Quarter |" header
        elif line.startswith("| Quarter |") and ctx and ctx[0] == "q":
            cols = [c.strip() for c in line.strip().strip("|").split("|")][1:]
        elif line.startswith("| Segment |"):
            ctx, cols = ("annual",), [c.strip() for c in line.strip("|").split("|")][1:]
        elif line.startswith("| Line item |"):
            ctx, cols = ("inc",), [int(c) for c in line.strip("|").split("|")[1:]]
        elif line.startswith("|") and not line.startswith("|---") and ctx:
            label, *cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if ctx[0] == "q":
                key = "rev" if label.startswith("Revenue") else "oi" if label.startswith("Operating") else "vol"
                by_col = dict(zip(cols, cells))  # no matching header -> a short list -> failure
                f["q"][(ctx[1], ctx[2], key)] = [_num(by_col[f"Q{i} {ctx[2]}"]) for i in (1, 2, 3, 4)
                                                 if f"Q{i} {ctx[2]}" in by_col]
            elif ctx[0] == "annual":
                for col, c in zip(cols, cells):
                    metric, year = col.rsplit(" ", 1)
                    f["annual"][(label, "rev" if metric == "Revenue" else "oi", int(year))] = _num(c)
            else:
                for year, c in zip(cols, cells):
                    f["inc"][(label, year)] = _num(c)
    for m in _HEADS.finditer(text):
        f["heads"][int(m.group(1))] = int(m.group(2).replace(",", ""))
        f["heads"][int(m.group(3))] = int(m.group(4).replace(",", ""))
    for m in _SITES.finditer(text):
        f["sites"][(m.group(2), int(m.group(1)))] = int(m.group(3))
        f["sites"][(m.group(2), int(m.group(4)))] = int(m.group(5))
    for m in _CHARGE.finditer(text):
        f["charge"][(m.group(1), int(m.group(2)))] = _num(m.group(3))
    return f


def _fmt(x: Fraction, decimals: int) -> str:
    q = Decimal(1).scaleb(-decimals)
    out = str((Decimal(x.numerator) / Decimal(x.denominator)).quantize(q, rounding=ROUND_HALF_UP))
    return out.lstrip("-") if Decimal(out) == 0 else out


def _recompute(task: F.ReportTask, f: dict, segs: list[str]) -> str:
    """The answer, derived from the question wording and the parsed facts."""
    q = task.question
    named = [s for s in segs if f"the {s} segment" in q]
    seg = named[0] if len(named) == 1 else None
    years = [int(y) for y in re.findall(r"\b(\d{4})\b", q)]
    quarter = re.search(r"\bQ([1-4]) (\d{4})", q)
    qi = int(quarter.group(1)) - 1 if quarter else None
    metric = "oi" if "operating income" in q else "rev"
    dec = 0 if "whole number" in q else 2 if "two decimals" in q else 1
    qt, an, inc = f["q"], f["annual"], f["inc"]
    if task.question_type == "extraction":
        key = "vol" if "whole number" in q else metric
        return _fmt(qt[(seg, years[0], key)][qi], dec)
    if task.question_type == "sum":
        if "all " in q and " segments" in q:
            assert f"all {len(segs)} segments" in q
            return _fmt(sum(qt[(s, years[0], metric)][qi] for s in segs), dec)
        if "half of" in q:
            half = 0 if "first half" in q else 2
            return _fmt(sum(qt[(seg, years[0], metric)][half:half + 2]), dec)
        return _fmt(sum(qt[(seg, years[0], "vol")]), dec)
    if task.question_type == "growth":
        y0, y1 = years
        a, b = ((inc[("Revenue", y0)], inc[("Revenue", y1)]) if "group revenue" in q
                else (an[(seg, "rev", y0)], an[(seg, "rev", y1)]))
        return _fmt((b - a) * 100 / a, 1)
    if task.question_type == "ratio":
        if "of the group" in q:
            return _fmt(inc[("Operating income", years[0])] * 100 / inc[("Revenue", years[0])], 1)
        if quarter:
            return _fmt(qt[(seg, years[0], "oi")][qi] * 100 / qt[(seg, years[0], "rev")][qi], 1)
        return _fmt(an[(seg, "oi", years[0])] * 100 / an[(seg, "rev", years[0])], 1)
    if task.question_type == "comparison":
        y = years[0]
        if quarter:
            vals = {s: qt[(s, y, "rev")][qi] for s in segs}
        elif "operating margin" in q:
            vals = {s: an[(s, "oi", y)] / an[(s, "rev", y)] for s in segs}
        else:
            vals = {s: an[(s, metric, y)] for s in segs}
        ranked = sorted(vals.values(), reverse="highest" in q)
        assert ranked[0] != ranked[1], f"tie in comparison: {q}"
        return max(vals, key=vals.get) if "highest" in q else min(vals, key=vals.get)
    assert task.question_type == "cross_paragraph"
    y = years[0]
    if "per employee" in q:
        return _fmt(inc[("Revenue", y)] * 1000 / f["heads"][y], dec)
    if "Excluding the one-off charge" in q:
        return _fmt(an[(seg, "oi", y)] + f["charge"][(seg, y)], dec)
    return _fmt(an[(seg, "rev", y)] / f["sites"][(seg, y)], dec)


def _segments(doc: str) -> list[str]:
    return re.findall(r"^## Segment review: (.+)$", doc, re.MULTILINE)


@pytest.fixture(scope="module")
def tasks():
    """60 level-1 tasks plus a few longer ones."""
    out = [F.make_report_task(s, 1) for s in SEEDS]
    return out + [F.make_report_task(s, 2) for s in range(8)] + [F.make_report_task(s, 3) for s in range(2)]


def test_deterministic_and_seed_dependent():
    for level in (1, 3):
        assert F.make_report_task(5, level) == F.make_report_task(5, level)
    docs = {F.make_report_task(s, 1).document for s in range(10)}
    titles = {F.make_report_task(s, 1).title for s in range(10)}
    assert len(docs) == 10 and len(titles) >= 8
    state = random.getstate()
    random.seed(1)
    a = F.make_report_task(9, 2)
    random.seed(2)
    assert F.make_report_task(9, 2) == a  # the global random module plays no part
    random.setstate(state)


def test_bad_level_or_seed_raises_config_error():
    for level in (0, 5, "2", True, None):
        with pytest.raises(ConfigError, match="level must be one of"):
            F.make_report_task(1, level)
    with pytest.raises(ConfigError, match="seed must be an int"):
        F.make_report_task("1", 1)


def test_document_format(tasks):
    for t in tasks:
        doc = t.document
        assert doc.startswith(f"# {t.title}\n\n[Page 1]\n\n")
        assert re.fullmatch(r".+ - Annual Report \d{4}", t.title)
        markers = [int(n) for n in re.findall(r"^\[Page (\d+)\]$", doc, re.MULTILINE)]
        assert markers == list(range(1, t.pages + 1))
        headings = re.findall(r"^## (.+)$", doc, re.MULTILINE)
        for h in ("Letter to shareholders", "Highlights", "Business overview", "Risk factors", "Outlook",
                  "Governance", "Financial statements", "Notes to the financial statements"):
            assert h in headings
        segs = _segments(doc)
        assert 3 <= len(segs) <= 6 and len(set(segs)) == len(segs)
        assert not any(a != b and a.lower() in b.lower() for a in segs for b in segs)
        paras = [p for p in doc.split("\n\n") if len(p.split()) > 25 and not p.startswith("|")]
        assert len(paras) == len(set(paras)), "narrative paragraphs repeat"
        assert t.question_type in F.QUESTION_TYPES and t.answer_kind in ("number", "percent", "name")
        assert "Answer " in t.question


def test_figures_are_consistent(tasks):
    for t in tasks:
        f, segs = _facts(t.document), _segments(t.document)
        years = sorted({y for (_, _, y) in f["annual"]})
        assert len(years) in (2, 3) and years[-2:] == sorted(f["heads"])
        assert {(s, y) for s in segs for y in years} == {(s, y) for (s, y, _) in f["q"]}
        for y in years:
            for m, label in (("rev", "Revenue"), ("oi", "Operating income")):
                for s in segs:
                    assert sum(f["q"][(s, y, m)]) == f["annual"][(s, m, y)]
                assert sum(f["annual"][(s, m, y)] for s in segs) == f["annual"][("Group total", m, y)]
                assert f["annual"][("Group total", m, y)] == f["inc"][(label, y)]
            i = {k: v for (k, yy), v in f["inc"].items() if yy == y}
            assert i["Revenue"] - i["Cost of sales"] == i["Gross profit"]
            assert i["Gross profit"] - i["Operating expenses"] == i["Operating income"]
            assert i["Operating income"] - i["Net finance costs"] == i["Profit before tax"]
            assert i["Profit before tax"] - i["Income tax"] == i["Net profit"]
        assert {s for s, _ in f["sites"]} == set(segs) and len(f["charge"]) == 2


def test_answers_recomputed_from_document_and_from_evidence(tasks):
    for t in tasks:
        segs = _segments(t.document)
        for e in t.evidence:
            assert e in t.document and len(e) <= 300
        assert _recompute(t, _facts(t.document), segs) == t.answer, t.question
        assert _recompute(t, _facts("\n".join(t.evidence)), segs) == t.answer, ("evidence", t.question)


def test_every_question_type_appears_and_comparisons_have_no_near_tie(tasks):
    level1 = tasks[:len(SEEDS)]
    assert {t.question_type for t in level1} == set(F.QUESTION_TYPES)
    for t in tasks:
        if t.question_type == "comparison":
            assert t.answer_kind == "name" and t.answer in _segments(t.document)


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_page_counts_and_words_per_page(level):
    seeds = (0, 1) if level == 4 else (0, 1, 2)
    for s in seeds:
        start = time.perf_counter()
        t = F.make_report_task(s, level)
        elapsed = time.perf_counter() - start
        words = len(t.document.split())
        assert abs(t.pages - F.LEVELS[level]) <= max(1, 0.1 * F.LEVELS[level]), (level, t.pages)
        assert 420 <= words / t.pages <= 580
        if level == 4:
            assert elapsed < 1.5, f"level 4 took {elapsed:.2f} s"


def _formats(t: F.ReportTask) -> list[str]:
    a, unit = t.answer, t.unit
    if t.answer_kind == "name":
        return [a, a.upper(), f"The {a.lower()} segment.", f"  {a}  ", f"**{a}**"]
    x = Decimal(a)
    dec = len(a.partition(".")[2])
    comma = f"{x:,.{dec}f}"
    out = [a, comma, f"{a} {unit}", f"The answer is {a}.", f"Q1 2024: {a}", a.replace("-", "\u2212")]
    if unit.endswith("million"):
        out.append(f"{unit.split()[0]} {comma} million")
    if t.answer_kind == "percent":
        out += [f"{a}%", f"{a} %"]
    return out


def test_scoring_accepts_reference_formats(tasks):
    for t in tasks:
        for text in _formats(t):
            ok, info = S.score_report_answer(t, text)
            assert ok, (t.answer, text, info)
        assert set(info) == {"parsed", "expected", "abs_error", "reason"}


def test_scoring_rejects_wrong_answers(tasks):
    for t in tasks:
        if t.answer_kind == "name":
            other = next(s for s in _segments(t.document) if s != t.answer)
            assert not S.score_report_answer(t, other)[0]
            assert not S.score_report_answer(t, f"{t.answer} and {other}")[0]
            continue
        ref = float(t.answer)
        wrong = ref * 1.1 + (1 if abs(ref) < 10 else 0)
        ok, info = S.score_report_answer(t, f"{wrong:.2f}")
        assert not ok and info["abs_error"] > 0
        step = 10.0 ** -len(t.answer.partition(".")[2])
        if abs(ref) * t.tolerance < step:  # a neighbouring rounded value is wrong
            assert not S.score_report_answer(t, repr(ref + step))[0]


def test_scoring_tolerance_rules():
    t = F.ReportTask("doc", "T", "q?", "12.3", "percent", "%", 0.001, "ratio", (), 1)
    assert S.score_report_answer(t, "12.34")[0] and S.score_report_answer(t, "12.25")[0]
    assert not S.score_report_answer(t, "12.4")[0] and not S.score_report_answer(t, "12.2")[0]
    assert S.score_report_answer(t, "from 11.9 to 12.3")[0]  # the last number counts
    big = F.ReportTask("doc", "T", "q?", "5000.0", "number", "EUR million", 0.001, "cross_paragraph", (), 1)
    assert S.score_report_answer(big, "5,004.9")[0] and not S.score_report_answer(big, "5,005.2")[0]
    neg = F.ReportTask("doc", "T", "q?", "-3.2", "percent", "%", 0.0, "growth", (), 1)
    for text in ("-3.2", "\u22123.2%", "\u2013 3.2".replace(" ", ""), "a fall of -3.2 percent"):
        assert S.score_report_answer(neg, text)[0], text
    assert not S.score_report_answer(neg, "3.2")[0]
    assert not S.score_report_answer(neg, "2024-3.2")[0]  # hyphen glued to a number is not a sign
    assert S.parse_number("EUR 1,234.5 million") == 1234.5 and S.parse_number("none") is None


def test_scoring_never_raises_on_garbage(tasks):
    rng = random.Random(0)
    samples = [None, "", " ", "\x00" * 50, "12.3\x00", "a" * 1_000_000, "9" * 999, "1" * 5000, "nan", "inf",
               "1e400", "\ud800", "٣٫٢", "１２.３", "--3", "...", ",,,", "|| 1 | 2 ||"]
    samples += ["".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randrange(1, 80))) for _ in range(300)]
    for t in (tasks[0], next(t for t in tasks if t.answer_kind == "name")):
        for text in samples:
            ok, info = S.score_report_answer(t, text)
            assert isinstance(ok, bool) and info["expected"] == t.answer
        assert not S.score_report_answer(t, None)[0]
        assert not S.score_report_answer(t, t.answer + "\x00")[0]
        assert not S.score_report_answer(t, " " * 2000 + t.answer)[0]
