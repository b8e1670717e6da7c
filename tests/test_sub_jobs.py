"""Sub jobs: each sub job's cost codes and budget codes stay its own, read, routed and created."""
from __future__ import annotations

from services.project_system import BudgetCode, CostCode
from services.routing.learning import Suggestion
from services.routing.routing import Router
from tests.test_procore_client import calls_to
from tests.test_routing import labor

# ----------------------------------------------------------------- reading from the sandbox


def by_sub_job(codes: list[CostCode], text: str) -> dict[str | None, int]:
    """The ids of the cost codes of one text, by sub job (None: the project's own)."""
    return {code.sub_job: code.id for code in codes if code.code == text}


def test_each_sub_job_has_its_own_cost_codes_and_budget_codes(contract_client, contract_company):
    """The same code text on the project and on two sub jobs gives three cost codes, and each
    budget code ties to the cost code of its own sub job, never another's."""
    project = contract_company["contract_projects"]["sub_jobs"]
    cost_codes, _types, budget_codes = contract_client.read_catalog(project)
    earthwork = by_sub_job(cost_codes, "02-200")
    assert set(earthwork) == {None, "B1", "B2"} and len(set(earthwork.values())) == 3
    codes = {code.flat_code: code for code in budget_codes}
    assert codes["02-200.L"].cost_code_id == earthwork[None]
    assert codes["B1.02-200.L"].cost_code_id == earthwork["B1"]
    assert codes["B2.02-200.L"].cost_code_id == earthwork["B2"]
    sub_job_of = {code.id: code.sub_job for code in cost_codes}
    for code in budget_codes:
        named = code.flat_code.split(".")[0] if code.flat_code.startswith("B") else None
        assert sub_job_of[code.cost_code_id] == named, code
    assert calls_to(contract_client, "GET", "/sub_jobs") == 1
    assert calls_to(contract_client, "GET", "/cost_codes") == 3  # the project's, B1's, B2's


def test_a_required_sub_job_ties_its_codes_to_the_sub_jobs_cost_codes(contract_client,
                                                                      contract_company):
    project = contract_company["contract_projects"]["sub_job_first"]
    cost_codes, _types, budget_codes = contract_client.read_catalog(project)
    labor_code = next(code for code in budget_codes if code.flat_code == "B1.02-200.L")
    assert labor_code.cost_code_id == by_sub_job(cost_codes, "02-200")["B1"]


def test_unreadable_sub_jobs_tie_their_codes_to_nothing(contract_client, contract_company,
                                                        sandbox_server):
    """Without the sub jobs, their budget codes keep no cost code rather than the project's."""
    from tests.plugins.sandbox import SandboxControl

    switch = SandboxControl(sandbox_server, contract_company)
    switch.fault(403, count=1, methods=["GET"], match="/sub_jobs")
    project = contract_company["contract_projects"]["sub_jobs"]
    cost_codes, _types, budget_codes = contract_client.read_catalog(project)
    switch.close()
    assert all(code.sub_job is None for code in cost_codes)
    codes = {code.flat_code: code for code in budget_codes}
    assert codes["02-200.L"].cost_code_id == by_sub_job(cost_codes, "02-200")[None]
    assert codes["B1.02-200.L"].cost_code_id is None
    assert codes["B2.02-200.L"].cost_code_id is None


def test_a_sub_jobs_budget_code_is_created_on_that_sub_job(contract_client, contract_company):
    """Creating the missing labor code of sub job B2's cost code makes B2's, once."""
    project = contract_company["contract_projects"]["sub_jobs"]
    cost_codes = contract_client.list_cost_codes(project)
    masonry = by_sub_job(cost_codes, "04-200")
    before = {code.flat_code for code in contract_client.list_budget_codes(project)}
    assert "B2.04-200.L" not in before and "04-200.L" not in before  # masonry has no labor code
    made = contract_client.create_budget_code(project, masonry["B2"], "labor")
    assert (made.flat_code, made.cost_code_id, made.cost_type) == \
        ("B2.04-200.L", masonry["B2"], "labor")
    again = contract_client.create_budget_code(project, masonry["B2"], "labor")
    assert again.id == made.id
    own = contract_client.create_budget_code(project, masonry[None], "labor")
    assert own.flat_code == "04-200.L" and own.id != made.id
    after = {code.flat_code: code for code in contract_client.list_budget_codes(project)}
    assert after["B2.04-200.L"].cost_code_id == masonry["B2"]
    assert after["04-200.L"].cost_code_id == masonry[None]
    assert "B1.04-200.L" not in after


def test_a_required_sub_job_is_given_when_creating_its_code(contract_client, contract_company):
    project = contract_company["contract_projects"]["sub_job_first"]
    masonry = by_sub_job(contract_client.list_cost_codes(project), "04-200")
    made = contract_client.create_budget_code(project, masonry["B1"], "labor")
    assert (made.flat_code, made.cost_code_id) == ("B1.04-200.L", masonry["B1"])


# ----------------------------------------------------------------- routing

SUB_JOB_CODES = [
    CostCode(id=21, code="02-200", name="Site Earthwork"),
    CostCode(id=22, code="02-200", name="Site Earthwork", sub_job="B1"),
    CostCode(id=23, code="02-200", name="Site Earthwork", sub_job="B2"),
]
SUB_JOB_BUDGET = [
    BudgetCode(id=201, flat_code="02-200.L", description="", cost_code_id=21, cost_type="labor"),
    BudgetCode(id=202, flat_code="B1.02-200.L", description="", cost_code_id=22,
               cost_type="labor"),
    BudgetCode(id=203, flat_code="B2.02-200.L", description="", cost_code_id=23,
               cost_type="labor"),
]


def test_a_crews_code_names_the_sub_job_it_says():
    router = Router(SUB_JOB_CODES, SUB_JOB_BUDGET)
    plain, first, second, spaced = router.route_all([
        labor("Laborer", "02-200"), labor("Laborer", "B1.02-200"),
        labor("Laborer", "b2 02-200"), labor("Laborer", "B1 02 200")])
    assert (plain.budget_code.id, plain.exact) == (201, True)  # the project's own, as written
    assert (first.budget_code.id, first.exact) == (202, True)
    assert (second.budget_code.id, second.exact) == (203, True)
    assert spaced.budget_code.id == 202
    assert "B1.02-200" in first.reason


def test_a_code_on_several_sub_jobs_only_is_never_guessed():
    """Where only sub jobs have the code, its bare text names none of them; one alone is taken."""
    router = Router(SUB_JOB_CODES[1:], SUB_JOB_BUDGET[1:])
    bare, = router.route_all([labor("Laborer", "02-200")])
    assert bare.budget_code is None and bare.needs_review
    assert "sub jobs B1, B2" in bare.reason
    words, = router.route_all([labor("Site earthwork crew")])
    assert words.budget_code is None  # the name matches both sub jobs' codes alike
    alone = Router(SUB_JOB_CODES[1:2], SUB_JOB_BUDGET[1:2])
    only, = alone.route_all([labor("Laborer", "02-200")])
    assert (only.budget_code.id, only.exact) == (202, True)


def test_a_learned_choice_keeps_its_sub_job_on_another_project():
    """A PM's pick of B2's code on one project suggests B2's code on the next, never B1's."""
    learned = Suggestion(cost_code="B2.02-200", cost_type="labor", budget_code_id=999,
                         budget_code="B2.02-200.L", reason="picked before")
    router = Router(SUB_JOB_CODES, SUB_JOB_BUDGET)
    route, = router.route_all([labor("Operator")], lambda kind, text: learned)
    assert (route.budget_code.id, route.learned) == (203, True)


# ----------------------------------------------------------------- through the API

def test_the_api_names_each_cost_codes_sub_job(app, client, acme, sandbox_server,
                                               contract_company):
    """A program sees which sub job a cost code belongs to, and creates a budget code on it."""
    from tests.test_connection_check import connect_to

    connect_to(app, acme, sandbox_server, contract_company)
    project = contract_company["contract_projects"]["sub_jobs"]
    found = client.get(f"/v1/projects/{project}/cost-codes", query_string={"q": "04-200"},
                       headers=acme.headers).get_json()["data"]
    assert [(item["code"], item["sub_job"]) for item in found] == [
        ("04-200", None), ("B1.04-200", "B1"), ("B2.04-200", "B2")]
    b1 = found[1]
    made = client.post(f"/v1/projects/{project}/budget-codes", headers=acme.headers,
                       json={"cost_code_item_id": b1["id"], "cost_type": "labor"})
    assert made.status_code == 200, made.get_json()
    assert (made.get_json()["code"], made.get_json()["created"]) == ("B1.04-200.L", True)
    again = client.get(f"/v1/projects/{project}/cost-codes", query_string={"q": "B1.04-200"},
                       headers=acme.headers).get_json()["data"]
    assert [code["code"] for item in again for code in item["budget_codes"]] == ["B1.04-200.L"]
