"""cluster.store: did the ranks meet at rank 0's report store?

Declared here, with the job's other checks; reported by the gather itself (``ncclcheck.cluster``):
passing in rank 0's job report, warning or failing in the report of a process that could not
join.
"""

from __future__ import annotations

from ncclcheck.model import Category
from ncclcheck.probes.spec import CheckSpec


STORE = CheckSpec(
    "cluster.store", "the ranks met at rank 0's report store",
    (Category.CONFIGURATION, Category.NAME_RESOLUTION, Category.PORT_IN_USE,
     Category.CONNECTION),
    fails_when="MASTER_ADDR does not resolve (name_resolution), rank 0 cannot "
               "open the store because its port is taken (port_in_use) or "
               "MASTER_ADDR is not its host, or a rank cannot reach the store "
               "(connection)",
    warns_when="MASTER_ADDR / MASTER_PORT are missing, so each process reports on "
               "itself only",
    doc="A process that cannot join the job prints its own report with this row "
        "in it; rank 0's job report carries it as a passing row with the store's "
        "address.",
    order=80)
