"""Cluster mode: under a launcher every rank runs the checks and rank 0 reports for the job.

``session`` is the store connection probe families use (``ctx.cluster``); ``job`` runs a
command across ranks and returns what this rank found (``state.Findings``), which
``ncclcheck.runner`` turns into the report; ``membership`` holds what only the gather can see
(judged by the ``cluster.*`` checks of ``ncclcheck.probes.cluster``);
``aggregate`` folds many ranks' results into one row per check. The transport is torch's
TCPStore, never NCCL.
"""
