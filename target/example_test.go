package target_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/target"
)

// Parse a chain string and turn it into connectors: web1 over SSH (from
// ~/.ssh/config or the given file, like `ssh web1`), then root on it
// through sudo, started by web1's agent. Nothing is dialled yet.
func Example() {
	t, err := target.Parse("web1,sudo")
	if err != nil {
		log.Fatal(err)
	}
	steps, err := t.Steps(target.Options{
		SSH: ssh.Options{ConfigFile: "/etc/spindle/ssh_config", ConnectTimeout: 10 * time.Second},
		BecomePassword: func(kind, user string) (string, error) {
			return "", nil // none: sudo -n, which fails at once if web1 wants one
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range steps {
		fmt.Printf("%-8s %T %s\n", s.Hop, s.Connector, s.Connector.Name())
	}
	// Output:
	// ssh:web1 ssh.Options ssh:web1
	// sudo     sudo.Options sudo:root
}

// Open a chain from its string and run a command at its end. It is
// compiled but not run by `go test` (it has no Output): it needs a host
// web1 that ssh reaches with a key, and sudo rights there. Example_local
// runs the same code on a chain that works anywhere.
func Example_open() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	t, err := target.Parse("web1,sudo")
	if err != nil {
		log.Fatal(err) // a *target.ParseError
	}
	steps, err := t.Steps(target.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cx, err := target.Open(ctx, ctl, steps)
	if err != nil {
		log.Fatal(err) // its message names the chain: ssh:web1 → sudo:root
	}
	res, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{"id", "-un"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Stdout) // root
}

// Open a two-hop chain on this machine: the second agent is started by
// the first, as a host behind a bastion would be.
func Example_local() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	t, err := target.Parse("local,local")
	if err != nil {
		log.Fatal(err)
	}
	steps, err := t.Steps(target.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cx, err := target.Open(ctx, ctl, steps)
	if err != nil {
		log.Fatal(err)
	}
	res, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{"echo", "hello from", cx.Name()}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Stdout)
	// Output:
	// hello from local → local
}

// A refused chain string says which hop is wrong and why.
func ExampleParse_error() {
	_, err := target.Parse("web1,sudo:root,dokcer:app1")
	var pe *target.ParseError
	if errors.As(err, &pe) {
		fmt.Println("hop", pe.Hop, errors.Is(err, target.ErrUnknownKind))
	}
	// Output:
	// hop 3 true
}
