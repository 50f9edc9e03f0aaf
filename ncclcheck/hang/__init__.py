"""`ncclcheck hang`: during a live hang, on a node, where every rank of the job is and which
rank(s) hold the others up.

snapshot.py takes a node's snapshot (discover.py finds the processes; sources.py reads their
stacks with py-spy, torch's debug server or the armed hook; procstate.py reads /proc; ras.py
asks NCCL's RAS); verdict.py groups the ranks and names the culprits; files.py writes and reads
the snapshot files that ``ncclcheck explain`` joins across nodes; armed.py is the one-line hook
a training script may call (``from ncclcheck.hang import arm; arm()``).
"""

from ncclcheck.hang.armed import arm, disarm

__all__ = ["arm", "disarm"]
