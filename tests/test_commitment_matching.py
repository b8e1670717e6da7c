"""A sub's name matched to a project's directory: exact, a suggestion with its reason, or none."""
from __future__ import annotations

import pytest

from services.project_system.base import Commitment, Vendor
from services.project_system.commitments import Directory, match, normalise

APEX, BOLT, CEDAR, BAYSIDE = (Vendor(1, "Apex Concrete, Inc."), Vendor(2, "Bolt Electric LLC"),
                              Vendor(3, "Cedar Framing & Trim"), Vendor(4, "Bayside Rentals"))
DIRECTORY = Directory(
    vendors=(APEX, BOLT, CEDAR, BAYSIDE),
    commitments=(
        Commitment(10, "work_order", "SC-001", "Concrete", "Approved", 1, APEX.name),
        Commitment(12, "purchase_order", "PO-001", "Wire", "Approved", 2, BOLT.name),
        Commitment(11, "work_order", "SC-002", "Electrical", "Approved", 2, BOLT.name),
        Commitment(13, "work_order", "SC-003", "Framing", "Draft", 3, CEDAR.name)))


@pytest.mark.parametrize(("name", "compared"), [
    ("Apex Concrete, Inc.", "apex concrete"),
    ("APEX CONCRETE INC", "apex concrete"),
    ("Bolt Electric L.L.C.", "bolt electric"),
    ("Cedar Framing & Trim", "cedar framing and trim"),
    ("Peña Builders Co.", "pena builders"),
    ("O'Neil Plumbing Corp", "oneil plumbing"),
    ("Company", "company"),  # a suffix alone is the name
])
def test_names_are_compared_without_case_punctuation_accents_or_a_legal_suffix(name, compared):
    assert normalise(name) == compared


def test_one_vendor_named_as_the_sub_with_one_commitment_is_exact():
    found = match("apex concrete", DIRECTORY)
    assert (found.vendor, found.commitment.id, found.exact) == (APEX, 10, True)


def test_a_vendor_with_two_commitments_is_a_suggestion_of_its_subcontract_saying_why():
    found = match("Bolt Electric", DIRECTORY)
    assert (found.commitment.id, found.exact) == (11, False)
    assert found.reason == "Bolt Electric LLC has 2 commitments on this project"


def test_a_near_name_is_a_suggestion_naming_the_closest_vendor():
    found = match("Cedar Framing", DIRECTORY)
    assert (found.vendor, found.commitment.id, found.exact) == (CEDAR, 13, False)
    assert found.reason == "closest name in the directory: Cedar Framing & Trim"


def test_a_vendor_without_a_commitment_and_an_unknown_sub_are_said_plainly():
    bayside = match("Bayside Rentals", DIRECTORY)
    assert (bayside.commitment, bayside.exact) == (None, False)
    assert bayside.reason == "Bayside Rentals has no commitment on this project in Procore"
    delta = match("Delta Drywall", DIRECTORY)
    assert (delta.vendor, delta.commitment) == (None, None)
    assert delta.reason == "Delta Drywall is not in this project's directory in Procore"


def test_two_vendors_of_the_same_name_are_a_suggestion():
    twice = Directory(vendors=(APEX, Vendor(5, "Apex Concrete LLC")),
                      commitments=DIRECTORY.commitments[:1])
    found = match("Apex Concrete", twice)
    assert (found.commitment.id, found.exact) == (10, False)
    assert found.reason.startswith("2 companies in this project's directory are named")


def test_an_unreadable_directory_writes_no_commitment_and_says_so():
    found = match("Apex Concrete", Directory((), (), readable=False))
    assert (found.commitment, found.exact) == (None, False)
    assert "cannot be read" in found.reason
