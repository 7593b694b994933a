#!/bin/sh
# fuzz-one.sh PACKAGE TARGET FUZZTIME [FLAG...]: fuzz one target, as `make
# fuzz` does, passing any FLAGs on to `go test`.
#
# Go before 1.27 may fail a duration-bound fuzz run at its very end with a
# bare "context deadline exceeded" and no failing input
# (https://go.dev/issue/75804: the coordinator's deadline races a busy
# worker). Such a run is retried once; a run that wrote a failing input,
# or failed in any other way, fails at once.
set -u
pkg=$1 target=$2 fuzztime=$3
shift 3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for attempt in 1 2; do
	if ${GO:-go} test "$pkg" -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "$@" >"$log" 2>&1; then
		cat "$log"
		exit 0
	fi
	cat "$log"
	if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written to' "$log"; then
		echo "fuzz-one.sh: $target: the Go fuzzer's end-of-run deadline race (go.dev/issue/75804), no failing input; once more" >&2
		continue
	fi
	exit 1
done
exit 1
