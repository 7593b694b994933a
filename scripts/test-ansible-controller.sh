#!/usr/bin/env bash
# Builds the Docker image of an Ansible controller for the Ansible
# integration tests (integration/ansible): a Debian SUITE minbase
# (debootstrap) with ansible-core and openssh-client from apt, so the
# tests run the ansible-core that Debian SUITE ships (trixie: 2.19; sid:
# the newest) beside the host's own; and Debian's ansible (the community
# collections), whose community.general brings the doas become plugin. No registry: the root file system is
# tarred into `docker import`; the packages come from the machine's own
# apt mirror (scripts/apt-mirror.sh).
#
#   scripts/test-ansible-controller.sh SUITE     # prints the image's name
#   PRINT_IMAGE=1 scripts/test-ansible-controller.sh SUITE  # name, no build
#
# The image is tagged by a hash of this script and SUITE, so a second run
# with the same recipe finds it and does nothing; a changed recipe builds
# a new tag. One builder per suite at a time (flock).
set -euo pipefail

suite=${1:?usage: test-ansible-controller.sh SUITE (trixie, sid)}
docker=${DOCKER:-docker}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

recipe=$( { cat "${BASH_SOURCE[0]}"; echo "suite=$suite"; } | sha256sum | cut -c1-12)
image=spindle-test/ansible-controller:$suite-$recipe

if [ -n "${PRINT_IMAGE:-}" ]; then
	echo "$image"
	exit
fi

have_image() { "$docker" image inspect "$image" >/dev/null 2>&1; }

command -v "$docker" >/dev/null || { echo "test-ansible-controller: $docker is not installed" >&2; exit 1; }
if have_image; then echo "$image"; exit 0; fi
exec 9>"${TMPDIR:-/tmp}/spindle-test-ansible-controller-$suite.lock"
flock 9
if have_image; then echo "$image"; exit 0; fi

[ "$(id -u)" -eq 0 ] || { echo "test-ansible-controller: debootstrap and chroot need root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "test-ansible-controller: needs debootstrap (scripts/test-deps.sh)" >&2; exit 1; }

mirror=$("$here/apt-mirror.sh" "$suite")

# An unstable suite's Release file may be past its Valid-Until on a
# mirror that is a dated snapshot; apt must still take it.
apt_opts=()
[ "$suite" = sid ] && apt_opts=(-o Acquire::Check-Valid-Until=false)

root=$(mktemp -d "${TMPDIR:-/tmp}/spindle-ansible-$suite-XXXXXX")
log=$root.log
mounted=()
cleanup() {
	local m
	for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	# Never remove a tree that still has something mounted inside: with
	# /dev bound there, rm -rf would reach the host's devices.
	if findmnt -rn -o TARGET | grep -q "^$root/"; then
		echo "test-ansible-controller: $root still has mounts; left in place" >&2
	else
		rm -rf "$root"
	fi
	rm -f "$log"
}
trap cleanup EXIT

echo "test-ansible-controller: debootstrap $suite from $mirror, then ansible-core (about 5 minutes)" >&2
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$log" 2>&1 ||
	{ tail -20 "$log" >&2; exit 1; }

mount -t proc proc "$root/proc" && mounted=("$root/proc" "${mounted[@]}")
if [ ! -c "$root/dev/null" ]; then
	mount --bind /dev "$root/dev" && mounted=("$root/dev" "${mounted[@]}")
fi
# Nothing installed here may start a service.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
chroot "$root" env DEBIAN_FRONTEND=noninteractive sh -c \
	'apt-get "$@" update && apt-get "$@" install -y --no-install-recommends ansible-core ansible openssh-client' \
	sh "${apt_opts[@]}" >"$log" 2>&1 ||
	{ tail -20 "$log" >&2; exit 1; }
chroot "$root" ansible-playbook --version >"$log" 2>&1 ||
	{ tail -20 "$log" >&2; echo "test-ansible-controller: ansible-playbook does not run in the $suite tree" >&2; exit 1; }
version=$(head -n 1 "$log")
for m in "${mounted[@]}"; do umount "$m"; done
mounted=()
rm -f "$root/usr/sbin/policy-rc.d"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

tar -C "$root" --numeric-owner -c . |
	"$docker" import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' \
		--change 'CMD ["/bin/sh"]' \
		--change "LABEL spindle.recipe=$recipe spindle.suite=$suite" \
		- "$image" >/dev/null
have_image || { echo "test-ansible-controller: $docker import did not produce $image" >&2; exit 1; }
# Images of this suite from older recipes are half a gigabyte each.
"$docker" image ls --format '{{.Repository}}:{{.Tag}}' "${image%%:*}" |
	grep -E "^${image%%:*}:$suite-[0-9a-f]+\$" | grep -vxF "$image" |
	xargs -r "$docker" rmi >/dev/null 2>&1 || true
echo "test-ansible-controller: built $image ($version)" >&2
echo "$image"
