"""The settings linter's vocabulary: the facts rules compare with, the verdict they give, and
how NCCL reads an integer. Shared by the rules (``setting_rules``) and the linter
(``settings``), so neither imports the other's internals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ncclcheck.model import Category, Status
from ncclcheck.ncclib.config_files import Setting
from ncclcheck.ncclib.library_names import SHIPPED, NameSource
from ncclcheck.ncclib.version import NcclVersion
from ncclcheck.redact import MASK, is_secret_name

_C_INT = re.compile(r"^\s*([+-]?)(0[xX][0-9A-Fa-f]+|0[0-7]*|[1-9][0-9]*)")


@dataclass
class LintFacts:
    """What the rules compare values with; gathered by the probe, given freely by tests."""

    interfaces: dict[str, list[str]] = field(default_factory=dict)  # up interfaces -> addresses
    ib_devices: list[str] = field(default_factory=list)
    loaded_version: NcclVersion | None = None
    loaded_path: str | None = None
    other_copies: dict[str, str] = field(default_factory=dict)  # version -> a libnccl not loaded
    local_world_size: int | None = None
    host: str = "localhost"
    names: NameSource = SHIPPED  # the NCCL_* names the loaded library reads (or the table)


@dataclass
class Verdict:
    name: str
    value: str
    source: str
    status: Status
    summary: str
    fix: str | None = None
    category: Category | None = None
    rule: str = "ok"
    notes: list[str] = field(default_factory=list)
    names_from: str | None = None  # set when the verdict rests on the list of known names

    def shown_value(self) -> str:
        return MASK if is_secret_name(self.name) else self.value


def shown(setting: Setting) -> str:
    return f"{setting.name}={MASK if is_secret_name(setting.name) else setting.value}"


def ok(s: Setting, summary: str, rule: str = "ok") -> Verdict:
    return Verdict(s.name, s.value, s.source, Status.PASS, summary, rule=rule)


def warn(s: Setting, summary: str, fix: str, category: Category = Category.CONFIGURATION,
         rule: str = "value") -> Verdict:
    return Verdict(s.name, s.value, s.source, Status.WARN, summary, fix, category, rule)


def fail(s: Setting, summary: str, fix: str, category: Category = Category.CONFIGURATION,
         rule: str = "value") -> Verdict:
    return Verdict(s.name, s.value, s.source, Status.FAIL, summary, fix, category, rule)


# -- value parsing ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CInt:
    value: int | None   # None: not a number at all
    trailing: str       # what strtoll left unread


def parse_c_int(text: str) -> CInt:
    """NCCL reads integers with strtoll(text, &end, 0): decimal, 0x hex, leading-0 octal;
    trailing characters are silently ignored."""
    match = _C_INT.match(text)
    if not match:
        return CInt(None, text)
    sign, digits = match.groups()
    if digits.lower().startswith("0x"):
        number = int(digits, 16)
    elif digits.startswith("0") and len(digits) > 1:
        number = int(digits, 8)
    else:
        number = int(digits)
    return CInt(-number if sign == "-" else number, text[match.end():])



Rule = Callable[[Setting, LintFacts], "Verdict | None"]
