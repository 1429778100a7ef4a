"""When a question points at a time: "há duas semanas", "last week", "no dia 10 de março".

Recall uses the window to favour what was said then (``recall.WHEN``). The
parser knows the expressions people use in English and Portuguese to place a
conversation in time, relative to the moment of the question; anything else
is no window (the question is searched as it is). Days are UTC calendar days.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from ...core.text import fold

__all__ = ["Window", "find_window"]

#: Slack around "N days/weeks/months ago": people round. A week ago may be
#: five days or nine.
SLACK_DAYS = {"day": 1, "week": 3, "month": 10}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30}

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "um": 1,
    "uma": 1,
    "dois": 2,
    "duas": 2,
    "tres": 3,
    "quatro": 4,
    "cinco": 5,
    "seis": 6,
    "sete": 7,
    "oito": 8,
    "nove": 9,
    "dez": 10,
}
_UNITS = {
    "day": "day",
    "days": "day",
    "dia": "day",
    "dias": "day",
    "week": "week",
    "weeks": "week",
    "semana": "week",
    "semanas": "week",
    "month": "month",
    "months": "month",
    "mes": "month",
    "meses": "month",
}
_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan", "janeiro"),
            ("february", "feb", "fevereiro", "fev"),
            ("march", "marco"),
            ("april", "apr", "abril", "abr"),
            ("may", "maio", "mai"),
            ("june", "jun", "junho"),
            ("july", "jul", "julho"),
            ("august", "aug", "agosto"),
            ("september", "sep", "sept", "setembro"),
            ("october", "oct", "outubro"),
            ("november", "nov", "novembro"),
            ("december", "dec", "dezembro"),
        ]
    )
    for name in names
}  # no "mar", "set", "out", "ago", "dez": words of their own (sea, set, out, ago, ten)
_NUM = r"(\d{1,2}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_UNIT = "(" + "|".join(sorted(_UNITS, key=len, reverse=True)) + ")"
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + ")"


@dataclass(frozen=True, slots=True)
class Window:
    """Days ``first`` to ``last`` (inclusive), and the question without the words that said so."""

    first: date
    last: date
    rest: str

    def holds(self, when: datetime | None) -> bool:
        return when is not None and self.first <= when.date() <= self.last


def _ago(n: int, unit: str, today: date) -> tuple[date, date]:
    center = today - timedelta(days=n * _UNIT_DAYS[unit])
    slack = timedelta(days=SLACK_DAYS[unit])
    return center - slack, min(today, center + slack)


def _month_range(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    following = date(year + (month == 12), month % 12 + 1, 1)
    return first, following - timedelta(days=1)


def _exact(year: int, month: int, day: int) -> tuple[date, date] | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return d, d


def _latest(month: int, day: int | None, today: date) -> tuple[date, date] | None:
    """The most recent such month (or day) not after today."""
    year = today.year if (month, day or 1) <= (today.month, today.day) else today.year - 1
    return _month_range(year, month) if day is None else _exact(year, month, day)


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def _monday(today: date) -> date:
    return today - timedelta(days=today.weekday())


def _last_month(today: date) -> tuple[date, date]:
    end = today.replace(day=1) - timedelta(days=1)
    return end.replace(day=1), end


#: The days a match points at, seen from today; None when they do not exist.
Days = Callable[[re.Match[str], date], "tuple[date, date] | None"]

#: Tried in order; the first that matches and names real days wins.
_RULES: list[tuple[re.Pattern[str], Days]] = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m, today: _exact(int(m[1]), int(m[2]), int(m[3]))),
    # A year written out is the year, before the rules that pick the latest
    # such day or month ("in December 2023" asked in 2025 is not December 2024).
    (
        re.compile(rf"\b(?:dia )?(\d{{1,2}})(?:st|nd|rd|th)? (?:de |of )?{_MONTH},? (?:de )?(\d{{4}})\b"),
        lambda m, today: _exact(int(m[3]), _MONTHS[m[2]], int(m[1])),
    ),
    (
        re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b"),
        lambda m, today: _exact(int(m[3]), _MONTHS[m[1]], int(m[2])),
    ),
    (
        re.compile(rf"\b(?:(?:in|em|de) )?{_MONTH},? (?:de |of )?(\d{{4}})\b"),
        lambda m, today: _month_range(int(m[2]), _MONTHS[m[1]]) if 1 <= int(m[2]) <= 9999 else None,
    ),
    (
        re.compile(r"\b(\d{1,2})/(\d{1,2})(?:/(\d{4}))?\b"),  # day/month, as written in Portuguese
        lambda m, today: _exact(int(m[3]), int(m[2]), int(m[1])) if m[3] else _latest(int(m[2]), int(m[1]), today),
    ),
    (
        re.compile(rf"\b(?:dia )?(\d{{1,2}})(?:st|nd|rd|th)? (?:de |of )?{_MONTH}\b"),
        lambda m, today: _latest(_MONTHS[m[2]], int(m[1]), today),
    ),
    (
        re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?\b"),
        lambda m, today: _latest(_MONTHS[m[1]], int(m[2]), today),
    ),
    (re.compile(rf"\b(?:ha|faz) {_NUM} {_UNIT}\b"), lambda m, today: _ago(_number(m[1]), _UNITS[m[2]], today)),
    (re.compile(rf"\b{_NUM} {_UNIT} (?:ago|atras)\b"), lambda m, today: _ago(_number(m[1]), _UNITS[m[2]], today)),
    (re.compile(r"\b(?:day before yesterday|anteontem)\b"), lambda m, today: (today - timedelta(2),) * 2),
    (re.compile(r"\b(?:yesterday|ontem)\b"), lambda m, today: (today - timedelta(1),) * 2),
    # "hoje em dia" is "nowadays", not a day.
    (re.compile(r"\b(?:today|hoje(?! em dia))\b"), lambda m, today: (today, today)),
    (
        re.compile(r"\b(?:last week|na semana passada)\b"),
        lambda m, today: (_monday(today) - timedelta(7), _monday(today) - timedelta(1)),
    ),
    (
        re.compile(r"\b(?:this week|(?:n)?esta semana|(?:n)?essa semana)\b"),
        lambda m, today: (_monday(today), today),
    ),
    (re.compile(r"\b(?:last month|no mes passado)\b"), lambda m, today: _last_month(today)),
    (
        re.compile(r"\b(?:this month|(?:n)?este mes|(?:n)?esse mes)\b"),
        lambda m, today: (today.replace(day=1), today),
    ),
    (
        re.compile(r"\b(?:last year|no ano passado)\b"),
        lambda m, today: (date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)),
    ),
    (re.compile(rf"\b(?:in|em|de) {_MONTH}\b"), lambda m, today: _latest(_MONTHS[m[1]], None, today)),
]


def find_window(question: str, now: datetime) -> Window | None:
    """The days ``question`` points at, seen from ``now``; None when it names no time."""
    text, today = fold(question), now.date()
    for pattern, days in _RULES:
        match = pattern.search(text)
        if match is None:
            continue
        span = days(match, today)
        if span is None:
            continue
        first, last = span
        # Folding keeps Latin text's length, so the words around the match
        # are cut from the question as it was typed (the embedder sees case).
        source = question if len(question) == len(text) else text
        rest = source[: match.start()] + " " + source[match.end() :]
        return Window(first=first, last=last, rest=" ".join(rest.split()))
    return None
