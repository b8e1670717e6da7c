"""Companies and the description of the caller."""
from __future__ import annotations

from models import Company, db
from models.schemas import CompanyRef, KeyRef, Me
from services.accounts.keys import Caller
from services.platform.database import write_transaction
from services.platform.errors import ValidationFailed, field_problem


def create_company(name: str) -> Company:
    """Create a company with the given display name."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ValidationFailed("a company needs a name of 1 to 200 characters",
                               details=[field_problem("name", "1 to 200 characters")])
    with write_transaction() as session:
        company = Company(name=name)
        session.add(company)
    return company


def get_company(company_id: int) -> Company | None:
    """Return a company by id, or None."""
    return db.session.get(Company, company_id)


def describe_caller(caller: Caller) -> Me:
    """Describe the company and key behind an authenticated request."""
    return Me(company=CompanyRef(id=caller.company_id, name=caller.company_name),
              key=KeyRef(name=caller.name, prefix=caller.prefix, created_at=caller.created_at,
                         created_by=caller.created_by, last_used_at=caller.last_used_at))
