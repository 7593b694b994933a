#!/usr/bin/env bash
# Builds the local Docker image of the container-then-become tests: a
# Debian minbase (debootstrap) with sudo, and a user app (1000) allowed
# to sudo without a password. No registry: the rootfs is tarred into
# `docker import`; the packages come from the machine's own apt mirror.
#
# Idempotent and quick when the image exists with the current recipe
# (the spindle.recipe label); one builder at a time (flock).
#
#   scripts/test-image-debian.sh      # builds spindle-test/debian:bookworm
set -euo pipefail

image=${IMAGE:-spindle-test/debian:bookworm}
docker=${DOCKER:-docker}
suite=${SUITE:-bookworm}
recipe=1

# The mirror apt already uses here for $suite (scripts/apt-mirror.sh says
# how it is found); MIRROR=URL overrides it.
find_mirror() { "$(dirname "${BASH_SOURCE[0]}")/apt-mirror.sh" "$suite"; }

# PRINT_MIRROR=1: say which mirror a build would use, and stop.
if [ -n "${PRINT_MIRROR:-}" ]; then
	find_mirror
	exit
fi

have_image() {
	[ "$("$docker" image inspect -f '{{index .Config.Labels "spindle.recipe"}}' "$image" 2>/dev/null)" = "$recipe" ]
}

command -v "$docker" >/dev/null || { echo "test-image-debian: $docker is not installed" >&2; exit 1; }
have_image && exit 0
exec 9>"${TMPDIR:-/tmp}/spindle-test-image-debian.lock"
flock 9
have_image && exit 0

if ! command -v debootstrap >/dev/null; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "test-image-debian: installing debootstrap" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
	fi
	command -v debootstrap >/dev/null || { echo "test-image-debian: needs debootstrap (scripts/test-deps.sh)" >&2; exit 1; }
fi

mirror=$(find_mirror)

root=$(mktemp -d "${TMPDIR:-/tmp}/spindle-debian-XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "test-image-debian: debootstrap $suite from $mirror (about a minute)" >&2
debootstrap --variant=minbase --include=sudo "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
	{ tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
chroot "$root" useradd -m -u 1000 -s /bin/sh app
echo 'app ALL=(ALL:ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/app"
chmod 440 "$root/etc/sudoers.d/app"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

tar -C "$root" --numeric-owner -c . |
	"$docker" import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["/bin/sh"]' \
		--change "LABEL spindle.recipe=$recipe" \
		- "$image" >/dev/null
have_image || { echo "test-image-debian: $docker import did not produce $image" >&2; exit 1; }
echo "test-image-debian: built $image" >&2
