"""Typed SQLAlchemy models. Importing this package registers every table."""
from models.base import Base, UTCDateTime, db, utcnow
from models.company import ApiKey, Company, Reviewer
from models.link import CaptureLink
from models.pricing import Authorization, ProjectMarkups, RateSheet
from models.project_system import (
    KnownProject,
    ProjectSettings,
    ProjectSystemConnection,
    SubCommitment,
)
from models.routing import RoutingDecision
from models.share_link import ShareLink
from models.signing import SignatureRequest
from models.ticket import Decision, StagedPhoto, Ticket, TicketPhoto, short_reference
from models.usage import StorageUsage
from models.webhook import WebhookAttempt, WebhookDelivery, WebhookEndpoint

__all__ = ["ApiKey", "Authorization", "Base", "CaptureLink", "Company", "Decision", "KnownProject",
           "ProjectMarkups", "ProjectSettings", "ProjectSystemConnection", "RateSheet", "Reviewer",
           "RoutingDecision", "ShareLink",
           "SignatureRequest",
           "StagedPhoto",
           "StorageUsage", "SubCommitment", "Ticket", "TicketPhoto", "short_reference", "UTCDateTime",
           "WebhookAttempt",
           "WebhookDelivery", "WebhookEndpoint", "db", "utcnow"]
