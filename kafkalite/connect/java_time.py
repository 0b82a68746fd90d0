"""Java's SimpleDateFormat (and Joda) date patterns (``yyyy-MM-dd'T'HH:mm:ss.SSSX``), formatted and parsed in UTC.

TimestampConverter's ``format`` and TimestampRouter's ``timestamp.format`` are Java patterns; users
copy them from Kafka's documentation, so they are read as Java reads them (``S`` counts
milliseconds, quotes delimit literals, ``X``/``Z`` are offsets) rather than as strftime codes.
"""
from __future__ import annotations

import datetime as _dt
import re
from functools import lru_cache

from .errors import ConfigException, DataException

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_LETTERS = set("GyYMLwWDdFEuaHkKhmsSzZX")


@lru_cache(maxsize=64)
def tokenize(pattern: str) -> tuple[tuple[str, str], ...]:
    """(kind, text) tokens: kind 'lit' for literal text, else the pattern letter repeated."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = i + 1
            text = []
            while end < len(pattern):
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            if end >= len(pattern):
                raise ConfigException(f"Unterminated quote in date format pattern: {pattern}")
            tokens.append(("lit", "".join(text) if end > i + 1 else "'"))
            i = end + 1
            continue
        if char.isalpha():
            if char not in _LETTERS:
                raise ConfigException(f"Illegal pattern character '{char}' in {pattern}")
            end = i
            while end < len(pattern) and pattern[end] == char:
                end += 1
            tokens.append((char, pattern[i:end]))
            i = end
            continue
        tokens.append(("lit", char))
        i += 1
    return tuple(tokens)


def validate_pattern(pattern: str) -> None:
    tokenize(pattern)


def format_utc(moment: _dt.datetime, pattern: str, zone: _dt.tzinfo = _dt.timezone.utc) -> str:
    """``moment`` (naive = UTC) in Java's pattern, in UTC (or ``zone``: the storage partitioners' timezone)."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)
    utc = aware.astimezone(zone)
    out: list[str] = []
    for kind, text in tokenize(pattern):
        n = len(text)
        if kind == "lit":
            out.append(text)
        elif kind in "yY":
            out.append(f"{utc.year % 100:02d}" if n == 2 else f"{utc.year:0{n}d}")
        elif kind in "ML":
            out.append(_MONTHS[utc.month - 1] if n >= 4 else _MONTHS[utc.month - 1][:3] if n == 3
                       else f"{utc.month:0{n}d}")
        elif kind == "d":
            out.append(f"{utc.day:0{n}d}")
        elif kind == "D":
            out.append(f"{utc.timetuple().tm_yday:0{n}d}")
        elif kind == "H":
            out.append(f"{utc.hour:0{n}d}")
        elif kind == "k":
            out.append(f"{utc.hour or 24:0{n}d}")
        elif kind == "K":
            out.append(f"{utc.hour % 12:0{n}d}")
        elif kind == "h":
            out.append(f"{utc.hour % 12 or 12:0{n}d}")
        elif kind == "m":
            out.append(f"{utc.minute:0{n}d}")
        elif kind == "s":
            out.append(f"{utc.second:0{n}d}")
        elif kind == "S":
            out.append(f"{utc.microsecond // 1000:0{n}d}")
        elif kind == "E":
            out.append(_DAYS[utc.weekday()] if n >= 4 else _DAYS[utc.weekday()][:3])
        elif kind == "u":
            out.append(str(utc.isoweekday()))
        elif kind == "a":
            out.append("AM" if utc.hour < 12 else "PM")
        elif kind == "G":
            out.append("AD")
        elif kind == "z":
            out.append(utc.tzname() or "UTC")
        elif kind in "ZX":
            offset = utc.utcoffset() or _dt.timedelta(0)
            if kind == "X" and not offset:
                out.append("Z")
            else:
                minutes = int(offset.total_seconds() // 60)
                sign = "-" if minutes < 0 else "+"
                hours, mins = divmod(abs(minutes), 60)
                out.append(f"{sign}{hours:02d}:{mins:02d}" if kind == "X" and n >= 3 else f"{sign}{hours:02d}{mins:02d}")
        else:  # w, W, F: week fields
            out.append(f"{int(utc.strftime('%U')):0{n}d}")
    return "".join(out)


@lru_cache(maxsize=64)
def _parser(pattern: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    parts: list[str] = []
    kinds: list[str] = []
    for kind, text in tokenize(pattern):
        n = len(text)
        if kind == "lit":
            parts.append(re.escape(text))
            continue
        kinds.append(kind)
        if kind in "ML" and n >= 3:
            parts.append("([A-Za-z]+)")
        elif kind == "E":
            parts.append("([A-Za-z]+)")
        elif kind == "a":
            parts.append("(AM|PM|am|pm)")
        elif kind in "zG":
            parts.append(r"([A-Za-z]+)")
        elif kind in "ZX":
            parts.append(r"(Z|[+-]\d{2}:?\d{2}|[+-]\d{2})")
        elif kind == "S":
            parts.append(r"(\d+)")
        else:
            parts.append(rf"(\d{{{n}}})" if n > 1 and kind not in "yY" else r"(\d+)")
    return re.compile("".join(parts)), tuple(kinds)


def parse_utc(text: str, pattern: str) -> _dt.datetime:
    """Java-pattern text as a UTC datetime; DataException if it does not match."""
    regex, kinds = _parser(pattern)
    match = regex.fullmatch(text.strip())
    if match is None:
        raise DataException(f"Could not parse timestamp: value ({text}) does not match pattern ({pattern})")
    fields = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "ms": 0}
    pm: bool | None = None
    offset = _dt.timedelta(0)
    for kind, value in zip(kinds, match.groups()):
        if kind in "yY":
            year = int(value)
            fields["year"] = year + 2000 if len(value) == 2 else year
        elif kind in "ML":
            if value.isdigit():
                fields["month"] = int(value)
            else:
                names = [m[:3].lower() for m in _MONTHS]
                fields["month"] = names.index(value[:3].lower()) + 1
        elif kind == "d":
            fields["day"] = int(value)
        elif kind in "Hk":
            fields["hour"] = int(value) % 24
        elif kind in "hK":
            fields["hour"] = int(value) % 12
        elif kind == "m":
            fields["minute"] = int(value)
        elif kind == "s":
            fields["second"] = int(value)
        elif kind == "S":
            fields["ms"] = int(value)
        elif kind == "a":
            pm = value.upper() == "PM"
        elif kind in "ZX" and value != "Z":
            digits = value.replace(":", "")
            sign = -1 if digits[0] == "-" else 1
            hours = int(digits[1:3])
            minutes = int(digits[3:5]) if len(digits) >= 5 else 0
            offset = sign * _dt.timedelta(hours=hours, minutes=minutes)
    if pm is not None and pm:
        fields["hour"] += 12
    try:
        local = _dt.datetime(fields["year"], fields["month"], fields["day"], fields["hour"], fields["minute"],
                             fields["second"], tzinfo=_dt.timezone.utc)
    except ValueError as exc:
        raise DataException(f"Could not parse timestamp: value ({text}) does not match pattern ({pattern}): "
                            f"{exc}") from None
    return local + _dt.timedelta(milliseconds=fields["ms"]) - offset
