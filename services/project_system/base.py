"""What the service needs from a project system (Procore or the sandbox): records and errors."""
from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol


@dataclass(frozen=True)
class RemoteProject:
    """A project in the project system."""

    id: int
    name: str
    display_name: str | None
    project_number: str | None
    active: bool
    # The project system's name for the zone, e.g. "Pacific Time (US & Canada)".
    time_zone: str | None = None


@dataclass(frozen=True)
class CostCode:
    """A cost code; ``code`` is the full code with its parent prefix, e.g. "02-200".

    Where the company splits a project into sub jobs, each sub job has cost codes of its own
    (the same code text, another id); ``sub_job`` is that sub job's code, e.g. "B1".
    """

    id: int
    code: str
    name: str
    sub_job: str | None = None

    @property
    def shown(self) -> str:
        """The code as people read it: with its sub job in front ("B1.02-200") when it has one."""
        return f"{self.sub_job}.{self.code}" if self.sub_job else self.code


@dataclass(frozen=True)
class CostType:
    """A cost type (Procore: line item type), e.g. code "L", base_type "labor"."""

    id: int
    code: str
    name: str
    base_type: str


@dataclass(frozen=True)
class BudgetCode:
    """A budget (WBS) code such as "02-200.L".

    ``cost_type`` uses the service's words "labor", "materials", "equipment" and "other";
    any other kind keeps the project system's base type (e.g. "commitment").
    """

    id: int
    flat_code: str
    description: str
    cost_code_id: int | None
    cost_type: str | None


@dataclass(frozen=True)
class ChangeEventLine:
    """One cost line of a change event; ``budget_code_id`` None means no budget code."""

    description: str
    budget_code_id: int | None
    cost_type: str | None
    quantity: Decimal | None
    unit_cost: Decimal | None
    amount: Decimal
    # A hint: the client sends the company's own unit ("hr" becomes its hour unit) or none.
    unit_of_measure: str | None
    # The sub's vendor and commitment the line is proposed on; None writes the line without.
    vendor_id: int | None = None
    contract_id: int | None = None


@dataclass(frozen=True)
class ChangeEventDraft:
    """A change event to create; ``origin_id`` identifies it for lookups after a failure."""

    origin_id: str
    title: str
    description: str
    lines: tuple[ChangeEventLine, ...]
    origin_data: str | None = None
    # Procore's event type: tbd, allowance, contingency, owner_change or transfer.
    event_type: str = "tbd"
    change_reason_id: int | None = None


@dataclass(frozen=True)
class Vendor:
    """A company in a project's directory (Procore: vendor)."""

    id: int
    name: str


@dataclass(frozen=True)
class Commitment:
    """A subcontract (work order contract) or purchase order of a project, with its vendor."""

    id: int
    kind: str  # "work_order" or "purchase_order"
    number: str | None
    title: str | None
    status: str | None  # Procore's words, e.g. "Approved", "Draft"
    vendor_id: int | None
    vendor_name: str | None


@dataclass(frozen=True)
class ChangeReason:
    """A company's change order change reason, e.g. "Client Request"."""

    id: int
    name: str


@dataclass(frozen=True)
class ChangeOrderState:
    """A change order a written line is on: ``kind`` "commitment" or "prime"."""

    kind: str
    number: str | None
    title: str | None
    status: str | None


@dataclass(frozen=True)
class RecordState:
    """Where a written change event or daily log entry stands in the project system now.

    ``status`` is the project system's status name ("Open", "Pending", "Closed", "Void"; a daily
    log entry's "pending" or "approved"); ``deleted`` is true when the record is gone or in the
    recycle bin; ``change_orders`` lists each change order the record's lines are on, once.
    """

    status: str | None
    deleted: bool
    change_orders: tuple[ChangeOrderState, ...] = ()


@dataclass(frozen=True)
class Attachment:
    """A file to attach to a record."""

    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class ManpowerDraft:
    """A daily log manpower entry to create; hours are per worker."""

    origin_id: str
    date: datetime.date
    num_workers: int
    num_hours: Decimal
    notes: str


@dataclass(frozen=True)
class RemoteRecord:
    """A record written to the project system: "change_event" or "manpower_log"."""

    kind: str
    id: int
    number: str | None
    url: str
    attachment_filenames: tuple[str, ...] = ()
    # The attachments' ids, in the order of their names above.
    attachment_ids: tuple[int, ...] = ()


class ProjectSystemError(Exception):
    """The project system refused a call or could not be used.

    ``message`` is the project system's own text where it sent one; ``status`` is the HTTP
    status (None when no answer came); ``request_id`` is its X-Request-Id, for support.
    """

    def __init__(self, message: str, *, status: int | None = None,
                 request_id: str | None = None) -> None:
        """Keep the message, the HTTP status and the request id."""
        super().__init__(message)
        self.message = message
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        """The message with the status and request id, when known."""
        details = [f"HTTP {self.status}"] if self.status is not None else []
        if self.request_id:
            details.append(f"request {self.request_id}")
        return f"{self.message} ({', '.join(details)})" if details else self.message


class ProjectSystemUnavailable(ProjectSystemError):
    """No usable answer: connection failure, timeout, or 5xx/429 after the allowed retries.

    After a write, the write may or may not have happened; look the record up before retrying.
    """


class ProjectSystemRateLimited(ProjectSystemUnavailable):
    """The project system asked for a longer pause than a caller should wait (its 429).

    ``retry_after_s`` is how long it asked for. Nothing was done by the refused call.
    """

    def __init__(self, message: str, *, retry_after_s: float, status: int | None = 429,
                 request_id: str | None = None) -> None:
        """Keep the message and how long the project system asked to wait."""
        super().__init__(message, status=status, request_id=request_id)
        self.retry_after_s = retry_after_s


class WriteUnconfirmed(ProjectSystemError):
    """A write was sent and not confirmed: it may be there, whole or in part."""


class ProjectSystemAuthError(ProjectSystemError):
    """The client credentials were refused."""


class ToolDisabled(ProjectSystemError):
    """The project's tool (e.g. Change Events) is off or not permitted (403/404)."""


class ProjectSystem(Protocol):
    """The operations the service performs on a project system."""

    def list_projects(self) -> list[RemoteProject]:
        """All projects the credentials can see."""
        ...

    def change_events_enabled(self, project_id: int) -> bool:
        """Whether change events can be written on the project."""
        ...

    def list_cost_codes(self, project_id: int) -> list[CostCode]:
        """The project's cost codes that can carry budget codes."""
        ...

    def list_cost_types(self, project_id: int) -> list[CostType]:
        """The cost types available on the project."""
        ...

    def list_budget_codes(self, project_id: int) -> list[BudgetCode]:
        """The project's active budget codes."""
        ...

    def read_catalog(self, project_id: int
                     ) -> tuple[list[CostCode], list[CostType], list[BudgetCode]]:
        """Cost codes, cost types and budget codes together, each read once."""
        ...

    def create_budget_code(self, project_id: int, cost_code_id: int, cost_type: str,
                           description: str | None = None) -> BudgetCode:
        """Create the budget code for a cost code and cost type, or return the existing one."""
        ...

    def create_change_event(self, project_id: int, draft: ChangeEventDraft) -> RemoteRecord:
        """Create an open, out-of-scope change event with one line item per draft line."""
        ...

    def attach_files(self, project_id: int, change_event_id: int,
                     attachments: Sequence[Attachment],
                     known_ids: Sequence[int] = ()) -> RemoteRecord:
        """Attach files to a change event in one change of it; the event as read back after,
        each sent file under the name it was sent with (`known_ids`: attachments it had)."""
        ...

    def find_change_event(self, project_id: int, origin_id: str,
                          created_after: datetime.datetime | None = None,
                          ) -> RemoteRecord | None:
        """The change event created with ``origin_id``, if there is one."""
        ...

    def create_manpower_log(self, project_id: int, draft: ManpowerDraft) -> RemoteRecord:
        """Create a daily log manpower entry."""
        ...

    def find_manpower_log(self, project_id: int, origin_id: str,
                          date: datetime.date) -> RemoteRecord | None:
        """The manpower entry created with ``origin_id`` on ``date``, if there is one."""
        ...

    def list_vendors(self, project_id: int) -> list[Vendor]:
        """The project's directory of companies."""
        ...

    def list_commitments(self, project_id: int) -> list[Commitment]:
        """The project's subcontracts and purchase orders that can take a line (not Void or
        Terminated)."""
        ...

    def list_change_reasons(self, project_id: int) -> list[ChangeReason]:
        """The company's change reasons offered in selects."""
        ...

    def read_record_state(self, project_id: int, kind: str, record_id: int) -> RecordState:
        """Where a written record ("change_event" or "manpower_log") stands now."""
        ...

    def get_change_event(self, project_id: int, change_event_id: int) -> dict[str, Any]:
        """A change event as the project system returns it."""
        ...

    def get_manpower_log(self, project_id: int, manpower_log_id: int) -> dict[str, Any]:
        """A manpower entry as the project system returns it."""
        ...

    def record_url(self, project_id: int, kind: str, record_id: int) -> str:
        """The web address where a person can open the record."""
        ...
