"""Support for the nccl probe family: find libnccl, ask it, judge its plugins and settings.

* ``discovery`` / ``search`` / ``elf``: every libnccl copy and which one ld.so loads;
* ``loader``: the library's own answers, from a child process under a deadline;
* ``plugins``: net / tuner / profiler / env plugins and their API versions;
* ``settings`` / ``known_names`` / ``config_files``: the settings linter;
* ``gpu``: GPU and CUDA readiness; ``version``: NCCL version codes and labels.

The package imports none of them: each caller imports the module it needs, so reading a
version code does not load the library search or the settings linter.
"""
