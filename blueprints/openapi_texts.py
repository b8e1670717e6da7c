"""The words of the OpenAPI document: its description, a description per tag (resource), and
the texts every error status and binary body shares. blueprints/openapi.py builds the document."""
from __future__ import annotations

ERROR_TEXT = {
    400: "The request has problems; `details` lists every one of them.",
    401: "Missing, malformed, unknown or revoked API key.",
    404: "No such resource on this company (another company's resources look the same).",
    408: "The body did not arrive in time (too long between two parts, or in all); send it again.",
    409: "The resource's state forbids this request.",
    413: "The body is larger than the configured limit.",
    415: "The body is not application/json.",
    429: "More than the allowed requests per minute on this key; see Retry-After.",
    502: "The project system refused or could not take the call; its message is passed on.",
    503: "The server (`busy`) or the project system is busy; nothing was done. Send again "
         "after the seconds in Retry-After.",
}

BINARY_BODY_TEXT = ("The image itself (JPEG, PNG or WebP), not base64; any Content-Type is taken "
                    "(image/jpeg, image/png, image/webp too): the bytes are checked.")

ACCEPTED_TEXT = ("The piece was kept; the photo is not whole yet. The body (and `Upload-Offset`) "
                 "says where the next piece starts.")

# The Content-Range request header of a photo sent in pieces.
PIECE_TEXT = (
    "Send the photo in pieces on a weak signal: `bytes FIRST-LAST/TOTAL` names where this "
    "body goes (bytes counted from 0, LAST included; TOTAL the photo's size, at most 2 MiB). "
    "Every piece but the last has at least 16 KiB. A piece that is not the last is answered "
    "202 with the offset the server now holds; the last one 200, as a whole photo. A piece "
    "that does not start where the server's bytes end is refused with 409 "
    "`upload_offset_mismatch` and the offset it holds (body `details.offset` and "
    "`Upload-Offset`): send on from there. A piece of a photo whose bytes the server holds "
    "whole already (the request that sent its last piece is still making the photo, or its "
    "answer was lost) is answered 200 with the photo, as the last piece is. After a drop, "
    "send from the offset you last heard, or from 0 to be told. Without this header the body "
    "is the whole photo. Pieces of a photo with no new piece for 6 hours (the server's "
    "PHOTO_PIECE_HOURS) are dropped.")

# The approve route's refusals, status by status (its codes come from the route's errors).
APPROVE_ERROR_TEXT = {
    400: "The body has problems (code `validation_failed`), such as a `routes` key "
         "that is not a line index, named in `details` as `routes.<key>`.",
    409: "Nothing was written. `ticket_rejected` (the ticket is rejected and "
         "`allow_rejected` is not true); `lines_need_review` (`details` lists each "
         "refused line as {line, reason, description}: for a change event, a line "
         "without a budget code unless `allow_unrouted`, a line whose code was learned "
         "from another sub's decisions (`learned_from_sub`) unless `routes` names "
         "it, or under `require_exact` a line not on a confirmed code; a daily log entry "
         "carries no codes); `no_change_events` (the project has no change-event tool and no "
         "destination, or `change_event`, was named: name `daily_log`); "
         "`approval_in_progress` (another approval is writing this ticket now; "
         "retry after the seconds in Retry-After to see its outcome); "
         "`nte_exceeded` (writing it takes the written tickets against its "
         "not-to-exceed authorization past the authorised amount; `details` gives "
         "{authorization_id, reference, authorized, written, ticket, after}; send "
         "`confirm_over_nte: true` if the GC agreed); `line_not_found` or "
         "`budget_code_not_found` (a `routes` entry names a line the ticket does not "
         "have, or a budget code its project does not have, when any does; `details` "
         "names each as `routes.<key>`); `contract_not_found` (`contract_id` is no open "
         "commitment of the ticket's project); `commitment_needs_confirmation` (the ticket's "
         "`commitment` is a suggestion, `exact: false`, or the one confirmed for its sub "
         "is no longer open: confirm it with PUT "
         "/v1/projects/{project_id}/commitments, or name it with `contract_id`); "
         "`change_reason_not_found` (the change reason set for the project's change events "
         "is no longer offered in the project system: set another with PUT "
         "/v1/projects/{project_id}/settings).",
    502: "The project system refused or could not take the write; the message is "
         "its own. The ticket stays approvable, and a retry finds any record the "
         "failed attempt left (by origin id) instead of writing a second one. "
         "`project_system_write_unconfirmed`: the write was sent and not confirmed "
         "(no answer, a server error, or the record made but a file not attached), so "
         "it may be there in whole or in part: retry to complete it. The other codes "
         "mean nothing was sent or the project system refused it.",
    503: "The signed ticket document, attached to the change event, could not be "
         "made in time (see Retry-After); nothing was written.",
}

# The backup package's refusals, status by status (its codes come from the route's errors).
BACKUP_PACKAGE_ERROR_TEXT = {
    400: "`validation_failed` (neither `tickets` nor `change_event_id`, or both; a name in "
         "`tickets` that is no ticket id or T-reference; `details` names the field), "
         "`too_many_tickets` (more than 50 tickets, named or on the change event; `details` "
         "gives {limit, chosen}: make several packages), `ticket_reference_ambiguous` (a "
         "T-reference two tickets of the project share: name it by its id).",
    404: "`ticket_not_found` (a ticket named is not one of this project's: another project's, "
         "another company's and a missing one look the same), `change_event_not_found` (no "
         "written ticket of the project is on that change event), `project_not_found` (the "
         "project id is not a project system's number).",
    409: "`ticket_not_written`: a ticket named is not written to Procore yet (`details.tickets` "
         "lists their T-references); a package holds written tickets only.",
    503: "The package could not be made in time (see Retry-After); nothing was changed.",
}

API_DESCRIPTION = """\
Record claims of out-of-scope construction work and write approved ones into the
project system (Procore) as change events or daily-log entries, exactly once.

This document is served at `/v1/openapi.json` (no key needed) and rendered for people at
[/v1/docs](/v1/docs). It is generated from the same Pydantic models that validate requests,
so it cannot fall behind them: bodies are documented as they are validated, answers as they
are serialised, and each shape is one named component.

Creating tickets may be automated. Approving should be done by a person; a program that
approves should send `require_exact: true` and never `allow_unrouted`.

Decisions where the contract left the shape open:

* **Keys.** `ewt_` followed by 43 URL-safe characters (256 random bits). Send
  `Authorization: Bearer <key>` or `X-API-Key: <key>`. Only a SHA-256 digest and a
  12-character display prefix are stored, so a lost key cannot be recovered: revoke it and
  make a new one (on the keys page, or `flask --app app keys`). Every request reads its key
  from the database, so a revoked key stops at once. `last_used_at` is updated at most once
  a minute per key. Cookies are neither read nor set under `/v1`: a signed-in
  reviewer's browser session is no key.
* **Errors.** Always `{"error": {"code", "message", "details"}}` with a stable `code`; each
  documented error response lists the codes it can carry (also as `x-error-codes`).
  Validation errors (400, `validation_failed`) list every problem at once in `details` as
  `{"field", "message"}` (`FieldProblem`), with fields written like `labor[2].hours`,
  `photos[2]`, `signature.image`. 401 codes are `api_key_missing`, `api_key_malformed`,
  `api_key_invalid` and `api_key_revoked`; a 405 names the allowed methods in `Allow`.
* **Another company's resources** answer exactly like missing ones: same status, same body.
  A body's project or cost code that is not there is a 404, as in a path. A body naming what
  the ticket or project does not have (a line, a budget code, an authorization) is a 409 with
  its own code (`line_not_found`, `budget_code_not_found`, `authorization_not_found`) and
  `details` naming each field: well formed, but at odds with the ticket or project as they are
  now, like a request the ticket's state refuses (written, or already holding 12 photos).
* **Lists** are objects with a `data` array; `GET /tickets` adds `total`, `limit` and
  `offset`.
* **Rate limit.** One shared bucket of 120 requests per minute per key (by default) across all `/v1`
  routes; every answer of a keyed route (successes and errors) carries `RateLimit-Limit`,
  `RateLimit-Remaining` (after this request) and `RateLimit-Reset` (Unix time in seconds),
  and 429 (`rate_limited`) adds `Retry-After` in seconds.
* **Bodies.** JSON bodies are `application/json` objects (415 otherwise). By default the
  routes that take photos accept up to 34 MiB (room for 12 photos of up to 2 MiB each in
  base64), every other route 256 KiB; past that 413 `payload_too_large`. A body must keep arriving and be in
  within its deadline (408). A JSON body with too many objects or values (more than any
  body its schema allows), or nested more than 8 deep, is 400; so is a NUL character in any
  text the service reads, a query string included. Fields a schema does not name are
  ignored. A request refused this way stores nothing.
* **Links.** An answer that names something new (the ticket, capture link, signing request,
  rate sheet or authorization a call made; the projects listed) carries OpenAPI `links` to the
  operations that take it: its id goes into their path, and a listed project's id into the
  `project_id` of a new ticket's or capture link's body.
* **Rules beyond a field.** Two rules across fields are in the schemas, as JSON Schema
  `if`/`then`: a `not_verified` signature needs a `qualifier_reason`, and a signing request an
  `email` or a `phone`. What no schema can say is said where it applies: an image must be a
  real JPEG, PNG or WebP; a rate sheet names each classification and item once (without
  regard to case), and its CSV's rows are checked like its JSON fields.
* **Times** (`taken_at`, `signed_at`, `captured_at`, ...) are date-times going in (RFC 3339,
  with the offset, in the years 1900 to 2199; blank is none) and coming out; dates going in
  are `YYYY-MM-DD`; the dates a person reads (a work day, a daily log's date) are on the jobsite's clock:
  the project's time zone as Procore names it, else UTC.
* **Amounts** are exact decimals rounded to cents (half up); `total` is the sum of the rounded
  line amounts.
* **The project system.** A company not yet connected to one gets 409
  `project_system_not_connected` from the routes that need it. When it refuses or cannot be
  reached the answer is 502 with its own message; when it is busy, or asks for a pause too long
  to wait out within the call (Procore's hourly limit), 503 `project_system_busy` with its
  wait in `Retry-After`. Nothing was changed in either case. An approval waits its turn behind
  the company's other approvals, and up to a whole window (60 s) of Procore's rate limit for
  each of its calls, so programs may approve side by side.
"""

# The document's sections, one per resource, in the order a reader meets them: each
# operation names one with `api_route(tag=...)`. Name, heading, and the reference text that
# opens the section (Markdown).
TAGS: dict[str, tuple[str, str]] = {
    "account": ("Account", """\
Which company and key a request is authenticated as. Keys are made and revoked by a
signed-in reviewer on the keys page, or with `flask --app app keys`."""),
    "projects": ("Projects", """\
The company's projects, cost codes and budget codes, read from its project system.
Project ids are strings of the project system's numbers. The project list and "has the
change-event tool" are remembered for 60 seconds, a project's codes, directory, commitments
and change reasons for 30 (`PROJECT_CACHE_S`, `CAPABILITY_CACHE_S`, `CATALOG_CACHE_S`).
A project's commitments are the subcontracts and purchase orders its subs' lines are proposed
on: confirm one per sub (PUT `.../commitments`) where a ticket's `commitment` is a suggestion.
Its settings are the event type and change reason of its change events."""),
    "tickets": ("Tickets", """\
A ticket is one claim of extra work: what was done, why it is extra, who directed it, its
labor, equipment and material lines, photos and a signature.

**A list finds tickets; the ticket holds them whole.** Each item of `GET /tickets` is a
`TicketSummary`: id, status, project, work, reason, who directed and recorded it, capture
time and channel, work day, `total`, `photo_count`, `signed`, `awaiting_signature_since`,
approval, the written record (`external`), `routing_pending` and `authorization_ref`. Lines,
photos, the signature, the decision history, the not-to-exceed status and the routing are on
`GET /tickets/{ticket_id}` (a `Ticket`, which has every summary field too), the one read a
program needs before approving anyway.

**Limits** (all in the schema): description 4000 characters, reason 2000, names 200; at most
50 labor, 50 equipment and 100 material lines; hours 0 to 1000, workers 0 to 500, rates and
unit costs 0 to 100,000, quantities 0 to 1,000,000. Numbers must be finite, may be sent as
JSON numbers or numeric strings, and are kept to 6 decimal places (rounded half up). Strings
are trimmed, and a required string of only whitespace counts as missing.

**Amounts.** Labor is workers × hours × rate (workers default to 1), equipment hours × rate,
materials quantity × unit cost, each rounded to cents. A line without a rate or unit cost is
priced from the rate sheet in force (see Rate sheets), else has amount 0 and a warning.
Project markups follow the cost lines as lines of their own. Prices are fixed when the ticket
is created; `POST /tickets/{ticket_id}/reprice` prices a ticket not yet written again.

**`client_ref`** (optional, 8 to 64 letters, digits, `-`, `_`): your own id for the ticket;
sending it again returns the first ticket instead of making a second. The capture page uses
it for every ticket. `worked_on` (`YYYY-MM-DD`) is the day the work was done; it picks the
rate sheet and dates a daily log entry (default: the jobsite's date when the ticket arrived).

**Routing.** Lines are numbered labor, then equipment, then materials, from 0; the cost type
comes from the kind of line. A line whose cost code has a budget code of its type is routed
and exact. Otherwise routing looks at where this company's approvals put the most similar
lines before (their words in any order, misspelt, shortened or in Spanish, the same `sub`
weighing more; a line routed to a new code twice in a row sets the new habit), at the cost
code and cost type level, so another project's choice lands on this project's own budget
code: such a line is routed, not exact, needs review, with `learned: true` and a `reason`
such as "chosen 4 times for Summit Framing's 'Framer'". When those decisions were on another
sub's tickets, the reason names whose ("chosen 3 times for Bayside Rentals' 'Scissor lift'")
and `learned_from_sub` says it; confirm such a line only where a person saw it (the review
pages never confirm it in bulk). Only the crew's own codes kept and
the codes a person picked or confirmed (approve `routes`) count as choices. Failing that, a
cost code without that type lends its `other` code, or the trade or description is matched
against cost code names (routed, not exact, needs review); else the line is unrouted. Every
line says why in `reason`. A written ticket keeps the routing it was written with.

**Creating never waits on the project system.** A ticket's project is checked against the
project list read in the last minute, else against the projects the company made a link or a
ticket on before; only another project is looked up, and is a 404 while the project system is
away (502 when the company never made a link or a ticket). A ticket whose
project's codes are not at hand answers with `routing_pending: true`, every line
`needs_review` with the reason "routing is pending", until a read works its routing out on
the real codes; routing is never guessed without them, and reading a ticket changes nothing.

**Storage.** A ticket or photos past a daily storage quota (per link, per company, for the
server; counted in the database, so a restart does not reset them) are refused with 507
`storage_quota_exceeded` and `Retry-After`; when storing would leave too little free disk,
or the disk fills while writing, with 507 `storage_full`; when the file store (a bucket) cannot
be reached, with 503 `storage_unavailable` and `Retry-After`. Nothing is stored."""),
    "evidence": ("Photos and signature", """\
A ticket's evidence: its photos and the signature drawn on the crew's phone or on a
signing link.

**Photos** are sent as a data URL or bare base64 (`photos` of a ticket, or
`POST /tickets/{ticket_id}/photos`), or as the image itself
(`PUT /tickets/{ticket_id}/photo-uploads/{key}`, safe to repeat: for senders on a weak
signal). Each is a JPEG, PNG or WebP of at most 2 MiB, 16 megapixels and 4096 px on the
longest side (a JPEG of at most 24 scans); anything else (not an image, truncated, invalid
base64, a decompression bomb, one that takes too long or too much memory to read) is a 400
naming the photo, and nothing is stored. Accepted photos are re-encoded as JPEG without EXIF
or GPS, turned upright, capped at 2048 px on the long edge, with a 320 px thumbnail;
`taken_at` and `coords` (`{"lat", "lng", "accuracy_m"}`) are kept as fields. At most 12
photos per ticket; a written ticket takes no more (409 `ticket_written`). Send
`photos_expected` with a ticket whose photos follow one by one, so it shows them as arriving.

**The signature** is kept only with an image (checked like a photo and stored as PNG, with a
320 px thumbnail); without one it is dropped with a warning. `qualifier` is what the signer
says the signature vouches for: `verified` ("Time and materials verified"),
`verified_scope_disputed` ("Time and materials verified; scope disputed") or `not_verified`
("Not verified", which needs a `qualifier_reason`). A qualifier sent as free text is kept as
the `qualifier_reason` with no choice. The stored signature also carries `content_sha256`
(see Signing links), `signed_via` (`crew_phone`, `signing_link` or `api`), and for link
signatures the signer's `ip_address` and `user_agent`. A later change to what the signer was
shown voids it: `signature` becomes null and it moves to `voided_signatures` (oldest first,
each with `voided_at` and `void_reason`).

**Reading them back.** Each photo on a ticket carries `id`, `url` and `thumbnail_url`, and the
signature `id` (the SHA-256 of its image), `url` and `thumbnail_url`. They need the same key as
every `/v1` call. A caller that sends `Accept: application/octet-stream` gets the same bytes
under that type."""),
    "approval": ("Approval", """\
Approve writes a ticket into the project system; reject closes it without writing; restore
undoes a rejection. Each decision is kept in the ticket's `decisions`, which only ever grows;
`approved_by` and each decision's `by` are the reviewer's e-mail, or
`key:<key name> (<key prefix>)` for an API key.

**States.** `reject` on a rejected ticket is 409 `ticket_rejected`, on a written one 409
`ticket_written`. `restore` on a submitted ticket changes nothing; on a written one it is 409
`ticket_written`. For a change event, a line with no budget code (unless `allow_unrouted`),
a line whose suggested code was learned from another sub's decisions (`learned_from_sub`;
confirm it by naming the line in `routes`), or with `require_exact` a line not on a confirmed
code, refuses the approval with 409
`lines_need_review`, `details` listing `{line, reason, description}` for each; nothing is
written. A daily log entry carries no budget code, so its lines are not checked. `routes` keys \
must be line indexes of the ticket and values budget code ids of its
project (else 400 naming `routes.<key>`); a routed line counts as exact, and a line routed to
a budget code of another cost type is written as asked but is not exact.

**The sub's commitment.** Each line item of a change event (markups too) is proposed on the
ticket's `commitment`: the vendor and commitment (subcontract or purchase order) of the
ticket's `sub` on the project. It is exact when one vendor of the project's directory has the
sub's name (ignoring case, punctuation and a legal suffix such as "Inc." or "LLC") and exactly
one commitment on the project, or when a PM confirmed it for the sub and project (on the
ticket page, in bulk approval, on the links page, or with PUT
`/v1/projects/{project_id}/commitments`, kept for the sub's next tickets). Anything else with a
commitment is a suggestion (`exact: false`, `reason` says why), which approve refuses with 409
`commitment_needs_confirmation` unless `contract_id` names the commitment; nothing is written
unseen. A sub with no vendor or no commitment on the project is written without one, and
`reason` says so; but when the commitment a PM confirmed for the sub was voided or closed in
the project system since, approve refuses with `commitment_needs_confirmation` until a PM
confirms again (`reason` starts "the commitment confirmed for this sub is no longer open").
`contract_id` overrides the ticket's commitment; one the project does not
have is 409 `contract_not_found`. A written ticket's `commitment` is the one it was written
on. The change event is out of scope, with the event type and change reason of the project's
settings (`/v1/projects/{project_id}/settings`).

**What is written.** A change event gets one line item per line on its budget code (markups
too), a title and description built from the ticket, and the photos, the signature and the
signed ticket document (`ticket-T-XXXXXXXX.pdf`, of the ticket as approved) attached, each
under a name that is the same on every attempt, so a retry attaches only what is missing. A
daily log entry is a manpower entry with the workers and hours per worker; its notes link to
the ticket's document on the review pages, and `external.note` says it is a dated record that
bills nothing. It is dated on the jobsite's calendar: the capture time read in the project's
time zone, so a crew's 8 pm ticket in California lands on that day's log.

**A hung project system.** What an approval reads (the project's codes, time zone and tools)
comes from what the service last read when the project system is slow, and each of its calls
waits at most `PROJECT_SYSTEM_APPROVAL_WAIT_S` (2 s; `PROJECT_SYSTEM_APPROVAL_WRITE_WAIT_S`, 4 s,
for a write) for an answer: a hung project system is answered within seconds with a 502, the
ticket still approvable.

**Exactly once.** Every record carries the origin id `ewt-ticket-<ticket id>`. Approve claims
the ticket in the database, then, with no transaction open, looks for a record with that
origin id before creating one, so a write whose answer was lost is found and reused on the
next try. A second approval while one is writing gets 409 `approval_in_progress` with
`Retry-After`; a claim left by a crashed process expires after `APPROVAL_CLAIM_TTL_S` (120 s).
When the project system refuses, the answer is 502 with its message and the ticket stays
approvable. When a write was sent and not settled (no answer, a server error, or the record
made but a file not attached) the code is `project_system_write_unconfirmed`: approving again
finds the record and completes it. Approving a written ticket again answers it with
`already: true`.

**Where it stands in Procore.** `POST /v1/tickets/{id}/sync` reads a written ticket's record
back and answers the ticket: `external.status` (Procore's status name, such as `Open`,
`Closed` or `Void`), `external.deleted`, `external.change_orders` (each commitment or prime
change order its lines are on, with its number, title and status) and
`external.status_read_at`. The ticket page reads it again when the last read is over 15
minutes old, and a scheduled command reads the tickets written in the last 90 days, longest
unread first, within Procore's rate limit. A ticket that is not written is 409
`ticket_not_written`. A change event deleted or voided in Procore leaves the ticket written:
it is never restored nor written again (restore stays 409 `ticket_written`)."""),
    "backup-packages": ("Backup packages", """\
One PDF for the owner with the written tickets behind a change: a cover with the project, the
date on the jobsite's clock, each change event (or daily log entry) the tickets were written as
with its status in Procore and the change orders its lines are on (as last read back, see
Approval), the totals by budget code (markup lines included) and by sub, and a list of the
tickets; then each ticket's signed document with its signature and photos, the same pages as
its own document, each ticket from a new page. Choose the tickets of one project by id or
T-reference, or every written ticket on one change event; at most 50 in one package, so it is
made within the limits of one ticket document (else 503 `document_busy` with Retry-After,
as for a ticket document)."""),
    "signature-requests": ("Signing links", """\
The general contractor's person signs a ticket from a link, with no account.

**The link** is `/s/{token}`: 256 bits, an HMAC of a random salt under the service's secret
key; the database keeps only the salt and the token's SHA-256, so a copy of the database opens
nothing. It works for `SIGNATURE_LINK_DAYS` (7), signs once, and can be revoked. Its page,
made for a phone, in English or Spanish, shows the company, the jobsite, the work, why it is
extra, who directed it, each line with its workers, hours and quantities, and the photos, and
asks for the typed name and role, one of the three qualifiers and the drawn signature. Amounts
are shown only when the company's crews enter prices (see Capture settings); otherwise the
signer verifies time and materials and sees no money. `/s/{token}/document.pdf` gives the
signer a copy of the ticket document, without money in that case too.

**What is recorded:** the drawing, name, role, qualifier and reason, the time, the signer's
address and browser, and `content_sha256`, the SHA-256 of the canonical JSON of what the page
showed (work, reason, directed-by, work day, the optional text fields the page shows, such as
`captured_by`, each line's kind, description, workers, hours, quantity and unit, and the
amounts and total when shown). If the ticket changed while the page
was open, signing is refused and the page shows it again. When a repricing or a corrected
version changes what the signer was shown, the signature stops counting (see Photos and
signature). A link opened while its ticket is rejected signs nothing; once the ticket is
restored or corrected, the same link works again.

**Delivery.** With mail settings (`MAIL_SERVER`), a request with an e-mail address is e-mailed
at once; the answer to `POST` always carries the link (`url`) and an `sms:` link to text it
(`sms_href`), and no later answer shows it again. Open requests with an address get reminders
by e-mail at 7:00 on the jobsite's clock, the first at least four hours after the request, then
each following morning, at most three, never after the link expires. The e-mails, the text and
the page are in the request's `language`: the one given, else the ticket's `language` (that of
the crew's capture page when it was sent), else English.

409 `ticket_already_signed` when the ticket has a signature that counts, `ticket_written` once
it is written, `ticket_rejected` while it is rejected."""),
    "links": ("Capture links", """\
A capture link lets a crew send tickets for one project from a phone, with no account: the
token in its address (192 random bits) is the credential. It comes as a plain link
(`/c/{token}`), a QR code for the site trailer (`/c/{token}/q`) and a text-message link
(`/c/{token}/s`); the ticket records which one was opened. The capture page and its
submissions are public and sit outside `/v1`; a revoked link answers 410 and an unknown one
404, with a page that says so, and stores nothing. A link reaches only the tickets sent
through it. Tickets sent through links and through the API are the same tickets."""),
    "share-links": ("Share links", """\
A share link is a sub's live log of its tickets, opened with no account by the sub's office: the
token in its address (`/l/{token}`, 192 random bits) is the credential, shown only in the answer
to `POST`; the service keeps only its digest. Its page lists the company's tickets whose `sub` is
the link's (ignoring case), of its project when it names one, newest first: reference, date,
description, amount, stage, the reason a ticket was sent back, the ticket's document, and its
change event's number and status and commitment change orders in Procore as last read; with a
CSV of the same rows (`/l/{token}/log.csv`), in Spanish when the browser asks for it. It is
counted per link (`SHARE_LINK_RATE_LIMIT`, then 429). Once ended (`DELETE`) or past
`expires_at` its page answers 410; an unknown token, 404."""),
    "capture-settings": ("Capture settings", """\
How the company's capture form asks crews for tickets. With `crew_enters_prices` off, crews see
no rates, unit costs or cost codes (the office prices and codes the tickets), and a signing link
shows no amounts."""),
    "rate-sheets": ("Rate sheets", """\
Rates agreed with the general contractor, per project or as the company's default, each in
force from `effective_from`: labor classifications with straight-time, overtime and
double-time rates; equipment per hour and optionally per day; materials at cost plus one
material markup percentage. Saving a sheet with the date of an existing one (same project,
or the company default) replaces it.

**Pricing.** A ticket's `worked_on` picks the project's latest sheet in force, else the company
default's. A labor line names a `classification` (the trade is tried when it is missing) and
an `hour_type` (`st`, `ot`, `dt`; default `st`). A line without a rate gets the sheet's;
equipment is charged by the day (hours over 8, rounded up) when the daily rate is lower;
materials get the sheet's markup on their cost (`unit_price`). A rate sent with the line is
kept, and flagged (`pricing.differs`, a warning) when the sheet says otherwise; a
classification or item the sheet lacks stays at 0 and is flagged for the office. Every line
carries `pricing`: source, sheet, item, hour type and a sentence.

**CSV.** Import and export use the columns `kind,item,st,ot,dt,hourly,daily,unit_cost,percent`
(kinds `labor`, `equipment`, `material`, `material_markup`). An import goes through the same
validator as the JSON body: any bad row refuses the whole sheet, `details` naming `row <n>`
(the header is row 1). Export cells starting with `=`, `+`, `-` or `@` get a leading `'`."""),
    "markups": ("Markups", """\
A project's markups: overhead, profit, bond, insurance and tax, each a percentage of the
amounts of the line kinds it names, applied in the listed order; a compounding markup also
takes the markups before it into its base. Each is rounded to cents and becomes its own line
(`markups` on the ticket, `kind: markup` in `routing`, after the cost lines) and its own
change-event line item on the budget code the PM picked, routed like any line (a code that
disappeared makes the line need review). Tickets keep the markups they were created with."""),
    "authorizations": ("Not-to-exceed", """\
A GC directive or change-order request with an authorised amount. A ticket names it with
`authorization_ref` (an unknown reference is kept and flagged), or the PM links it. A reference
is unique per project whatever its case, and found that way: `cd-014` names `CD-014`. `nte` on
the ticket is the running total of the written and open tickets against it: `warning` from
80 %, `over` past 100 %. Approving a ticket that takes the written total past the amount
answers 409 `nte_exceeded` and writes nothing, unless `confirm_over_nte: true`. Two approvals
against the same authorization at the same instant are not serialised against each other."""),
    "webhooks": ("Webhooks", """\
Endpoints of your programs that are sent the company's ticket events, so they need not poll
`GET /tickets`: `ticket.submitted` (a new ticket, or a crew's correction of one sent back),
`ticket.signed` (the general contractor's person signed it, or a signature was added),
`ticket.sent_back` (rejected, and sent back to the crew of the capture link it came through),
`ticket.rejected` (a ticket sent by a program, rejected), `ticket.restored` (back in the review
queue), `ticket.written` (in the project system, with `external`) and `ticket.record_changed`
(its record read back from the project system changed: status, deleted, or the change orders
its lines are on, in `external`; not sent for the first read of an open event on none). Each is a POST of
`{"type", "timestamp", "data"}`, `data` the ticket as `GET /tickets/{ticket_id}` answered at
that moment (see this document's `webhooks` section), signed per
[Standard Webhooks](https://www.standardwebhooks.com/): verify `webhook-signature` over
`webhook-id`, `webhook-timestamp` and the body with the endpoint's secret (its libraries do
it), and drop a `webhook-id` already seen.

**Delivery.** Each event is stored with the change that caused it and sent by a worker, at
least once, in no set order across tickets. Any 2xx answer within 10 seconds counts (no
redirect is followed; at most 64 KiB of the answer is read); otherwise it is sent again with
the same `webhook-id` after 5 seconds, 5 minutes, 30 minutes, 2, 5 and 10 hours, then every
10 hours, for three days. An endpoint that fails for three days is disabled and the company's
admins are e-mailed; `PATCH` it with `enabled: true` once it works. Every attempt is kept 30
days (`/webhooks/{endpoint_id}/deliveries`); one delivery can be sent again (`replay`).

**Addresses.** Events go only over https to public addresses: a name is resolved at each send
and every address it has must be public (no loopback, private, link-local or metadata
address). An address written as such a number is refused when registered (400
`webhook_url_refused`). The server's `WEBHOOK_ALLOW_PRIVATE` setting may allow hosts or
networks on the server's own network, over plain http too. Managing webhooks takes any key of
the company; on the keys page only company admins may."""),
    "reports": ("Reports", """\
Figures read across tickets. The outstanding report counts the dollars not yet paid: where
each claim waits (a signature, the project manager, a change order in the project system) and
for how long, by stage, sub or project, with the ticket list's filters; the same figures as
CSV. The board page draws them for project managers."""),
    "openapi": ("This document", """\
The OpenAPI 3.1 description of this API, the one rendered here. It needs no key."""),
}
