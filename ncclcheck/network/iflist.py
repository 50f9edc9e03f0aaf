"""The interface-list grammar NCCL uses for NCCL_SOCKET_IFNAME, NCCL_IB_HCA and friends: the one
parser every family (the net probe, the settings linter) asks.

NCCL (src/misc/utils.cc ``parseStringList`` / ``matchIfList``, src/misc/socket.cc): a leading
``^`` makes the whole list an exclude list; after it a leading ``=`` makes every entry an exact
name, otherwise entries are prefixes. Entries are split at ``,`` (empty ones dropped, at most
16 kept), anything after a ``:`` in an entry is a port. Nothing is trimmed: a space is part of
the name it precedes, so ``" eth0"`` matches no interface. An empty list matches everything.
The variable counts only when longer than one byte (C ``strlen``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ncclcheck.network.model import INET, INET6

MAX_IFS = 16  # NCCL's MAX_IFS: most interfaces one search returns


@dataclass(frozen=True)
class IfList:
    """A parsed NCCL interface list: ``^`` exclude, ``=`` exact, entries (prefixes or names)."""

    entries: tuple[str, ...]
    exclude: bool = False
    exact: bool = False

    @classmethod
    def parse(cls, value: str) -> "IfList":
        exclude = value.startswith("^")
        if exclude:
            value = value[1:]
        exact = value.startswith("=")
        if exact:
            value = value[1:]
        entries = []
        for token in value.split(","):
            prefix = token.split(":", 1)[0]
            if prefix:  # empty tokens and ":port" entries are dropped, as NCCL does
                entries.append(prefix[:63])
            if len(entries) == MAX_IFS:
                break
        return cls(tuple(entries), exclude, exact)

    def matches(self, name: str) -> bool:
        if not self.entries:
            hit = True  # an empty list matches everything
        elif self.exact:
            hit = name in self.entries
        else:
            hit = any(name.startswith(e) for e in self.entries)
        return hit != self.exclude

    def __str__(self) -> str:
        return ("^" if self.exclude else "") + ("=" if self.exact else "") + ",".join(self.entries)



def dead_entries(value: str, names: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Entries of an NCCL interface list that can never match anything, and why: NCCL does
    not trim spaces, reads ``^`` / ``=`` only at the start of the whole list, and compares
    names case-sensitively. ``names``: the interface names present."""
    present = list(names)
    parsed = IfList.parse(value)
    dead = []
    for entry in parsed.entries:
        if entry != entry.strip():
            dead.append((entry, "spaces are kept as part of the name"))
        elif entry[0] in "^=":
            dead.append((entry, f"'{entry[0]}' only counts at the very start of the list"))
        elif not any(n.startswith(entry) for n in present) and any(
                n.lower().startswith(entry.lower()) for n in present):
            dead.append((entry, "names are case-sensitive"))
    return dead


def socket_family(env: Mapping[str, str]) -> str | None:
    """NCCL_SOCKET_FAMILY, as NCCL reads it: exactly AF_INET or AF_INET6, anything else ignored."""
    value = env.get("NCCL_SOCKET_FAMILY")
    return {"AF_INET": INET, "AF_INET6": INET6}.get(value) if value is not None else None


def ifname_setting(env: Mapping[str, str], name: str = "NCCL_SOCKET_IFNAME") -> str | None:
    """The variable's value when the library honours it (longer than one character), else None."""
    value = env.get(name)
    if value is None or len(value.encode("utf-8", "surrogateescape")) <= 1:  # C strlen
        return None
    return value
