"""Every signature's category agrees with the contract's table of categories.

The contract (docs/report.md's taxonomy) defines each category by what it covers; some
messages name their category beyond doubt (a collective mismatch found by torch's or NCCL's own
check is desync; "Address already in use" is a port in use; NCCL's "Duplicate GPU detected" a
duplicate GPU). A signature whose real example line holds such a message must carry that
category, so the catalogue cannot drift from the contract one entry at a time.
"""

from __future__ import annotations

import re

import pytest

from ncclcheck.catalogue import load
from ncclcheck.model import Category

# A message that decides the category, by the contract's words for it.
DECIDING = {
    Category.DESYNC: r"mismatch between collectives|Mismatched collective detected|"
                     r"collective mismatch error",
    Category.PORT_IN_USE: r"Address already in use|EADDRINUSE",
    Category.DUPLICATE_GPU: r"Duplicate GPU detected",
    Category.SHARED_MEMORY: r"/dev/shm/",
    Category.OUT_OF_MEMORY: r"CUDA out of memory",
    Category.NAME_RESOLUTION: r"Name or service not known|Temporary failure in name resolution",
}
SIGNATURES = load().signatures


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.example], ids=lambda s: s.id)
def test_a_message_that_decides_its_category_carries_it(sig):
    decided = {c for c, words in DECIDING.items() if re.search(words, sig.example)}
    assert len(decided) <= 1, (sig.id, decided)
    if decided:
        assert sig.category in decided, f"{sig.id} is {sig.category.value}: {sig.example[:120]}"


def test_the_deciding_messages_are_found_in_the_catalogue():
    """Each deciding message is in some signature's example: the test reads real entries."""
    for category, words in DECIDING.items():
        assert any(re.search(words, s.example) for s in SIGNATURES), category


def test_every_category_is_the_contract_s():
    assert {s.category for s in SIGNATURES} <= set(Category)
