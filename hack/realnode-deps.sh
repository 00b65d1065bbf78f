#!/usr/bin/env bash
# Installs the Debian packages the real node needs (runc, the CNI plugins, iptables,
# iproute2, nftables; containerd itself is built by make realnode-tools, since
# Debian's is too old to report pinned images), and only those missing: `make test` runs this every time, so a
# machine that already has them must not touch apt at all. A machine where apt cannot
# run is not an error: the real-node tests skip there and say what is missing.
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_cmd runc || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
have_cmd iptables || need+=(iptables)
have_cmd ip || need+=(iproute2)
# Removes the empty tables the kubelet's chains leave in the nf_tables backend.
have_cmd nft || need+=(nftables)

if [ ${#need[@]} -eq 0 ]; then
	echo "realnode-deps: runc, CNI plugins, iptables, ip and nft are installed"
	exit 0
fi
if ! have_cmd apt-get; then
	echo "realnode-deps: apt-get not available; missing ${need[*]}: the real-node tests will skip"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "realnode-deps: not root; missing ${need[*]}: the real-node tests will skip"
	exit 0
fi

echo "realnode-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be absent (a fresh image) or stale: refresh them once if the
# install fails, and give up quietly if there is no mirror to reach.
if ! apt-get install -y --no-install-recommends "${need[@]}"; then
	if ! apt-get update || ! apt-get install -y --no-install-recommends "${need[@]}"; then
		echo "realnode-deps: could not install ${need[*]}: the real-node tests will skip"
		exit 0
	fi
fi
# Debian's containerd package, installed here before containerd was built instead,
# enables and starts a containerd service where an init system runs. Ours runs its
# own with private paths; a system one on the default socket would only compete for
# the same host (and confuse a check for a running containerd).
if have_cmd systemctl && [ -d /run/systemd/system ]; then
	systemctl disable --now containerd >/dev/null 2>&1 || true
fi
echo "realnode-deps: done"
