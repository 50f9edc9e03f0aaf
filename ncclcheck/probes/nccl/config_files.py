"""NCCL's config files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf): readable, and read as
NAME=value lines."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, passed, warned
from ncclcheck.ncclib.config_files import ConfigFile
from ncclcheck.probes.nccl.facts import NcclFacts
from ncclcheck.probes.spec import CheckSpec, judge


CONFIG_FILES = CheckSpec(
    "nccl.config_files", "NCCL's config files", (Category.CONFIGURATION,),
    warns_when="a config file cannot be read, NCCL_CONF_FILE names no file, or lines "
               "are not NAME=value",
    order=80)


@judge(CONFIG_FILES)
def judge_config_files(facts: NcclFacts) -> CheckResult:
    return check_config_files(facts.files, facts.ctx.env)


def check_config_files(files: list[ConfigFile], env) -> CheckResult:
    details = {"files": [f.to_dict() for f in files]}
    broken = [f for f in files if f.error]
    if broken:
        f = broken[0]
        return warned(CONFIG_FILES, f"{f.path} ({f.why}) cannot be read: {f.error}; NCCL "
                      "skips it", f"Fix or remove {f.path}.", Category.CONFIGURATION, **details)
    explicit = env.get("NCCL_CONF_FILE")
    if explicit and not any(f.exists for f in files if f.why == "NCCL_CONF_FILE"):
        return warned(CONFIG_FILES, f"NCCL_CONF_FILE={explicit}: no such file",
                      "Point NCCL_CONF_FILE at an existing file, or unset it.",
                      Category.CONFIGURATION, **details)
    used = [f for f in files if f.exists]
    if not used:
        return passed(CONFIG_FILES, "no NCCL config file (" +
                      ", ".join(f.path for f in files) + "): settings come from the environment",
                      **details)
    bad = [f for f in used if f.skipped]
    listing = ", ".join(f"{f.path} ({len(f.entries)} setting(s))" for f in used)
    if bad:
        return warned(CONFIG_FILES, f"{bad[0].path}: lines {bad[0].skipped} are not "
                      "NAME=value; NCCL ignores them", f"Fix those lines in {bad[0].path}.",
                      Category.CONFIGURATION, **details)
    return passed(CONFIG_FILES, f"NCCL also reads {listing}; their settings are judged "
                  "below (the environment wins)", **details)
