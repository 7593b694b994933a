#!/usr/bin/env bash
# Installs what the test suites need on a fresh Debian machine. Run as root
# it installs through apt; otherwise it says loudly what is missing, and
# the suites that need it skip with a message naming this script.
#
# The SSH integration tests (integration/) need openssh-server for its
# sshd binary only: they start their own throwaway sshd on 127.0.0.1 and
# never start or enable the system service.
set -euo pipefail

# zstd: `make build` embeds a zstd form of each agent beside the gzip one,
# and the bootstrap tests unpack it as a target with zstd does.
# busybox-static, not busybox: the container tests' image (scripts/
# test-image.sh) is a static busybox and nothing else. It provides the same
# /bin/busybox as the busybox package, which it replaces (they conflict).
# podman and lxc: the podman and lxc connectors are tested live (rootful,
# containers of the same busybox rootfs; see internal/testkit/containertest).
# Without recommends: no rootless helpers, templates or lxcfs, which the
# tests do not use; podman runs with runc or crun, whichever its depends
# bring.
# systemd: its systemd-run answers the machinectl connector's test for a
# machine that does not exist (the rest of that connector's start-up runs
# through a stand-in: there is no booted systemd-nspawn machine in CI).
# ansible-core: the Ansible connection plugin's unit tests (ansible/plugin)
# import it, with the system's /usr/bin/python3; and it is Debian 12's
# 2.14, the oldest controller the Ansible integration tests
# (integration/ansible) run. ansible: the collections, whose
# community.general has the doas become plugin; acl: its setfacl lets
# Ansible hand temporary files to an unprivileged become user.
packages=(ansible-core ansible acl git gzip zstd procps iproute2 debootstrap openssh-server openssh-client zsh fish tcsh dash busybox-static sudo opendoas util-linux passwd podman lxc systemd)

# The container tests (integration/containers_test.go, connectors/setns)
# also need a running Docker engine; it is not installed here.
if ! command -v docker >/dev/null || ! docker version >/dev/null 2>&1; then
	echo "!!! test-deps: no working docker: the container tests will be SKIPPED (and FAIL under CI=true)." >&2
fi

# The Ansible tests' newer controllers (ansible-core from Debian trixie
# and sid) are Docker images that scripts/test-ansible-controller.sh
# builds with debootstrap: about five minutes each the first time, then
# cached by recipe. Both start here in the background, so that they
# overlap the build and the other suites; the tests wait for them (the
# script's lock) when they get there. Their logs are in $TMPDIR.
start_controller_builds() {
	local suite here log
	here=$(dirname "${BASH_SOURCE[0]}")
	command -v docker >/dev/null && docker version >/dev/null 2>&1 || return 0
	[ "$(id -u)" -eq 0 ] && command -v debootstrap >/dev/null || return 0
	for suite in trixie sid; do
		log="${TMPDIR:-/tmp}/spindle-ansible-controller-$suite.log"
		nohup "$here/test-ansible-controller.sh" "$suite" >"$log" 2>&1 </dev/null &
		echo "test-deps: the ansible-core controller image for $suite builds in the background (or is cached): $log"
	done
}

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "test-deps: all present (${packages[*]})"
	start_controller_builds
	exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "test-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Installing openssh-server must not start a system sshd: the tests
	# run their own. policy-rc.d exit 101 tells invoke-rc.d not to start
	# services; remove it afterwards only if we created it.
	created_policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		created_policy=1
	fi
	trap 'if [ -n "$created_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi' EXIT
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	echo "test-deps: installed ${missing[*]}"
else
	echo "!!! test-deps: MISSING ${missing[*]} and cannot install them (not root on Debian)." >&2
	echo "!!! Tests that need them will be SKIPPED and say so." >&2
fi
start_controller_builds
