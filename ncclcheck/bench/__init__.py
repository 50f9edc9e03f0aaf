"""The all-reduce benchmark: an nccl-tests style sweep over NCCL (Gloo on CPU).

- ``sizes``: K/M/G sizes and the geometric sweep;
- ``metrics``: algbw/busbw as nccl-tests computes them, job rows, stragglers;
- ``worker``: one rank's timed and checked sweep (torch imported there only);
- ``launcher``: standalone processes under a deadline; ``sweep``: standalone or cluster mode;
- ``analysis``: outcomes -> job rows and the report's ``bench`` section (the ``bench.*`` checks
  are ``ncclcheck.probes.bench``'s); ``isolate``, ``pairs``: the pair tests of --isolate;
- ``reference``: built-in busbw references per hardware; ``faults``: test-only fault injection.
"""

from .metrics import bandwidths, busbw_factor
from .options import BenchOptions
from .sizes import format_size, parse_size, sweep_sizes

__all__ = ["BenchOptions", "bandwidths", "busbw_factor", "format_size", "parse_size",
           "sweep_sizes"]
