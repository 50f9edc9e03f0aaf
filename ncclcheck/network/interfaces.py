"""Network interfaces, and which of them NCCL and Gloo will pick: the public face of the
network owner, which every family asks.

The parts live in their own modules: ``model`` (the data), ``iflist`` (the NCCL interface-list
grammar), ``enumeration`` (reading this host, once), ``selection`` (NCCL's and Gloo's rules,
pure). NCCL settings as NCCL sees them (environment + config files) come from
``ncclcheck.ncclib.config_files``.
"""

from __future__ import annotations

from ncclcheck.network.enumeration import (SYS_CLASS_INFINIBAND, list_ib_devices, list_ib_ports,
                                           list_interfaces)
from ncclcheck.network.iflist import MAX_IFS, IfList, dead_entries, ifname_setting, socket_family
from ncclcheck.network.model import (INET, INET6, VIRTUAL_BRIDGE_PREFIXES, Address, IbPort,
                                     Interface, SocketChoice, fastest_ib_rate, find,
                                     interface_for_address)
from ncclcheck.network.selection import (LATEST_RULES, NcclPrediction, explain_nccl_choice,
                                         getaddrinfo_first, gloo_interface_names, parse_version,
                                         predict_gloo_interface, predict_gloo_interfaces,
                                         predict_nccl_bootstrap, predict_nccl_interfaces,
                                         propose_ifname, socket_link_speed, tp_interface_name)


__all__ = [
    "Address", "Interface", "IbPort", "IfList", "SocketChoice", "NcclPrediction", "dead_entries",
    "list_interfaces", "list_ib_ports", "list_ib_devices", "explain_nccl_choice",
    "predict_nccl_interfaces", "predict_nccl_bootstrap", "predict_gloo_interface",
    "predict_gloo_interfaces", "gloo_interface_names", "tp_interface_name", "propose_ifname",
    "parse_version", "socket_family", "ifname_setting", "interface_for_address", "find",
    "getaddrinfo_first", "fastest_ib_rate", "socket_link_speed", "INET", "INET6", "MAX_IFS",
    "LATEST_RULES", "SYS_CLASS_INFINIBAND", "VIRTUAL_BRIDGE_PREFIXES",
]
