#!/usr/bin/env bash
# Prints the Debian mirror that this machine's apt already uses, for the
# test scripts that debootstrap a root file system (test-image-debian.sh,
# test-ansible-controller.sh). No archive host is written anywhere in the
# repository: the URL comes from apt's configuration, or from MIRROR.
#
#   scripts/apt-mirror.sh SUITE
#
# The mirror is the first enabled `deb` source whose suite is exactly SUITE
# (not SUITE-security or SUITE-updates), read from the one-line
# (sources.list, sources.list.d/*.list) and deb822 (sources.list.d/*.sources)
# files. A suite apt does not list here (trixie or sid on a bookworm
# machine) comes from the same archive as the machine's own release
# (VERSION_CODENAME in os-release), so that entry is used instead.
#
# MIRROR=URL overrides it; APT_ETC replaces /etc/apt and OS_RELEASE
# replaces /etc/os-release (for the scripts' tests).
set -euo pipefail

suite=${1:?usage: apt-mirror.sh SUITE}
apt_etc=${APT_ETC:-/etc/apt}
os_release=${OS_RELEASE:-/etc/os-release}

sources_for() {
	local want=$1 f
	for f in "$apt_etc/sources.list" "$apt_etc"/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		# deb [OPTIONS] URI SUITE COMPONENT…; the options may hold spaces.
		awk -v suite="$want" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) print $i
			}' "$f"
	done
	for f in "$apt_etc"/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		# Stanzas apart by blank lines; Field: value, continued on lines
		# that start with a space; field names in any case.
		awk -v suite="$want" '
			BEGIN { RS = ""; FS = "\n" }
			{
				delete v; key = ""
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^#/) continue
					if (line ~ /^[ \t]/ && key != "") { v[key] = v[key] " " line; continue }
					if (match(line, /^[A-Za-z0-9-]+:/)) {
						key = tolower(substr(line, 1, RLENGTH - 1))
						v[key] = substr(line, RLENGTH + 1)
					}
				}
				if (tolower(v["enabled"]) ~ /no/) next
				if ((" " v["types"] " ") !~ /[ \t]deb[ \t]/) next
				if ((" " v["suites"] " ") !~ ("[ \t]" suite "[ \t]")) next
				n = split(v["uris"], uris, /[ \t]+/)
				for (j = 1; j <= n; j++) if (uris[j] != "") print uris[j]
			}' "$f"
	done
}

first_mirror() {
	local m
	m=$(sources_for "$1" | grep -E '^(https?|file):' | head -n 1 || true)
	echo "${m%/}"
}

m=${MIRROR:-}
[ -z "$m" ] && m=$(first_mirror "$suite")
own=
if [ -z "$m" ] && [ -r "$os_release" ]; then
	own=$(. "$os_release" && echo "${VERSION_CODENAME:-}")
	[ -n "$own" ] && [ "$own" != "$suite" ] && m=$(first_mirror "$own")
fi
if [ -z "$m" ]; then
	also=
	[ -n "$own" ] && [ "$own" != "$suite" ] && also=" nor for this machine's own $own"
	echo "apt-mirror: apt has no enabled deb source for $suite$also here ($apt_etc/sources.list, $apt_etc/sources.list.d/*.list, *.sources): add one, or set MIRROR to the URL of a Debian mirror" >&2
	exit 1
fi
echo "$m"
