#!/usr/bin/env bash
# Install the system tools gpufabric drives (Debian/Ubuntu). Idempotent: does nothing
# when everything is present. Without root it only reports what is missing; tests that
# need a missing tool skip with the reason.
set -euo pipefail

packages=(
  python3-venv fio iperf3 sockperf perftest rdma-core ibverbs-utils nvme-cli nftables
  iproute2 ethtool pciutils openmpi-bin slurm-wlm chromium chromium-driver munge util-linux
  shellcheck opensm ibsim-utils infiniband-diags tuned postgresql
)
# command that proves each package is installed (same order as above)
probes=(
  "python3 -c 'import ensurepip, venv'" "fio --version" "iperf3 --version" "sockperf --version"
  "command -v ib_write_lat" "command -v rdma" "command -v ibv_devinfo" "nvme version"
  "nft --version" "ip -V" "ethtool --version" "command -v lspci" "command -v mpirun"
  "command -v slurmctld" "command -v chromium" "command -v chromedriver"
  "command -v munged && command -v mungekey" "command -v nsenter && command -v unshare"
  "shellcheck --version" "command -v opensm" "command -v ibsim" "command -v smpquery" "command -v tuned-adm"
  "ls /usr/lib/postgresql/*/bin/initdb"
)

missing=()
for i in "${!packages[@]}"; do
  if ! eval "${probes[$i]}" >/dev/null 2>&1; then missing+=("${packages[$i]}"); fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all system tools present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: not root; missing (tests using them will skip): ${missing[*]}" >&2
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
