#!/bin/sh
# Run by the script module: its arguments and its user back on stdout.
echo "script args: $*"
id -un
