"""Pydantic shapes of every /v1 request and response: one model per shape.

These models validate input and generate the OpenAPI document, so the
document is never a second, hand-kept copy.
"""
from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
)


# Whitespace as JSON Schema patterns (ECMA-262) know it, so "\\S" in the document and the
# trimming here agree on what a blank string is.
ECMA_SPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


def required_text(max_length: int, **extra: Any) -> Any:
    """A required string that must hold more than whitespace once trimmed."""
    return Field(min_length=1, max_length=max_length, json_schema_extra={"pattern": "\\S"}, **extra)


class Shape(BaseModel):
    """Base of every API shape: unknown input fields are ignored, output is plain JSON."""

    model_config = ConfigDict(extra="ignore")


class InputShape(Shape):
    """Base of every shape a caller sends: strings are trimmed before they are checked."""

    @field_validator("*", mode="before")
    @classmethod
    def _trim(cls, value: Any) -> Any:
        """Trim surrounding whitespace from every string."""
        return value.strip(ECMA_SPACE) if isinstance(value, str) else value


class ErrorDetail(Shape):
    """The inside of every error body."""

    code: str = Field(description="Stable, machine-readable error code.")
    message: str = Field(description="Human-readable explanation.")
    details: Any = Field(default=None, description=(
        "Optional. For validation errors: a list of {field, message}, one per problem."))


class ErrorBody(Shape):
    """Every error under /v1 has this shape."""

    error: ErrorDetail


class CompanyRef(Shape):
    """A company as shown to its own callers."""

    id: int
    name: str


class KeyRef(Shape):
    """The calling API key, without its secret."""

    name: str
    prefix: str = Field(description="The first characters of the key, enough to recognise it.")


class Me(Shape):
    """Who is calling: the company the key belongs to, and the key itself."""

    company: CompanyRef
    key: KeyRef


CostTypeName = Literal["labor", "materials", "equipment", "other"]


class Project(Shape):
    """A project of the company in the project system."""

    id: str = Field(description="The project's id in the project system.")
    name: str
    display_name: str | None = None
    project_number: str | None = None


class ProjectList(Shape):
    """The company's projects."""

    data: list[Project]


class BudgetCodeRef(Shape):
    """A budget (WBS) code as listed under its cost code."""

    id: int = Field(description="Budget code id; use it as a value in approve `routes`.")
    code: str = Field(description="Flat code, e.g. '02-200.L'.")
    cost_type: str | None = Field(description="labor, materials, equipment, other, or the "
                                              "project system's own type name.")


class CostCodeItem(Shape):
    """A cost code of a project with the budget codes it already has."""

    id: int = Field(description="Cost code item id; use it as `cost_code_item_id`.")
    code: str
    name: str
    budget_codes: list[BudgetCodeRef]


class CostCodeList(Shape):
    """Cost codes that match the search."""

    data: list[CostCodeItem]


class CostCodeQuery(InputShape):
    """Search parameters for cost codes."""

    q: str | None = Field(default=None, max_length=100,
                          description="Case-insensitive substring of the code or the name.")


class BudgetCodeInput(InputShape):
    """A budget code to create for a cost code and cost type."""

    cost_code_item_id: int = Field(gt=0, lt=2**63)
    cost_type: CostTypeName = Field(default="other", description="Defaults to 'other'.")


class BudgetCodeOut(Shape):
    """A budget code, existing or just created."""

    id: int
    code: str
    cost_type: str | None
    cost_code_item_id: int | None
    description: str
    created: bool = Field(description="False when the pair already existed and was returned as is.")


class Capability(Shape):
    """Where a ticket on the project can be filed."""

    change_events: bool = Field(description="The project has the change-event tool.")
    daily_log: bool = Field(description="The project can take a daily log entry.")
    destination: Literal["change_event", "daily_log"] | None = Field(description=(
        "What approve writes when no destination is named: 'change_event', or null when the "
        "project has no change-event tool (approve then answers 409 no_change_events; a daily "
        "log is never chosen automatically)."))


# ----------------------------------------------------------------- tickets

SIX_PLACES = Decimal("0.000001")


def _to_decimal(value: Any) -> Any:
    """Read a JSON number (or numeric text, as forms send) exactly, kept to 6 decimal places.

    Floats are read through their shortest text, so 0.1 is 0.1 and not 0.1000000000000000055.
    """
    if isinstance(value, bool):
        raise ValueError("must be a number")
    if isinstance(value, (int, float, str, Decimal)):
        try:
            number = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
        except InvalidOperation:
            raise ValueError("must be a number")
        if not number.is_finite():
            raise ValueError("must be a finite number")
        if abs(number) >= 10**12:
            raise ValueError("is far too large")
        return number.quantize(SIX_PLACES, rounding=ROUND_HALF_UP)
    return value


def _number(low: int, high: int) -> Any:
    """A finite decimal within documented bounds, documented as a JSON number."""
    return Annotated[Decimal, Field(ge=low, le=high), BeforeValidator(_to_decimal),
                     WithJsonSchema({"type": "number", "minimum": low, "maximum": high})]


Hours = _number(0, 1000)
Workers = _number(0, 500)
Rate = _number(0, 100_000)
Quantity = _number(0, 1_000_000)
CostCodeText = Annotated[str | None, Field(default=None, max_length=40,
                                           description="Project cost code, e.g. '02-200'; helps routing.")]
JsonNumber = Annotated[Decimal, PlainSerializer(float, return_type=float, when_used="json")]
OptionalJsonNumber = Annotated[Decimal | None,
                               PlainSerializer(lambda v: None if v is None else float(v),
                                               return_type=float | None, when_used="json")]


class LaborLineIn(InputShape):
    """Labor: a trade, hours per worker, how many workers, and the hourly rate."""

    trade: str = required_text(100)
    hours: Hours = Field(description="Hours per worker, 0 to 1000.")
    workers: Workers = Field(default=1, validate_default=True, description="Defaults to 1; at most 500.")
    rate: Rate | None = Field(default=None, description="Per hour, 0 to 100000.")
    costCode: CostCodeText = None


class EquipmentLineIn(InputShape):
    """Equipment: what ran, for how many hours, at what hourly rate."""

    description: str = required_text(300)
    hours: Hours
    rate: Rate | None = Field(default=None, description="Per hour, 0 to 100000.")
    costCode: CostCodeText = None


class MaterialLineIn(InputShape):
    """Materials: what was used, how much, at what unit cost."""

    description: str = required_text(300)
    quantity: Quantity = Field(description="0 to 1000000.")
    unitCost: Rate | None = Field(default=None, description="0 to 100000.")
    costCode: CostCodeText = None


class Coords(InputShape):
    """Where a photo was taken, as the phone reported it."""

    lat: float = Field(ge=-90, le=90, allow_inf_nan=False)
    lng: float = Field(ge=-180, le=180, allow_inf_nan=False)
    accuracy_m: float | None = Field(default=None, ge=0, le=100_000, allow_inf_nan=False)


_DATETIME = TypeAdapter(dt.datetime)


def _check_timestamp(value: str | None) -> str | None:
    """Accept an RFC 3339 / ISO 8601 date-time string and keep it exactly as given."""
    if value is None or value == "":
        return None
    try:
        _DATETIME.validate_python(value)
    except ValidationError:
        raise ValueError("not an ISO 8601 date-time, e.g. 2026-05-04T07:30:00Z")
    return value


Timestamp = Annotated[str | None, Field(default=None, max_length=40,
                                        json_schema_extra={"format": "date-time"}),
                      AfterValidator(_check_timestamp)]


class PhotoIn(InputShape):
    """A photo: a data URL (or bare base64) of a JPEG, PNG or WebP image, at most 2 MiB."""

    name: str | None = Field(default=None, max_length=200)
    data_url: Annotated[str, required_text(50_000_000, description=(
        "data:image/jpeg;base64,... or bare base64. The image itself is checked too: "
        "anything that is not a JPEG, PNG or WebP is refused with 400."))]
    taken_at: Timestamp = None
    coords: Coords | None = None


class SignatureIn(InputShape):
    """The signature of the general contractor's person; it counts only with an image."""

    name: str | None = Field(default=None, max_length=200)
    role: str | None = Field(default=None, max_length=200)
    signed_at: Timestamp = None
    image: str | None = Field(default=None, description="data:image/png;base64,... of the drawing.")


def _id_text(value: Any) -> Any:
    """Accept a project id given as a JSON integer, since project-system ids are numbers."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


ProjectId = Annotated[str, BeforeValidator(_id_text), required_text(40)]


class TicketInput(InputShape):
    """A new ticket, as the API and the capture form both submit it."""

    project_id: ProjectId
    description: str = required_text(4000, description="What was done.")
    reason: str = required_text(2000, description="Why it is out of scope.")
    directed_by: str = required_text(200, description="Who authorized it.")
    captured_by: str | None = Field(default=None, max_length=200)
    labor: list[LaborLineIn] = Field(default_factory=list, max_length=50)
    equipment: list[EquipmentLineIn] = Field(default_factory=list, max_length=50)
    materials: list[MaterialLineIn] = Field(default_factory=list, max_length=100)
    photos: list[PhotoIn] = Field(default_factory=list, max_length=12,
                                  description="At most 12 photos per ticket.")
    signature: SignatureIn | None = None
    photos_expected: int | None = Field(
        default=None, ge=0, le=12, description="How many photos will follow one by one "
        "(PUT .../photos/{key}); the ticket shows them as arriving until they are all in.")
    worked_on: dt.date | None = Field(
        default=None, description="The day the work was done (YYYY-MM-DD), if not the day the "
                                  "ticket is sent; it dates the daily log entry.")
    client_ref: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_-]{8,64}$",
        description="Your own id for this ticket (8 to 64 letters, digits, '-', '_'). Sending "
                    "the same value again returns the ticket made the first time, not a second one.")


class PhotosInput(InputShape):
    """Photos to attach to a ticket that is not written yet."""

    photos: list[PhotoIn] = Field(min_length=1, max_length=12)


class LaborLine(Shape):
    """A labor line with its amount (workers x hours x rate)."""

    trade: str
    hours: JsonNumber
    workers: JsonNumber
    rate: OptionalJsonNumber
    costCode: str | None
    amount: JsonNumber


class EquipmentLine(Shape):
    """An equipment line with its amount (hours x rate)."""

    description: str
    hours: JsonNumber
    rate: OptionalJsonNumber
    costCode: str | None
    amount: JsonNumber


class MaterialLine(Shape):
    """A material line with its amount (quantity x unitCost)."""

    description: str
    quantity: JsonNumber
    unitCost: OptionalJsonNumber
    costCode: str | None
    amount: JsonNumber


class Photo(Shape):
    """A stored photo of a ticket."""

    name: str
    taken_at: str | None
    coords: Coords | None


class Signature(Shape):
    """The stored signature."""

    name: str | None
    role: str | None
    signed_at: str | None


class Decision(Shape):
    """One approve, reject or restore, oldest first."""

    action: Literal["approved", "rejected", "restored"]
    by: str | None
    at: dt.datetime


class External(Shape):
    """The record written into the project system."""

    destination: Literal["change_event", "daily_log"]
    change_event_id: int | None
    manpower_log_id: int | None
    number: str | None
    written_at: dt.datetime
    url: str
    note: str | None


class RoutingLine(Shape):
    """Where one line of money lands in the project system."""

    line: int = Field(description="Index of the line; the key in approve `routes`.")
    kind: Literal["labor", "equipment", "materials"]
    description: str
    cost_type: str | None
    quantity: OptionalJsonNumber
    unit_cost: OptionalJsonNumber
    amount: JsonNumber
    budget_code: str | None = Field(description="Flat code text, e.g. '02-200.L'.")
    budget_code_id: int | None
    routed: bool
    exact: bool = Field(description="False means a fallback or a loose match was used.")
    needs_review: bool = Field(description="A person should look; approve refuses it unless allowed.")
    reason: str = Field(description="Why the line landed where it did.")


class TicketSummary(Shape):
    """A ticket as listed: every field except routing."""

    id: str
    status: Literal["submitted", "written", "rejected"]
    project_id: str
    description: str
    reason: str
    directed_by: str
    captured_at: dt.datetime
    worked_on: dt.date | None = None
    captured_via: Literal["qr", "sms", "link", "api"]
    captured_by: str | None
    total: JsonNumber
    labor: list[LaborLine]
    equipment: list[EquipmentLine]
    materials: list[MaterialLine]
    signature: Signature | None
    photos: list[Photo]
    photo_count: int
    photos_expected: int | None = None
    link_token: str | None
    approved_by: str | None
    approved_at: dt.datetime | None
    decisions: list[Decision]
    external: External | None
    warnings: list[str]


class Ticket(TicketSummary):
    """A ticket with its routing: the most important field for a reviewer."""

    routing: list[RoutingLine]


class TicketList(Shape):
    """A page of tickets, newest first."""

    data: list[TicketSummary]
    total: int = Field(description="How many tickets match the filters.")
    limit: int
    offset: int


class TicketListQuery(InputShape):
    """Filters and paging for the ticket list."""

    status: Literal["submitted", "written", "rejected"] | None = None
    project_id: str | None = Field(default=None, max_length=40, pattern=r"^[0-9]+$",
                                   description="A project id: the project system's number.")
    q: str | None = Field(default=None, max_length=100,
                          description="Case-insensitive text to look for in the description.")
    limit: int = Field(default=50, ge=1, le=200, description="1 to 200, default 50.")
    offset: int = Field(default=0, ge=0, le=10_000_000)


# ----------------------------------------------------------------- approval

Flag = Annotated[bool, Field(strict=True)]
def _whole_number(value: Any) -> Any:
    """Refuse booleans and text where a JSON integer is meant; 17.0 still counts as 17."""
    if isinstance(value, (bool, str)):
        raise ValueError("must be an integer")
    return value


BudgetCodeId = Annotated[int, Field(gt=0, lt=2**63), BeforeValidator(_whole_number)]


class ApproveInput(InputShape):
    """How to approve a ticket; every field is optional and an empty body means all defaults."""

    allow_unrouted: Flag = Field(default=False, description=(
        "Accept a blank budget code for lines that could not be routed. Never set this "
        "automatically."))
    allow_rejected: Flag = Field(default=False, description="Allow approving a rejected ticket.")
    require_exact: Flag = Field(default=False, description=(
        "Also refuse any line not on a confirmed budget code (`exact: false`); use it "
        "whenever no person reviews the write."))
    routes: dict[str, BudgetCodeId] = Field(default_factory=dict, max_length=200, description=(
        "Per-line budget code override: keys are line indexes as strings (see `routing`), "
        "values budget code ids of the ticket's project. A line routed here counts as exact."))
    destination: Literal["change_event", "daily_log"] | None = Field(default=None, description=(
        "Where to file. Omitted: a change event when the project has the tool, else 409 "
        "no_change_events (a daily log is never chosen automatically). A daily log entry "
        "is dated with the capture time read in the project's time zone (UTC when the "
        "project names none the service knows)."))


class ApprovalResult(Ticket):
    """The approved ticket with its project-system record, and whether it was already written."""

    already: bool = Field(description=(
        "True when the ticket was written before this call; nothing new was written."))


# ------------------------------------------------------------------ links

class LinkInput(InputShape):
    """A capture link to create."""

    project_id: ProjectId
    label: str | None = Field(default=None, max_length=120,
                              description="Who or where it is for, e.g. 'North trailer'.")


class CaptureSettings(Shape):
    """How the company's capture form asks crews for a ticket."""

    crew_enters_prices: bool = Field(description=(
        "Whether crews see rate, unit cost and cost code fields; off when the office prices "
        "and codes the tickets."))


class CaptureSettingsInput(InputShape):
    """A change to the capture form settings."""

    crew_enters_prices: Annotated[bool, Field(strict=True)]


class LinkUrls(Shape):
    """The three forms of a link's address; the ticket records which one was opened."""

    plain: str
    qr: str
    sms: str


class Link(Shape):
    """A capture link. The token is a credential: anyone holding it can submit tickets."""

    token: str
    url: str = Field(description="The plain capture address.")
    urls: LinkUrls
    project_id: str
    project_name: str
    label: str | None
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    ticket_count: int
    qr_svg_url: str = Field(description="A QR code (SVG) of the qr address.")
    poster_url: str = Field(description="A printable poster for the site trailer.")
    sms_href: str = Field(description="An sms: link that opens a text with the sms address.")


class LinkList(Shape):
    """The company's capture links, newest first."""

    data: list[Link]
