"""Typed SQLAlchemy models. Importing this package registers every table."""
from models.base import Base, UTCDateTime, db, utcnow
from models.company import ApiKey, Company, Reviewer

__all__ = ["ApiKey", "Base", "Company", "Reviewer", "UTCDateTime", "db", "utcnow"]
