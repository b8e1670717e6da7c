"""The morning digest: each reviewer who has not turned it off is e-mailed, once a day from
DIGEST_HOUR (7:00) on the company's clock, what waits for them, with links to the queue.

What waits is the company's, as the queue shows it to every reviewer of the company:

- tickets waiting for the PM (stage "review"): how many, their dollars and the oldest;
- signatures overdue: tickets waiting for a signature (stage "signature") captured on a day at
  least SIGNATURE_OVERDUE_DAYS before today (UTC dates, as the queue's date filter reads them);
- tickets written as a change event on a day more than UNBILLED_DAYS before today (UTC
  dates, as the queue's `written_to` filter reads them) and on no change order yet (stage
  "written").

Nothing is sent when none of these has a ticket. The company's clock is the time zone most of
its active projects name in the project system, kept on the company each time it is read so it
is known while Procore is away; UTC while none was ever read. The day is claimed for each
reviewer (the date on that clock) before the e-mail goes, so a timer every 15 minutes, or two
runs at once, send it once; a mail that fails gives the day back for the next run.
"""
from __future__ import annotations

import collections
import datetime as dt
import logging
import urllib.parse
from dataclasses import dataclass
from decimal import Decimal
from zoneinfo import ZoneInfo

from flask import current_app
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import func, or_, select, update

from models import Company, Reviewer, db, short_reference, utcnow
from models import Ticket as TicketRecord
from services.platform import mail
from services.platform.database import write_transaction
from services.platform.errors import ServiceError
from services.platform.web import public_base_url
from services.project_system import projects
from services.project_system.base import ProjectSystemError
from services.project_system.zones import UTC, project_zone
from services.tickets.ticket_queries import ListFilter, cents_column, list_conditions
from services.tickets.ticket_records import OLDEST_FIRST

log = logging.getLogger(__name__)

# A ticket still unsigned this many days after the day it was captured is overdue.
SIGNATURE_OVERDUE_DAYS = 3
# A change event on no change order this many days after it was written is named.
UNBILLED_DAYS = 30


@dataclass(frozen=True)
class Figure:
    """How many tickets wait in one way, their dollars, and the queue listing them."""

    count: int
    total: Decimal
    url: str


@dataclass(frozen=True)
class Oldest:
    """The ticket that has waited longest for the PM."""

    reference: str
    description: str
    captured_at: dt.datetime
    total: Decimal
    url: str


@dataclass(frozen=True)
class Digest:
    """What waits for a company's reviewers one morning."""

    company: str
    review: Figure
    oldest: Oldest | None
    overdue: Figure
    unbilled: Figure

    @property
    def waits(self) -> bool:
        """Whether anything waits, so that an e-mail is worth sending."""
        return bool(self.review.count or self.overdue.count or self.unbilled.count)


def _queue_url(**params: str) -> str:
    """The queue, filtered by these query parameters, at the public address."""
    return f"{public_base_url()}/queue?{urllib.parse.urlencode(params)}"


def _figure(company_id: int, where: ListFilter, url: str, *extra) -> Figure:
    """Count and dollars of a company's tickets matching a list filter and extra conditions."""
    count, cents = db.session.execute(
        select(func.count(), func.coalesce(func.sum(cents_column()), 0))
        .where(*list_conditions(company_id, where), *extra)).one()
    return Figure(count=int(count), total=Decimal(int(cents)) / 100, url=url)


def digest_for(company_id: int, now: dt.datetime | None = None) -> Digest:
    """What waits for a company's reviewers at `now`."""
    now = now or utcnow()
    review = ListFilter(stage="review")
    oldest = db.session.scalars(select(TicketRecord)
                                .where(*list_conditions(company_id, review))
                                .order_by(*OLDEST_FIRST).limit(1)).first()
    last_overdue_day = now.astimezone(UTC).date() - dt.timedelta(days=SIGNATURE_OVERDUE_DAYS)
    overdue_before = dt.datetime.combine(last_overdue_day + dt.timedelta(days=1), dt.time(),
                                         tzinfo=dt.timezone.utc)
    last_unbilled_day = now.astimezone(UTC).date() - dt.timedelta(days=UNBILLED_DAYS + 1)
    unbilled_before = dt.datetime.combine(last_unbilled_day + dt.timedelta(days=1), dt.time(),
                                          tzinfo=dt.timezone.utc)
    company = db.session.get(Company, company_id)
    return Digest(
        company=company.name if company else "",
        review=_figure(company_id, review, _queue_url(stage="review")),
        oldest=Oldest(reference=short_reference(oldest.id),
                      description=" ".join(oldest.description.split()),
                      captured_at=oldest.captured_at, total=oldest.total,
                      url=f"{public_base_url()}/tickets/{oldest.id}") if oldest else None,
        # The queue's "unsigned" filter on its default status (submitted) is this stage.
        overdue=_figure(company_id, ListFilter(stage="signature", captured_before=overdue_before),
                        _queue_url(unsigned="1", to=last_overdue_day.isoformat())),
        # Written on a day more than UNBILLED_DAYS before today (UTC dates), as the queue's
        # `written_to` filter reads them.
        unbilled=_figure(company_id, ListFilter(stage="written", written_before=unbilled_before),
                         _queue_url(not_on_change_order="1",
                                    written_to=last_unbilled_day.isoformat())))


# ------------------------------------------------------------ the company's clock


def company_zone(company_id: int) -> ZoneInfo:
    """The company's clock: the zone most of its active projects name, read from the project
    system and kept on the company; the one kept while it cannot be read; UTC when none."""
    try:
        named = [project_zone(project.time_zone).key
                 for project in projects.remote_projects(company_id)
                 if project.active and project.time_zone]
    except (ServiceError, ProjectSystemError) as error:
        log.info("digest: projects of company %s not read (%s); its kept zone is used",
                 company_id, type(error).__name__)
        named = []
    if named:
        zone = collections.Counter(named).most_common(1)[0][0]
        with write_transaction() as session:
            company = session.get(Company, company_id)
            if company is not None and company.time_zone != zone:
                company.time_zone = zone
    company = db.session.get(Company, company_id)
    return project_zone(company.time_zone) if company and company.time_zone else UTC


def sent_at(company_id: int, now: dt.datetime | None = None) -> str | None:
    """When the company's digest goes, as a reviewer reads it ('7:00 PDT', on the clock last
    kept for it, UTC while none is); None while this server sends no e-mail."""
    if not mail.configured():
        return None
    company = db.session.get(Company, company_id)
    zone = project_zone(company.time_zone) if company and company.time_zone else UTC
    hour = int(current_app.config["DIGEST_HOUR"])
    return f"{hour}:00 {(now or utcnow()).astimezone(zone):%Z}"


# ------------------------------------------------------------ turning it off and on


def _stop_signer() -> URLSafeSerializer:
    """Signs the 'stop these e-mails' links with the app's secret."""
    return URLSafeSerializer(current_app.secret_key, salt="ewt-digest-stop")


def stop_url(reviewer_id: int) -> str:
    """The link in a digest that turns it off for its reviewer, with no sign-in."""
    return f"{public_base_url()}/digest/stop/{_stop_signer().dumps(reviewer_id)}"


def stop_reviewer(token: str) -> Reviewer | None:
    """The reviewer a stop link was made for; None for a link this service did not sign."""
    try:
        reviewer_id = _stop_signer().loads(str(token)[:200])
    except BadSignature:
        return None
    if not isinstance(reviewer_id, int) or isinstance(reviewer_id, bool):
        return None
    return db.session.get(Reviewer, reviewer_id)


def set_digest(reviewer_id: int, on: bool) -> None:
    """Turn a reviewer's morning digest on or off."""
    with write_transaction() as session:
        reviewer = session.get(Reviewer, reviewer_id)
        if reviewer is not None:
            reviewer.digest_off = not on


# ------------------------------------------------------------ the e-mail


def _money(value: Decimal) -> str:
    """Dollars as the queue shows them: $1,234.50."""
    return f"${value:,.2f}"


def _tickets(count: int) -> str:
    """'1 ticket' or 'n tickets'."""
    return f"{count} ticket" if count == 1 else f"{count} tickets"


def message(digest: Digest, reviewer_id: int, zone: ZoneInfo, now: dt.datetime
            ) -> tuple[str, str]:
    """Subject and plain-text body of one reviewer's digest."""
    today = now.astimezone(zone)
    parts = []
    if digest.review.count:
        parts.append(f"{digest.review.count} to approve")
    if digest.overdue.count:
        parts.append(f"{digest.overdue.count} unsigned")
    if digest.unbilled.count:
        parts.append(f"{digest.unbilled.count} not on a change order")
    subject = f"Extra-work tickets this morning: {', '.join(parts)}"
    lines = [f"Good morning. This is what waits at {digest.company} on "
             f"{today:%A, %B} {today.day}.", ""]
    if digest.review.count:
        lines += [f"Waiting for you to approve: {_tickets(digest.review.count)}, "
                  f"{_money(digest.review.total)}", f"  {digest.review.url}"]
        if digest.oldest:
            captured = digest.oldest.captured_at.astimezone(zone)
            days = (today.date() - captured.date()).days
            waited = "today" if days == 0 else ("1 day ago" if days == 1 else f"{days} days ago")
            lines += [f"  The oldest: {digest.oldest.reference}, {digest.oldest.description[:80]}"
                      f", captured {captured:%Y-%m-%d} ({waited}), "
                      f"{_money(digest.oldest.total)}", f"  {digest.oldest.url}"]
        lines.append("")
    if digest.overdue.count:
        lines += [f"Still waiting for a signature {SIGNATURE_OVERDUE_DAYS} days or more after "
                  f"the work: {_tickets(digest.overdue.count)}, {_money(digest.overdue.total)}",
                  f"  {digest.overdue.url}", ""]
    if digest.unbilled.count:
        lines += [f"Written to Procore more than {UNBILLED_DAYS} days ago and not on a change "
                  f"order yet: {_tickets(digest.unbilled.count)}, {_money(digest.unbilled.total)}",
                  f"  {digest.unbilled.url}", ""]
    lines += ["You get this e-mail on mornings when something waits. To stop it, open:",
              stop_url(reviewer_id)]
    return subject, "\n".join(lines) + "\n"


# ------------------------------------------------------------ sending


def _claim(reviewer_id: int, day: dt.date) -> tuple[bool, dt.date | None]:
    """Mark the digest of `day` as sent to a reviewer still due one: whether this run did (not
    another), and the date it was last sent on before, to give back."""
    with write_transaction() as session:
        before = session.scalar(select(Reviewer.digest_sent_on).where(Reviewer.id == reviewer_id))
        claimed = session.execute(
            update(Reviewer).where(Reviewer.id == reviewer_id, Reviewer.disabled_at.is_(None),
                                   Reviewer.digest_off.is_(False),
                                   or_(Reviewer.digest_sent_on.is_(None),
                                       Reviewer.digest_sent_on < day))
            .values(digest_sent_on=day).execution_options(synchronize_session=False))
        return claimed.rowcount == 1, before


def _give_back(reviewer_id: int, day: dt.date, before: dt.date | None) -> None:
    """Undo a claim whose e-mail did not go, so the next run tries again."""
    with write_transaction() as session:
        session.execute(update(Reviewer).where(Reviewer.id == reviewer_id,
                                               Reviewer.digest_sent_on == day)
                        .values(digest_sent_on=before).execution_options(synchronize_session=False))


def _morning(company_id: int, now: dt.datetime, hour: int) -> dt.datetime | None:
    """Now on the company's clock once its digest hour has come there and a reviewer may be
    due, else None; the project system is asked for the zone only then, or while none is kept
    (not every 15 minutes all day)."""
    company = db.session.get(Company, company_id)
    if company is not None and company.time_zone:
        kept = now.astimezone(project_zone(company.time_zone))
        if kept.hour < hour or not _due(company_id, kept.date()):
            return None
    local = now.astimezone(company_zone(company_id))
    return local if local.hour >= hour else None


def _due(company_id: int, day: dt.date) -> list[tuple[int, str]]:
    """The company's reviewers still due the digest of `day`: (id, e-mail)."""
    return list(db.session.execute(
        select(Reviewer.id, Reviewer.email).where(
            Reviewer.company_id == company_id, Reviewer.disabled_at.is_(None),
            Reviewer.digest_off.is_(False),
            or_(Reviewer.digest_sent_on.is_(None), Reviewer.digest_sent_on < day))
        .order_by(Reviewer.id)).all())


def send_due(now: dt.datetime | None = None) -> list[int]:
    """E-mail each reviewer due a digest now; returns the ids of those it went to.

    A reviewer is due once DIGEST_HOUR has come on the company's clock and no digest was sent
    to them on that date; the first run that finds them due decides the day, sending nothing
    when nothing waits. Does nothing while e-mail is not set up.
    """
    if not mail.configured():
        return []
    now = now or utcnow()
    hour = int(current_app.config["DIGEST_HOUR"])
    sent: list[int] = []
    companies = db.session.scalars(
        select(Reviewer.company_id).where(Reviewer.disabled_at.is_(None),
                                          Reviewer.digest_off.is_(False))
        .distinct().order_by(Reviewer.company_id)).all()
    for company_id in companies:
        local = _morning(company_id, now, hour)
        if local is None:
            continue
        due = _due(company_id, local.date())
        if not due:
            continue
        digest = digest_for(company_id, now)
        for reviewer_id, email in due:
            claimed, before = _claim(reviewer_id, local.date())
            if not claimed or not digest.waits:
                continue
            subject, body = message(digest, reviewer_id, local.tzinfo, now)
            if mail.send(email, subject, body):
                sent.append(reviewer_id)
            else:
                _give_back(reviewer_id, local.date(), before)
    return sent
