"""Schedules as people type them, in English or Portuguese.

``parse_schedule`` turns what someone types into a ``Schedule``: either a
5-field cron expression (recurring) or one moment in UTC (a one-shot).
``next_run`` says when a schedule fires next, in aware UTC, computed with
croniter in the schedule's IANA time zone.

Matching ignores case, accents and extra spaces ("Amanhã ÀS 8" reads as
"amanha as 8"). Every accepted form:

=====================================  =====================================  ===============================
English                                Portuguese                             Result
=====================================  =====================================  ===============================
``hourly``, ``every hour``             ``de hora em hora``, ``a cada hora``   ``0 * * * *``
``daily``, ``every day``               ``diariamente``, ``todo dia``          ``0 0 * * *``
``weekly``                             ``semanalmente``                       ``0 0 * * 0`` (Sunday)
``monthly``                            ``mensalmente``                        ``0 0 1 * *``
``every minute``                       ``a cada minuto``                      ``* * * * *``
``every 15 minutes``                   ``a cada 15 minutos``,                 ``*/15 * * * *``
                                       ``de 15 em 15 minutos``
``every 2 hours``                      ``a cada 2 horas``,                    ``0 */2 * * *``
                                       ``de 2 em 2 horas``
``daily at 9am``, ``every day at 9``   ``todo dia às 9h``,                    ``0 9 * * *``
                                       ``todos os dias às 9``,
                                       ``diariamente às 9h``
``daily at 6am, 12pm``                 ``todo dia às 6h e 12h``               ``0 6,12 * * *``
``weekdays at 18:30``                  ``dias úteis às 18h30``,               ``30 18 * * 1-5``
                                       ``de segunda a sexta às 18h30``
``weekends at 10``                     ``fins de semana às 10``               ``0 10 * * 0,6``
``every monday at 8``, ``mondays at    ``toda segunda às 8``,                 ``0 8 * * 1``
8``, ``every mon and thu at 8``        ``todas as segundas-feiras às 8``,
                                       ``toda segunda e quinta às 8``         (``0 8 * * 1,4``)
``in 2 hours``, ``after 90 minutes``,  ``daqui a 2 horas``, ``em 90           one-shot: ``now`` + the delay
``in a day``                           minutos``, ``dentro de 1 dia``
``tomorrow at 9``                      ``amanhã às 9``                        one-shot: 09:00 tomorrow, local
``today at 18:00``                     ``hoje às 18h``                        one-shot (must be after ``now``)
``0 9 * * 1-5`` (5-field cron),        the same                               itself, validated by croniter
``@hourly``/``@daily``/``@weekly``/
``@monthly``
=====================================  =====================================  ===============================

Times: ``9``, ``9am``, ``9 pm``, ``6:30pm``, ``18:30``, ``18h``, ``18h30``,
``noon``/``meio-dia`` (``todo dia ao meio-dia``), ``midnight``/``meia-noite``, ``8 da manhã``, ``6 da
tarde``/``da noite``. Several times share one cron when their minutes agree
(``6am, 12pm`` → ``0 6,12``); ``9:15 and 18:30`` is refused, as one cron
line would also fire at 9:30 and 18:15. A form without a time (``daily``,
``every monday``, ``weekdays``) fires at 00:00, as cron's ``@daily`` does.

Steps that do not divide the hour or the day are accepted as cron reads
them: ``every 7 minutes`` is ``*/7 * * * *``, which fires at :00, :07, …,
:56 and again at :00 — four minutes after :56. ``every 5 hours`` is
``0 */5 * * *`` (00:00, 05:00, …, 20:00, then 00:00). Minutes go up to 59
and hours up to 23; longer intervals need a time of day or a cron line.

Refused, with ``UsageError`` naming what was wrong and listing the forms:
text that matches no form ("never"), a zero or too long interval ("every 0
minutes", "every 90 minutes"), a time that does not exist ("daily at
25:00", "13pm"), an invalid cron line ("61 * * * *"), a cron line that never
fires ("0 0 31 2 *": February has no 31st), a one-shot further away than
``MAX_ONESHOT_DELAY`` ("in 99999999999999999999 minutes"), text longer than
``MAX_SCHEDULE_CHARS``, "today at" a time already past, an unknown time zone
(``caderno.core.validate.check_zone``), and naive datetimes.

Daylight saving time: a schedule with a fixed hour ("daily at 9") fires
once per local day at that wall-clock time. On the night the clocks go
back, a time that happens twice fires at its first occurrence only; on the
night they go forward, a time that does not exist fires that much later
(02:30 becomes 03:30), as POSIX ``mktime`` reads it. A schedule whose hour
field is a wildcard or a step ("every 15 minutes", "hourly", "every 2
hours") follows elapsed time through the change, so no interval is skipped
or doubled. One-shots are moments: "in 2 hours" is two real hours after
``now``, whatever the clocks do meanwhile.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .errors import UsageError
from .validate import check_zone

__all__ = [
    "ACCEPTED_FORMS",
    "MAX_ONESHOT_DELAY",
    "MAX_SCHEDULE_CHARS",
    "Schedule",
    "next_run",
    "parse_schedule",
    "shortest_gap",
]

ACCEPTED_FORMS = (
    "hourly | daily | weekly | monthly; every 15 minutes; every 2 hours; daily at 9am; daily at 6am, 12pm; "
    "weekdays at 18:30; weekends at 10; every monday at 8; in 2 hours; after 90 minutes; tomorrow at 9; "
    "a 5-field cron like '0 9 * * 1-5'. Em português: de hora em hora, todo dia às 9h, a cada 15 minutos, "
    "dias úteis às 18h30, fins de semana às 10, toda segunda às 8, daqui a 2 horas, em 90 minutos, amanhã às 8"
)
"""A one-paragraph reminder of the accepted forms, quoted in every refusal."""

#: Longest schedule text, in characters. The longest accepted form people type
#: ("todas as segundas-feiras e quintas-feiras às 6h e 18h") is ~60; 200 leaves
#: room and bounds the regular expressions' work and the numbers they capture.
MAX_SCHEDULE_CHARS = 200
#: Furthest a one-shot may be: about ten years. A reminder further out is a
#: typo, and the bound keeps every moment far inside what ``datetime`` and
#: the stores hold (year 9999): "in 99999999999999999999 minutes" overflowed
#: ``timedelta`` into a 500 before this bound.
MAX_ONESHOT_DELAY = timedelta(days=3653)
# Where the "does this cron line ever fire" probe starts: any moment works,
# as croniter searches years ahead (Feb 29 is found from a non-leap year).
_NEVER_PROBE = datetime(2001, 1, 1)
_UNIT_DELTA = {"minutes": timedelta(minutes=1), "hours": timedelta(hours=1), "days": timedelta(days=1)}

# Wall-clock candidates are searched from this long before ``after``, so a
# run pushed forward by a spring-forward gap (02:30 -> 03:30) is still found
# when ``after`` falls inside the shifted hour. Three hours covers every
# DST offset change in the tz database (the largest are two hours).
_DST_LOOKBACK = timedelta(hours=3)

# Cron's named shortcuts, and the bare words that mean them.
_SHORTCUTS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
}
_WORDS = {
    "hourly": "@hourly",
    "every hour": "@hourly",
    "each hour": "@hourly",
    "de hora em hora": "@hourly",
    "a cada hora": "@hourly",
    "cada hora": "@hourly",
    "toda hora": "@hourly",
    "todas as horas": "@hourly",
    "weekly": "@weekly",
    "every week": "@weekly",
    "semanalmente": "@weekly",
    "toda semana": "@weekly",
    "monthly": "@monthly",
    "every month": "@monthly",
    "mensalmente": "@monthly",
    "todo mes": "@monthly",
}

_DAYS = {
    "sunday": 0, "sun": 0, "domingo": 0,
    "monday": 1, "mon": 1, "segunda": 1, "segunda-feira": 1, "seg": 1,
    "tuesday": 2, "tue": 2, "tues": 2, "terca": 2, "terca-feira": 2, "ter": 2,
    "wednesday": 3, "wed": 3, "quarta": 3, "quarta-feira": 3, "qua": 3,
    "thursday": 4, "thu": 4, "thurs": 4, "quinta": 4, "quinta-feira": 4, "qui": 4,
    "friday": 5, "fri": 5, "sexta": 5, "sexta-feira": 5, "sex": 5,
    "saturday": 6, "sat": 6, "sabado": 6,
}  # fmt: skip

# Day-of-week spellings: "every day" and friends map to a cron day field.
_EVERY_DAY = r"daily|every day|each day|diariamente|todo dia|todos os dias|cada dia"
_WEEKDAYS = (
    r"weekdays|every weekday|on weekdays|dias uteis|nos dias uteis|em dias uteis|todo dia util"
    r"|todos os dias uteis|de segunda a sexta(?:-feira)?"
)
_WEEKENDS = r"weekends|on weekends|every weekend|fins de semana|nos fins de semana|aos fins de semana|todo fim de semana|fim de semana"
_DAY_PREFIX = r"(?:every|on|toda|todo|todas as|todos os|as|aos|nas|nos)\s+"
_DAY_NAME = r"[a-z]+(?:-feira)?s?(?:-feiras)?"
_DAY_LIST = rf"{_DAY_NAME}(?:\s*(?:,|\band\b|\be\b)\s*{_DAY_NAME})*"
# The connector is required: "todo dia 5" is the 5th of the month in
# Portuguese, not "daily at 5", so a bare number is not read as a time.
_AT = r"\s+(?:at|@|as|a|ao)\s+"

_NUMBER = r"(\d+|a|an|one|um|uma)"
_MINUTES = r"(?:minutes?|mins?|minutos?)"
_HOURS = r"(?:hours?|hrs?|h|horas?)"
_DAYS_UNIT = r"(?:days?|dias?)"


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    """A parsed schedule: a cron line, or one moment."""

    cron_expr: str | None
    """The 5-field cron expression of a recurring schedule, else ``None``."""
    run_at: datetime | None
    """The moment of a one-shot, aware and in UTC, else ``None``."""
    is_oneshot: bool
    """True when the schedule fires once, at ``run_at``."""
    original: str
    """The text as it was typed (stripped)."""

    def __post_init__(self) -> None:
        # Exactly one of the two shapes, so a scheduler never has to guess.
        if self.is_oneshot != (self.run_at is not None) or (self.cron_expr is None) == (self.run_at is None):
            raise UsageError("a Schedule has either a cron_expr (recurring) or a run_at (one-shot), not both")
        if self.run_at is not None and self.run_at.utcoffset() != timedelta(0):
            raise UsageError("Schedule.run_at must be an aware datetime in UTC")


def parse_schedule(text: str, *, now: datetime, tz: str | ZoneInfo) -> Schedule:
    """Read a schedule as someone typed it (see the module docstring for the forms).

    Args:
        text: what the person typed, in English or Portuguese.
        now: the current moment, aware; one-shots are computed from it (the
            parser never reads a clock).
        tz: the person's IANA time zone ("America/Sao_Paulo"): "tomorrow
            at 9" means 9 o'clock there.

    Returns:
        A ``Schedule``: a validated cron expression, or a one-shot in UTC.

    Raises:
        UsageError: the text matches no form, or names an impossible time
            or interval; the message says which and lists the forms.
    """
    zone = _zone(tz)
    now = _aware(now, "now")
    if not isinstance(text, str):
        raise UsageError("a schedule is text, such as 'daily at 9am' or 'todo dia às 9h'")
    if len(text) > MAX_SCHEDULE_CHARS:
        raise UsageError(
            f"the schedule is {len(text)} characters long; the limit is {MAX_SCHEDULE_CHARS}. Accepted: {ACCEPTED_FORMS}."
        )
    original = text.strip()
    s = _normalize(text)
    if not s:
        raise _refuse(original, "the schedule is empty")
    cron = _recurring(s, original)
    if cron is not None:
        return Schedule(cron_expr=cron, run_at=None, is_oneshot=False, original=original)
    run_at = _oneshot(s, original, now, zone)
    if run_at is not None:
        return Schedule(cron_expr=None, run_at=run_at, is_oneshot=True, original=original)
    raise _refuse(original, "no schedule form matches it")


def next_run(schedule_or_cron: Schedule | str, *, after: datetime, tz: str | ZoneInfo) -> datetime:
    """When the schedule fires next, strictly after ``after``, in aware UTC.

    A one-shot returns its ``run_at`` whatever ``after`` is, so a scheduler
    that was down still finds it due (``run_at <= now``); it retires the
    job once it has run.

    Args:
        schedule_or_cron: a ``Schedule`` or a 5-field cron expression.
        after: an aware datetime; the result is later than it.
        tz: the IANA time zone the cron's wall-clock times are in.

    Raises:
        UsageError: ``after`` is naive, the zone is unknown, or the cron
            expression is invalid.
    """
    zone = _zone(tz)
    after = _aware(after, "after").astimezone(UTC)
    if isinstance(schedule_or_cron, Schedule):
        if schedule_or_cron.run_at is not None:
            return schedule_or_cron.run_at
        expr = schedule_or_cron.cron_expr or ""
    else:
        expr = _cron(" ".join(schedule_or_cron.split()).lower(), schedule_or_cron)
    from croniter import CroniterBadDateError, croniter

    try:
        if "*" in expr.split()[1]:
            # Wildcard or stepped hours follow elapsed time: croniter walks the
            # aware local clock, so the repeated hour runs again and the
            # skipped one is skipped, and no interval is doubled or lost.
            found = croniter(expr, after.astimezone(zone)).get_next(datetime)
            return found.astimezone(UTC)
        # Fixed hours are wall-clock appointments: walk naive local time and
        # place each candidate with fold=0 (first occurrence of a repeated
        # time; a missing time moves forward by the gap), so "daily at 1:30"
        # fires once on the night the clocks go back.
        it = croniter(expr, (after - _DST_LOOKBACK).astimezone(zone).replace(tzinfo=None))
        while True:
            wall = it.get_next(datetime)
            moment = wall.replace(tzinfo=zone).astimezone(UTC)
            if moment > after:
                return moment
    except (CroniterBadDateError, OverflowError):
        # A stored line that slipped past ``_cron`` (an old row), or a walk past year 9999.
        raise UsageError(f"the cron line {expr!r} never fires after {after:%Y-%m-%d %H:%M} UTC") from None


def shortest_gap(cron_expr: str, *, at_least: timedelta, after: datetime, tz: str | ZoneInfo) -> timedelta | None:
    """The first gap between two runs of ``cron_expr`` shorter than ``at_least``, or None when there is none.

    Cron's minute and hour fields are the same on every day it fires, so a
    short gap shows within one firing day or across its midnight into the
    next one. Walking until the runs have covered two days (48 hours past
    the first) therefore finds any gap under ``at_least``; when every gap is
    long enough the walk takes at most ``48 h / at_least`` steps (192 for 15
    minutes).

    Raises:
        UsageError: an invalid cron expression, zone or a naive ``after``.
    """
    previous = next_run(cron_expr, after=after, tz=tz)
    horizon = previous + timedelta(hours=48)
    while previous <= horizon:
        following = next_run(cron_expr, after=previous, tz=tz)
        if following - previous < at_least:
            return following - previous
        previous = following
    return None


# -- recognising the forms ------------------------------------------------------


def _recurring(s: str, original: str) -> str | None:
    """The cron expression for a recurring form, or None if ``s`` is not one."""
    if s in _WORDS:
        return _SHORTCUTS[_WORDS[s]]
    if s in _SHORTCUTS:
        return _SHORTCUTS[s]
    if s in ("every minute", "each minute", "a cada minuto", "cada minuto", "todo minuto"):
        return "* * * * *"
    m = re.fullmatch(rf"(?:every|each|a cada|cada)\s+(\d+)\s*{_MINUTES}|de (\d+) em \2 {_MINUTES}", s)
    if m:
        return _minute_step(int(m.group(1) or m.group(2)), original)
    m = re.fullmatch(rf"(?:every|each|a cada|cada)\s+(\d+)\s*{_HOURS}|de (\d+) em \2 {_HOURS}", s)
    if m:
        return _hour_step(int(m.group(1) or m.group(2)), original)
    if _looks_like_cron(s):
        return _cron(s, original)
    for pattern, dow in ((_EVERY_DAY, "*"), (_WEEKDAYS, "1-5"), (_WEEKENDS, "0,6")):
        m = re.fullmatch(rf"(?:{pattern})(?:{_AT}(.+))?", s)
        if m:
            return _at(m.group(1), dow, original)
    m = re.fullmatch(rf"(?:{_DAY_PREFIX})?({_DAY_LIST})(?:{_AT}(.+))?", s)
    if m:
        days = _day_field(m.group(1))
        if days is not None:
            return _at(m.group(2), days, original)
    return None


def _oneshot(s: str, original: str, now: datetime, zone: ZoneInfo) -> datetime | None:
    """The UTC moment of a one-shot form, or None if ``s`` is not one."""
    m = re.fullmatch(
        rf"(?:in|after|daqui a|em|dentro de|apos|depois de)\s+{_NUMBER}\s*({_MINUTES}|{_HOURS}|{_DAYS_UNIT})", s
    )
    if m:
        count = int(m.group(1)) if m.group(1).isdigit() else 1
        if count < 1:
            raise _refuse(original, "the delay must be at least 1")
        unit = m.group(2)
        name = "minutes" if re.fullmatch(_MINUTES, unit) else "hours" if re.fullmatch(_HOURS, unit) else "days"
        most = MAX_ONESHOT_DELAY // _UNIT_DELTA[name]
        if count > most:  # compared as integers: ``timedelta`` itself overflows on the way
            raise _refuse(original, f"a one-shot runs within {most} {name} (about ten years), not {count}")
        return now.astimezone(UTC) + count * _UNIT_DELTA[name]
    m = re.fullmatch(rf"(tomorrow|amanha|today|hoje)(?:{_AT}(.+))?", s)
    if m:
        if m.group(2) is None:
            raise _refuse(original, f"say at what time, e.g. '{m.group(1)} at 9'")
        times = _times(m.group(2), original)
        if len(times) != 1:
            raise _refuse(original, "a one-shot takes a single time")
        day = now.astimezone(zone).date() + timedelta(days=1 if m.group(1) in ("tomorrow", "amanha") else 0)
        moment = _local_moment(day, times[0], zone)
        if moment <= now:
            raise _refuse(original, f"{times[0]:%H:%M} today has already passed")
        return moment
    return None


def _minute_step(n: int, original: str) -> str:
    if n < 1:
        raise _refuse(original, "the interval must be at least 1 minute")
    if n == 1:
        return "* * * * *"
    if n >= 60:
        raise _refuse(original, f"{n} minutes is not an interval cron can repeat (1-59); say 'every N hours'")
    return f"*/{n} * * * *"


def _hour_step(n: int, original: str) -> str:
    if n < 1:
        raise _refuse(original, "the interval must be at least 1 hour")
    if n == 1:
        return "0 * * * *"
    if n >= 24:
        raise _refuse(original, f"{n} hours is not an interval cron can repeat (1-23); say 'daily at ...'")
    return f"0 */{n} * * *"


def _at(times_text: str | None, dow: str, original: str) -> str:
    """``M H * * dow`` for one or more times that share their minutes."""
    times = _times(times_text, original) if times_text else [time(0, 0)]
    minutes = {t.minute for t in times}
    if len(minutes) > 1:
        raise _refuse(original, "several times must share their minutes (one cron line would mix them)")
    hours = ",".join(str(h) for h in sorted({t.hour for t in times}))
    return f"{minutes.pop()} {hours} * * {dow}"


def _day_field(text: str) -> str | None:
    """The cron day-of-week list for "monday and thursday", or None if a word is not a day."""
    days = set()
    for word in re.split(r"\s*(?:,|\band\b|\be\b)\s*", text):
        word = re.sub(r"(-feira)?s?(-feiras)?$", "", word) if word not in _DAYS else word
        day = _DAYS.get(word, _DAYS.get(word + "-feira"))
        if day is None:
            return None
        days.add(day)
    return ",".join(str(d) for d in sorted(days))


def _times(text: str, original: str) -> list[time]:
    """'6am, 12pm' / '9h e 18h' -> [06:00, 12:00] (at least one time)."""
    parts = [p for p in re.split(r"\s*(?:,|\band\b|\be\b)\s*", text.strip()) if p]
    if not parts:
        raise _refuse(original, "a time is missing after 'at'")
    return [_time(p, original) for p in parts]


def _time(text: str, original: str) -> time:
    """One time of day: 9, 9am, 6:30pm, 18:30, 18h30, noon, meio-dia, 8 da manha."""
    if re.fullmatch(r"noon|midday|meio[- ]dia", text):
        return time(12, 0)
    if re.fullmatch(r"midnight|meia[- ]noite", text):
        return time(0, 0)
    m = re.fullmatch(
        r"(\d{1,2})(?:(?::|h)(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.|da manha|da madrugada|da tarde|da noite)?"
        r"\s*(?:h|hs|horas?|o'?clock)?",
        text,
    )
    if not m:
        raise _refuse(original, f"{text!r} is not a time of day")
    hour, minute, half = int(m.group(1)), int(m.group(2) or 0), (m.group(3) or "").replace(".", "")
    if minute > 59:
        raise _refuse(original, f"minute {minute} is out of range (0-59)")
    if half:
        if not 1 <= hour <= 12:
            raise _refuse(original, f"{text!r} is not a time: with {half} the hour goes from 1 to 12")
        if half in ("am", "da manha", "da madrugada"):
            hour = 0 if hour == 12 else hour
        else:
            hour = 12 if hour == 12 else hour + 12
    if hour > 23:
        raise _refuse(original, f"hour {hour} is out of range (0-23)")
    return time(hour, minute)


def _looks_like_cron(s: str) -> bool:
    fields = s.split()
    return len(fields) == 5 and re.fullmatch(r"[\d*/,\-]+", fields[0]) is not None


def _cron(expr: str, original: str) -> str:
    """Validate a 5-field cron expression and return it with single spaces."""
    from croniter import CroniterBadDateError, croniter

    expr = _SHORTCUTS.get(expr, expr)
    if len(expr.split()) != 5 or not croniter.is_valid(expr):
        raise _refuse(original, f"{expr!r} is not a valid 5-field cron expression (minute hour day month weekday)")
    try:
        # croniter accepts a day its month never has ("0 0 31 2 *") and only
        # fails when asked for a run; refuse it here, when the task is made.
        croniter(expr, _NEVER_PROBE).get_next(datetime)
    except CroniterBadDateError:
        raise _refuse(original, f"{expr!r} never fires (no month has that day)") from None
    return " ".join(expr.split())


# -- small helpers ---------------------------------------------------------------


def _normalize(text: str) -> str:
    """Lowercase, no accents, single spaces, no trailing period: 'Amanhã  ÀS 8.' -> 'amanha as 8'."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.split()).rstrip(".!").strip()


def _local_moment(day: date, at: time, zone: ZoneInfo) -> datetime:
    # fold=0 (the default): the first of a repeated time; a missing one
    # moves forward by the gap, as in next_run.
    return datetime.combine(day, at, tzinfo=zone).astimezone(UTC)


def _zone(tz: str | ZoneInfo) -> ZoneInfo:
    if isinstance(tz, ZoneInfo):
        return tz
    return ZoneInfo(check_zone(tz))


def _aware(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise UsageError(f"{name} must be an aware datetime (with a time zone), got {moment.isoformat()}")
    return moment


def _refuse(original: str, reason: str) -> UsageError:
    return UsageError(f"cannot read the schedule {original!r}: {reason}. Accepted: {ACCEPTED_FORMS}.")
