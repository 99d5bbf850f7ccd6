"""Reads a meeting time and an IANA timezone out of English text (pure functions)."""

from __future__ import annotations

import functools
import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

DEFAULT_TIMEZONE = "UTC"
_DEFAULT_CLOCK = time(9, 0)

_ISO_DATETIME = re.compile(
    r"\b(\d{4}-\d{2}-\d{2})[T ](\d{1,2}:\d{2}(?::\d{2})?)(Z|[+-]\d{2}:?\d{2})?(?![\d:])"
)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_ZONE = re.compile(r"\b([A-Z][A-Za-z_]+(?:/[A-Z][A-Za-z_+-]+){1,2})\b")
_MERIDIEM = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])m\b", re.IGNORECASE)
_AT_CLOCK = re.compile(r"\bat\s+(\d{1,2})(?::(\d{2}))?\b(?!\s*[-/])", re.IGNORECASE)
_NAMED_CLOCK = {"noon": time(12, 0), "midday": time(12, 0), "midnight": time(0, 0)}
_PLACE = r"[A-Z][A-Za-z]+(?:[ _-][A-Z][A-Za-z]+){0,2}"
_CITY_CUE = re.compile(rf"\b(?P<before>{_PLACE})\s+time\b|\b[Ii]n\s+(?P<after>{_PLACE})\b")
_CITY_REGIONS = {"Africa", "America", "Asia", "Atlantic", "Australia", "Europe", "Indian"}
_CITY_REGIONS |= {"Pacific"}
_PLACE_ALIASES = {
    "pacific": "America/Los_Angeles",
    "mountain": "America/Denver",
    "central": "America/Chicago",
    "eastern": "America/New_York",
    "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "munich": "Europe/Berlin",
    "beijing": "Asia/Shanghai",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "bangalore": "Asia/Kolkata",
    "utc": "UTC",
    "gmt": "UTC",
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def extract_timezone(text: str) -> str:
    """The zone ``text`` names (``UTC`` when there is none).

    The first valid IANA name wins (``Europe/Berlin``); otherwise a city or region
    that people use for a zone, cued as ``Berlin time`` or ``in Berlin`` (``New York
    time``, ``in Tokyo``, ``Pacific time``).
    """
    for match in _ZONE.finditer(text):
        if _is_zone(match.group(1)):
            return match.group(1)
    for match in _CITY_CUE.finditer(text):
        zone = _cued_zone(match.group("before"), match.group("after"))
        if zone is not None:
            return zone
    return DEFAULT_TIMEZONE


def _cued_zone(before: str | None, after: str | None) -> str | None:
    """Tries the words nearest the cue first: ``Team Berlin time`` names Berlin."""
    words = (before or after or "").split()
    if before:
        places = [words[start:] for start in range(len(words))]
    else:
        places = [words[:end] for end in range(len(words), 0, -1)]
    return next((zone for place in places if (zone := zone_for_place(" ".join(place)))), None)


def zone_for_place(place: str) -> str | None:
    """``"Berlin"`` → ``Europe/Berlin``, ``"New York"`` → ``America/New_York``."""
    key = " ".join(place.replace("_", " ").split()).lower()
    return _PLACE_ALIASES.get(key) or _zones_by_city().get(key)


@functools.cache
def _zones_by_city() -> dict[str, str]:
    by_city: dict[str, str] = {}
    for name in sorted(available_timezones()):
        region, _, city = name.rpartition("/")
        if region.split("/")[0] in _CITY_REGIONS:
            by_city.setdefault(city.replace("_", " ").lower(), name)
    return by_city


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def extract_start(text: str, timezone: str, now: datetime) -> datetime:
    """The start time ``text`` asks for, as an aware datetime.

    An ISO-8601 date-time wins; otherwise a day word (``today``, ``tomorrow``, a
    weekday, an ISO date) and a clock time (``3pm``, ``at 15:30``, ``noon``) are
    combined in ``timezone``. A clock time alone means its next occurrence; nothing
    at all means tomorrow at 09:00.
    """
    zone = ZoneInfo(timezone)
    explicit = _iso_datetime(text, zone)
    if explicit is not None:
        return explicit
    local_now = now.astimezone(zone)
    clock = extract_clock(text)
    day = extract_day(text, local_now.date())
    if day is None:
        day = _next_day_for(clock, local_now)
    return datetime.combine(day, clock or _DEFAULT_CLOCK, tzinfo=zone)


def _iso_datetime(text: str, zone: ZoneInfo) -> datetime | None:
    match = _ISO_DATETIME.search(text)
    if match is None:
        return None
    day, clock, offset = match.groups()
    try:
        parsed = datetime.fromisoformat(f"{day}T{_pad_clock(clock)}{offset or ''}")
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)


def _pad_clock(clock: str) -> str:
    hours, _, rest = clock.partition(":")
    return f"{int(hours):02d}:{rest}"


def extract_clock(text: str) -> time | None:
    """A clock time such as ``3pm``, ``9:30 am``, ``at 15:30`` or ``noon``."""
    match = _MERIDIEM.search(text)
    if match is not None:
        hour = int(match.group(1)) % 12 + (12 if match.group(3).lower() == "p" else 0)
        return _safe_time(hour, int(match.group(2) or 0))
    match = _AT_CLOCK.search(text)
    if match is not None:
        return _safe_time(int(match.group(1)), int(match.group(2) or 0))
    lowered = text.lower()
    for word, clock in _NAMED_CLOCK.items():
        if re.search(rf"\b{word}\b", lowered):
            return clock
    return None


def _safe_time(hour: int, minute: int) -> time | None:
    if 0 <= hour < 24 and 0 <= minute < 60:
        return time(hour, minute)
    return None


def extract_day(text: str, today: date) -> date | None:
    """The day ``text`` names, relative to ``today``; ``None`` when it names none."""
    lowered = text.lower()
    iso = _ISO_DATE.search(lowered)
    if iso is not None:
        try:
            return date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
        except ValueError:
            return None
    if re.search(r"\bday after tomorrow\b", lowered):
        return today + timedelta(days=2)
    if re.search(r"\btomorrow\b", lowered):
        return today + timedelta(days=1)
    if re.search(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", lowered):
        return today
    return _weekday(lowered, today)


def _weekday(lowered: str, today: date) -> date | None:
    for index, name in enumerate(_WEEKDAYS):
        if re.search(rf"\b{name}\b", lowered):
            ahead = (index - today.weekday()) % 7 or 7
            return today + timedelta(days=ahead)
    return None


def _next_day_for(clock: time | None, local_now: datetime) -> date:
    today = local_now.date()
    if clock is not None and clock > local_now.time():
        return today
    return today + timedelta(days=1)


def format_start(start: datetime) -> str:
    """ISO-8601 with seconds and offset, e.g. ``2026-07-14T09:30:00+08:00``."""
    return start.isoformat(timespec="seconds")
