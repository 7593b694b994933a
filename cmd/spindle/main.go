// Command spindle is Spindle's command-line interface (package
// internal/cli): run commands, open shells, copy files, forward ports,
// ping and inspect agents.
//
//	spindle run local -- uname -a
//	spindle shell local
//	spindle ping -c 10 local
//	spindle info --json local
package main

import (
	"os"

	"github.com/spindle-rpc/spindle/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
