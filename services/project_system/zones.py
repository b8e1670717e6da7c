"""Project time zones: Procore names a project's zone the way Rails does ("Pacific Time (US &
Canada)"), and a jobsite's working day has to be read in that zone, not in UTC.

The table maps the Rails zone names (the list Procore's project settings appear to use) to
IANA zones, grouped by IANA zone. An IANA name ("America/Denver") is accepted as it is.
Anything else falls back to UTC, with a warning in the log.
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

log = logging.getLogger(__name__)

UTC = ZoneInfo("UTC")
# What an IANA key looks like; anything else (paths, very long text) never reaches the loader.
_IANA_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_+-]{0,30}(/[A-Za-z0-9_+-]{1,30}){0,2}")

_NAMES_BY_ZONE: dict[str, tuple[str, ...]] = {
    # North and Central America, Caribbean
    "Pacific/Midway": ("International Date Line West", "Midway Island"),
    "Pacific/Pago_Pago": ("American Samoa",),
    "Pacific/Honolulu": ("Hawaii",),
    "America/Juneau": ("Alaska",),
    "America/Los_Angeles": ("Pacific Time (US & Canada)",),
    "America/Tijuana": ("Tijuana",),
    "America/Denver": ("Mountain Time (US & Canada)",),
    "America/Phoenix": ("Arizona",),
    "America/Chihuahua": ("Chihuahua",),
    "America/Mazatlan": ("Mazatlan",),
    "America/Chicago": ("Central Time (US & Canada)",),
    "America/Regina": ("Saskatchewan",),
    "America/Mexico_City": ("Guadalajara", "Mexico City"),
    "America/Monterrey": ("Monterrey",),
    "America/Guatemala": ("Central America",),
    "America/New_York": ("Eastern Time (US & Canada)",),
    "America/Indiana/Indianapolis": ("Indiana (East)",),
    "America/Halifax": ("Atlantic Time (Canada)",),
    "America/St_Johns": ("Newfoundland",),
    "America/Puerto_Rico": ("Puerto Rico",),
    # South America and the Atlantic
    "America/Bogota": ("Bogota",),
    "America/Lima": ("Lima", "Quito"),
    "America/Caracas": ("Caracas",),
    "America/La_Paz": ("La Paz",),
    "America/Santiago": ("Santiago",),
    "America/Sao_Paulo": ("Brasilia",),
    "America/Argentina/Buenos_Aires": ("Buenos Aires",),
    "America/Montevideo": ("Montevideo",),
    "America/Guyana": ("Georgetown",),
    "America/Nuuk": ("Greenland",),
    "Atlantic/South_Georgia": ("Mid-Atlantic",),
    "Atlantic/Azores": ("Azores",),
    "Atlantic/Cape_Verde": ("Cape Verde Is.",),
    # Europe and Africa
    "Etc/UTC": ("UTC",),
    "Europe/London": ("London", "Edinburgh"),
    "Europe/Dublin": ("Dublin",),
    "Europe/Lisbon": ("Lisbon",),
    "Africa/Casablanca": ("Casablanca",),
    "Africa/Monrovia": ("Monrovia",),
    "Europe/Amsterdam": ("Amsterdam",),
    "Europe/Belgrade": ("Belgrade",),
    "Europe/Berlin": ("Berlin",),
    "Europe/Bratislava": ("Bratislava",),
    "Europe/Brussels": ("Brussels",),
    "Europe/Budapest": ("Budapest",),
    "Europe/Copenhagen": ("Copenhagen",),
    "Europe/Ljubljana": ("Ljubljana",),
    "Europe/Madrid": ("Madrid",),
    "Europe/Paris": ("Paris",),
    "Europe/Prague": ("Prague",),
    "Europe/Rome": ("Rome",),
    "Europe/Sarajevo": ("Sarajevo",),
    "Europe/Skopje": ("Skopje",),
    "Europe/Stockholm": ("Stockholm",),
    "Europe/Vienna": ("Vienna",),
    "Europe/Warsaw": ("Warsaw",),
    "Europe/Zagreb": ("Zagreb",),
    "Europe/Zurich": ("Bern", "Zurich"),
    "Africa/Algiers": ("West Central Africa",),
    "Europe/Athens": ("Athens",),
    "Europe/Bucharest": ("Bucharest",),
    "Africa/Cairo": ("Cairo",),
    "Africa/Harare": ("Harare",),
    "Europe/Helsinki": ("Helsinki",),
    "Europe/Istanbul": ("Istanbul",),
    "Asia/Jerusalem": ("Jerusalem",),
    "Europe/Kaliningrad": ("Kaliningrad",),
    "Europe/Kyiv": ("Kyiv", "Kyev"),
    "Europe/Minsk": ("Minsk",),
    "Africa/Johannesburg": ("Pretoria",),
    "Europe/Riga": ("Riga",),
    "Europe/Sofia": ("Sofia",),
    "Europe/Tallinn": ("Tallinn",),
    "Europe/Vilnius": ("Vilnius",),
    "Europe/Moscow": ("Moscow", "St. Petersburg"),
    "Europe/Volgograd": ("Volgograd",),
    "Europe/Samara": ("Samara",),
    "Africa/Nairobi": ("Nairobi",),
    # Asia
    "Asia/Baghdad": ("Baghdad",),
    "Asia/Kuwait": ("Kuwait",),
    "Asia/Riyadh": ("Riyadh",),
    "Asia/Tehran": ("Tehran",),
    "Asia/Muscat": ("Abu Dhabi", "Muscat"),
    "Asia/Baku": ("Baku",),
    "Asia/Tbilisi": ("Tbilisi",),
    "Asia/Yerevan": ("Yerevan",),
    "Asia/Kabul": ("Kabul",),
    "Asia/Yekaterinburg": ("Ekaterinburg",),
    "Asia/Karachi": ("Islamabad", "Karachi"),
    "Asia/Tashkent": ("Tashkent",),
    "Asia/Kolkata": ("Chennai", "Kolkata", "Mumbai", "New Delhi"),
    "Asia/Colombo": ("Sri Jayawardenepura",),
    "Asia/Kathmandu": ("Kathmandu",),
    "Asia/Dhaka": ("Astana", "Dhaka"),
    "Asia/Almaty": ("Almaty",),
    "Asia/Urumqi": ("Urumqi",),
    "Asia/Yangon": ("Rangoon",),
    "Asia/Bangkok": ("Bangkok", "Hanoi"),
    "Asia/Jakarta": ("Jakarta",),
    "Asia/Novosibirsk": ("Novosibirsk",),
    "Asia/Krasnoyarsk": ("Krasnoyarsk",),
    "Asia/Shanghai": ("Beijing",),
    "Asia/Chongqing": ("Chongqing",),
    "Asia/Hong_Kong": ("Hong Kong",),
    "Asia/Irkutsk": ("Irkutsk",),
    "Asia/Kuala_Lumpur": ("Kuala Lumpur",),
    "Asia/Singapore": ("Singapore",),
    "Asia/Taipei": ("Taipei",),
    "Asia/Ulaanbaatar": ("Ulaanbaatar", "Ulaan Bataar"),
    "Asia/Seoul": ("Seoul",),
    "Asia/Tokyo": ("Osaka", "Sapporo", "Tokyo"),
    "Asia/Yakutsk": ("Yakutsk",),
    "Asia/Vladivostok": ("Vladivostok",),
    "Asia/Magadan": ("Magadan",),
    "Asia/Srednekolymsk": ("Srednekolymsk",),
    "Asia/Kamchatka": ("Kamchatka",),
    # Australia and the Pacific
    "Australia/Perth": ("Perth",),
    "Australia/Darwin": ("Darwin",),
    "Australia/Adelaide": ("Adelaide",),
    "Australia/Brisbane": ("Brisbane",),
    "Australia/Melbourne": ("Canberra", "Melbourne"),
    "Australia/Sydney": ("Sydney",),
    "Australia/Hobart": ("Hobart",),
    "Pacific/Guam": ("Guam",),
    "Pacific/Port_Moresby": ("Port Moresby",),
    "Pacific/Guadalcanal": ("Solomon Is.",),
    "Pacific/Noumea": ("New Caledonia",),
    "Pacific/Fiji": ("Fiji",),
    "Pacific/Majuro": ("Marshall Is.",),
    "Pacific/Auckland": ("Auckland", "Wellington"),
    "Pacific/Chatham": ("Chatham Is.",),
    "Pacific/Tongatapu": ("Nuku'alofa",),
    "Pacific/Fakaofo": ("Tokelau Is.",),
    "Pacific/Apia": ("Samoa",),
}

ZONE_BY_NAME: dict[str, str] = {
    name: zone for zone, names in _NAMES_BY_ZONE.items() for name in names}


@functools.lru_cache(maxsize=512)
def project_zone(name: str | None) -> ZoneInfo:
    """The IANA zone for a project's time zone name (Procore's or IANA's); UTC if unknown."""
    text = (name or "").strip()
    if not text:
        return UTC
    key = ZONE_BY_NAME.get(text, text)
    if _IANA_KEY.fullmatch(key):
        try:
            return ZoneInfo(key)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    log.warning("unknown project time zone %r: dates are taken in UTC", text[:80])
    return UTC


def local_date(moment: dt.datetime, zone: ZoneInfo) -> dt.date:
    """The calendar date of an aware instant in a zone."""
    return moment.astimezone(zone).date()


def on_clock(moment: dt.datetime | str | None, zone: ZoneInfo) -> str:
    """A time (aware, naive UTC or ISO text) on a jobsite's clock: '2026-06-03 20:30 PDT'."""
    if not moment:
        return ""
    if isinstance(moment, str):
        try:
            moment = dt.datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            return moment
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    try:
        return f"{moment.astimezone(zone):%Y-%m-%d %H:%M %Z}"
    except OverflowError:  # a time at the calendar's very edge (kept from before times were bounded)
        return f"{moment.replace(tzinfo=None).isoformat(sep=' ', timespec='minutes')} {moment.tzname()}"


def jobsite_time(moment: dt.datetime, zone: ZoneInfo) -> str:
    """An instant on the jobsite clock with UTC beside it, or in UTC alone when that is the zone."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    utc = f"{moment.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
    if zone.key in ("UTC", "Etc/UTC"):
        return utc
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M %Z} ({utc})"
