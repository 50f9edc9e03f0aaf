#!/usr/bin/env bash
# Installs everything the test suite needs into .venv, then runs it (with no arguments, after
# the light install's tests in .venv-light: see below).
# As root on Debian/Ubuntu it first apt-installs what the real-system tests use: iproute2 and
# iptables (network namespaces), gcc, openmpi-bin (mpirun), libcap2-bin (capsh) and munge +
# slurmctld + slurmd + slurm-client (a single-host Slurm that only the tests start).
# torch==2.13.0 is installed first. It is the CPU build only where a local wheel store or mirror
# provides it; elsewhere set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu, or pip
# resolves the CUDA build and its nvidia-* wheels (several GB).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
  command -v iptables >/dev/null 2>&1 || missing="$missing iptables"
  command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
  command -v mpirun >/dev/null 2>&1 || missing="$missing openmpi-bin"
  # capsh: `ncclcheck hang` without CAP_SYS_PTRACE (tests/test_hang_armed.py)
  command -v capsh >/dev/null 2>&1 || missing="$missing libcap2-bin"
  # A real single-host Slurm for tests/slurm.py (the daemons are started by the tests only).
  command -v munged >/dev/null 2>&1 || missing="$missing munge"
  command -v slurmctld >/dev/null 2>&1 || missing="$missing slurmctld"
  command -v slurmd >/dev/null 2>&1 || missing="$missing slurmd"
  command -v srun >/dev/null 2>&1 || missing="$missing slurm-client"
  if [ -n "$missing" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
fi

# With no arguments (CI, the full suite), first the light install: a plain `pip install .` into
# .venv-light, as on-call engineers get it; torch must not come with it, and explain, hang,
# checks and the probes that need no torch must work there (tests/test_light_install.py).
# The quick loop (any arguments) leaves it out.
if [ "$#" = 0 ]; then
  [ -x .venv-light/bin/python ] || python3 -m venv .venv-light
  .venv-light/bin/pip install -q --disable-pip-version-check . pytest
  if .venv-light/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)'; then
    echo "scripts/test.sh: torch came with a plain 'pip install .' (.venv-light); it must not" >&2
    exit 1
  fi
  NCCLCHECK_LIGHT_INSTALL=1 .venv-light/bin/pytest -q -p no:cacheprovider \
    tests/test_light_install.py tests/test_explain_cli.py tests/test_hang_cli.py
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 \
  ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
.venv/bin/pip install -q --disable-pip-version-check -e '.[test,lightning]' nvidia-nccl-cu12
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
