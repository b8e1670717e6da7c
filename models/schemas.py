"""Pydantic shapes of every /v1 request and response: one model per shape.

These models validate input and generate the OpenAPI document, so the
document is never a second, hand-kept copy.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from enum import StrEnum
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
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticCustomError

# Whitespace as JSON Schema patterns (ECMA-262) know it, so "\\S" in the document and the
# trimming here agree on what a blank string is.
ECMA_SPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


# Documented for required text: something besides whitespace, and no NUL character anywhere.
NOT_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"


# Input text holds no NUL character (the service refuses it: no store keeps one).
NO_NUL = r"^[^\u0000]*$"


class DocumentSchema(GenerateJsonSchema):
    """JSON Schema as the document gives it: input text without a pattern of its own says it
    holds no NUL."""

    def str_schema(self, schema):
        """A string; in an input shape, one that holds no NUL character."""
        result = super().str_schema(schema)
        if self.mode != "validation" or "format" in result:
            return result
        if "pattern" in result:  # a pattern is matched anywhere in the text: both must hold
            result["allOf"] = [{"pattern": NO_NUL}]
        else:
            result["pattern"] = NO_NUL
        return result


def required_text(max_length: int, **extra: Any) -> Any:
    """A required string that must hold more than whitespace once trimmed."""
    return Field(min_length=1, max_length=max_length, json_schema_extra={"pattern": NOT_BLANK},
                 **extra)


def field_error(field: str, message: str) -> PydanticCustomError:
    """A failed check across fields, reported against the field it is about."""
    return PydanticCustomError("field_problem", message, {"field": field})


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


class FieldProblem(Shape):
    """One problem of a refused request (400), naming the field it is about."""

    field: str = Field(description="Where the problem is, e.g. 'labor[2].hours', 'photos[1]', "
                                   "'signature.image', 'routes.3'; 'body' for the whole body.")
    message: str


class LineRefusal(Shape):
    """One line an approval refused (409 lines_need_review)."""

    line: int = Field(description="Index of the line, as in `routing`; the key to use in `routes`.")
    reason: str = Field(description="Why the line was refused.")
    description: str


class NteExceededDetail(Shape):
    """What a refused approval would do to its not-to-exceed authorization (409 nte_exceeded)."""

    authorization_id: int
    reference: str = Field(description="The authorization's reference, e.g. 'CD-014'.")
    authorized: str = Field(description="The not-to-exceed amount, as a decimal string.")
    written: str = Field(description="Already written against it, as a decimal string.")
    ticket: str = Field(description="This ticket's total, as a decimal string.")
    after: str = Field(description="Written once this ticket is too, as a decimal string.")


class UploadProgress(Shape):
    """How much of a photo sent in pieces the server holds (a 202 to a piece that was not the
    last; the details of a 409 `upload_offset_mismatch`)."""

    offset: int = Field(ge=0, description="Bytes of the photo the server holds, from byte 0 "
                                          "on: the next piece starts at this byte.")
    total: int = Field(ge=1, description="The photo's size in bytes, as its pieces give it.")


class TooManyTicketsDetail(Shape):
    """How many tickets a backup package holds and how many were chosen (400 too_many_tickets)."""

    limit: int = Field(description="The most tickets one package holds.")
    chosen: int = Field(description="The tickets chosen, named or on the change event.")


class TicketsNotWrittenDetail(Shape):
    """The tickets named that are not written to the project system yet (409
    ticket_not_written of a backup package)."""

    tickets: list[str] = Field(description="Their T-references.")


class ErrorDetail(Shape):
    """The inside of every error body."""

    code: str = Field(description="Stable, machine-readable error code; each response lists "
                                  "the codes it can carry.")
    message: str = Field(description="Human-readable explanation.")
    details: (list[FieldProblem] | list[LineRefusal] | NteExceededDetail | UploadProgress
              | TooManyTicketsDetail | TicketsNotWrittenDetail | None) = \
        Field(default=None, description=(
            "A 400 `validation_failed` lists every problem at once as FieldProblem items, and so "
            "does a 409 for what a body names that the ticket or project does not have "
            "(`line_not_found`, `budget_code_not_found`, `authorization_not_found`); a 409 "
            "`lines_need_review` lists every refused line as LineRefusal items; a 409 "
            "`nte_exceeded` is one NteExceededDetail; a 409 `upload_offset_mismatch` is one "
            "UploadProgress (where the photo's next piece must start); a 400 `too_many_tickets` "
            "is one TooManyTicketsDetail and a backup package's 409 `ticket_not_written` one "
            "TicketsNotWrittenDetail; otherwise absent."))


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
    created_at: dt.datetime
    created_by: str | None = Field(description=(
        "The e-mail of the reviewer who made the key on the keys page (disabling them revokes "
        "it); null for a key made on the command line."))
    last_used_at: dt.datetime | None = Field(description=(
        "When the key was last used, to within a minute (this request included)."))


class Me(Shape):
    """Who is calling: the company the key belongs to, and the key itself."""

    company: CompanyRef
    key: KeyRef


CostTypeName = Literal["labor", "materials", "equipment", "other"]


class CostType(StrEnum):
    """Procore's base cost types (line item types) a budget code can carry."""

    LABOR = "labor"
    MATERIALS = "materials"
    EQUIPMENT = "equipment"
    OTHER = "other"
    COMMITMENT = "commitment"
    OWNER_COST = "owner_cost"
    PROFESSIONAL_SERVICES = "professional_services"


def _known_cost_type(value: Any) -> Any:
    """A cost type the project system names outside Procore's base types reads as null."""
    return value if value is None or value in CostType._value2member_map_ else None


KnownCostType = Annotated[CostType | None, BeforeValidator(_known_cost_type)]


class Destination(StrEnum):
    """Where an approved ticket is filed in the project system."""

    CHANGE_EVENT = "change_event"
    DAILY_LOG = "daily_log"


class TicketStatus(StrEnum):
    """Where a ticket stands: `submitted` (shown as "Needs review"), `written`, `rejected`."""

    SUBMITTED = "submitted"
    WRITTEN = "written"
    REJECTED = "rejected"


class Language(StrEnum):
    """The language of a crew's capture page, and of a signer's link, texts and e-mails."""

    EN = "en"
    ES = "es"


class CaptureChannel(StrEnum):
    """How a ticket came in: a capture link's QR, text-message or plain form, or the API."""

    QR = "qr"
    SMS = "sms"
    LINK = "link"
    API = "api"


class LineKind(StrEnum):
    """The kind of a cost line, which fixes its cost type."""

    LABOR = "labor"
    EQUIPMENT = "equipment"
    MATERIALS = "materials"


class RoutingLineKind(StrEnum):
    """The kind of a routing line: a cost line's kind, or a markup after the cost lines."""

    LABOR = "labor"
    EQUIPMENT = "equipment"
    MATERIALS = "materials"
    MARKUP = "markup"


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
    cost_type: KnownCostType = Field(description="Procore's base cost type of the code; null "
                                                 "when the project system names another.")


class CostCodeItem(Shape):
    """A cost code of a project with the budget codes it already has."""

    id: int = Field(description="Cost code item id; use it as `cost_code_item_id`.")
    code: str = Field(description="The code with its parent prefix, e.g. `02-200`; a sub job's "
                                  "own cost code has the sub job in front, e.g. `B1.02-200`.")
    name: str
    sub_job: str | None = Field(default=None, description="The sub job the cost code belongs to "
                                "(its code, e.g. `B1`), where the project is split into sub "
                                "jobs; null for the project's own cost codes.")
    budget_codes: list[BudgetCodeRef]


class CostCodeList(Shape):
    """Cost codes that match the search."""

    data: list[CostCodeItem]


class CostCodeQuery(InputShape):
    """Search parameters for cost codes."""

    q: str | None = Field(default=None, max_length=100,
                          description="Case-insensitive substring of the code or the name.")


def _whole_number(value: Any) -> Any:
    """Refuse booleans and text where a JSON integer is meant; 17.0 still counts as 17."""
    if isinstance(value, (bool, str)):
        raise ValueError("must be an integer")
    return value


def whole_number(**bounds: int) -> Any:
    """A JSON integer of a body within bounds: never `true` or "5", which the parser would
    otherwise read as 1 and 5 (the bounds come first, or the document would not show them)."""
    return Annotated[int, Field(**bounds), BeforeValidator(_whole_number)]


RecordId = whole_number(gt=0, lt=2**63)


class BudgetCodeInput(InputShape):
    """A budget code to create for a cost code and cost type."""

    cost_code_item_id: RecordId
    cost_type: CostTypeName = Field(default="other", description="Defaults to 'other'.")


class BudgetCodeOut(Shape):
    """A budget code, existing or just created."""

    id: int
    code: str
    cost_type: KnownCostType
    cost_code_item_id: int | None
    description: str
    created: bool = Field(description="False when the pair already existed and was returned as is.")


class Capability(Shape):
    """Where a ticket on the project can be filed."""

    change_events: bool = Field(description="The project has the change-event tool.")
    daily_log: bool = Field(description="The project can take a daily log entry.")
    destination: Destination | None = Field(description=(
        "What approve writes when no destination is named: 'change_event', or null when the "
        "project has no change-event tool (approve then answers 409 no_change_events; a daily "
        "log is never chosen automatically)."))


# ----------------------------------------------------------------- tickets

SIX_PLACES = Decimal("0.000001")


def _to_decimal(value: Any) -> Any:
    """Read a JSON number (or numeric text, as forms send) exactly: its bounds are checked on
    the number as sent, then `_six_places` keeps 6 decimal places.

    Floats are read through their shortest text, so 0.1 is 0.1 and not 0.1000000000000000055.
    """
    if isinstance(value, bool):
        raise ValueError("must be a number")
    if isinstance(value, (int, float, str, Decimal)):
        try:
            number = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
        except InvalidOperation:
            raise ValueError("must be a number") from None
        if not number.is_finite():
            raise ValueError("must be a finite number")
        if abs(number) >= 10**12:
            raise ValueError("is far too large")
        return number
    return value


def _six_places(number: Decimal) -> Decimal:
    """A number within its bounds kept to 6 decimal places (rounded half up), never -0."""
    return number.quantize(SIX_PLACES, rounding=ROUND_HALF_UP) + 0


def _number(low: int, high: int) -> Any:
    """A finite decimal within documented bounds, documented as a JSON number. The bounds hold
    for the number as sent (-0.0000001 is below 0, as the document's `minimum` says), before
    it is rounded to 6 places."""
    return Annotated[Decimal, Field(ge=low, le=high), BeforeValidator(_to_decimal),
                     AfterValidator(_six_places),
                     WithJsonSchema({"type": "number", "minimum": low, "maximum": high})]


Hours = _number(0, 1000)
Workers = _number(0, 500)
Rate = _number(0, 100_000)
Quantity = _number(0, 1_000_000)


ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _date_text(value: Any) -> Any:
    """Take a date only as ISO text, YYYY-MM-DD (or a date), never as a number of seconds ("0"
    is no date, though the parser would read it as 1970-01-01); blank is none."""
    if isinstance(value, (int, float, bool)) or (isinstance(value, str) and value
                                                 and not ISO_DATE.fullmatch(value)):
        raise ValueError("must be an ISO date, e.g. 2026-05-04")
    return None if value == "" else value


IsoDate = Annotated[dt.date, BeforeValidator(_date_text)]
# A blank date (a form's empty date field) is none: the document says so, as the code does.
OptionalIsoDate = Annotated[dt.date | None, BeforeValidator(_date_text), WithJsonSchema(
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 0},
               {"type": "null"}]}, mode="validation")]
class HourType(StrEnum):
    """A labor line's hour type: straight time, overtime or double time."""

    ST = "st"
    OT = "ot"
    DT = "dt"


HOUR_TYPE_NAMES = {"st": "straight time", "ot": "overtime", "dt": "double time"}
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
    rate: Rate | None = Field(default=None, description=(
        "Per hour, 0 to 100000. Omit it to have the line priced from the rate sheet in force "
        "on the work day; a rate given here is kept, and flagged when it differs from the sheet."))
    costCode: CostCodeText = None
    classification: str | None = Field(default=None, max_length=100, description=(
        "Labor classification on the rate sheet, e.g. 'Journeyman Electrician'; without it the "
        "trade is looked up. A name the sheet does not list is kept and flagged for the office."))
    hour_type: HourType = Field(default=HourType.ST, description=(
        "'st' straight time (default), 'ot' overtime or 'dt' double time: which of the "
        "classification's rates prices the hours."))


class EquipmentLineIn(InputShape):
    """Equipment: what ran, for how many hours, at what hourly rate."""

    description: str = required_text(300)
    hours: Hours
    rate: Rate | None = Field(default=None, description=(
        "Per hour, 0 to 100000. Omit it to have the line priced from the rate sheet."))
    costCode: CostCodeText = None


class MaterialLineIn(InputShape):
    """Materials: what was used, how much, at what unit cost."""

    description: str = required_text(300)
    quantity: Quantity = Field(description="0 to 1000000.")
    unitCost: Rate | None = Field(default=None, description=(
        "Cost per unit, 0 to 100000. Omit it to have the line priced from the rate sheet; the "
        "sheet's material markup is added to the cost either way when a sheet is in force."))
    costCode: CostCodeText = None


class Coords(InputShape):
    """Where a photo was taken, as the phone reported it."""

    lat: float = Field(ge=-90, le=90, allow_inf_nan=False)
    lng: float = Field(ge=-180, le=180, allow_inf_nan=False)
    accuracy_m: float | None = Field(default=None, ge=0, le=100_000, allow_inf_nan=False)


_DATETIME = TypeAdapter(dt.datetime)
# The document's `format: date-time` (RFC 3339): a date, a time and the offset from UTC. The
# parser alone would also take "0.5" (seconds since 1970), a bare date or a time without offset.
RFC_3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
                      r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})")
# A time given is in the years 1900 to 2199: one at the calendar's edge (year 1 or 9999) cannot
# be moved to UTC or to a jobsite's clock.
TIME_YEARS = r"^(?:19|2[01])[0-9]{2}-"


def _check_timestamp(value: str | None) -> str | None:
    """Accept an RFC 3339 date-time string of the years 1900 to 2199 and keep it exactly as
    given; blank is none."""
    if value is None or value == "":
        return None
    try:
        if not RFC_3339.fullmatch(value) or not re.match(TIME_YEARS, value):
            raise ValueError(value)
        _DATETIME.validate_python(value)
    except (ValueError, ValidationError):
        raise ValueError("not an RFC 3339 date-time of the years 1900 to 2199, "
                         "e.g. 2026-05-04T07:30:00Z") from None
    return value


TIME_SCHEMA = {"type": "string", "format": "date-time", "maxLength": 40, "pattern": TIME_YEARS}
DateTimeText = Annotated[str, Field(max_length=40), AfterValidator(_check_timestamp),
                         WithJsonSchema(TIME_SCHEMA)]
# A blank time (a form's empty field) is none: the document says so, as the code does.
Timestamp = Annotated[DateTimeText | None, Field(default=None), WithJsonSchema(
    {"anyOf": [TIME_SCHEMA, {"type": "string", "maxLength": 0}, {"type": "null"}]},
    mode="validation")]


class PhotoIn(InputShape):
    """A photo: a data URL (or bare base64) of a JPEG, PNG or WebP image, at most 2 MiB."""

    name: str | None = Field(default=None, max_length=200)
    data_url: Annotated[str, required_text(50_000_000, description=(
        "data:image/jpeg;base64,... or bare base64. The image itself is checked too: "
        "anything that is not a JPEG, PNG or WebP is refused with 400."))]
    taken_at: Timestamp = None
    coords: Coords | None = None


class PhotoUploadQuery(InputShape):
    """What the phone says about a photo sent as the body itself."""

    name: str | None = Field(default=None, max_length=200)
    taken_at: Timestamp = None
    lat: float | None = Field(default=None, ge=-90, le=90, allow_inf_nan=False,
                              description="Where it was taken; kept only with `lng`.")
    lng: float | None = Field(default=None, ge=-180, le=180, allow_inf_nan=False,
                              description="Where it was taken; kept only with `lat`.")


class SignatureQualifier(StrEnum):
    """What a signature vouches for, as the signer chose it."""

    verified = "verified"
    verified_scope_disputed = "verified_scope_disputed"
    not_verified = "not_verified"


QUALIFIER_CODES = tuple(q.value for q in SignatureQualifier)


def legacy_qualifier(data: Any) -> Any:
    """A qualifier sent as free text (before the three choices) is kept as the reason, with no choice."""
    if isinstance(data, dict):
        qualifier = data.get("qualifier")
        if isinstance(qualifier, str) and qualifier.strip(ECMA_SPACE) \
                and qualifier.strip(ECMA_SPACE) not in QUALIFIER_CODES:
            data = {**data, "qualifier": None,
                    "qualifier_reason": data.get("qualifier_reason") or qualifier}
    return data


QUALIFIER_TEXT = (
    "What the signer vouches for: `verified` (time and materials verified), "
    "`verified_scope_disputed` (time and materials verified; scope disputed) or "
    "`not_verified` (with `qualifier_reason`). Older free text is read as the reason.")


# The refusal of a `not_verified` signature that gives no reason.
REASON_NEEDED = "say why the work is not verified"


class _OrOlderFreeText:
    """Documents a qualifier as one of the choices, or (deprecated) the free text it once was,
    which `legacy_qualifier` keeps as the reason (so as long as a reason may be)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        """The choices' schema with the older free text beside them."""
        schema = handler(core_schema)
        older = {"type": "string", "maxLength": 300, "pattern": NOT_BLANK, "deprecated": True,
                 "description": "Older free text: kept as the `qualifier_reason`, with no choice."}
        return {**schema, "anyOf": [*schema["anyOf"][:1], older, *schema["anyOf"][1:]]}


class SignatureIn(InputShape):
    """The signature of the general contractor's person; it counts only with an image."""

    # The rule across fields, for the document: `not_verified` comes with a reason.
    model_config = ConfigDict(json_schema_extra={
        "if": {"required": ["qualifier"],
               "properties": {"qualifier": {"type": "string", "pattern": r"^\s*not_verified\s*$"}}},
        "then": {"required": ["qualifier_reason"],
                 "properties": {"qualifier_reason": {"type": "string", "pattern": NOT_BLANK}}},
    })

    name: str | None = Field(default=None, max_length=200)
    role: str | None = Field(default=None, max_length=200)
    signed_at: Timestamp = None
    qualifier: Annotated[SignatureQualifier | None, _OrOlderFreeText] = Field(
        default=None, description=QUALIFIER_TEXT)
    qualifier_reason: str | None = Field(default=None, max_length=300, description=(
        "Why, in the signer's words; required with `not_verified`."))
    image: str | None = Field(default=None, description="data:image/png;base64,... of the drawing.")

    _legacy = model_validator(mode="before")(legacy_qualifier)

    @model_validator(mode="after")
    def _reason_when_not_verified(self) -> SignatureIn:
        """`not_verified` needs a reason."""
        if self.qualifier == SignatureQualifier.not_verified and not self.qualifier_reason:
            raise field_error("qualifier_reason", REASON_NEEDED)
        return self


def _id_text(value: Any) -> Any:
    """Accept a project id given as a JSON integer, since project-system ids are numbers."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


ProjectId = Annotated[str, BeforeValidator(_id_text), required_text(40)]


def N_(text: str) -> str:
    """Marks a label for the Spanish catalog; the page that shows it to a crew translates it."""
    return text


class Shows(StrEnum):
    """Where an optional ticket text field shows, besides the API (every one is on the API)."""

    CAPTURE = "capture"  # the crew's capture form, asked by the field's `ask`
    FACTS = "facts"  # the facts of the review page and of the ticket document (PDF)
    SIGNING = "signing"  # the signing page, and so the content a signature's digest covers
    EMAIL = "email"  # the signing e-mail
    CSV = "csv"  # a column of the CSV log, named as the field
    PROCORE = "procore"  # the change event's description and the daily log entry's notes
    SEARCH = "search"  # the text search of the list, the queue and the CSV
    QUEUE = "queue"  # the queue's row, under "Sub or crew"


@dataclass(frozen=True)
class Shown:
    """A ticket text field's label (Spanish in the catalog), capture question and places."""

    label: str
    shows: frozenset[Shows]
    ask: str | None = None


@dataclass(frozen=True)
class TicketField:
    """An optional ticket text field as the places that show it read it."""

    name: str
    label: str
    shows: frozenset[Shows]
    ask: str | None
    max_length: int | None

    def value(self, ticket: Any) -> str | None:
        """The field's text on a ticket (a row or a shape), None when blank."""
        return getattr(ticket, self.name, None) or None


def ticket_fields(place: Shows | None = None) -> list[TicketField]:
    """The optional text fields of TicketText in their order, those that show in `place`."""
    found = []
    for name, info in TicketText.model_fields.items():
        shown = next((m for m in info.metadata if isinstance(m, Shown)), None)
        if shown is not None and (place is None or place in shown.shows):
            max_length = next((m.max_length for m in info.metadata
                               if getattr(m, "max_length", None)), None)
            found.append(TicketField(name, shown.label, shown.shows, shown.ask, max_length))
    return found


class TicketText(Shape):
    """The optional text a ticket is sent with and shown with, each field declared once here
    for the new ticket (TicketInput) and its answers (TicketSummary, Ticket), with where it
    shows (`Shown`): every place listed reads this declaration (ticket_fields).

    An answer carries every field, defaults included, so the document lists each field of a
    ticket's answer as required.
    """

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    sub: Annotated[str | None, Shown(N_("Sub or crew"), frozenset({
        Shows.FACTS, Shows.CSV, Shows.SEARCH, Shows.QUEUE}))] = Field(
        default=None, max_length=120, description=(
            "The subcontractor or crew that did the work. A ticket from a capture link takes "
            "the link's label. Lists filter by it, and routing weighs a sub's own past lines "
            "more."))
    captured_by: Annotated[str | None, Shown(N_("Recorded by"), frozenset({
        Shows.CAPTURE, Shows.FACTS, Shows.SIGNING, Shows.CSV, Shows.PROCORE, Shows.SEARCH,
        Shows.QUEUE}), ask=N_("Your name"))] = Field(default=None, max_length=200, description=(
            "Who recorded the ticket, as they gave their name."))
    authorization_ref: Annotated[str | None, Shown(N_("Directive or change order"), frozenset({
        Shows.CAPTURE, Shows.FACTS, Shows.CSV}), ask=N_(
            "GC directive or change-order number, if any"))] = Field(
        default=None, max_length=60, description=(
            "Reference of the GC directive or change-order request the work was done under, "
            "e.g. 'CD-014'. When the project lists it (see /projects/{id}/authorizations) the "
            "ticket counts against its not-to-exceed amount; otherwise it is kept and flagged."))


class TicketInput(InputShape, TicketText):
    """A new ticket, as the API and the capture form both submit it."""

    project_id: ProjectId
    description: str = required_text(4000, description="What was done.")
    reason: str = required_text(2000, description="Why it is out of scope.")
    directed_by: str = required_text(200, description="Who authorized it.")
    labor: list[LaborLineIn] = Field(default_factory=list, max_length=50)
    equipment: list[EquipmentLineIn] = Field(default_factory=list, max_length=50)
    materials: list[MaterialLineIn] = Field(default_factory=list, max_length=100)
    photos: list[PhotoIn] = Field(default_factory=list, max_length=12,
                                  description="At most 12 photos per ticket.")
    signature: SignatureIn | None = None
    photos_expected: whole_number(ge=0, le=12) | None = Field(
        default=None, description="How many photos will follow one by one "
        "(PUT .../photos/{key}); the ticket shows them as arriving until they are all in.")
    worked_on: OptionalIsoDate = Field(default=None, description=(
        "ISO date the work was done; defaults to the capture date on the jobsite's clock. "
        "Picks the rate sheet in force and dates the daily log entry."))
    client_ref: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_-]{8,64}$",
        description="Your own id for this ticket (8 to 64 letters, digits, '-', '_'). Sending "
                    "the same value again returns the ticket made the first time, not a second one.")


class PhotosInput(InputShape):
    """Photos to attach to a ticket that is not written yet."""

    photos: list[PhotoIn] = Field(min_length=1, max_length=12)


class MarkupKind(StrEnum):
    """What a markup is for."""

    OVERHEAD = "overhead"
    PROFIT = "profit"
    BOND = "bond"
    INSURANCE = "insurance"
    TAX = "tax"


class MarkupLine(Shape):
    """A markup applied to a ticket: its own line, after the cost lines."""

    name: str
    markup: MarkupKind
    percent: JsonNumber
    applies_to: list[LineKind]
    compound: bool
    base: JsonNumber = Field(description="The amount the percentage was taken of.")
    budget_code_id: int
    amount: JsonNumber
    description: str


class LinePricing(Shape):
    """Where a line's rate came from: the rate sheet, the caller, or nowhere."""

    source: Literal["sheet", "explicit", "none"] = Field(description=(
        "'sheet': priced from the rate sheet; 'explicit': the rate sent with the line was kept; "
        "'none': no rate, the amount is 0 until the office prices it."))
    sheet_id: int | None = None
    sheet_name: str | None = None
    effective_from: dt.date | None = None
    item: str | None = Field(default=None, description="The sheet's classification or item used.")
    hour_type: HourType | None = Field(default=None, description="Labor: the hour type priced.")
    sheet_rate: OptionalJsonNumber = Field(default=None, description=(
        "The sheet's rate (for materials: its cost per unit) for this line, when it lists one."))
    markup_percent: OptionalJsonNumber = Field(default=None, description=(
        "Materials: the sheet's markup added to the cost."))
    per: Literal["day"] | None = Field(default=None, description=(
        "Equipment: 'day' when the sheet's daily rate was lower than the hours at the hourly "
        "rate; the line is then `days` x `day_rate` (and goes on the line item in days)."))
    days: OptionalJsonNumber = None
    day_rate: OptionalJsonNumber = None
    differs: bool = Field(default=False, description=(
        "The rate sent with the line differs from the sheet's: the office should look."))
    needs_office: bool = Field(default=False, description=(
        "The office should look: a rate that differs from the sheet, a classification or item "
        "the sheet does not list, or no rate at all."))
    note: str = Field(description="Which rate was used and from which sheet, in words.")


class LaborLine(Shape):
    """A labor line with its amount (workers x hours x rate)."""

    trade: str
    hours: JsonNumber
    workers: JsonNumber
    rate: OptionalJsonNumber
    costCode: str | None
    amount: JsonNumber
    classification: str | None = Field(default=None, description=(
        "The rate-sheet classification the crew picked (or typed)."))
    hour_type: HourType = Field(default=HourType.ST, description="'st', 'ot' or 'dt'.")
    pricing: LinePricing | None = Field(default=None, description=(
        "Which rate priced the line and from which sheet; null on lines priced before sheets."))


class EquipmentLine(Shape):
    """An equipment line with its amount (hours x rate)."""

    description: str
    hours: JsonNumber
    rate: OptionalJsonNumber
    costCode: str | None
    amount: JsonNumber
    pricing: LinePricing | None = Field(default=None, description=(
        "Which rate priced the line and from which sheet; null on lines priced before sheets."))


class MaterialLine(Shape):
    """A material line with its amount (quantity x unitCost)."""

    description: str
    quantity: JsonNumber
    unitCost: OptionalJsonNumber
    costCode: str | None
    amount: JsonNumber
    unit_price: OptionalJsonNumber = Field(default=None, description=(
        "The cost per unit with the sheet's material markup added; the amount is quantity x "
        "unit_price. Null when no markup applied (amount is quantity x unitCost)."))
    pricing: LinePricing | None = Field(default=None, description=(
        "Which rate priced the line and from which sheet; null on lines priced before sheets."))


class Photo(Shape):
    """A stored photo of a ticket, with the addresses of its image (the API key opens them)."""

    id: int = Field(description="The photo's id, as in its `url`.")
    name: str
    taken_at: dt.datetime | None = Field(description="When the phone says it was taken.")
    coords: Coords | None = Field(description="Where the phone says it was taken.")
    url: str = Field(description="The photo as JPEG (at most 2048 px on the long edge): "
                                 "GET /v1/tickets/{id}/photos/{photo_id} with the API key.")
    thumbnail_url: str = Field(description="A 320 px JPEG thumbnail, with the API key.")


class SignedVia(StrEnum):
    """Where a signature was drawn."""

    crew_phone = "crew_phone"
    signing_link = "signing_link"
    api = "api"


class SignatureRecord(Shape):
    """A signature as recorded: who signed, as what, when, what it vouches for, and the ticket
    content it was given on."""

    id: str = Field(description="The SHA-256 of the stored signature image.")
    name: str | None = Field(description="The signer.")
    role: str | None
    signed_at: dt.datetime | None
    qualifier: SignatureQualifier | None = Field(description=QUALIFIER_TEXT)
    qualifier_reason: str | None = Field(default=None, description=(
        "Why, in the signer's words (always with `not_verified`; an older free-text qualifier "
        "is shown here)."))
    content_sha256: str | None = Field(default=None, description=(
        "SHA-256 of the ticket content the signer was shown (work, reason, directed by, the "
        "optional text fields shown, such as `captured_by`, lines and quantities, and amounts "
        "when shown). Null on signatures from before it was kept."))
    signed_via: SignedVia | None = Field(default=None, description=(
        "`crew_phone` (drawn on the crew's phone), `signing_link` (a signing link) or `api`."))
    ip_address: str | None = Field(default=None, description="The signer's address (signing links).")
    user_agent: str | None = Field(default=None, description="The signer's browser (signing links).")


class Signature(SignatureRecord):
    """The signature that counts, with the addresses of its image (the API key opens them)."""

    url: str = Field(description="The drawn signature as PNG: GET /v1/tickets/{id}/signature "
                                 "with the API key.")
    thumbnail_url: str = Field(description="A 320 px PNG thumbnail, with the API key.")


class VoidedSignature(SignatureRecord):
    """A signature that no longer counts: the ticket's lines changed after it was given."""

    voided_at: dt.datetime
    void_reason: str = Field(description="Why it no longer counts, in words.")


class Decision(Shape):
    """One approve, reject or restore, oldest first."""

    action: Literal["approved", "rejected", "restored", "resubmitted"]
    by: str | None
    at: dt.datetime
    reason: str | None = Field(default=None, description="Why, as the reviewer put it (rejections).")


class ChangeOrder(Shape):
    """A change order the lines of a written change event are on, as last read from Procore."""

    kind: Literal["commitment", "prime"] = Field(description=(
        "`commitment`: a commitment change order on the sub's subcontract or purchase order "
        "(what pays the sub); `prime`: a prime contract change order (what bills the owner)."))
    number: str | None
    title: str | None
    status: str | None = Field(description="Procore's status name, e.g. 'Pending', 'Approved'.")


class External(Shape):
    """The record written into the project system, and where it stands there as last read."""

    destination: Destination
    change_event_id: int | None
    manpower_log_id: int | None
    number: str | None
    written_at: dt.datetime
    url: str
    note: str | None
    status: str | None = Field(default=None, description=(
        "The record's status in Procore as last read (a change event's `Open`, `Pending`, "
        "`Closed` or `Void`; a daily log entry's `pending` or `approved`); null until read."))
    status_read_at: dt.datetime | None = Field(default=None, description=(
        "When the status was last read: on `POST /v1/tickets/{id}/sync`, when the ticket page "
        "opens and this is over 15 minutes old, and by the scheduled sync of tickets written "
        "in the last 90 days."))
    deleted: bool = Field(default=False, description=(
        "True when the record was deleted in Procore (or is in its recycle bin). The ticket "
        "stays written: it is never restored or written again."))
    change_orders: list[ChangeOrder] = Field(default_factory=list, description=(
        "The change orders the change event's lines are on, each once; empty while none is "
        "(or for a daily log entry, which is never on one)."))


class RoutingLine(Shape):
    """Where one line of money lands in the project system."""

    line: int = Field(description="Index of the line; the key in approve `routes`.")
    kind: RoutingLineKind = Field(description=(
        "Markup lines come after the cost lines, one per markup of the project."))
    description: str
    cost_type: KnownCostType
    quantity: OptionalJsonNumber
    unit_cost: OptionalJsonNumber
    amount: JsonNumber
    budget_code: str | None = Field(description="Flat code text, e.g. '02-200.L'.")
    budget_code_id: int | None
    routed: bool
    exact: bool = Field(description="False means a fallback or a loose match was used.")
    needs_review: bool = Field(description="A person should look; approve refuses it unless allowed.")
    reason: str = Field(description=(
        "Why the line landed where it did, in words a person reads: the crew's cost code, a "
        "suggestion from the company's past decisions ('chosen 4 times for Summit Framing's "
        "\'Framer\''), a cost code's name, or who routed it."))
    pricing: LinePricing | None = Field(default=None, description=(
        "Which rate priced the line and from which rate sheet."))
    learned: bool = Field(default=False, description=(
        "The budget code is a suggestion from where this company put the most similar lines "
        "before (see `reason`): routed, not exact, to be confirmed like any other check."))
    learned_from_sub: str | None = Field(default=None, description=(
        "When a suggestion (`learned`) comes from the decisions on another sub's or crew's "
        "tickets, not this ticket's own: whose. It is never written unseen: the review pages "
        "never confirm such a line in bulk (the PM confirms it on the ticket), and `approve` "
        "refuses it (409 `lines_need_review`) unless `routes` names the line."))


class AuthorizationKind(StrEnum):
    """What a not-to-exceed authorization is: a GC directive or a change-order request."""

    DIRECTIVE = "directive"
    CHANGE_ORDER_REQUEST = "change_order_request"


class NteStatus(Shape):
    """A not-to-exceed authorization and what is claimed against it so far."""

    id: int
    project_id: str
    reference: str = Field(description="The GC's number, e.g. 'CD-014' or 'COR-7'.")
    kind: AuthorizationKind
    title: str | None
    authorized: JsonNumber = Field(description="The authorised (not-to-exceed) amount.")
    written: JsonNumber = Field(description="Total of tickets against it written to the project system.")
    open: JsonNumber = Field(description="Total of tickets against it still awaiting review.")
    used: JsonNumber = Field(description="written + open.")
    remaining: JsonNumber = Field(description="authorized - used; negative once past it.")
    percent: JsonNumber = Field(description="used as a percentage of authorized, to 0.1.")
    level: Literal["ok", "warning", "over"] = Field(description=(
        "'warning' from 80 %, 'over' past 100 % of the authorised amount."))
    message: str = Field(description="The same in words, as the pages show it.")


class TicketCommitment(Shape):
    """The sub's vendor and commitment in the project system that a ticket's lines are written on."""

    vendor_id: int | None = Field(description=(
        "The sub's vendor in the project's directory; null when none. The lines carry it "
        "only with a commitment (`contract_id`)."))
    vendor_name: str | None
    contract_id: int | None = Field(description=(
        "The commitment (subcontract or purchase order) each line is proposed on; null writes "
        "the lines without one, and `reason` says why."))
    contract_number: str | None
    contract_title: str | None
    exact: bool = Field(description=(
        "True when the lines are written on it as shown: the sub's name is the vendor's "
        "(ignoring case, punctuation and a legal suffix) and the vendor has one commitment on "
        "the project, or a PM confirmed it for the sub and project. False with a commitment: "
        "a suggestion, which approve refuses (409 `commitment_needs_confirmation`) until it is "
        "confirmed or `contract_id` is given. False without one: the lines carry none, unless "
        "`reason` starts 'the commitment confirmed for this sub is no longer open', which "
        "approve refuses the same way until a PM confirms again."))
    reason: str = Field(description=(
        "Why, in words a PM reads, e.g. 'Bolt Electric LLC has 2 commitments on this "
        "project' or 'Bayside Rentals has no commitment on this project in Procore'."))


class TicketSummary(TicketText):
    """A ticket as a list shows it: what finds and sorts it, its total and its state.

    Lines, photos, the signature, the decision history and the routing are on the ticket
    itself (GET /v1/tickets/{id}).
    """

    id: str
    status: TicketStatus
    project_id: str
    description: str
    reason: str
    directed_by: str
    captured_at: dt.datetime
    captured_via: CaptureChannel
    worked_on: dt.date | None = Field(default=None, description="The day the work was done.")
    total: JsonNumber
    photo_count: int
    photos_expected: int | None = None
    signed: bool = Field(description="Whether the ticket carries a signature.")
    awaiting_signature_since: dt.datetime | None = Field(default=None, description=(
        "When the oldest open signature request of an unsigned ticket was made; null when "
        "none is open."))
    link_token: str | None
    approved_by: str | None
    approved_at: dt.datetime | None
    external: External | None
    routing_pending: bool = Field(description=(
        "True when the routing shown is not worked out on the project's budget codes, because "
        "they have not been read yet (a ticket's answer to its create never waits on the "
        "project system) or cannot be read now; its lines need review until a read works the "
        "routing out. In a list: whether the server holds no codes of the ticket's project "
        "yet. Always false on a written ticket. Reading a ticket never changes it."))


class Ticket(TicketSummary):
    """A ticket whole: its lines, evidence, history and routing (the reviewer's main field)."""

    labor: list[LaborLine]
    equipment: list[EquipmentLine]
    materials: list[MaterialLine]
    markups: list[MarkupLine] = Field(default_factory=list, description=(
        "The project's markups as lines of their own, in the order they were applied; "
        "`total` includes them."))
    signature: Signature | None
    voided_signatures: list[VoidedSignature] = Field(default_factory=list, description=(
        "Signatures that no longer count because the lines or quantities changed after "
        "signing, oldest first."))
    photos: list[Photo]
    decisions: list[Decision]
    warnings: list[str]
    nte: NteStatus | None = Field(default=None, description=(
        "The not-to-exceed authorization the ticket counts against, with its running total."))
    routing: list[RoutingLine]
    language: Language | None = Field(default=None, description=(
        "The language of the crew's capture page when the ticket was sent; its signing links "
        "default to it. Null for a ticket a program sent."))
    commitment: TicketCommitment | None = Field(default=None, description=(
        "The sub's vendor and commitment the change event's lines are proposed on (as written, "
        "once written). Null when the ticket names no sub, when the project's directory in the "
        "project system cannot be read now, and in the answer to a ticket's create (which "
        "never waits on the project system)."))


class TicketList(Shape):
    """A page of tickets as lists show them, newest first."""

    data: list[TicketSummary]
    total: int = Field(description="How many tickets match the filters.")
    limit: int
    offset: int


class TicketFilters(InputShape):
    """Which tickets: by status, project and text (the list and the CSV export)."""

    status: TicketStatus | None = None
    project_id: str | None = Field(default=None, max_length=40, pattern=r"^[0-9]+$",
                                   description="A project id: the project system's number.")
    q: str | None = Field(default=None, max_length=100,
                          description="Case-insensitive text to look for in the description, reason, "
                                      "directed-by or recorded-by, or a ticket reference "
                                      "(T- and up to 8 characters of the id).")
    sub: str | None = Field(default=None, max_length=120, description=(
        "A sub or crew, as tickets name it (exactly, ignoring case)."))
    not_on_change_order: bool = Field(default=False, description=(
        "Only tickets written as a change event whose lines are on no change order yet, as "
        "last read from Procore (`external.change_orders` empty): claimed, not yet billed."))


class TicketListQuery(TicketFilters):
    """Filters and paging for the ticket list."""

    limit: int = Field(default=50, ge=1, le=200, description="1 to 200, default 50.")
    offset: int = Field(default=0, ge=0, le=10_000_000)


# A ticket named in a backup package: its id, or its T-reference (T- and the id's first 8 hex
# digits); a package's tickets are such names separated by commas (spaces around them allowed).
PACKAGE_TICKET = re.compile(r"(?:[0-9a-fA-F]{8}-?(?:[0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}|[Tt]-[0-9a-fA-F]{8})")
PACKAGE_TICKETS = f"^ *(?:{PACKAGE_TICKET.pattern})(?: *, *(?:{PACKAGE_TICKET.pattern}))* *$"


class BackupPackageQuery(InputShape):
    """Which written tickets of a project go into a backup package: named, or one change event's."""

    tickets: str | None = Field(default=None, max_length=4000, json_schema_extra={
        "pattern": PACKAGE_TICKETS}, description=(
        "The tickets, comma-separated: ids or T-references (`T-1A2B3C4D`), at most 50."))
    change_event_id: int | None = Field(default=None, gt=0, lt=2**63, description=(
        "A change event's id in Procore (a written ticket's `external.change_event_id`): "
        "every written ticket of the project on it."))

    @field_validator("tickets")
    @classmethod
    def _ticket_names(cls, value: str | None) -> str | None:
        """Each comma-separated name is a ticket id or a T-reference."""
        if value is None:
            return None
        names = [name.strip(" ") for name in value.split(",")]
        wrong = [name for name in names if not PACKAGE_TICKET.fullmatch(name)]
        if wrong:
            raise ValueError("each ticket is its id or its T-reference (T-1A2B3C4D), separated "
                             "by commas; not: " + ", ".join(repr(name[:40]) for name in wrong[:5]))
        return ",".join(names)

    @model_validator(mode="after")
    def _one_choice(self) -> BackupPackageQuery:
        """Tickets or a change event: exactly one of the two."""
        if self.tickets and self.change_event_id is not None:
            raise field_error("tickets", "name tickets or a change event, not both")
        if not self.tickets and self.change_event_id is None:
            raise field_error("tickets", "name at least one ticket, or a change event")
        return self

    @property
    def ticket_names(self) -> list[str]:
        """The tickets named, each once, in the order given."""
        return list(dict.fromkeys((self.tickets or "").split(","))) if self.tickets else []


# ----------------------------------------------------------------- approval

Flag = Annotated[bool, Field(strict=True)]
BudgetCodeId = RecordId
# A line index as a `routes` key: a whole number written plainly ("0", "12"; not "01" or "+1").
LINE_INDEX = re.compile(r"0|[1-9][0-9]{0,5}")


class ApproveInput(InputShape):
    """How to approve a ticket; every field is optional and an empty body means all defaults."""

    allow_unrouted: Flag = Field(default=False, description=(
        "Accept a blank budget code for lines that could not be routed. Never set this "
        "automatically. A daily log entry carries no budget codes, so it needs none."))
    allow_rejected: Flag = Field(default=False, description="Allow approving a rejected ticket.")
    require_exact: Flag = Field(default=False, description=(
        "Also refuse any line not on a confirmed budget code (`exact: false`); use it "
        "whenever no person reviews the write. Not checked for a daily log entry, which "
        "carries no budget codes."))
    routes: dict[str, BudgetCodeId] = Field(
        default_factory=dict, max_length=200,
        json_schema_extra={"propertyNames": {"pattern": f"^(?:{LINE_INDEX.pattern})$"}}, description=(
            "Per-line budget code override: keys are line indexes as strings (see `routing`), "
            "values budget code ids of the ticket's project. A line routed here counts as exact. "
            "A line the ticket lacks, or a budget code its project lacks, is a 409 "
            "(`line_not_found`, `budget_code_not_found`) naming each `routes.<key>`."))
    confirm_over_nte: Flag = Field(default=False, description=(
        "Approve although the written tickets against the ticket's not-to-exceed authorization, "
        "this one included, pass its authorised amount. Without it such an approval is refused "
        "with 409 nte_exceeded."))
    destination: Destination | None = Field(default=None, description=(
        "Where to file. Omitted: a change event when the project has the tool, else 409 "
        "no_change_events (a daily log is never chosen automatically). A daily log entry "
        "is dated with the capture time read in the project's time zone (UTC when the "
        "project names none the service knows)."))
    contract_id: RecordId | None = Field(default=None, description=(
        "The commitment (subcontract or purchase order id, see GET "
        "/v1/projects/{project_id}/commitments) the change event's lines are proposed on, "
        "overriding the ticket's `commitment`, with that commitment's vendor. A commitment the "
        "project does not have is a 409 `contract_not_found`; nothing is written."))


class ApprovalResult(Ticket):
    """The approved ticket with its project-system record, and whether it was already written."""

    already: bool = Field(description=(
        "True when the ticket was written before this call; nothing new was written."))


# ------------------------------------------------------------------ links

class RejectInput(InputShape):
    """Why a ticket is rejected; the crew sees it on the phone that sent the ticket."""

    reason: str | None = Field(default=None, max_length=500,
                               description="Why it is rejected, in words the crew will read.")


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


# ------------------------------------------------------------------ share links

class ShareLinkInput(InputShape):
    """A share link to make: whose tickets it shows, of which project, until when."""

    sub: str = required_text(120, description=(
        "The sub as its tickets name it (a capture link's label, or `sub` of a created "
        "ticket); matched ignoring case."))
    project_id: str | None = Field(default=None, max_length=40, pattern=r"^[0-9]+$", description=(
        "One of the company's projects: only its tickets show. Without it, the sub's tickets "
        "of every project."))
    expires_at: Timestamp = Field(default=None, description=(
        "When the link stops working (RFC 3339 with its offset, in the future); without it, "
        "it works until it is ended."))


class ShareLink(Shape):
    """A share link: a sub's live log of its tickets, opened with no account; its address is
    shown only once, when it is made."""

    id: int
    sub: str
    project_id: str | None
    expires_at: dt.datetime | None
    created_at: dt.datetime
    created_by: str | None = Field(description="A reviewer's e-mail or an API key.")
    ended_at: dt.datetime | None = Field(description="When it was ended; null while it works.")


class ShareLinkCreated(ShareLink):
    """A new share link with its address: this answer is the only one carrying it."""

    url: str = Field(description="The page of the sub's tickets; a credential for reading them.")


class ShareLinkList(Shape):
    """A page of the company's share links, newest first."""

    data: list[ShareLink]
    total: int = Field(description="How many share links the company has made.")
    limit: int
    offset: int


class ShareLinkListQuery(InputShape):
    """Paging of the share links."""

    limit: int = Field(default=50, ge=1, le=200, description="1 to 200, default 50.")
    offset: int = Field(default=0, ge=0, le=10_000_000)


# ------------------------------------------------------------------ signature requests

# Whitespace spelt out for a pattern both sides apply: "\s" means one set to the document's readers
# (ECMA-262) and another to the regex that checks the field here (it also counts U+0085).
SPACE_CLASS = "".join(f"\\u{ord(c):04x}" for c in ECMA_SPACE)
EMAIL_PATTERN = rf"^[^@{SPACE_CLASS}]{{1,64}}@[^@{SPACE_CLASS}]{{1,190}}\.[^@{SPACE_CLASS}]{{2,63}}$"
PHONE_PATTERN = r"^\+?[0-9][0-9 ().-]{5,28}[0-9]$"


class SignatureRequestInput(InputShape):
    """Whom to ask for a signature, and where to send the signing link: an e-mail address or a
    phone number, or both."""

    # The rule across fields, for the document: without an e-mail address, a phone number (as
    # `if`/`then`, which generated clients leave to the server, where an `anyOf` would turn the
    # shape into a union of two).
    model_config = ConfigDict(json_schema_extra={
        "if": {"not": {"required": ["email"], "properties": {"email": {"type": "string"}}}},
        "then": {"required": ["phone"], "properties": {"phone": {"type": "string"}}},
    })

    name: Annotated[str, required_text(200, description="The signer, e.g. 'Sam Ortiz'.")]
    role: str | None = Field(default=None, max_length=200,
                             description="The signer's role, e.g. 'GC superintendent'.")
    email: str | None = Field(default=None, max_length=254, pattern=EMAIL_PATTERN, description=(
        "Where the link is e-mailed (when the service has mail settings)."))
    phone: str | None = Field(default=None, max_length=40, pattern=PHONE_PATTERN, description=(
        "A mobile number for a text message; the answer's `sms_href` opens one with the link."))
    language: Language | None = Field(default=None, description=(
        "The language of the e-mail, the text message and the signing page (until the signer "
        "switches). Without it, the language the crew wrote the ticket in on its capture page, "
        "or English for a ticket a program sent."))

    @field_validator("email", "phone", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        """An empty address counts as none."""
        return None if isinstance(value, str) and not value.strip(ECMA_SPACE) else value

    @model_validator(mode="after")
    def _somewhere_to_send(self) -> SignatureRequestInput:
        """At least one of e-mail and phone."""
        if not self.email and not self.phone:
            raise field_error("email", "give an e-mail address or a phone number (or both)")
        return self


class SignatureRequestState(StrEnum):
    """Where a signature request stands."""

    open = "open"
    signed = "signed"
    revoked = "revoked"
    expired = "expired"


class SignatureRequest(Shape):
    """A signing link sent to one person for one ticket; the link itself is shown only once,
    when it is made."""

    id: int
    ticket_id: str
    name: str
    role: str | None
    email: str | None
    phone: str | None
    state: SignatureRequestState
    created_at: dt.datetime
    created_by: str | None = Field(description="A reviewer's e-mail, an API key, or 'crew'.")
    expires_at: dt.datetime
    revoked_at: dt.datetime | None
    signed_at: dt.datetime | None
    emailed_at: dt.datetime | None = Field(description=(
        "When the link was e-mailed; null when it was not (no address, or no mail settings)."))
    reminders_sent: int
    next_reminder_at: dt.datetime | None = Field(description=(
        "When the next e-mail reminder is due (jobsite mornings, at most 3); null when none."))
    language: Language = Field(description=(
        "The language of its e-mails, text message and signing page."))


class SignatureRequestCreated(SignatureRequest):
    """A new signature request with its signing link: this answer is the only one carrying it."""

    url: str = Field(description="The signing link; a credential for signing this ticket once.")
    sms_href: str = Field(description="An sms: link that opens a text with the signing link.")


class SignatureRequestList(Shape):
    """A ticket's signature requests, newest first."""

    data: list[SignatureRequest]


# ------------------------------------------------------------------ rate sheets

Percent = _number(0, 1000)


class RateSheetLabor(InputShape):
    """A labor classification with its burdened hourly rates per hour type."""

    classification: str = required_text(100, description="e.g. 'Journeyman Electrician'.")
    st: Rate = Field(description="Straight-time rate per hour.")
    ot: Rate | None = Field(default=None, description="Overtime rate per hour.")
    dt: Rate | None = Field(default=None, description="Double-time rate per hour.")


class RateSheetEquipment(InputShape):
    """A piece of equipment with its hourly rate and, optionally, a daily rate."""

    description: str = required_text(300)
    hourly: Rate = Field(description="Per hour.")
    daily: Rate | None = Field(default=None, description=(
        "Per day of up to 8 hours; when given, a line is charged the lower of its hours at "
        "the hourly rate and its days (hours / 8, rounded up) at the daily rate."))


class RateSheetMaterial(InputShape):
    """A material at cost; the sheet's material markup is added when it is priced."""

    description: str = required_text(300)
    unit_cost: Rate = Field(description="Cost per unit, before the sheet's material markup.")


def _unique(items: list[Any], attribute: str, what: str) -> list[Any]:
    """Refuse two items of a sheet with the same name (compared without case)."""
    seen: set[str] = set()
    for item in items:
        key = getattr(item, attribute).casefold()
        if key in seen:
            raise ValueError(f"{what} {getattr(item, attribute)!r} is listed twice")
        seen.add(key)
    return items


class RateSheetInput(InputShape):
    """A rate sheet: agreed rates in force from a date, for a project or the company's default.

    A sheet sent with the same effective date as an existing sheet of the same project (or of
    the company default) replaces it. Tickets keep the prices they were given.
    """

    name: str = required_text(120, description="e.g. 'IBEW 2026 burdened rates'.")
    effective_from: IsoDate = Field(description="ISO date from which the sheet prices tickets "
                                                "(by the day their work was done).")
    material_markup: Percent = Field(default=0, validate_default=True, description=(
        "Percent added to the cost of every material line priced with this sheet."))
    labor: list[RateSheetLabor] = Field(default_factory=list, max_length=500)
    equipment: list[RateSheetEquipment] = Field(default_factory=list, max_length=500)
    materials: list[RateSheetMaterial] = Field(default_factory=list, max_length=2000)

    @field_validator("labor")
    @classmethod
    def _one_rate_per_classification(cls, items: list[RateSheetLabor]) -> list[RateSheetLabor]:
        """Each classification once."""
        return _unique(items, "classification", "classification")

    @field_validator("equipment", "materials")
    @classmethod
    def _one_rate_per_item(cls, items: list[Any]) -> list[Any]:
        """Each piece of equipment or material once."""
        return _unique(items, "description", "item")


class RateSheetCsvInput(InputShape):
    """A rate sheet sent as CSV text, as the rate-sheet page imports it.

    Columns: kind, item, st, ot, dt, hourly, daily, unit_cost, percent. `kind` is `labor`
    (item = classification; st, ot, dt), `equipment` (hourly, daily), `material` (unit_cost) or
    `material_markup` (percent). A sheet with any bad row is refused whole, the row named.
    """

    name: str = required_text(120)
    effective_from: IsoDate
    csv: str = Field(min_length=1, max_length=200_000, json_schema_extra={"contentMediaType": "text/csv"},
                     description=(
        "The CSV text, with a header row (at most 200,000 characters: more rows than a sheet "
        "holds). Its rows are checked like the JSON sheet's fields, each classification or item "
        "once, and a bad row refuses the whole sheet."))


class RateSheetLaborOut(Shape):
    """A labor classification of a sheet."""

    classification: str
    st: JsonNumber
    ot: OptionalJsonNumber
    dt: OptionalJsonNumber


class RateSheetEquipmentOut(Shape):
    """Equipment of a sheet."""

    description: str
    hourly: JsonNumber
    daily: OptionalJsonNumber


class RateSheetMaterialOut(Shape):
    """A material of a sheet, at cost."""

    description: str
    unit_cost: JsonNumber


class RateSheet(Shape):
    """A stored rate sheet."""

    id: int
    project_id: str | None = Field(description="Null for the company's default sheet.")
    name: str
    effective_from: dt.date
    material_markup: JsonNumber = Field(description="Percent added to material costs.")
    labor: list[RateSheetLaborOut]
    equipment: list[RateSheetEquipmentOut]
    materials: list[RateSheetMaterialOut]
    created_at: dt.datetime
    updated_at: dt.datetime


class RateSheetList(Shape):
    """Rate sheets, newest effective date first."""

    data: list[RateSheet]


class RateSheetCsv(Shape):
    """A rate sheet as CSV text, in the import's columns."""

    filename: str
    csv: str


# ------------------------------------------------------------------ markups

class MarkupIn(InputShape):
    """One markup of a project: a percentage on chosen line kinds, on the budget code picked for it."""

    name: str | None = Field(default=None, max_length=100, description=(
        "Shown on the ticket and the line item; defaults to the kind, e.g. 'Overhead'."))
    kind: MarkupKind
    percent: Percent = Field(description="Percent, 0 to 1000.")
    applies_to: list[LineKind] = Field(min_length=1, max_length=3, description=(
        "The line kinds whose amounts it is a percentage of."))
    compound: Flag = Field(default=False, description=(
        "True: the markups before it in the list are added to its base (e.g. profit on cost "
        "plus overhead). False: only the lines of `applies_to`."))
    budget_code_id: BudgetCodeId = Field(description=(
        "Budget code of the project the markup's line item lands on; checked like any route."))


class MarkupsInput(InputShape):
    """A project's markups in the order they apply; an empty list removes them all.

    Tickets created afterwards carry them as lines of their own; tickets already made keep
    the markups they were created with.
    """

    markups: list[MarkupIn] = Field(max_length=10)


class Markup(Shape):
    """A project's markup as stored."""

    name: str
    kind: MarkupKind
    percent: JsonNumber
    applies_to: list[LineKind]
    compound: bool
    budget_code_id: int
    budget_code: str | None = Field(description="Flat code text of the budget code, when the "
                                                "project still has it.")


class ProjectMarkupsOut(Shape):
    """A project's markups in the order they apply."""

    project_id: str
    markups: list[Markup]



# ------------------------------------------------------------------ commitments, settings

class EventType(StrEnum):
    """Procore's change event type."""

    TBD = "tbd"
    ALLOWANCE = "allowance"
    CONTINGENCY = "contingency"
    OWNER_CHANGE = "owner_change"
    TRANSFER = "transfer"


class CommitmentItem(Shape):
    """A subcontract (work order) or purchase order of a project, with its vendor."""

    id: int = Field(description="The `contract_id` to confirm for a sub or approve with.")
    kind: Literal["work_order", "purchase_order"]
    number: str | None
    title: str | None
    status: str | None = Field(description="The project system's status, e.g. 'Approved'.")
    vendor_id: int | None
    vendor_name: str | None


class SubCommitmentItem(Shape):
    """A sub as the project's tickets name it, and the commitment its lines are written on."""

    sub: str
    commitment: TicketCommitment


class CommitmentList(Shape):
    """A project's commitments that can take a line, and the subs whose commitment is confirmed."""

    project_id: str
    data: list[CommitmentItem]
    confirmed: list[SubCommitmentItem] = Field(description=(
        "Each sub a PM confirmed a commitment for (or none) on this project, as its tickets use it."))


class SubCommitmentInput(InputShape):
    """Confirm which commitment a sub's lines are written on, for the sub's tickets on a project."""

    sub: str = required_text(120, description=(
        "The sub as tickets name it (a capture link's label, or `sub` of a created ticket); "
        "matched ignoring case, punctuation and a legal suffix."))
    contract_id: RecordId | None = Field(description=(
        "One of the project's commitments (GET /v1/projects/{project_id}/commitments), or null: "
        "the sub's lines carry no commitment on this project."))


class ChangeReasonItem(Shape):
    """A change reason of the company in the project system."""

    id: int
    name: str


class ProjectSettingsInput(InputShape):
    """How a project's change events are written; a field left out takes its default."""

    event_type: EventType = Field(default=EventType.TBD, description="Procore's event type.")
    change_reason_id: RecordId | None = Field(default=None, description=(
        "A change reason of `change_reasons`, or null for none; another id is a 409 "
        "`change_reason_not_found`."))


class ProjectSettingsOut(Shape):
    """How a project's change events are written (always out of scope: the work is extra)."""

    project_id: str
    event_type: EventType
    change_reason_id: int | None
    change_reason: str | None = Field(description="The change reason's name.")
    change_reasons: list[ChangeReasonItem] = Field(description=(
        "The change reasons the company offers, to choose from."))


# ------------------------------------------------------------------ not-to-exceed

class AuthorizationInput(InputShape):
    """A GC directive or change-order request with the amount it authorises."""

    reference: str = required_text(60, description=(
        "The GC's number, e.g. 'CD-014'; unique per project whatever its case ('cd-014' is the "
        "same reference)."))
    kind: AuthorizationKind = AuthorizationKind.DIRECTIVE
    title: str | None = Field(default=None, max_length=300)
    amount: _number(0, 100_000_000) = Field(description="The authorised (not-to-exceed) amount.")


class AuthorizationList(Shape):
    """A project's authorizations with their running totals."""

    data: list[NteStatus]


class TicketAuthorizationInput(InputShape):
    """Which authorization a ticket counts against; null to count it against none."""

    authorization_id: RecordId | None = \
        Field(description=(
        "An authorization of the ticket's project (see /projects/{id}/authorizations), or null."))


# ------------------------------------------------------------------ webhooks

class WebhookEventType(StrEnum):
    """A ticket event a webhook endpoint can be sent."""

    SUBMITTED = "ticket.submitted"
    SIGNED = "ticket.signed"
    SENT_BACK = "ticket.sent_back"
    WRITTEN = "ticket.written"
    REJECTED = "ticket.rejected"
    RESTORED = "ticket.restored"
    RECORD_CHANGED = "ticket.record_changed"


WEBHOOK_URL_TEXT = ("Where events are sent: an https address of a public host (http only for a "
                    "host the server's WEBHOOK_ALLOW_PRIVATE setting allows).")


class WebhookEndpointInput(InputShape):
    """A webhook endpoint to register."""

    url: str = required_text(2000, description=WEBHOOK_URL_TEXT)
    events: list[WebhookEventType] = Field(
        default_factory=lambda: list(WebhookEventType), min_length=1, max_length=20,
        description="The events to send; every event when left out.")
    description: str | None = Field(default=None, max_length=200,
                                     description="What the endpoint is for, e.g. 'ERP sync'.")


class WebhookEndpointPatch(InputShape):
    """The fields of a webhook endpoint to change; those left out stay as they are."""

    url: str | None = Field(default=None, min_length=1, max_length=2000,
                            json_schema_extra={"pattern": NOT_BLANK}, description=WEBHOOK_URL_TEXT)
    events: list[WebhookEventType] | None = Field(default=None, min_length=1, max_length=20)
    description: str | None = Field(default=None, max_length=200)
    enabled: Flag | None = Field(default=None, description=(
        "False stops sending (events meanwhile are not kept for it); true sends again and "
        "clears a disabling after three days of failures."))


class WebhookEndpoint(Shape):
    """A webhook endpoint of the company; its secret is shown only when it is made or rotated."""

    id: int
    url: str
    description: str | None
    events: list[WebhookEventType]
    enabled: bool
    disabled_reason: str | None = Field(description="Why the service disabled it, if it did.")
    failing_since: dt.datetime | None = Field(
        description="Since when its deliveries fail; three days of failures disable it.")
    created_at: dt.datetime


class WebhookEndpointCreated(WebhookEndpoint):
    """A webhook endpoint with its signing secret, shown this once."""

    secret: str = Field(description=(
        "The Standard Webhooks signing secret (`whsec_` and base64); verify each event's "
        "`webhook-signature` with it."))


class WebhookEndpointList(Shape):
    """The company's webhook endpoints, oldest first."""

    data: list[WebhookEndpoint]


class WebhookAttempt(Shape):
    """One try at sending a delivery."""

    attempted_at: dt.datetime
    status_code: int | None = Field(description="The endpoint's answer; null when none came.")
    duration_ms: int
    ok: bool
    error: str | None


class WebhookDelivery(Shape):
    """One event sent (or being sent) to one endpoint, with its attempts of the last 30 days."""

    id: str = Field(description="The `webhook-id` every attempt of this event sends.")
    endpoint_id: int
    type: WebhookEventType
    ticket_id: str | None
    status: Literal["pending", "delivered", "failed"]
    created_at: dt.datetime
    next_attempt_at: dt.datetime | None
    attempts: list[WebhookAttempt]


class WebhookDeliveryList(Shape):
    """An endpoint's deliveries, newest first."""

    data: list[WebhookDelivery]


class WebhookEvent(Shape):
    """The body of every webhook: the event, when it happened, and the ticket as
    `GET /v1/tickets/{ticket_id}` answered at that moment."""

    type: WebhookEventType
    timestamp: dt.datetime
    data: Ticket


# ----------------------------------------------------------------- reports

class ReportGroup(StrEnum):
    """What the outstanding report's rows are: a stage, a sub or a project."""

    STAGE = "stage"
    SUB = "sub"
    PROJECT = "project"


class OutstandingQuery(InputShape):
    """Which outstanding tickets the report counts (the ticket list's filters) and how it groups
    them."""

    project_id: str | None = TicketFilters.model_fields["project_id"]
    sub: str | None = TicketFilters.model_fields["sub"]
    q: str | None = TicketFilters.model_fields["q"]
    group_by: ReportGroup = Field(default=ReportGroup.STAGE, description=(
        "`stage` (every outstanding stage, in order, empty ones too), `sub` or `project` "
        "(largest total first)."))


class OutstandingAge(Shape):
    """The tickets of a row that are of one age, in whole days since they were captured."""

    key: Literal["0_2", "3_7", "8_30", "over_30"] = Field(description=(
        "`0_2` (0 to 2 days), `3_7`, `8_30` or `over_30`."))
    label: str = Field(description="The age in words, e.g. '3-7 days'.")
    count: int
    total: str = Field(description="Their dollars, as a decimal string.")


class OutstandingRow(Shape):
    """One stage, sub or project: its outstanding tickets, their dollars and ages."""

    key: str | None = Field(description=(
        "The stage (`signature`, `review`, `written`, `change_order`), the sub as its tickets "
        "first name it (null for tickets naming none), or the project id."))
    label: str = Field(description="The row in words: the stage, the sub, or the project's name.")
    count: int
    total: str = Field(description="Their dollars, as a decimal string.")
    oldest_at: dt.datetime | None = Field(description=(
        "When its oldest ticket was captured; null for a stage with none."))
    buckets: list[OutstandingAge] = Field(description="Each age, youngest first, empty ones too.")


class OutstandingReport(Shape):
    """Outstanding dollars: tickets not yet paid, by stage, sub or project, split by age."""

    rows: list[OutstandingRow]
    as_of: dt.datetime = Field(description="The moment the ages are counted from.")
    group_by: ReportGroup
