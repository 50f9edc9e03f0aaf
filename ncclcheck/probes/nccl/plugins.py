"""The nccl family's plugin checks: the net / tuner / profiler / env plugins NCCL would load,
and whether NCCL_NET names a network that exists here.

Pure judgement of the plugin searches, the supported API versions read from libnccl and the
RDMA devices, all gathered by ``facts.gather_facts``.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, failed, passed, warned
from ncclcheck.ncclib.plugins import PluginSearch
from ncclcheck.ncclib.plugins import judge as judge_plugin
from ncclcheck.ncclib.version import NcclVersion
from ncclcheck.probes.nccl.facts import NcclFacts
from ncclcheck.probes.spec import CheckSpec, judge

PLUGIN = CheckSpec(
    "nccl.plugin.*", "NCCL's net / tuner / profiler / env plugins",
    (Category.NET_PLUGIN,),
    fails_when="a named plugin is not found, needs a missing library, or speaks no "
               "API version the loaded NCCL supports",
    warns_when="the supported versions cannot be read, or the CollNet part is "
               "unusable",
    order=60)
NET = CheckSpec(
    "nccl.net", "NCCL_NET names a network that exists here", (Category.NET_PLUGIN,),
    fails_when="NCCL_NET=IB without RDMA devices, or a name no plugin provides",
    order=70)


@judge(PLUGIN)
def judge_plugins(facts: NcclFacts) -> list[CheckResult]:
    return [check_plugin(s, facts.supported, facts.version) for s in facts.searches]


@judge(NET)
def judge_net(facts: NcclFacts) -> CheckResult:
    return check_net(facts.env, facts.searches[0], facts.ib_devices)


def check_plugin(search: PluginSearch, supported: dict[str, list[int]],
                 version: NcclVersion | None) -> CheckResult:
    kind = search.kind
    cid = PLUGIN.member(kind.name)
    nccl = f"NCCL {version}" if version else "the loaded NCCL"
    details: dict[str, Any] = {"variable": kind.variable, "value": search.value,
                               "tried": search.tried, "found": [p.to_dict() for p in search.found],
                               "supported": {k: [f"v{n}" for n in supported.get(k, [])]
                                             for k in kind.symbols}}
    if search.disabled:
        return passed(cid, f"{kind.variable}=none: external {kind.name} plugins are disabled",
                      **details)
    if not search.found:
        if search.value:
            return failed(cid, f"{kind.variable}={search.value}: no plugin file found (tried "
                          f"{', '.join(search.tried)})", f"Install the plugin and put its "
                          f"directory on LD_LIBRARY_PATH, give {kind.variable} the full path, "
                          f"or unset {kind.variable}.", Category.NET_PLUGIN, **details)
        return passed(cid, f"no {kind.prefix}.so on the search path: {nccl} uses its built-in "
                      + ("IB and Socket transports" if kind.name == "net" else "defaults"),
                      **details)
    verdicts = []
    for plugin in search.found:
        primary = judge_plugin(plugin, kind.symbols[0], supported)
        extra = [judge_plugin(plugin, fam, supported) for fam in kind.symbols[1:]
                 if plugin.exports.get(fam)]
        verdicts.append((plugin, primary, extra))
    # NCCL uses the first candidate that dlopen accepts; one with a missing dependency is skipped.
    loadable = [v for v in verdicts if not v[0].missing_needed and not v[0].error]
    first, primary, extra = (loadable or verdicts)[0]
    details["judgement"] = [{"path": p.path, "usable": j.usable, "reason": j.reason,
                             "also": [e.reason for e in x]} for p, j, x in verdicts]
    if first.missing_needed:
        return failed(cid, f"{first.path} needs {', '.join(first.missing_needed)}, which the "
                      "loader cannot find: NCCL skips the plugin", "Install the missing "
                      f"libraries or add their directory to LD_LIBRARY_PATH "
                      f"({', '.join(first.missing_needed)}).", Category.NET_PLUGIN, **details)
    if primary.usable is False:
        wanted = (f"Install a {kind.name} plugin built for {nccl} (one exporting "
                  f"{kind.symbols[0]}_v{max(supported.get(kind.symbols[0], [0]))}), or set "
                  f"{kind.variable}=none.")
        fix = (catalogue_fix("nccl.net_plugin_broken", f"Here: {wanted}")
               if kind.name == "net" else wanted)
        return failed(cid, f"{first.path} {primary.reason}: {nccl} cannot use it", fix,
                      Category.NET_PLUGIN, **details)
    if primary.usable is None:
        return warned(cid, f"{first.path}: {primary.reason}", f"Check the plugin's release notes "
                      f"for {nccl}.", Category.NET_PLUGIN, **details)
    unusable_extra = [e for e in extra if e.usable is False]
    if unusable_extra:
        return warned(cid, f"{first.path}: {primary.reason}; but {unusable_extra[0].reason} "
                      "(CollNet/SHARP stays off)", f"Update the plugin to one built for {nccl}.",
                      Category.NET_PLUGIN, **details)
    return passed(cid, f"{first.path} {primary.reason}", **details)


def check_net(env, net_search: PluginSearch, devices: list[str]) -> CheckResult:
    """NCCL_NET must name a network that exists here: IB, Socket or an external plugin's."""
    value = env.get("NCCL_NET")
    if not value:
        return passed(NET, "NCCL_NET unset: NCCL picks "
                      + ("IB (RDMA devices present)" if devices else "Socket (no RDMA devices)"),
                      ib_devices=devices)
    name = value.strip().lower()
    plugin_found = any(p.exports.get("ncclNetPlugin") for p in net_search.found)
    details = {"NCCL_NET": value, "ib_devices": devices, "net_plugin": plugin_found}
    if name == "socket":
        return passed(NET, "NCCL_NET=Socket: the built-in TCP transport, always available",
                      **details)
    if name == "ib":
        if devices:
            return passed(NET, f"NCCL_NET=IB: RDMA devices {', '.join(devices)} present",
                          **details)
        return failed(NET, "NCCL_NET=IB but this host has no RDMA device: NCCL init fails "
                      "('Failed to initialize any NET plugin')",
                      catalogue_fix("nccl.net_not_found"),
                      Category.NET_PLUGIN, **details)
    if plugin_found:
        return passed(NET, f"NCCL_NET={value}: an external net plugin is present; its "
                      "name is checked by NCCL at init", **details)
    return failed(NET, f"NCCL_NET={value} names no available network: no external net "
                  "plugin found, and the built-in ones are IB and Socket",
                  catalogue_fix("nccl.net_not_found"),
                  Category.NET_PLUGIN, **details)
