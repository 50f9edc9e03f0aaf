"""Declarations of the net and nccl checks, kept here until those families' own modules export
``CHECKS``; then this module and its line in ``ncclcheck.registry.DECLARING_MODULES`` go (the
registry's duplicate-id check fails while both exist)."""

from __future__ import annotations

from ncclcheck.model import Category
from ncclcheck.ncclib.plugins import KINDS
from ncclcheck.registry import CheckSpec

IFACE = Category.INTERFACE

NET_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("net.interfaces", "the interface inventory",
              doc="Never fails: every interface with its state, IPv4/IPv6 addresses, MTU, speed "
                  "and kind, for the other checks and for the reader."),
    CheckSpec("net.infiniband", "InfiniBand / RoCE ports are active", (Category.INFINIBAND,),
              warns_when="an InfiniBand / RoCE port (/sys/class/infiniband) is not ACTIVE",
              doc="Skipped on a host without RDMA devices."),
    CheckSpec("net.nccl_interface", "the interface NCCL will use for sockets", (IFACE,),
              fails_when="no interface qualifies (NCCL would stop with `Bootstrap : no socket "
                         "interface found`): the summary says why each matching name is "
                         "unusable, the fix lists the real interfaces and proposes a "
                         "NCCL_SOCKET_IFNAME value",
              warns_when="a multi-node job would use loopback, a docker / virtual bridge or a "
                         "link-local address, or NCCL_SOCKET_IFNAME has entries that can never "
                         "match (spaces, `^` / `=` after the start, wrong case)",
              doc="details.nccl_interfaces lists the interfaces NCCL would use, in NCCL's "
                  "order; details.gloo_interface the one Gloo would bind."),
    CheckSpec("net.gloo_interface", "the interface Gloo will bind", (IFACE,),
              fails_when="GLOO_SOCKET_IFNAME names an interface without an address (torch "
                         "raises `Unable to find address for`)",
              warns_when="a multi-node job's Gloo would bind loopback (a host name mapped to "
                         "127.0.1.1) or a bridge"),
    CheckSpec("net.tp_interface", "the interface TensorPipe (torch RPC) will bind", (IFACE,),
              fails_when="TP_SOCKET_IFNAME names no interface with an address",
              doc="Only when TP_SOCKET_IFNAME is set."),
    CheckSpec("net.master_addr", "MASTER_ADDR resolves and leads to rank 0",
              (Category.NAME_RESOLUTION, Category.CONNECTION, IFACE),
              fails_when="MASTER_ADDR does not resolve, the node that must host the store "
                         "(rank 0's) is not MASTER_ADDR, a multi-node job's MASTER_ADDR is "
                         "loopback (name_resolution), or no route leads there (connection)",
              warns_when="the store is reached through another interface than the one NCCL "
                         "will use"),
    CheckSpec("net.master_port", "MASTER_PORT is free on the master and reachable from the others",
              (Category.PORT_IN_USE, Category.CONNECTION),
              fails_when="on the master node another process holds the port (named); on the "
                         "other nodes the connection is refused, times out (dropped) or has no "
                         "route (connection)",
              warns_when="the port lies in the ephemeral range, or is refused before the job "
                         "has started"),
    CheckSpec("net.mesh", "every node reaches every other node's NCCL address",
              (Category.CONNECTION, Category.TIMEOUT),
              fails_when="a node cannot connect to another node's NCCL address; each failing "
                         "pair is named with direction and kind (refused / timeout / "
                         "unreachable / handshake)",
              warns_when="a node leader never published its address (timeout)",
              doc="Cluster mode only; errors (connection) when the mesh itself could not run."),
    CheckSpec("net.consistency", "the nodes agree on NCCL's interface and its MTU", (IFACE,),
              warns_when="nodes disagree on NCCL's interface name or its MTU",
              doc="Cluster mode only, reported once by the first node leader."),
)

NCCL_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("nccl.library", "the libnccl the job loads",
              (Category.VERSION_MISMATCH, Category.CONFIGURATION),
              fails_when="torch is a CUDA build but no libnccl.so.2 can be found, or --nccl-lib "
                         "is not a regular file (configuration)",
              warns_when="torch's own copy and a system copy have different versions",
              doc="The winner is computed with ld.so's order for torch's libtorch_cuda.so; "
                  "each copy's version is read from its banner without loading it."),
    CheckSpec("nccl.load", "the library loads and answers in a child process",
              (Category.VERSION_MISMATCH,),
              fails_when="errors when the library crashes the child (signal named), hangs "
                         "until the deadline, or is not a loadable object"),
    CheckSpec("nccl.version", "ncclGetVersion", (Category.VERSION_MISMATCH,),
              fails_when="errors when ncclGetVersion returns no version"),
    CheckSpec("nccl.bootstrap_interface", "the interface libnccl bootstraps on", (IFACE,),
              fails_when="libnccl finds no socket interface (`Bootstrap : no socket interface "
                         "found`); errors when ncclGetUniqueId fails without naming one",
              warns_when="the network probe's prediction names a different interface"),
    CheckSpec("nccl.torch_version", "torch.cuda.nccl.version() agrees with the library",
              (Category.VERSION_MISMATCH,),
              warns_when="torch reports another NCCL version than the library found",
              doc="Skipped on a CPU-only build of torch."),
    *(CheckSpec(f"nccl.plugin.{kind.name}", f"the NCCL {kind.name} plugin ({kind.variable})",
                (Category.NET_PLUGIN,),
                fails_when=f"{kind.variable} names a plugin that is not found; the plugin "
                           "exports no versioned symbol, or only versions the loaded NCCL does "
                           "not support; a library it needs (DT_NEEDED) cannot be found",
                warns_when="only part of the plugin (e.g. its CollNet version) is unsupported")
      for kind in KINDS),
    CheckSpec("nccl.net", "NCCL_NET names an available network", (Category.NET_PLUGIN,),
              fails_when="NCCL_NET=IB on a host without RDMA devices, or NCCL_NET=<name> with no "
                         "external net plugin present (built-ins are IB and Socket)"),
    CheckSpec("nccl.config_files", "NCCL's config files", (Category.CONFIGURATION,),
              warns_when="a config file cannot be read, NCCL_CONF_FILE names no file, or lines "
                         "are not NAME=value"),
    CheckSpec("nccl.setting.*", "one NCCL_* / TORCH_NCCL_* / GLOO_* setting",
              (Category.CONFIGURATION, IFACE, Category.INFINIBAND, Category.P2P,
               Category.SHARED_MEMORY),
              fails_when="a value NCCL cannot use (not a number, out of range, an unknown "
                         "token), or NCCL_SOCKET_IFNAME matches no interface here (interface)",
              warns_when="an unknown or deprecated name, a costly setting (NCCL_P2P_DISABLE, "
                         "NCCL_SHM_DISABLE, NCCL_IB_DISABLE with RDMA devices, NCCL_DEBUG=TRACE), "
                         "an unwritable NCCL_DEBUG_FILE, NCCL_VERSION differing from the loaded "
                         "library, or too many sockets (nccl.setting.socket_count)",
              doc="One row per linted variable that is set, in the environment or NCCL's "
                  "config files; details.source says where it came from."),
    CheckSpec("nccl.cuda_visible_devices", "CUDA_VISIBLE_DEVICES is well formed",
              (Category.DUPLICATE_GPU,),
              fails_when="CUDA_VISIBLE_DEVICES has an empty or invalid entry (CUDA stops there) "
                         "or repeats a device"),
    CheckSpec("nccl.cuda_driver", "the driver supports torch's CUDA", (Category.CUDA,),
              fails_when="the driver's CUDA version is older than torch's CUDA build, or torch "
                         "is a CPU-only build on a host with an NVIDIA driver"),
    CheckSpec("nccl.gpu_visible", "LOCAL_RANK has a visible GPU", (Category.RANK_MISMATCH,),
              fails_when="LOCAL_RANK >= the visible GPU count"),
    CheckSpec("nccl.gpu_arch", "torch has code for this GPU", (Category.CUDA,),
              fails_when="the GPU's compute capability has no code in "
                         "torch.cuda.get_arch_list()"),
    CheckSpec("nccl.gpu_bf16", "the GPU computes bfloat16 natively", (Category.CUDA,),
              warns_when="the compute capability is below 8.0 (bf16 mixed precision is not "
                         "native)"),
    CheckSpec("nccl.gpu_compute_mode", "GPUs accept several processes", (Category.CUDA,),
              fails_when="a GPU is in Exclusive_Process or Prohibited mode (nvidia-smi)"),
)

CHECKS: tuple[CheckSpec, ...] = NET_CHECKS + NCCL_CHECKS
