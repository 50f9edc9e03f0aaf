"""Support for the nccl probe family: find libnccl, ask it, judge its plugins and settings.

* ``discovery`` / ``search`` / ``elf``: every libnccl copy and which one ld.so loads;
* ``loader``: the library's own answers, from a child process under a deadline;
* ``plugins``: net / tuner / profiler / env plugins and their API versions;
* ``settings`` / ``known_names`` / ``config_files``: the settings linter;
* ``gpu``: GPU and CUDA readiness; ``version``: NCCL version codes and labels.
"""

from ncclcheck.ncclib.discovery import Discovery, LibraryCopy, discover
from ncclcheck.ncclib.loader import LibraryAnswer, ask_library
from ncclcheck.ncclib.plugins import KINDS, find_plugins, judge, supported_versions
from ncclcheck.ncclib.settings import LintFacts, Verdict, lint
from ncclcheck.ncclib.version import NcclVersion, decode, encode, parse_label

__all__ = ["Discovery", "LibraryCopy", "discover", "LibraryAnswer", "ask_library", "KINDS",
           "find_plugins", "judge", "supported_versions", "LintFacts", "Verdict", "lint",
           "NcclVersion", "decode", "encode", "parse_label"]
