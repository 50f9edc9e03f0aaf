"""Post-mortem: read failed runs' logs, find the root cause and say how to fix it.

The catalogue (``signatures/*.toml``) is the single source of failure texts; probes use
``signature(id).render(facts)`` so a failure reads the same before and after a run.
"""

from ncclcheck.explain.catalogue import Signature, UnknownSignature, all_signatures, signature

__all__ = ["Signature", "UnknownSignature", "all_signatures", "signature"]
