"""Procore REST client, used against Procore itself and against the embedded sandbox.

Reads are retried with capped exponential backoff; writes are sent exactly once (apart from
a repeat after a 401, which Procore answers before doing anything). After a failed or
unanswered write, callers look the record up by origin id before writing again.

It is one thing, the client of one REST API, kept whole so that every request it makes can
be read against Procore's published contract in one place.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

from services.project_system.base import (
    Attachment,
    BudgetCode,
    ChangeEventDraft,
    ChangeOrderState,
    ChangeReason,
    Commitment,
    CostCode,
    CostType,
    ManpowerDraft,
    ProjectSystemAuthError,
    ProjectSystemError,
    ProjectSystemRateLimited,
    ProjectSystemUnavailable,
    RecordState,
    RemoteProject,
    RemoteRecord,
    ToolDisabled,
    Vendor,
)
from services.project_system.pacing import Budget, LocalBudget

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0
# While set (`hurried`), every call waits at most (connect, read, write) seconds and is not
# sent again after a transport error: the caller would rather say so than keep a person waiting.
_HURRIED: ContextVar[tuple[float, float, float] | None] = ContextVar("hurried", default=None)
# While set (`patient`), how long one call may wait for the company's rate-limit budget,
# instead of the client's own `max_rate_limit_wait_s`.
_PATIENCE: ContextVar[float | None] = ContextVar("patience", default=None)
# The longest pause a 429 may ask for and still be waited out within the call; a longer one
# (Procore's hourly limit) is refused at once with the time to wait.
RATE_LIMIT_WAIT_S = 10.0
# A wait that ends this little past a call's patience is still waited: Procore's reset and
# clock come in whole seconds, so a whole window may read a second or two longer.
WAIT_ROUNDING_S = 2.0
BACKOFF_BASE_S = 0.5
TOKEN_SAFETY_S = 60
MAX_BODY_BYTES = 20 * 1024 * 1024
# One approval's files go up side by side, this many at a time.
UPLOAD_THREADS = 4
# Records are looked up from a little before the caller's timestamp: our clock and
# Procore's are not the same clock.
CLOCK_SKEW = datetime.timedelta(minutes=10)
_TRANSPORT_ERRORS = (requests.ConnectionError, requests.Timeout,
                     requests.exceptions.ChunkedEncodingError)
# Procore's default cost type codes, preferred when several types share a base type.
_STANDARD_CODES = {"labor": "L", "equipment": "E", "materials": "M", "other": "O"}
# Procore does not document the engine names: match names and titles seen or likely.
_CHANGE_EVENT_TOOLS = {"change_events", "change_event", "change events", "changeevents",
                       "change_event_tool"}
# A tool's name in a refusal, and the permission its calls need (Procore's permission names).
_TOOL_WORDS = {"change_events": "the Change Events tool", "daily_log": "the Daily Log tool",
               "budget": "the budget codes (Budget tool)", "tools": "the project's tool list",
               "directory": "the project's Directory", "commitments": "the Commitments tool"}
_TOOL_PERMISSIONS = {"change_events": "Standard or Admin permission on Change Events",
                     "daily_log": "Standard or Admin permission on the Daily Log",
                     "budget": "Admin permission on the Budget",
                     "tools": "Admin permission on the project",
                     "directory": "Read Only permission on the Directory",
                     "commitments": "Read Only permission on Commitments"}
# The two kinds of commitment and where each is listed; a Void or Terminated one takes no line.
_COMMITMENT_LISTS = (("work_order", "/rest/v1.0/work_order_contracts"),
                     ("purchase_order", "/rest/v1.0/purchase_order_contracts"))
_DEAD_COMMITMENTS = {"void", "terminated"}
# Engine names and titles of Procore tools other than Change Events (also undocumented): a
# tool list whose every row is one of these, or Change Events, is read as it is; a row known
# by neither its engine name nor its title may be Change Events under another name or
# language, and the statuses call decides.
_OTHER_TOOLS = {
    "home", "directory", "documents", "daily_log", "photos", "rfi", "rfis", "submittal_log",
    "submittals", "tm_tickets", "t&m tickets", "budgeting", "budget", "commitments",
    "prime_contracts", "prime contracts", "admin", "emails", "drawing_log", "drawings",
    "specification_sections", "specifications", "meetings", "schedule", "punch_list",
    "punch list", "inspections", "observations", "incidents", "forms", "transmittals",
    "correspondence", "bidding", "estimating", "timesheets", "timecard", "crews", "equipment",
    "direct_costs", "direct costs", "invoicing", "tasks", "action_plans", "action plans",
    "coordination_issues", "models", "progress_billings", "change_orders", "change orders",
    "instructions", "reports", "portfolio", "daily log", "my time", "timecards"}
_HOUR_WORDS = {"hr", "hrs", "hour", "hours", "h"}
UOM_CACHE_S = 3600


@contextlib.contextmanager
def hurried(connect_s: float, read_s: float, write_s: float) -> Iterator[None]:
    """Calls made in the block wait at most `connect_s` to connect and `read_s` (`write_s` for
    a write) for each part of an answer, and are not sent again after a transport error."""
    token = _HURRIED.set((connect_s, read_s, write_s))
    try:
        yield
    finally:
        _HURRIED.reset(token)


@contextlib.contextmanager
def patient(seconds: float) -> Iterator[None]:
    """Calls made in the block each wait up to `seconds` for the company's rate-limit budget
    (a whole 60 s window, say), then are refused with the time still to wait."""
    token = _PATIENCE.set(seconds)
    try:
        yield
    finally:
        _PATIENCE.reset(token)


class ProcoreClient:
    """A ProjectSystem speaking Procore's REST API with client-credentials OAuth.

    ``calls`` lists every HTTP call made, as (method, path), token requests included.
    """

    def __init__(self, api_base: str, oauth_base: str, client_id: str, client_secret: str,
                 company_id: int, *, web_base: str | None = None,
                 timeout: tuple[float, float] = (5, 30), per_page: int = 100,
                 write_timeout: tuple[float, float] | None = None,
                 max_read_retries: int = 4, max_rate_limit_retries: int = 4,
                 max_rate_limit_wait_s: float = RATE_LIMIT_WAIT_S,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 session: requests.Session | None = None,
                 budget: Budget | None = None) -> None:
        """Configure the client; pass ``web_base`` (e.g. https://app.procore.com) for Procore."""
        # Without web_base, record links point at the API host, where the sandbox serves pages.
        self.api_base = api_base.rstrip("/")
        self.oauth_base = oauth_base.rstrip("/")
        self.web_base = (web_base or api_base).rstrip("/")
        self.client_id = client_id
        self._client_secret = client_secret
        self.company_id = int(company_id)
        self.timeout = timeout  # reads (and the token): short, so a page never waits long
        self.write_timeout = write_timeout or timeout  # writes: may carry photos
        self.per_page = per_page
        self.max_read_retries = max_read_retries
        self.max_rate_limit_retries = max_rate_limit_retries
        self.max_rate_limit_wait_s = max_rate_limit_wait_s
        self.clock = clock
        self.sleep = sleep
        self._session = session or requests.Session()
        self._owns_session = session is None
        self._token: str | None = None
        self._token_expires_at = 0.0
        self.calls: list[tuple[str, str]] = []
        # Called with every answer and its body; tests record exchanges with it.
        self.observer: Callable[[requests.Response, bytes], None] | None = None
        self._uoms: list[dict[str, Any]] | None = None
        # The calls Procore's rate limit leaves this company, shared by every thread (and, on
        # Redis, every process): a call waits for the window's reset rather than meet a 429.
        self.budget: Budget = budget or LocalBudget()
        # When (on `clock`) the latest wait of this client's calls for Procore's rate limit
        # ends: the calls queued behind them know the company's budget, not a hung Procore,
        # holds them up.
        self.paced_until = 0.0
        self._paced_lock = threading.Lock()
        self.units_readable = True  # False once the company's units answered 403 or 404
        self._uoms_read_at = 0.0

    def __repr__(self) -> str:
        """Identify the client without its secret or token."""
        return f"ProcoreClient(api_base={self.api_base!r}, company_id={self.company_id})"

    def close(self) -> None:
        """Close the HTTP session if this client created it."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> ProcoreClient:
        """Use the client as a context manager that closes its session."""
        return self

    def __exit__(self, *_exc: object) -> None:
        """Close the session on leaving the block."""
        self.close()

    # HTTP plumbing

    def _send(self, method: str, url: str, *, retry: bool,
              **kwargs: Any) -> tuple[requests.Response, bytes]:
        """Send one request; all are retried on a short 429, safe ones also on transport errors
        and 5xx. A 429 asking for a longer pause raises ProjectSystemRateLimited at once."""
        path = urlsplit(url).path
        paced = url.startswith(f"{self.api_base}/rest/")  # not the token, not file storage
        hurried = _HURRIED.get()
        if hurried is not None:
            timeout: Any = (hurried[0], hurried[1] if retry else hurried[2])
        else:
            timeout = self.timeout if retry else self.write_timeout
        attempt = 0
        while True:
            try:
                response, body = self._exchange(method, url, path, paced, timeout=timeout,
                                                **kwargs)
            except _TRANSPORT_ERRORS as exc:
                if retry and hurried is None and attempt < self.max_read_retries:
                    delay = self._backoff(attempt)
                    log.info("Retrying %s %s in %.1f s after %s", method, path, delay,
                             type(exc).__name__)
                    self.sleep(delay)
                    attempt += 1
                    continue
                raise ProjectSystemUnavailable(
                    f"No answer from the project system for {method} {path}: "
                    f"{type(exc).__name__}") from exc
            status = response.status_code
            # A 429 is answered before anything is done, so writes may repeat it too.
            if status == 429:
                now = self.clock()
                delay = self._retry_delay(response, attempt)
                if attempt >= self.max_rate_limit_retries or delay > self._patience_s():
                    raise ProjectSystemRateLimited(
                        _error_message(response, body), retry_after_s=delay,
                        request_id=response.headers.get("X-Request-Id"))
                log.info("Retrying %s %s in %.1f s after HTTP 429", method, path, delay)
                self._wait_rate_limit(delay, now)
                attempt += 1
                continue
            if retry and status >= 500 and attempt < self.max_read_retries:
                delay = min(self._retry_delay(response, attempt), MAX_WAIT_S)
                log.info("Retrying %s %s in %.1f s after HTTP %s", method, path, delay, status)
                self.sleep(delay)
                attempt += 1
                continue
            return response, body

    def _wait_rate_limit(self, seconds: float, now: float) -> None:
        """Sleep for Procore's rate limit (the wait worked out at `now`), noted in
        `paced_until`."""
        with self._paced_lock:
            self.paced_until = max(self.paced_until, now + seconds)
        self.sleep(seconds)

    def _patience_s(self) -> float:
        """How long a call may wait for the rate limit: `patient`'s seconds in its block, else
        `max_rate_limit_wait_s`; a little more for Procore's whole seconds."""
        patience = _PATIENCE.get()
        return (self.max_rate_limit_wait_s if patience is None else patience) + WAIT_ROUNDING_S

    def _wait_for_budget(self, method: str, path: str) -> None:
        """Wait until the rate limit leaves a call for this one; a longer wait than a call may
        make raises ProjectSystemRateLimited before anything is sent."""
        while (wait := self.budget.take(now := self.clock())) > 0:
            if wait > self._patience_s():
                raise ProjectSystemRateLimited(
                    f"Procore's rate limit leaves no call for {math.ceil(wait)} s",
                    retry_after_s=wait)
            log.info("Pacing %s %s: %.1f s until Procore's rate limit resets", method, path, wait)
            self._wait_rate_limit(wait, now)

    def _exchange(self, method: str, url: str, path: str, paced: bool,
                  **kwargs: Any) -> tuple[requests.Response, bytes]:
        """One HTTP call and its body; when `paced`, a call of the company's budget is taken
        first and given back with what the answer says is left."""
        if paced:
            self._wait_for_budget(method, path)
        self.calls.append((method, path))
        remaining = reset = None
        try:
            response = self._session.request(method, url, allow_redirects=False, stream=True,
                                             **kwargs)
            remaining, reset = _rate_left(response, self.clock())
            body = self._read(response)
        finally:
            if paced:
                self.budget.done(remaining, reset)
        if self.observer is not None:
            self.observer(response, body)
        return response, body

    @staticmethod
    def _read(response: requests.Response) -> bytes:
        """Read the body, refusing answers larger than MAX_BODY_BYTES."""
        chunks, size = [], 0
        with response:
            for chunk in response.iter_content(64 * 1024):
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise ProjectSystemError("The project system's answer is too large",
                                             status=response.status_code)
                chunks.append(chunk)
        return b"".join(chunks)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: between half and all of base * 2**attempt."""
        ceiling = min(MAX_WAIT_S, BACKOFF_BASE_S * 2.0 ** attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def _retry_delay(self, response: requests.Response, attempt: int) -> float:
        """How long to wait: the later of Retry-After and X-Rate-Limit-Reset, else backoff."""
        waits = []
        retry_after = response.headers.get("Retry-After", "").strip()
        if retry_after:
            try:
                waits.append(float(retry_after))
            except ValueError:
                try:
                    waits.append(parsedate_to_datetime(retry_after).timestamp()
                                 - _clock_offset(response, self.clock()) - self.clock())
                except (TypeError, ValueError):
                    pass
        reset = response.headers.get("X-Rate-Limit-Reset", "").strip()
        remaining = response.headers.get("X-Rate-Limit-Remaining", "").strip()
        # Procore: on a 429, wait until the reported window resets (rate_limiting.md).
        if response.status_code == 429 and reset and (remaining == "0" or not waits):
            try:
                waits.append(float(reset) - _clock_offset(response, self.clock()) - self.clock())
            except ValueError:
                pass
        if waits:
            return max(max(waits), 0.0)
        return self._backoff(attempt)

    def _access_token(self) -> str:
        """A cached access token, fetched anew when missing or about to expire."""
        if self._token is not None and self.clock() < self._token_expires_at:
            return self._token
        issued_at = self.clock()
        response, body = self._send(
            "POST", f"{self.oauth_base}/oauth/token", retry=True,
            data={"grant_type": "client_credentials", "client_id": self.client_id,
                  "client_secret": self._client_secret},
            headers={"Accept": "application/json"})
        if response.status_code in (400, 401):
            raise ProjectSystemAuthError(_error_message(response, body),
                                         status=response.status_code,
                                         request_id=response.headers.get("X-Request-Id"))
        _raise_for_status(response, body)
        payload = _parse_json(response, body)
        if not isinstance(payload, dict) or not payload.get("access_token"):
            raise ProjectSystemAuthError("The token answer holds no access token",
                                         status=response.status_code)
        self._token = str(payload["access_token"])
        self._token_expires_at = issued_at + max(
            float(payload.get("expires_in") or 0) - TOKEN_SAFETY_S, 0.0)
        return self._token

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                 json_body: dict[str, Any] | None = None,
                 files: dict[str, tuple[str, bytes, str]] | None = None,
                 tool: str | None = None) -> tuple[requests.Response, bytes]:
        """An authenticated API call; a 401 renews the token once and repeats the call."""
        data = None
        headers = {"Accept": "application/json", "Procore-Company-Id": str(self.company_id)}
        if json_body is not None:
            data = json.dumps(json_body, default=_json_default)
            headers["Content-Type"] = "application/json"
        renewed = False
        while True:
            headers["Authorization"] = f"Bearer {self._access_token()}"
            response, body = self._send(method, f"{self.api_base}{path}", retry=method == "GET",
                                        params=params, data=data, files=files, headers=headers)
            if response.status_code != 401 or renewed:
                break
            self._token = None
            renewed = True
        _raise_for_status(response, body, tool=tool)
        return response, body

    def _get_object(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET one JSON object."""
        response, body = self._request("GET", path, params=params)
        payload = _parse_json(response, body)
        if not isinstance(payload, dict):
            raise ProjectSystemError(f"Expected an object from {path}",
                                     status=response.status_code,
                                     request_id=response.headers.get("X-Request-Id"))
        return payload

    def _pages(self, path: str, params: dict[str, Any] | None = None, *,
               tool: str | None = None) -> Iterator[dict[str, Any]]:
        """Every element of a paginated list, following Link rel="next" (or Total)."""
        page = 1
        while True:
            response, body = self._request(
                "GET", path, params={**(params or {}), "page": page, "per_page": self.per_page},
                tool=tool)
            items = _parse_json(response, body)
            if not isinstance(items, list):
                raise ProjectSystemError(f"Expected a list from {path}",
                                         status=response.status_code,
                                         request_id=response.headers.get("X-Request-Id"))
            yield from items
            following = _next_page(response, page, self.per_page)
            if following is None or following <= page:
                return
            page = following

    # Projects, tools and cost structure

    def list_projects(self) -> list[RemoteProject]:
        """All projects of the company, active and inactive."""
        return [RemoteProject(id=int(row["id"]), name=row["name"],
                              display_name=row.get("display_name"),
                              project_number=row.get("project_number"),
                              active=bool(row.get("active", True)),
                              time_zone=_text_or_none(row.get("time_zone")))
                for row in self._pages("/rest/v1.0/projects",
                                       {"company_id": self.company_id,
                                        "filters[by_status]": "All"})]

    def list_tools(self, project_id: int) -> list[dict[str, Any]] | None:
        """The project's tool list, or None when the credentials may not read it (403/404)."""
        try:
            return list(self._pages(f"/rest/v1.0/projects/{project_id}/tools"))
        except ProjectSystemError as exc:
            if exc.status not in (403, 404):
                raise
            return None

    def change_event_tool(self, project_id: int,
                          tools: list[dict[str, Any]] | None | object = ...) -> tuple[bool, str]:
        """Whether change events can be written, and how that was decided, in plain words
        (`tools`: the project's tool list, or None when unreadable, if already read)."""
        rows = self.list_tools(project_id) if tools is ... else tools
        if isinstance(rows, list):
            tool = next((row for row in rows if _is_change_event_tool(row)), None)
            if tool is not None:
                if not tool.get("is_active", True):
                    return False, (f"the Change Events tool ({tool.get('engine_name')!r}) is "
                                   "switched off on the project")
                return True, (f"the Change Events tool ({tool.get('engine_name')!r}) is on in "
                              "the project's tool list")
            unknown = [row for row in rows if not _is_other_tool(row)]
            if not unknown:
                return False, "the project's tool list has no Change Events tool"
            # A tool known by neither its engine name nor its title (a title in another
            # language, an engine name not seen before): the statuses call decides.
            why = (f"the project's tool list has no tool known as Change Events, but "
                   f"{_tool_names(unknown)} is not known either")
        else:
            why = "the tool list could not be read"
        # A 403 on the statuses call means the tool is off.
        try:
            self._request("GET", "/rest/v1.0/change_event/statuses",
                          params={"project_id": project_id, "per_page": 1},
                          tool="change_events")
        except ToolDisabled:
            return False, f"{why} and the change-event statuses were refused"
        return True, f"{why}, but the change-event statuses answered"

    def change_events_enabled(self, project_id: int) -> bool:
        """The tool list decides when it is readable; only otherwise the statuses probe does."""
        return self.change_event_tool(project_id)[0]

    def _cost_code_rows(self, project_id: int,
                        sub_jobs: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The project's cost codes as Procore lists them, divisions included, then each sub
        job's own (read with its ``sub_job_id``), each row marked with its sub job's code."""
        rows = {int(row["id"]): dict(row, _sub_job=None) for row in
                self._pages("/rest/v1.0/cost_codes", {"project_id": project_id})}
        for sub_job in sub_jobs:
            for row in self._pages("/rest/v1.0/cost_codes",
                                   {"project_id": project_id, "sub_job_id": sub_job["id"]}):
                rows[int(row["id"])] = dict(row, _sub_job=str(sub_job["code"]),
                                            _sub_job_id=int(sub_job["id"]))
        return list(rows.values())

    def _sub_jobs(self, project_id: int, wbs_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The project's sub jobs, read only when one of its budget codes names one; none when
        they cannot be read (their budget codes then tie to no cost code, never to another's)."""
        if not any(_segment_type(item) == "sub_job" for row in wbs_rows for item in _items(row)):
            return []
        try:
            return [row for row in self._pages("/rest/v1.0/sub_jobs", {"project_id": project_id})
                    if row.get("code") is not None]
        except ProjectSystemError as error:
            if error.status in (403, 404):
                return []
            raise

    def list_cost_codes(self, project_id: int) -> list[CostCode]:
        """The project's cost codes that are no other code's parent (divisions are left out)."""
        return self._codes_from_rows(self._read_codes(project_id)[0])

    @staticmethod
    def _codes_from_rows(rows: list[dict[str, Any]]) -> list[CostCode]:
        """Cost codes from Procore's rows, leaving out the divisions (codes that are parents)."""
        parents = {_parent_id(row) for row in rows}
        return [CostCode(id=int(row["id"]), code=_full_code(row), name=row["name"],
                         sub_job=row.get("_sub_job"))
                for row in rows if row["id"] not in parents]

    def list_cost_types(self, project_id: int) -> list[CostType]:
        """The cost types (line item types) of the project."""
        return [CostType(id=int(row["id"]), code=row["code"], name=row["name"],
                         base_type=row.get("base_type") or "")
                for row in self._pages("/rest/v1.0/line_item_types", {"project_id": project_id})]

    def _wbs_rows(self, project_id: int) -> list[dict[str, Any]]:
        """The project's active WBS codes as Procore lists them."""
        return [row for row in self._pages(
            f"/rest/v1.0/projects/{project_id}/work_breakdown_structure/wbs_codes",
            {"filters[status][]": "active"})
            # an inactive code is never used, whatever the filter did
            if str(row.get("status") or "active").lower() == "active"]

    def _read_codes(self, project_id: int
                    ) -> tuple[list[dict[str, Any]], list[CostType], list[dict[str, Any]]]:
        """Cost code rows (each sub job's too), cost types and WBS code rows, each read once."""
        cost_types = self.list_cost_types(project_id)
        wbs_rows = self._wbs_rows(project_id)
        return (self._cost_code_rows(project_id, self._sub_jobs(project_id, wbs_rows)),
                cost_types, wbs_rows)

    @staticmethod
    def _budget_codes(cost_codes: list[dict[str, Any]], cost_types: list[CostType],
                      wbs_rows: list[dict[str, Any]]) -> list[BudgetCode]:
        """Budget codes tied to cost codes (of their own sub job) and cost types through their
        segment items."""
        code_ids = {(row.get("_sub_job"), _full_code(row)): int(row["id"]) for row in cost_codes}
        types = {cost_type.code: cost_type for cost_type in cost_types}
        codes = []
        for row in wbs_rows:
            cost_code_id, cost_type = _codes_of(row, code_ids, types)
            codes.append(BudgetCode(id=int(row["id"]), flat_code=row["flat_code"],
                                    description=row.get("description") or
                                    row.get("flat_name") or "",
                                    cost_code_id=cost_code_id, cost_type=cost_type))
        return codes

    def list_wbs_segments(self, project_id: int) -> list[dict[str, Any]]:
        """The project's budget-code pattern: its segments in order, each with its delimiter
        (a company segment the project's pattern leaves out is no part of it)."""
        rows = [row for row in self._pages(
            f"/rest/v1.0/projects/{project_id}/work_breakdown_structure/segments")
            if row.get("is_included_in_project_pattern") is not False]
        return sorted(rows, key=lambda row: row.get("position") or 0)

    def list_budget_codes(self, project_id: int) -> list[BudgetCode]:
        """The project's active budget codes with their cost code and normalized cost type."""
        return self._budget_codes(*self._read_codes(project_id))

    def read_catalog(self, project_id: int
                     ) -> tuple[list[CostCode], list[CostType], list[BudgetCode]]:
        """Cost codes, cost types and budget codes in one pass (each list read once)."""
        rows, cost_types, wbs_rows = self._read_codes(project_id)
        return (self._codes_from_rows(rows), cost_types,
                self._budget_codes(rows, cost_types, wbs_rows))

    def create_budget_code(self, project_id: int, cost_code_id: int, cost_type: str,
                           description: str | None = None) -> BudgetCode:
        """The budget code for a cost code and cost type ("labor" or "L"), created if missing
        (with `description`, else "<cost code name>.<cost type name>"); a sub job's cost
        code gets its budget code on that sub job."""
        # A cost code or cost type the project lacks is reported as a 404 ProjectSystemError.
        cost_codes, cost_types, wbs_rows = self._read_codes(project_id)
        chosen_type = _pick_cost_type(cost_types, cost_type)
        cost_code = next((row for row in cost_codes if int(row["id"]) == cost_code_id), None)
        if chosen_type is None or cost_code is None:
            missing = (f"cost type {cost_type!r}" if chosen_type is None
                       else f"cost code {cost_code_id}")
            raise ProjectSystemError(f"Project {project_id} has no {missing}", status=404)
        for code in self._budget_codes(cost_codes, cost_types, wbs_rows):
            if code.cost_code_id == cost_code_id and \
                    code.cost_type == _normalize_cost_type(chosen_type):
                return code
        full_code, sub_job = _full_code(cost_code), cost_code.get("_sub_job")
        wanted = f"{sub_job + '.' if sub_job else ''}{full_code}.{chosen_type.code}"
        wbs = f"/rest/v1.0/projects/{project_id}/work_breakdown_structure"
        segments = self._budget_code_segments(project_id, bool(sub_job), wanted)
        items = self._segment_items(project_id, wbs, segments, cost_code, chosen_type, wanted)
        response, body = self._request("POST", f"{wbs}/wbs_codes", json_body={
            "description": description or f"{cost_code['name']}.{chosen_type.name}",
            "segment_items": [{"segment_id": segments[kind]["id"], "segment_item_id": item["id"]}
                              for kind, item in items.items()]})
        made = int(_parse_json(response, body)["id"])
        # Read back: the code must stand on this cost code (of this sub job) and cost type.
        row = next((row for row in self._wbs_rows(project_id) if int(row["id"]) == made), None)
        code = None if row is None else self._budget_codes(cost_codes, cost_types, [row])[0]
        if code is None or code.cost_code_id != cost_code_id or \
                code.cost_type != _normalize_cost_type(chosen_type):
            raise ProjectSystemError(
                f"Procore made budget code {made} for {wanted}, but it does not read back as "
                f"that cost code and cost type", status=422)
        return code

    def _budget_code_segments(self, project_id: int, sub_job: bool,
                              wanted: str) -> dict[Any, dict[str, Any]]:
        """The project's budget code segments by type, refused (422) when the pattern lacks a
        segment this service fills or requires one it cannot."""
        pattern = self.list_wbs_segments(project_id)
        segments = {row.get("type"): row for row in pattern}
        given = {"cost_code", "line_item_type"} | ({"sub_job"} if sub_job else set())
        if not given <= set(segments):
            raise ProjectSystemError(
                f"Project {project_id}'s budget code pattern has no "
                f"{' or '.join(sorted(given - set(segments)))} segment", status=422)
        others = [row.get("name") or row.get("type") for row in pattern
                  if row.get("type") not in given and row.get("required")]
        if others:
            raise ProjectSystemError(
                f"Project {project_id}'s budget codes also need a {', '.join(map(str, others))}; "
                f"create the budget code for {wanted} in Procore", status=422)
        return segments

    def _segment_items(self, project_id: int, wbs: str, segments: dict[Any, dict[str, Any]],
                       cost_code: dict[str, Any], chosen_type: CostType,
                       wanted: str) -> dict[str, dict[str, Any]]:
        """The segment item of each segment a new budget code stands on (cost code, cost type,
        and sub job when it has one); a 404 when one of them has none."""
        sub_job = cost_code.get("_sub_job")
        items = {"cost_code": self._cost_code_item(wbs, segments["cost_code"]["id"],
                                                   int(cost_code["id"]), _full_code(cost_code),
                                                   cost_code.get("_sub_job_id")),
                 "line_item_type": next((item for item in self._pages(
                     f"{wbs}/segments/{segments['line_item_type']['id']}/segment_items")
                     if item.get("code") == chosen_type.code), None)}
        if sub_job:
            items["sub_job"] = next((item for item in self._pages(
                f"{wbs}/segments/{segments['sub_job']['id']}/segment_items")
                if str(item.get("code")) == sub_job), None)
        if any(item is None for item in items.values()):
            raise ProjectSystemError(f"Project {project_id}'s budget code segments have no item "
                                     f"for {wanted}", status=404)
        return items

    def _cost_code_item(self, wbs: str, segment_id: int, cost_code_id: int, full_code: str,
                        sub_job_id: int | None = None) -> dict[str, Any] | None:
        """The cost-code segment item of a cost code, among its sub job's items when it has one
        (Procore lists those only with legacy_sub_job_id): by its legacy id, else by its path."""
        path = f"{wbs}/segments/{segment_id}/segment_items"
        owner = {"legacy_sub_job_id": sub_job_id} if sub_job_id is not None else {}
        for params in ({"legacy_cost_code_id": cost_code_id, **owner}, owner or None):
            found = next((item for item in self._pages(path, params)
                          if item.get("path_code") == full_code and not item.get("is_parent")),
                         None)
            if found is not None:
                return found
        return None

    # Change events

    def list_change_event_statuses(self, project_id: int) -> list[dict[str, Any]]:
        """The change-event statuses of the project's company."""
        return list(self._pages("/rest/v1.0/change_event/statuses",
                                {"project_id": project_id}, tool="change_events"))

    def _open_status_id(self, project_id: int) -> int:
        """The id of the project's default status that maps to "open"."""
        statuses = self.list_change_event_statuses(project_id)
        # A status hidden from Procore's own menus (show_in_select false) is not one to choose.
        open_statuses = [row for row in statuses
                         if str(row.get("mapped_to_status") or row.get("name", "")).lower()
                         == "open" and row.get("show_in_select") is not False]
        if not open_statuses:
            raise ProjectSystemError(f"Project {project_id} has no open change event status")
        return int(max(open_statuses, key=lambda row: bool(row.get("default_status")))["id"])

    def list_units_of_measure(self) -> list[dict[str, Any]]:
        """The company's units of measure, read at most once an hour; empty when unreadable."""
        if self._uoms is None or self.clock() - self._uoms_read_at > UOM_CACHE_S:
            try:
                self._uoms = list(self._pages(f"/rest/v1.0/companies/{self.company_id}/uoms"))
                self.units_readable = True
            except ProjectSystemError as exc:
                if exc.status not in (403, 404):
                    raise
                self._uoms = []
                self.units_readable = False
            self._uoms_read_at = self.clock()
        return self._uoms

    def unit_of_measure(self, wanted: str | None) -> str | None:
        """A unit name from the company's list: the same name, or its hour unit for "hr"."""
        if not wanted:
            return None
        units = [str(row.get("name")) for row in self.list_units_of_measure() if row.get("name")]
        same = next((name for name in units if name.lower() == wanted.lower()), None)
        if same is not None and wanted.lower() not in _HOUR_WORDS:
            return same
        if wanted.lower() in _HOUR_WORDS:
            return _hour_unit(self.list_units_of_measure())
        return None

    def create_change_event(self, project_id: int, draft: ChangeEventDraft) -> RemoteRecord:
        """Create an open, out-of-scope change event, each line on its vendor and commitment."""
        # Never repeated; the change reason goes with it, an event type other than tbd after.
        items = []
        for line in draft.lines:
            estimate = {"amount": line.amount, "calculation_strategy": "manual",
                        "quantity": line.quantity, "unit_cost": line.unit_cost,
                        "unit_of_measure": self.unit_of_measure(line.unit_of_measure)}
            cost: dict[str, Any] = {"estimate": {key: value for key, value in estimate.items()
                                                 if value is not None}}
            if line.vendor_id is not None:
                cost["vendor"] = {"proposed": {"id": line.vendor_id}}
            if line.contract_id is not None:
                cost["contract"] = {"proposed": {"id": line.contract_id}}
            item: dict[str, Any] = {"description": line.description, "cost_impact": cost}
            if line.budget_code_id is not None:
                item["budget_code"] = {"id": line.budget_code_id}
            items.append(item)
        external = {"origin_id": draft.origin_id}
        if draft.origin_data:
            external["origin_data"] = draft.origin_data
        event = {"title": draft.title, "description": draft.description,
                 "scope": "out_of_scope", "status": {"id": self._open_status_id(project_id)},
                 "external_data": external, "change_items": items}
        if draft.change_reason_id is not None:
            event["change_reason"] = {"id": draft.change_reason_id}
        response, body = self._request("POST", "/rest/v1.1/change_events",
                                       params={"project_id": project_id},
                                       json_body={"change_event": event}, tool="change_events")
        record = self._change_event_record(project_id, _parse_json(response, body))
        if draft.event_type != "tbd":
            self._set_event_type(project_id, record.id, draft.event_type)
        return record

    def _set_event_type(self, project_id: int, change_event_id: int, event_type: str) -> None:
        """Give a written change event its type through v1.0 (v1.1 names no event type)."""
        # A failure leaves the written event at Procore's default type: it is still answered.
        try:
            self._request("PATCH", f"/rest/v1.0/change_events/{change_event_id}",
                          json_body={"project_id": project_id,
                                     "change_event": {"event_type": event_type}},
                          tool="change_events")
        except ProjectSystemError as exc:
            log.warning("change event %s kept its default type: %s", change_event_id, exc)

    def _change_event_record(self, project_id: int, row: dict[str, Any]) -> RemoteRecord:
        """A RemoteRecord for a change event as Procore returned it."""
        number = row.get("number")
        return RemoteRecord(
            kind="change_event", id=int(row["id"]),
            number=None if number is None else str(number),
            url=self.record_url(project_id, "change_event", int(row["id"])),
            attachment_filenames=tuple(str(item.get("filename") or item.get("name") or "")
                                       for item in row.get("attachments") or ()),
            attachment_ids=tuple(int(item.get("id") or 0) for item in row.get("attachments") or ()))

    def upload_file(self, project_id: int, attachment: Attachment) -> str:
        """Send a file through Procore's direct-upload flow; returns the upload's uuid."""
        response, body = self._request(
            "POST", f"/rest/v1.1/projects/{project_id}/uploads",
            json_body={"response_filename": attachment.filename,
                       "response_content_type": attachment.content_type})
        upload = _parse_json(response, body)
        if not isinstance(upload, dict) or not upload.get("uuid") or not upload.get("url"):
            raise ProjectSystemError("The upload answer holds no uuid or url",
                                     status=response.status_code,
                                     request_id=response.headers.get("X-Request-Id"))
        # The storage service gets the returned fields and the file, never our token.
        fields = {str(key): str(value) for key, value in (upload.get("fields") or {}).items()}
        stored, stored_body = self._send(
            "POST", str(upload["url"]), retry=False, data=fields,
            files={"file": (attachment.filename, attachment.data, attachment.content_type)})
        if stored.status_code >= 300:
            _raise_for_status(stored, stored_body, storage=True)
        return str(upload["uuid"])

    def attach_files(self, project_id: int, change_event_id: int,
                     attachments: Sequence[Attachment],
                     known_ids: Sequence[int] = ()) -> RemoteRecord:
        """Upload the files side by side (at most UPLOAD_THREADS at once), put them all on the
        change event in one v1.1 PATCH, and read the event back: each file sent is listed under
        the name it was sent with, even where Procore stored it under another (`known_ids`:
        the attachments the event had before, which are none of these)."""
        with ThreadPoolExecutor(max(1, min(UPLOAD_THREADS, len(attachments)))) as pool:
            # Each upload carries the caller's deadlines (`hurried` lives in a context).
            uploads = [pool.submit(contextvars.copy_context().run, self.upload_file, project_id,
                                   attachment) for attachment in attachments]
            uuids = [upload.result() for upload in uploads]
        self._request("PATCH", f"/rest/v1.1/change_events/{change_event_id}",
                      params={"project_id": project_id},
                      json_body={"change_event": {"attachments_by_uuid": [
                          {"upload_uuid": uuid} for uuid in uuids]}},
                      tool="change_events")
        row = self.get_change_event(project_id, change_event_id)
        row["attachments"] = _as_sent(row.get("attachments") or [], list(zip(
            uuids, attachments, strict=True)), set(known_ids))
        return self._change_event_record(project_id, row)

    def delete_change_event(self, project_id: int, change_event_id: int) -> None:
        """Delete a change event (Procore keeps it in the project's recycle bin)."""
        self._request("DELETE", f"/rest/v1.1/change_events/{change_event_id}",
                      params={"project_id": project_id}, tool="change_events")

    def find_change_event(self, project_id: int, origin_id: str,
                          created_after: datetime.datetime | None = None,
                          ) -> RemoteRecord | None:
        """The first change event whose external_data.origin_id is ``origin_id``, if any."""
        # Procore has no origin-id filter: page the (date-narrowed) list and compare here.
        params: dict[str, Any] = {"project_id": project_id}
        if created_after is not None:
            until = datetime.datetime.fromtimestamp(self.clock(), datetime.UTC)
            params["filters[created_at]"] = (f"{_timestamp(created_after - CLOCK_SKEW)}..."
                                             f"{_timestamp(until + datetime.timedelta(days=1))}")
        for row in self._pages("/rest/v1.1/change_events", params, tool="change_events"):
            external = row.get("external_data") or {}
            if origin_id in (external.get("origin_id"), row.get("origin_id")):
                # List entries may be abridged; the single record carries the attachments.
                return self._change_event_record(
                    project_id, self.get_change_event(project_id, int(row["id"])))
        return None

    def get_change_event(self, project_id: int, change_event_id: int) -> dict[str, Any]:
        """A change event as Procore returns it (v1.1), numbers as Decimal."""
        return self._get_object(f"/rest/v1.1/change_events/{change_event_id}",
                                {"project_id": project_id})

    def read_record_state(self, project_id: int, kind: str, record_id: int) -> RecordState:
        """Where a written change event or manpower entry stands now (404: gone)."""
        if kind == "change_event":
            path, params = f"/rest/v1.1/change_events/{record_id}", {"project_id": project_id}
        elif kind == "manpower_log":
            path, params = f"/rest/v1.0/projects/{project_id}/manpower_logs/{record_id}", None
        else:
            raise ValueError(f"Unknown record kind {kind!r}")
        try:
            row = self._get_object(path, params)
        except ProjectSystemError as exc:
            if exc.status == 404:
                return RecordState(status=None, deleted=True)
            raise
        status = row.get("status")
        if isinstance(status, dict):  # a change event's {id, name, mapped_to_status}
            status = status.get("name") or status.get("mapped_to_status")
        return RecordState(status=_text_or_none(status),
                           deleted=bool(row.get("deleted_at") or row.get("in_recycle_bin")),
                           change_orders=_change_orders(row) if kind == "change_event" else ())

    # Directory and commitments

    def list_vendors(self, project_id: int) -> list[Vendor]:
        """The project's directory of companies."""
        return [Vendor(id=int(row["id"]), name=str(row.get("name") or row.get("company") or ""))
                for row in self._pages(f"/rest/v1.0/projects/{project_id}/vendors",
                                       tool="directory") if row.get("id") is not None]

    def list_commitments(self, project_id: int) -> list[Commitment]:
        """The project's subcontracts and purchase orders, not Void or Terminated."""
        # Procore's purchase order list names the vendor vendor.company; others may say name.
        found = []
        for kind, path in _COMMITMENT_LISTS:
            for row in self._pages(path, {"project_id": project_id}, tool="commitments"):
                status = _text_or_none(row.get("status"))
                if (status or "").lower() in _DEAD_COMMITMENTS or row.get("deleted_at"):
                    continue
                vendor = row.get("vendor") if isinstance(row.get("vendor"), dict) else {}
                found.append(Commitment(
                    id=int(row["id"]), kind=kind, number=_text_or_none(row.get("number")),
                    title=_text_or_none(row.get("title")), status=status,
                    vendor_id=None if vendor.get("id") is None else int(vendor["id"]),
                    vendor_name=_text_or_none(vendor.get("company") or vendor.get("name"))))
        return found

    def list_change_reasons(self, project_id: int) -> list[ChangeReason]:
        """The company's change reasons offered in selects (the same for every project)."""
        return [ChangeReason(id=int(row["id"]),
                             name=str(row.get("change_reason") or row.get("name") or ""))
                for row in self._pages("/rest/v1.0/change_order_change_reasons",
                                       {"company_id": self.company_id})
                if row.get("id") is not None and row.get("show_in_select") is not False]

    # Daily log

    def create_manpower_log(self, project_id: int, draft: ManpowerDraft) -> RemoteRecord:
        """Create a manpower entry whose notes end with the origin marker (never retried)."""
        marker = _origin_marker(draft.origin_id)
        notes = f"{draft.notes.rstrip()}\n{marker}" if draft.notes.strip() else marker
        response, body = self._request(
            "POST", f"/rest/v1.0/projects/{project_id}/manpower_logs",
            json_body={"manpower_log": {"date": draft.date.isoformat(),
                                        "num_workers": draft.num_workers,
                                        "num_hours": str(draft.num_hours), "notes": notes}},
            tool="daily_log")
        return self._manpower_record(project_id, _parse_json(response, body))

    def _manpower_record(self, project_id: int, row: dict[str, Any]) -> RemoteRecord:
        """A RemoteRecord for a manpower entry as Procore returned it."""
        return RemoteRecord(
            kind="manpower_log", id=int(row["id"]), number=None,
            url=self.record_url(project_id, "manpower_log", int(row["id"])),
            attachment_filenames=tuple(str(item.get("filename") or item.get("name") or "")
                                       for item in row.get("attachments") or ()))

    def find_manpower_log(self, project_id: int, origin_id: str,
                          date: datetime.date) -> RemoteRecord | None:
        """The entry of ``date`` whose notes carry the origin marker, in any approval status."""
        # Without filters[status] only approved entries are listed (a Standard account's own
        # pending ones too are found with "all"); search may skip notes.
        marker = _origin_marker(origin_id)
        for row in self._pages(f"/rest/v1.0/projects/{project_id}/manpower_logs",
                               {"log_date": date.isoformat(), "filters[status]": "all"},
                               tool="daily_log"):
            if marker in (row.get("notes") or ""):
                return self._manpower_record(project_id, row)
        return None

    def delete_manpower_log(self, project_id: int, manpower_log_id: int) -> None:
        """Delete a daily log manpower entry."""
        self._request("DELETE",
                      f"/rest/v1.0/projects/{project_id}/manpower_logs/{manpower_log_id}",
                      tool="daily_log")

    def get_manpower_log(self, project_id: int, manpower_log_id: int) -> dict[str, Any]:
        """A manpower entry as Procore returns it, numbers as Decimal."""
        return self._get_object(
            f"/rest/v1.0/projects/{project_id}/manpower_logs/{manpower_log_id}")

    def record_url(self, project_id: int, kind: str, record_id: int) -> str:
        """The web page of a change event or manpower entry."""
        if kind == "change_event":
            return f"{self.web_base}/{project_id}/project/change_events/events/{record_id}"
        if kind == "manpower_log":
            return f"{self.web_base}/{project_id}/project/daily_log/manpower_logs/{record_id}"
        raise ValueError(f"Unknown record kind {kind!r}")


def _as_sent(listed: list[dict[str, Any]], sent: list[tuple[str, Attachment]],
             known: set[int]) -> list[dict[str, Any]]:
    """A change event's attachments with each file just sent under the name it was sent with:
    found by its upload uuid, else by its name (and size, where listed), else among the
    attachments new since the PATCH (not in `known`) by size, or in order when as many are new
    as are unfound. An attachment found for no file keeps Procore's name."""
    listed = [dict(item) for item in listed]
    taken: set[int] = set()
    unfound = []
    for uuid, attachment in sent:
        index = _by_upload_or_name(listed, taken, uuid, attachment)
        if index is None:
            unfound.append(attachment)
        else:
            _claim(listed, taken, attachment, index)
    new = [i for i, item in enumerate(listed)
           if i not in taken and int(item.get("id") or 0) not in known]
    if unfound and all(listed[i].get("size") is not None for i in new):
        unfound = _claim_new_by_size(listed, taken, new, unfound)
    new = [i for i in new if i not in taken]
    if unfound and len(new) == len(unfound):
        for attachment, index in zip(unfound, new, strict=True):
            _claim(listed, taken, attachment, index)
    return listed


def _claim(listed: list[dict[str, Any]], taken: set[int], attachment: Attachment,
           index: int) -> None:
    """Name the listed attachment at `index` as the file sent, and take it."""
    taken.add(index)
    listed[index]["filename"] = attachment.filename


def _size_fits(item: dict[str, Any], attachment: Attachment) -> bool:
    """Whether a listed attachment's size, when listed, is the sent file's."""
    size = item.get("size")
    return size is None or int(size) == len(attachment.data)


def _by_upload_or_name(listed: list[dict[str, Any]], taken: set[int], uuid: str,
                       attachment: Attachment) -> int | None:
    """The index of the untaken attachment with the file's upload uuid, else its name and size."""
    index = next((i for i, item in enumerate(listed) if i not in taken and uuid and
                  uuid in (item.get("upload_uuid"), item.get("upload_id"))), None)
    if index is None:
        index = next((i for i, item in enumerate(listed) if i not in taken and
                      str(item.get("filename") or item.get("name") or "") ==
                      attachment.filename and _size_fits(item, attachment)), None)
    return index


def _claim_new_by_size(listed: list[dict[str, Any]], taken: set[int], new: list[int],
                       unfound: list[Attachment]) -> list[Attachment]:
    """Claim for each unfound file a new attachment of its size; the files still unfound."""
    left = []
    for attachment in unfound:
        index = next((i for i in new if i not in taken and
                      int(listed[i]["size"]) == len(attachment.data)), None)
        if index is None:
            left.append(attachment)
        else:
            _claim(listed, taken, attachment, index)
    return left


def _rate_left(response: requests.Response,
               now: float) -> tuple[int | None, float | None]:
    """X-Rate-Limit-Remaining and -Reset of an answer, when it has both; the reset moved onto
    our clock (`now`) by how far Procore's clock (its Date header) is from ours."""
    try:
        remaining = int(response.headers["X-Rate-Limit-Remaining"])
        reset = float(response.headers["X-Rate-Limit-Reset"])
    except (KeyError, ValueError):
        return None, None
    return remaining, reset - _clock_offset(response, now)


def _clock_offset(response: requests.Response, now: float) -> float:
    """How far Procore's clock is ahead of ours, from the answer's Date header (whole seconds,
    so at most a second short: a wait comes out at most a second long); 0 without one."""
    try:
        return parsedate_to_datetime(response.headers["Date"]).timestamp() - now
    except (KeyError, TypeError, ValueError, IndexError):
        return 0.0


def _raise_for_status(response: requests.Response, body: bytes, *,
                      tool: str | None = None, storage: bool = False) -> None:
    """Turn an unsuccessful answer into the matching ProjectSystemError (`storage`: of the file
    store an upload goes to, whose 403 is its policy, not a permission)."""
    status = response.status_code
    if status < 300:
        return
    request_id = response.headers.get("X-Request-Id")
    if 300 <= status < 400:
        raise ProjectSystemError("The project system answered with a redirect, which is not "
                                 "followed", status=status, request_id=request_id)
    message = _error_message(response, body)
    if status == 401:
        raise ProjectSystemAuthError(message, status=status, request_id=request_id)
    if tool is not None and status in (403, 404):
        raise ToolDisabled(_refusal(message, status, tool), status=status, request_id=request_id)
    if status == 403 and not storage:
        raise ProjectSystemError(f"{message} (the service account lacks a permission this "
                                 "call needs)", status=status, request_id=request_id)
    if status == 429 or status >= 500:
        raise ProjectSystemUnavailable(message, status=status, request_id=request_id)
    raise ProjectSystemError(message, status=status, request_id=request_id)


def _refusal(message: str, status: int, tool: str) -> str:
    """Procore's refusal of a tool's call, saying which tool and what may be wrong."""
    words = _TOOL_WORDS.get(tool, tool)
    if status == 404:
        return f"{message} ({words} is not on the project)"
    return (f"{message} ({words}: switched off on the project, or the service account lacks "
            f"{_TOOL_PERMISSIONS.get(tool, 'permission on it')})")


def _error_message(response: requests.Response, body: bytes) -> str:
    """The project system's own error text from a JSON or plain-text body (v1's message and
    errors, or v2.0's error object)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        payload = payload["error"]  # v2.0's shape: {"error": {code, message, details}}
        details = "; ".join(str(item.get("message")) for item in payload.get("details") or ()
                            if isinstance(item, dict) and item.get("message"))
        message = _flatten(payload.get("message"))
        if message or details:
            return f"{message}: {details}" if message and details else message or details
    if isinstance(payload, dict):
        for key in ("message", "error_description", "errors", "error"):
            flattened = _flatten(payload.get(key))
            if flattened:
                return flattened
    if text and payload is None:
        return text[:1000]
    return response.reason or f"HTTP {response.status_code}"


def _flatten(value: Any) -> str:
    """Error details (text, list or field map) as one line of text."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "; ".join(part for part in (_flatten(item) for item in value) if part)
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_flatten(item)}" for key, item in value.items()
                         if _flatten(item))
    return ""


def _parse_json(response: requests.Response, body: bytes) -> Any:
    """Decode a JSON answer with decimals kept exact."""
    try:
        return json.loads(body, parse_float=Decimal)
    except ValueError:
        raise ProjectSystemError("The project system's answer is not JSON",
                                 status=response.status_code,
                                 request_id=response.headers.get("X-Request-Id")) from None


def _next_page(response: requests.Response, page: int, asked: int) -> int | None:
    """The next page number from the Link header, else from Total and the answer's Per-Page
    (Procore may give fewer than `asked` per page); None on the last page."""
    if "link" in response.headers:
        url = response.links.get("next", {}).get("url")
        if url is None:
            return None
        numbers = parse_qs(urlsplit(url).query).get("page")
        return int(numbers[0]) if numbers and numbers[0].isdigit() else None
    total = response.headers.get("Total", "")
    given = response.headers.get("Per-Page", "").strip()
    per_page = int(given) if given.isdigit() and int(given) > 0 else asked
    if total.isdigit() and page * per_page < int(total):
        return page + 1
    return None


def _change_orders(row: dict[str, Any]) -> tuple[ChangeOrderState, ...]:
    """The commitment and prime change orders a v1.1 change event's lines are on, each once."""
    # cost_impact.commitment (unless its type says it is the contract itself) or
    # change_order_package; revenue_impact.change_order or change_order_package.
    found: dict[tuple[str, Any], ChangeOrderState] = {}
    for item in row.get("change_items") or ():
        cost = item.get("cost_impact") or {}
        revenue = item.get("revenue_impact") or {}
        for kind, order in (("commitment", cost.get("commitment")),
                            ("commitment", cost.get("change_order_package")),
                            ("prime", revenue.get("change_order")),
                            ("prime", revenue.get("change_order_package"))):
            if not isinstance(order, dict) or order.get("type") == "contract":
                continue
            key = (kind, order.get("id") or order.get("number"))
            found.setdefault(key, ChangeOrderState(
                kind=kind, number=_text_or_none(order.get("number")),
                title=_text_or_none(order.get("title")),
                status=_text_or_none(order.get("status"))))
    return tuple(found.values())


def _json_default(value: Any) -> Any:
    """Encode decimals as JSON numbers, as Procore's cost fields expect."""
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"Cannot encode {type(value).__name__} as JSON")


def _timestamp(moment: datetime.datetime) -> str:
    """A UTC timestamp for Procore filters; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _origin_marker(origin_id: str) -> str:
    """The line that ties a manpower entry to our origin id (Procore has no field for it)."""
    return f"[ref:{origin_id}]"


def _parent_id(row: dict[str, Any]) -> int | None:
    """A cost code's parent id, from ``parent: {id}`` or ``parent_id``."""
    parent = row.get("parent")
    if isinstance(parent, dict) and parent.get("id") is not None:
        return int(parent["id"])
    return int(row["parent_id"]) if row.get("parent_id") is not None else None


def _full_code(row: dict[str, Any]) -> str:
    """A cost code with its parent prefix, e.g. "02-200"."""
    return str(row.get("full_code") or row["code"])


def _normalize_cost_type(cost_type: CostType) -> str | None:
    """The service's word for a cost type: Procore's base type, lowercased."""
    return cost_type.base_type.lower() or None


def _pick_cost_type(cost_types: list[CostType], wanted: str) -> CostType | None:
    """The cost type for a word ("labor") or code ("L"); Procore's default code wins ties."""
    by_word = [item for item in cost_types if _normalize_cost_type(item) == wanted.lower()]
    if by_word:
        standard = _STANDARD_CODES.get(wanted.lower())
        return next((item for item in by_word if item.code == standard), by_word[0])
    return next((item for item in cost_types if item.code.lower() == wanted.lower()), None)


def _text_or_none(value: Any) -> str | None:
    """A non-empty string field as is; anything else (missing, null, not text) as None."""
    return value if isinstance(value, str) and value.strip() else None


def is_daily_log_tool(row: dict[str, Any]) -> bool:
    """Whether a tool-list row is the Daily Log tool (by engine name or title)."""
    return bool({str(row.get(key) or "").strip().lower() for key in ("engine_name", "title")}
                & {"daily_log", "daily log", "dailylog"})


def _is_change_event_tool(row: dict[str, Any]) -> bool:
    """Whether a tool-list row is the Change Events tool (by engine name or title)."""
    names = {str(row.get("engine_name") or "").strip().lower(),
             str(row.get("title") or "").strip().lower(),
             str(row.get("name") or "").strip().lower()}
    return bool(names & _CHANGE_EVENT_TOOLS)


def _is_other_tool(row: dict[str, Any]) -> bool:
    """Whether a tool-list row is a known tool other than Change Events."""
    return bool({str(row.get(key) or "").strip().lower()
                 for key in ("engine_name", "title", "name")} & _OTHER_TOOLS)


def _tool_names(rows: list[dict[str, Any]]) -> str:
    """Tool-list rows named for a person: "'Eventos de cambio' (gestion_de_cambios)"."""
    return ", ".join(f"{row.get('title')!r} ({row.get('engine_name')})" for row in rows[:3])


def _hour_unit(units: list[dict[str, Any]]) -> str | None:
    """The company's unit for hours: by name, else by description; standard units first."""
    ranked = sorted(units, key=lambda row: not row.get("is_standard"))
    for row in ranked:
        if str(row.get("name") or "").strip().lower() in _HOUR_WORDS:
            return str(row["name"])
    for row in ranked:
        if str(row.get("description") or "").strip().lower() in _HOUR_WORDS and row.get("name"):
            return str(row["name"])
    return None


def _segment_type(item: dict[str, Any]) -> str | None:
    """The segment type of a WBS code's segment item (``segment.type`` or ``segment_type``)."""
    segment = item.get("segment")
    if isinstance(segment, dict) and segment.get("type"):
        return str(segment["type"])
    return str(item["segment_type"]) if item.get("segment_type") else None


def _items(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A WBS code's segment items."""
    return [item for item in row.get("segment_items") or () if isinstance(item, dict)]


def _codes_of(row: dict[str, Any], code_ids: dict[tuple[str | None, str], int],
              types: dict[str, CostType]) -> tuple[int | None, str | None]:
    """A WBS code's cost code id (that of its own sub job) and cost type word, from its
    segment items when typed."""
    typed = [(kind, item) for item in _items(row) if (kind := _segment_type(item))]
    if typed:
        sub_job = next((str(item.get("code")) for kind, item in typed if kind == "sub_job"), None)
        cost_code_id = cost_type = None
        for kind, item in typed:
            if kind == "cost_code":
                path = item.get("path_code")
                if path is None and item.get("path_codes"):
                    path = "-".join(str(part) for part in item["path_codes"])
                cost_code_id = code_ids.get(
                    (sub_job, str(path if path is not None else item.get("code"))))
            elif kind == "line_item_type" and str(item.get("code")) in types:
                cost_type = _normalize_cost_type(types[str(item.get("code"))])
        return cost_code_id, cost_type
    # No typed segment items: fall back to reading the default "cost code.cost type" pattern.
    cost_code_id = cost_type = None
    for part in str(row["flat_code"]).split("."):
        if (None, part) in code_ids:
            cost_code_id = code_ids[(None, part)]
        elif part in types:
            cost_type = _normalize_cost_type(types[part])
    return cost_code_id, cost_type
