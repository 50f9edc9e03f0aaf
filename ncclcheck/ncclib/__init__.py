"""Support for the nccl probe family: find libnccl, ask it, read its plugins and settings
(the checks that judge them are ``ncclcheck.probes.nccl``'s).

* ``discovery`` / ``search`` / ``elf``: every libnccl copy and which one ld.so loads;
* ``loader``: the library's own answers, from a child process under a deadline;
* ``plugins``: net / tuner / profiler / env plugins and their API versions;
* ``known_names`` / ``library_names`` / ``config_files``: the names and settings the linter reads;
* ``gpu``: GPU and CUDA facts; ``version``: NCCL version codes and labels.

Import the module you need: this file imports none of them, so that reading a version
(``ncclcheck.cluster.identity``) does not load the linter and the ELF reader.
"""
