"""Typed SQLAlchemy models. Importing this package registers every table."""
from models.base import Base, UTCDateTime, db, utcnow
from models.company import ApiKey, Company, Reviewer
from models.link import CaptureLink
from models.project_system import ProjectSystemConnection
from models.ticket import Decision, StagedPhoto, Ticket, TicketCount, TicketPhoto

__all__ = ["ApiKey", "Base", "CaptureLink", "Company", "Decision", "ProjectSystemConnection", "Reviewer", "Ticket",
           "StagedPhoto", "TicketCount", "TicketPhoto", "UTCDateTime", "db", "utcnow"]
