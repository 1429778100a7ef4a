"""The schedule parser: every documented form, every refusal, DST, properties."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given
from hypothesis import strategies as st

from caderno.core.cron import MAX_ONESHOT_DELAY, MAX_SCHEDULE_CHARS, Schedule, next_run, parse_schedule
from caderno.core.errors import UsageError
from caderno.core.validate import MAX_ZONE_NAME, check_zone

SP = "America/Sao_Paulo"
NOW = datetime(2026, 6, 17, 12, 0, tzinfo=UTC)  # 09:00 in São Paulo (UTC-3, no DST since 2019)

RECURRING = [
    ("hourly", "0 * * * *"),
    ("every hour", "0 * * * *"),
    ("daily", "0 0 * * *"),
    ("every day", "0 0 * * *"),
    ("weekly", "0 0 * * 0"),
    ("monthly", "0 0 1 * *"),
    ("every minute", "* * * * *"),
    ("every 15 minutes", "*/15 * * * *"),
    ("every 1 minute", "* * * * *"),
    ("every 7 minutes", "*/7 * * * *"),  # does not divide 60: accepted as cron reads it
    ("every 2 hours", "0 */2 * * *"),
    ("every 1 hour", "0 * * * *"),
    ("daily at 9am", "0 9 * * *"),
    ("daily at 9 pm", "0 21 * * *"),
    ("daily at 12am", "0 0 * * *"),
    ("daily at 12pm", "0 12 * * *"),
    ("daily at 6:30pm", "30 18 * * *"),
    ("every day at noon", "0 12 * * *"),
    ("daily at midnight", "0 0 * * *"),
    ("weekdays at 18:30", "30 18 * * 1-5"),
    ("every weekday at 7", "0 7 * * 1-5"),
    ("weekends at 10", "0 10 * * 0,6"),
    ("every monday at 8", "0 8 * * 1"),
    ("mondays at 8", "0 8 * * 1"),
    ("on fridays at 17:45", "45 17 * * 5"),
    ("every mon and thu at 8", "0 8 * * 1,4"),
    ("every monday, wednesday and friday at 7am", "0 7 * * 1,3,5"),
    ("every sunday", "0 0 * * 0"),
    ("daily at 6am, 12pm", "0 6,12 * * *"),
    ("daily at 6am, 12pm and 6pm", "0 6,12,18 * * *"),
    ("0 9 * * 1-5", "0 9 * * 1-5"),
    ("*/5  *  * * *", "*/5 * * * *"),
    ("0 9 * * MON-FRI", "0 9 * * mon-fri"),
    ("@daily", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
    # Portuguese
    ("de hora em hora", "0 * * * *"),
    ("a cada hora", "0 * * * *"),
    ("diariamente", "0 0 * * *"),
    ("todo dia", "0 0 * * *"),
    ("semanalmente", "0 0 * * 0"),
    ("mensalmente", "0 0 1 * *"),
    ("a cada minuto", "* * * * *"),
    ("a cada 15 minutos", "*/15 * * * *"),
    ("de 15 em 15 minutos", "*/15 * * * *"),
    ("a cada 2 horas", "0 */2 * * *"),
    ("de 2 em 2 horas", "0 */2 * * *"),
    ("todo dia às 9h", "0 9 * * *"),
    ("todos os dias às 9", "0 9 * * *"),
    ("diariamente às 21h", "0 21 * * *"),
    ("todo dia às 8 da manhã", "0 8 * * *"),
    ("todo dia às 6 da tarde", "0 18 * * *"),
    ("todo dia ao meio-dia", "0 12 * * *"),
    ("todo dia à meia-noite", "0 0 * * *"),
    ("todo dia às 6h e 12h", "0 6,12 * * *"),
    ("dias úteis às 18h30", "30 18 * * 1-5"),
    ("de segunda a sexta às 18h30", "30 18 * * 1-5"),
    ("fins de semana às 10", "0 10 * * 0,6"),
    ("nos fins de semana às 10h", "0 10 * * 0,6"),
    ("toda segunda às 8", "0 8 * * 1"),
    ("toda segunda-feira às 8", "0 8 * * 1"),
    ("todas as segundas-feiras às 8", "0 8 * * 1"),
    ("toda segunda e quinta às 8", "0 8 * * 1,4"),
    ("todos os sábados às 10", "0 10 * * 6"),
    ("aos domingos às 9h30", "30 9 * * 0"),
    # case and accents
    ("Todo Dia ÀS 9H.", "0 9 * * *"),
    ("DIAS UTEIS AS 18H30", "30 18 * * 1-5"),
    ("  Daily   at  9AM ", "0 9 * * *"),
]


@pytest.mark.parametrize(("text", "cron"), RECURRING)
def test_recurring_forms(text: str, cron: str) -> None:
    s = parse_schedule(text, now=NOW, tz=SP)
    assert s == Schedule(cron_expr=cron, run_at=None, is_oneshot=False, original=text.strip())
    assert croniter.is_valid(s.cron_expr)


ONESHOTS = [
    ("in 2 hours", NOW + timedelta(hours=2)),
    ("in 1 hour", NOW + timedelta(hours=1)),
    ("in an hour", NOW + timedelta(hours=1)),
    ("in 45 minutes", NOW + timedelta(minutes=45)),
    ("after 90 minutes", NOW + timedelta(minutes=90)),
    ("in 3 days", NOW + timedelta(days=3)),
    ("tomorrow at 9", datetime(2026, 6, 18, 12, 0, tzinfo=UTC)),
    ("tomorrow at 6:30pm", datetime(2026, 6, 18, 21, 30, tzinfo=UTC)),
    ("today at 18:00", datetime(2026, 6, 17, 21, 0, tzinfo=UTC)),
    ("daqui a 2 horas", NOW + timedelta(hours=2)),
    ("daqui a uma hora", NOW + timedelta(hours=1)),
    ("em 90 minutos", NOW + timedelta(minutes=90)),
    ("dentro de 2 dias", NOW + timedelta(days=2)),
    ("amanhã às 8", datetime(2026, 6, 18, 11, 0, tzinfo=UTC)),
    ("Amanha as 8h30", datetime(2026, 6, 18, 11, 30, tzinfo=UTC)),
    ("hoje às 18h", datetime(2026, 6, 17, 21, 0, tzinfo=UTC)),
]


@pytest.mark.parametrize(("text", "when"), ONESHOTS)
def test_oneshot_forms_are_computed_from_the_given_now(text: str, when: datetime) -> None:
    s = parse_schedule(text, now=NOW, tz=SP)
    assert s.is_oneshot and s.cron_expr is None and s.original == text
    assert s.run_at == when and s.run_at.tzinfo is UTC
    # The same text a day later is a day later: no hidden clock.
    later = parse_schedule(text, now=NOW + timedelta(days=1), tz=SP)
    assert later.run_at == when + timedelta(days=1)


def test_tomorrow_is_tomorrow_in_the_given_zone() -> None:
    # 01:00 UTC on the 18th is still the 17th in São Paulo: "tomorrow" is the 18th there.
    late = datetime(2026, 6, 18, 1, 0, tzinfo=UTC)
    assert parse_schedule("amanhã às 8", now=late, tz=SP).run_at == datetime(2026, 6, 18, 11, 0, tzinfo=UTC)
    assert parse_schedule("amanhã às 8", now=late, tz="UTC").run_at == datetime(2026, 6, 19, 8, 0, tzinfo=UTC)


REFUSALS = [
    ("never", "no schedule form matches"),
    ("", "the schedule is empty"),
    ("every 0 minutes", "at least 1 minute"),
    ("a cada 0 minutos", "at least 1 minute"),
    ("every 0 hours", "at least 1 hour"),
    ("every 90 minutes", "90 minutes is not an interval cron can repeat"),
    ("every 24 hours", "24 hours is not an interval cron can repeat"),
    ("daily at 25:00", "hour 25 is out of range"),
    ("todo dia às 24h", "hour 24 is out of range"),
    ("daily at 9:75", "minute 75 is out of range"),
    ("daily at 13pm", "with pm the hour goes from 1 to 12"),
    ("daily at soon", "'soon' is not a time of day"),
    ("daily at 9:15 and 18:30", "several times must share their minutes"),
    ("61 * * * *", "'61 * * * *' is not a valid 5-field cron expression"),
    ("0 25 * * *", "is not a valid 5-field cron expression"),
    ("0 9 * * 1-5 2026", "no schedule form matches"),
    ("tomorrow", "say at what time"),
    ("amanhã", "say at what time"),
    ("tomorrow at 9 and 10", "a one-shot takes a single time"),
    ("today at 8", "08:00 today has already passed"),
    ("in 0 minutes", "the delay must be at least 1"),
    ("every blursday at 9", "no schedule form matches"),
    ("todo dia 5", "no schedule form matches"),  # the 5th of the month, not "at 5"
    # Before: numbers past timedelta's range were a 500 (OverflowError).
    ("in 99999999999999999999 minutes", "a one-shot runs within 5260320 minutes"),
    ("daqui a 999999999999 dias", "a one-shot runs within 3653 days"),
    ("em 87673 horas", "a one-shot runs within 87672 hours"),
    # Before: croniter accepts a day its month never has, then fails on the first run (a 500).
    ("0 0 31 2 *", "never fires"),
    ("0 0 30 2 *", "never fires"),
    ("0 9 31 4,6,9,11 *", "never fires"),
]


@pytest.mark.parametrize(("text", "reason"), REFUSALS)
def test_refusals_name_the_problem_and_list_the_forms(text: str, reason: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_schedule(text, now=NOW, tz=SP)
    message = str(info.value)
    assert reason in message
    assert f"cannot read the schedule {text!r}" in message
    assert "every 15 minutes" in message and "todo dia às 9h" in message


def test_naive_datetimes_and_unknown_zones_are_refused() -> None:
    with pytest.raises(UsageError, match="now must be an aware datetime"):
        parse_schedule("in 2 hours", now=datetime(2026, 6, 17, 12), tz=SP)
    with pytest.raises(UsageError, match="after must be an aware datetime"):
        next_run("0 9 * * *", after=datetime(2026, 6, 17, 12), tz=SP)
    with pytest.raises(UsageError, match="unknown time zone 'Mars/Olympus'"):
        parse_schedule("daily", now=NOW, tz="Mars/Olympus")
    with pytest.raises(UsageError, match="not a valid 5-field cron"):
        next_run("every day", after=NOW, tz=SP)


def test_the_furthest_one_shot_and_the_rarest_cron_are_accepted() -> None:
    furthest = parse_schedule(f"in {MAX_ONESHOT_DELAY.days} days", now=NOW, tz=SP)
    assert furthest.run_at == NOW + MAX_ONESHOT_DELAY
    leap = parse_schedule("0 0 29 2 *", now=NOW, tz=SP)  # every four years is rare, not never
    assert next_run(leap, after=NOW, tz=SP) == datetime(2028, 2, 29, 3, 0, tzinfo=UTC)


def test_long_texts_and_hostile_zones_are_refused_with_a_sentence() -> None:
    with pytest.raises(UsageError, match=f"the limit is {MAX_SCHEDULE_CHARS}"):
        parse_schedule("every " + "9" * 5000 + " minutes", now=NOW, tz=SP)  # int() refuses > 4,300 digits
    # A 10,000-character name was ENAMETOOLONG from the file system (an OSError: a 500).
    for zone, reason in [
        ("A" * 10_000, f"an IANA name has at most {MAX_ZONE_NAME}"),
        ("../../../../etc/passwd", "unknown time zone"),
        ("/etc/localtime", "unknown time zone"),
        ("America/Sao_Paulo\x00", "unknown time zone"),
        ("", "unknown time zone"),
    ]:
        with pytest.raises(UsageError, match=re.escape(reason)):
            parse_schedule("daily", now=NOW, tz=zone)
        with pytest.raises(UsageError, match=re.escape(reason)):
            next_run("0 9 * * *", after=NOW, tz=zone)
        with pytest.raises(UsageError, match=re.escape(reason)):
            check_zone(zone)


def test_a_stored_cron_that_never_fires_is_a_usage_error() -> None:
    # An old row (or a store written by hand) never reaches parse_schedule: next_run refuses too.
    with pytest.raises(UsageError, match="never fires"):
        next_run("0 0 31 2 *", after=NOW, tz=SP)


def test_schedule_is_either_cron_or_oneshot() -> None:
    with pytest.raises(UsageError):
        Schedule(cron_expr="0 9 * * *", run_at=NOW, is_oneshot=True, original="x")
    with pytest.raises(UsageError):
        Schedule(cron_expr=None, run_at=None, is_oneshot=False, original="x")
    with pytest.raises(UsageError, match="in UTC"):
        Schedule(cron_expr=None, run_at=NOW.astimezone(ZoneInfo(SP)), is_oneshot=True, original="x")


# -- next_run -----------------------------------------------------------------------


def test_next_run_in_the_schedules_zone() -> None:
    s = parse_schedule("dias úteis às 18h30", now=NOW, tz=SP)
    # Wednesday 2026-06-17, 09:00 in São Paulo -> 18:30 the same day (21:30 UTC).
    assert next_run(s, after=NOW, tz=SP) == datetime(2026, 6, 17, 21, 30, tzinfo=UTC)
    # Friday evening -> Monday.
    friday = datetime(2026, 6, 19, 22, 0, tzinfo=UTC)
    assert next_run(s, after=friday, tz=SP) == datetime(2026, 6, 22, 21, 30, tzinfo=UTC)
    # Strictly after: a run exactly at `after` is not the next one.
    at = datetime(2026, 6, 17, 21, 30, tzinfo=UTC)
    assert next_run(s, after=at, tz=SP) == datetime(2026, 6, 18, 21, 30, tzinfo=UTC)
    assert next_run("30 18 * * 1-5", after=NOW, tz=ZoneInfo(SP)) == datetime(2026, 6, 17, 21, 30, tzinfo=UTC)


def test_oneshot_next_run_is_its_moment_even_when_overdue() -> None:
    s = parse_schedule("in 2 hours", now=NOW, tz=SP)
    assert next_run(s, after=NOW, tz=SP) == NOW + timedelta(hours=2)
    assert next_run(s, after=NOW + timedelta(days=1), tz=SP) == NOW + timedelta(hours=2)


NY = "America/New_York"


def _runs(expr: str, start: datetime, n: int, tz: str) -> list[datetime]:
    out, t = [], start
    for _ in range(n):
        t = next_run(expr, after=t, tz=tz)
        out.append(t)
    return out


def test_daily_at_nine_keeps_local_time_across_both_2026_changes() -> None:
    # 2026-03-08: New York springs forward (UTC-5 -> UTC-4); 2026-11-01 falls back.
    spring = _runs("0 9 * * *", datetime(2026, 3, 7, 0, 0, tzinfo=UTC), 3, NY)
    assert [r.astimezone(ZoneInfo(NY)).hour for r in spring] == [9, 9, 9]
    assert [r.hour for r in spring] == [14, 13, 13]  # UTC hour moves with the offset
    autumn = _runs("0 9 * * *", datetime(2026, 10, 31, 0, 0, tzinfo=UTC), 3, NY)
    assert [r.hour for r in autumn] == [13, 14, 14]


def test_a_repeated_wall_time_fires_once_when_clocks_go_back() -> None:
    # 01:30 happens twice in New York on 2026-11-01; a daily job runs once.
    runs = _runs("30 1 * * *", datetime(2026, 10, 31, 12, 0, tzinfo=UTC), 3, NY)
    assert runs == [
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # 01:30 EDT, the first occurrence
        datetime(2026, 11, 2, 6, 30, tzinfo=UTC),  # 01:30 EST
        datetime(2026, 11, 3, 6, 30, tzinfo=UTC),
    ]
    # Asked from inside the repeated hour (01:10 EST, after the first 01:30): next day.
    inside = datetime(2026, 11, 1, 6, 10, tzinfo=UTC)
    assert next_run("30 1 * * *", after=inside, tz=NY) == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)


def test_a_missing_wall_time_fires_after_the_gap_when_clocks_go_forward() -> None:
    # 02:30 does not exist in New York on 2026-03-08: it runs at 03:30 EDT, once.
    runs = _runs("30 2 * * *", datetime(2026, 3, 7, 12, 0, tzinfo=UTC), 2, NY)
    assert runs == [datetime(2026, 3, 8, 7, 30, tzinfo=UTC), datetime(2026, 3, 9, 6, 30, tzinfo=UTC)]
    # Asked at 03:10 EDT, inside the shifted hour, it is still ahead.
    assert next_run("30 2 * * *", after=datetime(2026, 3, 8, 7, 10, tzinfo=UTC), tz=NY) == runs[0]


def test_intervals_follow_elapsed_time_across_the_changes() -> None:
    # Hourly through the autumn night: 01:00 EDT, 01:00 EST, 02:00 EST — one hour apart each.
    autumn = _runs("0 * * * *", datetime(2026, 11, 1, 4, 30, tzinfo=UTC), 4, NY)
    assert [b - a for a, b in zip(autumn, autumn[1:], strict=False)] == [timedelta(hours=1)] * 3
    # Every 30 minutes through the spring gap: 01:30 EST then 03:00 EDT, 30 real minutes apart.
    spring = _runs("*/30 * * * *", datetime(2026, 3, 8, 6, 10, tzinfo=UTC), 3, NY)
    assert spring == [
        datetime(2026, 3, 8, 6, 30, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
    ]


def test_sao_paulo_historical_dst() -> None:
    # Brazil last sprang forward on 2018-11-04 at 00:00 (00:00-00:59 did not exist).
    runs = _runs("0 9 * * *", datetime(2018, 11, 3, 0, 0, tzinfo=UTC), 2, SP)
    assert runs == [datetime(2018, 11, 3, 12, 0, tzinfo=UTC), datetime(2018, 11, 4, 11, 0, tzinfo=UTC)]
    assert next_run("30 0 * * *", after=datetime(2018, 11, 3, 12, 0, tzinfo=UTC), tz=SP) == datetime(
        2018, 11, 4, 3, 30, tzinfo=UTC
    )  # 00:30 did not exist: 01:30 -02, one hour later on the wall clock


# -- properties ------------------------------------------------------------------------

ZONES = st.sampled_from([SP, NY, "Europe/Lisbon", "Asia/Kolkata", "Australia/Lord_Howe", "UTC"])
MOMENTS = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC))


@given(n=st.integers(1, 59), tz=ZONES, after=MOMENTS)
def test_every_n_minutes_parses_to_valid_cron_that_runs_later(n: int, tz: str, after: datetime) -> None:
    s = parse_schedule(f"every {n} minutes", now=after, tz=tz)
    assert croniter.is_valid(s.cron_expr)
    assert parse_schedule(f"a cada {n} minutos", now=after, tz=tz) == Schedule(
        cron_expr=s.cron_expr, run_at=None, is_oneshot=False, original=f"a cada {n} minutos"
    )
    run = next_run(s, after=after, tz=tz)
    assert after < run <= after + timedelta(hours=2)  # at most an hour, plus a DST change


@given(hour=st.integers(0, 23), minute=st.integers(0, 59), tz=ZONES, after=MOMENTS)
def test_daily_at_h_m_runs_next_within_a_day_at_that_local_time(
    hour: int, minute: int, tz: str, after: datetime
) -> None:
    s = parse_schedule(f"daily at {hour}:{minute:02d}", now=after, tz=tz)
    assert s.cron_expr == f"{minute} {hour} * * *" and croniter.is_valid(s.cron_expr)
    assert parse_schedule(f"todo dia às {hour}h{minute:02d}", now=after, tz=tz).cron_expr == s.cron_expr
    run = next_run(s, after=after, tz=tz)
    assert after < run <= after + timedelta(days=1, hours=3)
    zone = ZoneInfo(tz)
    local = run.astimezone(zone)
    if (local.hour, local.minute) != (hour, minute):
        # The asked time did not exist that day: it ran later by the gap (fold=0 placement).
        days = (local.date(), local.date() - timedelta(days=1))
        asked = [datetime.combine(d, time(hour, minute), tzinfo=zone) for d in days]
        assert any(a.astimezone(UTC) == run and a.astimezone(UTC).astimezone(zone).time() != a.time() for a in asked)


@given(n=st.integers(1, 72), after=MOMENTS, tz=ZONES)
def test_in_n_hours_is_exactly_n_real_hours_later(n: int, after: datetime, tz: str) -> None:
    s = parse_schedule(f"daqui a {n} horas", now=after, tz=tz)
    assert s.run_at == after + timedelta(hours=n)
