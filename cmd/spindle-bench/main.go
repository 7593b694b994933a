// Command spindle-bench is Spindle's benchmark harness (package
// internal/bench): `make bench` builds and runs it. Each line of output
// is one JSON object comparing an operation through Spindle with a
// baseline measured in the same run.
//
//	spindle-bench core
//	spindle-bench --rounds 3 ssh files
package main

import (
	"os"

	"github.com/spindle-rpc/spindle/internal/bench"
)

func main() {
	os.Exit(bench.Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
