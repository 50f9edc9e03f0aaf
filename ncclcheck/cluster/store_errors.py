"""Why a rank has no store: the exception that says so, and the finding for an address that
does not resolve (raised both before the store is opened and while its port is reached)."""

from __future__ import annotations

from typing import Any

from ncclcheck.model import Category


class StoreUnavailable(Exception):
    """This rank could not open (rank 0) or reach (others) the store; says why and what to do."""

    def __init__(self, category: Category, message: str, fix: str, **details: Any) -> None:
        super().__init__(message)
        self.category = category
        self.message = message
        self.fix = fix
        self.details = details


def unresolved(address: str, exc: BaseException) -> StoreUnavailable:
    """MASTER_ADDR does not resolve on this host."""
    return StoreUnavailable(
        Category.NAME_RESOLUTION,
        f"MASTER_ADDR={address!r} does not resolve on this host ({exc})",
        "Set MASTER_ADDR to a name every node resolves to the rank-0 node (or to its IP "
        "address); check /etc/hosts and DNS on this node.", address=address, error=str(exc))
