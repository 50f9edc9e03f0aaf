"""Post-mortem: read failed runs' logs, find the root cause and say how to fix it.

The failure texts are the catalogue's (ncclcheck.catalogue), the single source that probes
read too, so a failure reads the same before and after a run. What explain builds from the
catalogue to read logs quickly (prefilter literals, indexes, caches on disk) is its own
(prepared.py). This file imports nothing, so that importing one module of explain loads only
what that module needs.
"""
