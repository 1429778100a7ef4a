"""Time expressions in questions (caderno.memory.engines.when), English and Portuguese."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from caderno.memory.engines.when import find_window

NOW = datetime(2026, 3, 24, 21, 30, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("question", "first", "last", "rest"),
    [
        (
            "O que eu resolvi há duas semanas sobre o imposto?",
            date(2026, 3, 7),
            date(2026, 3, 13),
            "O que eu resolvi sobre o imposto?",
        ),
        (
            "what did I say 3 days ago about the car",
            date(2026, 3, 20),
            date(2026, 3, 22),
            "what did I say about the car",
        ),
        ("O seguro que eu falei na semana passada", date(2026, 3, 16), date(2026, 3, 22), "O seguro que eu falei"),
        ("what did we decide last week?", date(2026, 3, 16), date(2026, 3, 22), "what did we decide ?"),
        ("ontem falamos de quê?", date(2026, 3, 23), date(2026, 3, 23), "falamos de quê?"),
        ("what did we say the day before yesterday", date(2026, 3, 22), date(2026, 3, 22), "what did we say the"),
        ("O que eu agendei no dia 24 de março?", date(2026, 3, 24), date(2026, 3, 24), "O que eu agendei no ?"),
        ("what happened on the 10th of March", date(2026, 3, 10), date(2026, 3, 10), "what happened on the"),
        ("what did I say on March 10?", date(2026, 3, 10), date(2026, 3, 10), "what did I say on ?"),
        ("e no dia 10 de maio?", date(2025, 5, 10), date(2025, 5, 10), "e no ?"),  # May 10 has not come yet this year
        ("o que falamos em 2026-01-05?", date(2026, 1, 5), date(2026, 1, 5), "o que falamos em ?"),
        ("e em 14/02?", date(2026, 2, 14), date(2026, 2, 14), "e em ?"),
        ("what did we decide last month", date(2026, 2, 1), date(2026, 2, 28), "what did we decide"),
        ("o que combinamos no mês passado", date(2026, 2, 1), date(2026, 2, 28), "o que combinamos"),
        ("in March we talked about what?", date(2026, 3, 1), date(2026, 3, 31), "we talked about what?"),
        ("o que decidimos no ano passado", date(2025, 1, 1), date(2025, 12, 31), "o que decidimos"),
    ],
)
def test_windows(question: str, first: date, last: date, rest: str) -> None:
    window = find_window(question, NOW)
    assert window is not None
    assert (window.first, window.last, window.rest) == (first, last, rest)


@pytest.mark.parametrize(
    "question",
    [
        "Quanto custa o seguro?",
        "Que visita eu marquei para o dia 15?",  # a day without its month is not a time we can place
        "What is the set of rules?",  # "set", "out", "mar", "ago" alone are words, not months
        "O mar estava bom",
        "Que tipo de site eu recuso hoje em dia?",  # "nowadays"
        "De quanto foi a restituição do ano passado?",  # which refund, not when it was said
        "Which one did I take out?",
        "",
    ],
)
def test_no_window(question: str) -> None:
    assert find_window(question, NOW) is None


def test_an_impossible_date_is_no_window() -> None:
    assert find_window("o que houve em 31/02?", NOW) is None
    assert find_window("what about 2026-13-40", NOW) is None


def test_window_holds_days_inclusive() -> None:
    window = find_window("ontem", NOW)
    assert window is not None
    assert window.holds(datetime(2026, 3, 23, 0, 0, tzinfo=UTC)) and window.holds(
        datetime(2026, 3, 23, 23, 59, tzinfo=UTC)
    )
    assert not window.holds(datetime(2026, 3, 24, 0, 0, tzinfo=UTC)) and not window.holds(None)


@pytest.mark.parametrize(
    ("question", "now", "first", "last"),
    [
        # An explicit year is kept, whether that month is past, to come or years ago.
        (
            "What did Caroline do in December 2023?",
            datetime(2023, 6, 1, tzinfo=UTC),
            date(2023, 12, 1),
            date(2023, 12, 31),
        ),
        (
            "What did Caroline do in December 2023?",
            datetime(2023, 12, 20, tzinfo=UTC),
            date(2023, 12, 1),
            date(2023, 12, 31),
        ),
        (
            "What did Caroline do in December 2023?",
            datetime(2025, 3, 1, tzinfo=UTC),
            date(2023, 12, 1),
            date(2023, 12, 31),
        ),
        ("o que fizemos em março de 2024?", NOW, date(2024, 3, 1), date(2024, 3, 31)),
        ("What happened on 8 May 2023?", NOW, date(2023, 5, 8), date(2023, 5, 8)),
        ("What happened on May 8, 2023?", NOW, date(2023, 5, 8), date(2023, 5, 8)),
        ("o que houve no dia 8 de maio de 2023?", NOW, date(2023, 5, 8), date(2023, 5, 8)),
    ],
)
def test_an_explicit_year_is_the_year_of_the_window(question: str, now: datetime, first: date, last: date) -> None:
    window = find_window(question, now)
    assert window is not None
    assert (window.first, window.last) == (first, last)
    assert "2023" not in window.rest and "2024" not in window.rest
