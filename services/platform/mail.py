"""Outgoing e-mail through the SMTP server named by the MAIL_* settings (no daemon of our own)."""
from __future__ import annotations

import logging
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from flask import after_this_request, current_app

log = logging.getLogger(__name__)


def configured() -> bool:
    """Whether e-mail can be sent: an SMTP server is set."""
    return bool(current_app.config.get("MAIL_SERVER"))


def send(to: str, subject: str, body: str) -> bool:
    """Send one plain-text e-mail; False (logged without its content) when it could not go."""
    config = current_app.config
    if not configured():
        return False
    message = EmailMessage()
    message["From"] = config["MAIL_FROM"]
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=str(config["MAIL_FROM"]).rpartition("@")[2] or None)
    message.set_content(body)
    timeout = float(config["MAIL_TIMEOUT_S"])
    host, port = config["MAIL_SERVER"], int(config["MAIL_PORT"])
    try:
        if config.get("MAIL_USE_SSL"):
            smtp = smtplib.SMTP_SSL(host, port, timeout=timeout,
                                    context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(host, port, timeout=timeout)
        with smtp:
            if config.get("MAIL_USE_TLS") and not config.get("MAIL_USE_SSL"):
                smtp.starttls(context=ssl.create_default_context())
            if config.get("MAIL_USERNAME"):
                smtp.login(config["MAIL_USERNAME"], config.get("MAIL_PASSWORD") or "")
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as error:
        log.warning("e-mail to the SMTP server %s:%s failed: %s", host, port, type(error).__name__)
        return False
    return True


def send_after_answer(to: str, subject: str, body: str) -> None:
    """Send one e-mail once the current request's answer has gone out (its timing tells nothing)."""
    app = current_app._get_current_object()

    @after_this_request
    def _on_close(response):
        def _send() -> None:
            with app.app_context():
                send(to, subject, body)
        response.call_on_close(_send)
        return response
