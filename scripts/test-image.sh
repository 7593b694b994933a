#!/usr/bin/env bash
# Builds the local image the container tests run: nothing but a static
# busybox, so that a test proves the agent needs no more than sh.
#
#   /bin/busybox          static (Debian's busybox-static package)
#   /bin/sh, /bin/ls, …   symlinks to it, one per applet (busybox --install -s)
#   /etc/passwd, group    root (0) and an unprivileged app (1000)
#   /root, /home/app      their homes; /tmp 1777
#
# No registry is involved: the rootfs is tarred into `docker import` (or
# `podman import`). Idempotent and quick when the image exists with the
# current recipe (the spindle.recipe label); safe to run concurrently
# (flock). With ROOTFS=DIR it writes the same rootfs into DIR (a new or
# empty directory) and imports nothing: an LXC container's root.
#
#   scripts/test-image.sh            # builds spindle-test/busybox:latest
#   IMAGE=x/y:z scripts/test-image.sh
#   DOCKER=podman scripts/test-image.sh
#   ROOTFS=/var/lib/lxc/c1/rootfs scripts/test-image.sh
set -euo pipefail

image=${IMAGE:-spindle-test/busybox:latest}
docker=${DOCKER:-docker}
# Bump when the rootfs below changes: an image with another recipe is rebuilt.
recipe=2

have_image() {
	[ "$("$docker" image inspect -f '{{index .Config.Labels "spindle.recipe"}}' "$image" 2>/dev/null)" = "$recipe" ]
}

if [ -z "${ROOTFS:-}" ]; then
	if ! command -v "$docker" >/dev/null; then
		echo "test-image: $docker is not installed" >&2
		exit 1
	fi
	have_image && exit 0

	# One builder at a time (go test runs packages in parallel); the
	# others find the image when they get the lock.
	if command -v flock >/dev/null; then
		exec 9>"${TMPDIR:-/tmp}/spindle-test-image.lock"
		flock 9
		have_image && exit 0
	fi
fi

is_static() {
	# ldd (libc-bin) says so for a static executable; a dynamic busybox
	# would not run in an image without a libc.
	# (ldd exits 1 for one: its status is not the answer.)
	[ -x "$1" ] || return 1
	case $(LC_ALL=C ldd "$1" 2>&1) in
	*"not a dynamic executable"* | *"statically linked"*) return 0 ;;
	esac
	return 1
}

find_busybox() {
	for c in "${BUSYBOX:-}" /bin/busybox /usr/bin/busybox "$(command -v busybox || true)"; do
		if [ -n "$c" ] && is_static "$c"; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

if ! bb=$(find_busybox); then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		# busybox-static replaces (and conflicts with) the dynamic busybox
		# package; it provides /bin/busybox with the same applets.
		echo "test-image: installing busybox-static" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq --no-install-recommends busybox-static >/dev/null ||
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends busybox-static >/dev/null; }
	fi
	bb=$(find_busybox) || {
		echo "test-image: no static busybox found: install Debian's busybox-static (scripts/test-deps.sh), or set BUSYBOX=/path/to/static/busybox" >&2
		exit 1
	}
fi

if [ -n "${ROOTFS:-}" ]; then
	mkdir -p "$ROOTFS"
	if [ -n "$(ls -A "$ROOTFS")" ]; then
		echo "test-image: ROOTFS=$ROOTFS is not empty" >&2
		exit 1
	fi
	root=$ROOTFS
else
	root=$(mktemp -d "${TMPDIR:-/tmp}/spindle-rootfs-XXXXXX")
	trap 'rm -rf "$root"' EXIT
fi
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home/app,tmp,dev,proc,sys,run}
cp "$bb" "$root/bin/busybox"
chmod 755 "$root/bin/busybox"
# One symlink per applet, all in /bin (on the image's PATH). busybox
# --install makes them in one process; they point at the path the kernel
# reports for the busybox that ran (/proc/self/exe: /usr/bin/busybox on a
# merged-/usr host), so that path must lead to /bin/busybox in the image.
if "$bb" --install -s "$root/bin" 2>/dev/null && [ -L "$root/bin/sh" ]; then
	target=$(readlink "$root/bin/sh")
	if [ "$target" != /bin/busybox ]; then
		mkdir -p "$root$(dirname "$target")"
		ln -sf /bin/busybox "$root$target"
	fi
else
	# A busybox built without --install: the slow way, one ln per applet.
	"$bb" --list-full | while read -r applet; do
		case $applet in
		bin/busybox | "") continue ;;
		esac
		mkdir -p "$root/$(dirname "$applet")"
		ln -sf /bin/busybox "$root/$applet"
	done
fi
test -L "$root/bin/sh" || ln -sf /bin/busybox "$root/bin/sh"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
app:x:1000:1000:app:/home/app:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
app:x:1000:
nogroup:x:65534:
EOF
chmod 700 "$root/root"
chmod 755 "$root/home/app"
chown 1000:1000 "$root/home/app"
chmod 1777 "$root/tmp"
if [ -n "${ROOTFS:-}" ]; then
	exit 0
fi

tar -C "$root" --numeric-owner -c . |
	"$docker" import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["/bin/sh"]' \
		--change "LABEL spindle.recipe=$recipe" \
		- "$image" >/dev/null
have_image || {
	echo "test-image: $docker import did not produce $image" >&2
	exit 1
}
echo "test-image: built $image from $bb" >&2
