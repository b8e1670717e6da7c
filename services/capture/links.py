"""Capture links: create, list, revoke, and resolve a token from the field."""
from __future__ import annotations

import io
import secrets
import urllib.parse

import segno
from sqlalchemy import func, select

from models import CaptureLink, Ticket, db, utcnow
from models.schemas import Link, LinkUrls
from services.platform.database import write_transaction
from services.platform.errors import NotFound, ServiceError
from services.platform.web import public_base_url
from services.project_system import projects

VIA_SUFFIX = {"link": "", "qr": "/q", "sms": "/s"}


class LinkGone(ServiceError):
    """The link was revoked: the crew needs a new one."""

    status = 410
    code = "link_revoked"


def capture_url(token: str, via: str = "link") -> str:
    """The capture address of a token in one of its three forms."""
    return f"{public_base_url()}/c/{token}{VIA_SUFFIX[via]}"


def sms_href(link: CaptureLink) -> str:
    """An sms: URI whose body carries the sms form of the address."""
    body = f"Extra-work tickets for {link.project_name}: {capture_url(link.token, 'sms')}"
    return "sms:?&body=" + urllib.parse.quote(body)


def qr_svg(token: str) -> str:
    """A standalone SVG QR code of the qr form of the address.

    It carries the SVG namespace, so it renders as an image file (an <img> or the API's
    qr_svg_url) as well as inline in the poster; a title names it for screen readers.
    """
    out = io.BytesIO()
    segno.make(capture_url(token, "qr"), error="m").save(
        out, kind="svg", scale=8, border=2, xmldecl=False, svgns=True, svgclass=None,
        lineclass=None, title="QR code of the capture link", nl=False)
    return out.getvalue().decode("utf-8")


def _shape(link: CaptureLink, ticket_count: int) -> Link:
    """A link as the API shows it."""
    base = public_base_url()
    return Link(
        token=link.token, url=capture_url(link.token),
        urls=LinkUrls(plain=capture_url(link.token), qr=capture_url(link.token, "qr"),
                      sms=capture_url(link.token, "sms")),
        project_id=link.project_id, project_name=link.project_name, label=link.label,
        created_at=link.created_at, revoked_at=link.revoked_at, ticket_count=ticket_count,
        qr_svg_url=f"{base}/c/{link.token}/qr.svg", poster_url=f"{base}/c/{link.token}/poster",
        sms_href=sms_href(link))


def create_link(company_id: int, project_id: str, label: str | None) -> Link:
    """Create a link for a project of this company with a fresh 192-bit token."""
    project = projects.require_project(company_id, project_id)
    return create_link_for_known_project(company_id, str(project.id),
                                         project.display_name or project.name, label)


def create_link_for_known_project(company_id: int, project_id: str, project_name: str,
                                  label: str | None) -> Link:
    """Create a link for a project already known to belong to the company (demo data)."""
    link = CaptureLink(company_id=company_id, project_id=project_id, project_name=project_name,
                       label=label or None, token=secrets.token_urlsafe(24))
    with write_transaction() as session:
        projects.remember_project(session, company_id, project_id, project_name)
        session.add(link)
    return _shape(link, 0)


def _ticket_counts(company_id: int) -> dict[str, int]:
    """How many tickets came through each of the company's links."""
    rows = db.session.execute(
        select(Ticket.link_token, func.count()).where(Ticket.company_id == company_id,
                                                      Ticket.link_token.is_not(None))
        .group_by(Ticket.link_token))
    return dict(rows.all())


def list_links(company_id: int) -> list[Link]:
    """The company's links, newest first, with their ticket counts."""
    counts = _ticket_counts(company_id)
    links = db.session.scalars(select(CaptureLink).where(CaptureLink.company_id == company_id)
                               .order_by(CaptureLink.created_at.desc(), CaptureLink.id.desc()))
    return [_shape(link, counts.get(link.token, 0)) for link in links]


def labels(company_id: int) -> list[str]:
    """The distinct labels of the company's links: the subs and crews links were made for."""
    return list(db.session.scalars(
        select(CaptureLink.label).where(CaptureLink.company_id == company_id,
                                        CaptureLink.label.is_not(None))
        .group_by(CaptureLink.label).order_by(func.lower(CaptureLink.label))))


def label_of(token: str) -> str | None:
    """The label (the sub or crew) of the link with this token, if it has one."""
    return db.session.scalar(select(CaptureLink.label).where(CaptureLink.token == token))


def _company_link(company_id: int, token: str) -> CaptureLink:
    """A link of this company by token, or 404 exactly as for an unknown token."""
    link = db.session.scalar(select(CaptureLink).where(CaptureLink.token == str(token)[:64],
                                                       CaptureLink.company_id == company_id))
    if link is None:
        raise NotFound("no such link on this company", code="link_not_found")
    return link


def revoke_link(company_id: int, token: str) -> Link:
    """Stop a link from working; revoking twice changes nothing."""
    link = _company_link(company_id, token)
    if link.revoked_at is None:
        with write_transaction() as session:
            current = session.get(CaptureLink, link.id)
            if current.revoked_at is None:
                current.revoked_at = utcnow()
            link = current
    counts = _ticket_counts(company_id)
    return _shape(link, counts.get(link.token, 0))


def resolve_token(token: str) -> CaptureLink:
    """The live link behind a token from the field: 404 when unknown, 410 when revoked."""
    link = db.session.scalar(select(CaptureLink).where(CaptureLink.token == str(token)[:64]))
    if link is None:
        raise NotFound("this link does not exist", code="link_not_found")
    if link.revoked_at is not None:
        raise LinkGone("this link no longer works")
    return link
