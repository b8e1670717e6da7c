"""What a queue row says and offers: signatures held back, and counts of the filtered list."""
from __future__ import annotations

import re

from support.images import data_url, png_bytes
from tests.test_review_pages import sign_in


def signed_ticket(client, tenant, **signature):
    """A ticket with every line on an exact code, signed with the given qualifier."""
    body = {"project_id": tenant.project()["id"], "description": f"Hand-dug around gas line ({signature})",
            "reason": "Gas line", "directed_by": "Sam",
            "labor": [{"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"}],
            "signature": {"name": "Gene Carter", "role": "GC super",
                          "image": data_url(png_bytes(), "image/png"), **signature}}
    response = client.post("/v1/tickets", headers=tenant.headers, json=body)
    assert response.status_code in (200, 201), response.json
    return response.json["id"]


def row(html, ticket_id):
    return re.search(rf'<tr class="queue-row[^"]*" data-ticket="{ticket_id}".*?</tr>', html,
                     re.DOTALL).group(0)


def test_a_signature_that_holds_back_is_not_clean_and_says_so(app, client, acme):
    verified = signed_ticket(client, acme, qualifier="verified")
    disputed = signed_ticket(client, acme, qualifier="verified_scope_disputed")
    not_verified = signed_ticket(client, acme, qualifier="not_verified",
                                 qualifier_reason="Crew size not seen")
    noted = signed_ticket(client, acme, qualifier="Hours only")  # older free text
    browser = sign_in(app, client, acme)
    html = browser.get("/queue", headers={"HX-Request": "true"}).get_data(as_text=True)
    expected = {verified: ("1", "Yes"), disputed: ("0", "Yes, scope disputed"),
                not_verified: ("0", "Yes, not verified"), noted: ("0", "Yes, with a note")}
    for ticket_id, (clean, signed) in expected.items():
        shown = row(html, ticket_id)
        assert f'data-clean="{clean}"' in shown, (signed, shown)
        cell = re.search(r'<td class="signed">(.*?)</td>', shown, re.DOTALL).group(1)
        assert re.sub(r"<[^>]+>", "", cell).strip() == signed


TAB = re.compile(r">(Needs review|Written|Rejected|All) \((\d+)\)</a>")


def test_status_tabs_count_the_same_filter_as_the_list(app, client, acme):
    from services.approval import approval
    from tests.pile import SUBS, seed_pile
    pile = seed_pile(app, acme, count=24)
    project, sub = pile[1].project_id, SUBS[1]
    keep = [t for t in pile if t.project_id == project and t.sub == sub]
    with app.app_context():
        approval.reject(acme.company_id, keep[0].id, actor="pm@acme.example", reason="Not extra")
    browser = sign_in(app, client, acme)
    cases = {f"project_id={project}&sub={sub.replace(' ', '+')}": keep,
             "unsigned=1": [t for t in pile if not t.signed],
             "to_check=1": [t for t in pile if not t.clean],
             f"q=foreman+{sub.split()[0]}": [t for t in pile if t.sub == sub]}
    for query, matching in cases.items():
        rejected = sum(1 for t in matching if t.id == keep[0].id)
        for status in ("submitted", "all"):
            html = browser.get(f"/queue?status={status}&{query}",
                               headers={"HX-Request": "true"}).get_data(as_text=True)
            tabs = {label: int(count) for label, count in TAB.findall(html)}
            assert tabs == {"Needs review": len(matching) - rejected, "Written": 0,
                            "Rejected": rejected, "All": len(matching)}, (query, status)
            shown = {"submitted": len(matching) - rejected, "all": len(matching)}[status]
            assert f"of {shown} ticket" in html, (query, status)
