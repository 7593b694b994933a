package spindle_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/local"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/fs"
)

// Connect to this machine through a local agent and run a command there.
// Over SSH it is the same with ssh.Options{Host: "web1"}: the host is
// resolved through ~/.ssh/config as ssh resolves it.
func Example() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := exec.Run(ctx, cx, exec.Cmd{Argv: []string{"echo", "hello from", "the agent"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s(exit %d)\n", res.Stdout, res.ExitCode)
	// Output:
	// hello from the agent
	// (exit 0)
}

// A container behind a host behind a bastion, as root: each hop after the
// first is started by the previous hop's agent, over the one SSH
// connection to the bastion. The SSH hop from the bastion signs with this
// machine's keys and checks this machine's known_hosts; no key is copied
// anywhere. It has no Output: `go test` compiles it but does not run it
// (it needs the hosts); package target's Example_local runs a chain
// opened from its string ("local,local") here.
func Example_chain() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	bastion, err := ctl.Connect(ctx, ssh.Options{Host: "bastion"})
	if err != nil {
		log.Fatal(err)
	}
	web, err := bastion.Connect(ctx, ssh.Options{Host: "web1"})
	if err != nil {
		log.Fatal(err)
	}
	app, err := web.Connect(ctx, docker.Options{Container: "app1"})
	if err != nil {
		log.Fatal(err)
	}
	root, err := app.Connect(ctx, sudo.Options{})
	if err != nil {
		log.Fatal(err) // its message names the chain: ssh:bastion → ssh:web1 → docker:app1 → sudo:root
	}
	res, err := exec.Run(ctx, root, exec.Cmd{Shell: "id -un; hostname"})
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.Write(res.Stdout)
}

// Stream a command's input and output while it runs (exec.Start); exec.Run
// would collect them in its reply.
func Example_stream() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		log.Fatal(err)
	}
	p, err := exec.Start(ctx, cx, exec.Cmd{Argv: []string{"tr", "a-z", "A-Z"}})
	if err != nil {
		log.Fatal(err)
	}
	out := p.Stdout() // asked for before the output flows
	go func() {
		io.WriteString(p.Stdin(), "streamed through the agent\n")
		p.Stdin().Close() // end of file for tr
	}()
	if _, err := io.Copy(os.Stdout, out); err != nil {
		log.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit", res.ExitCode)
	// Output:
	// STREAMED THROUGH THE AGENT
	// exit 0
}

// Copy a file to a context, atomically (a temporary file renamed into
// place), then ask for its checksum, as a caller skipping unchanged files
// would.
func Example_files() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "spindle-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src, dst := filepath.Join(dir, "app.conf"), filepath.Join(dir, "copy.conf")
	content := []byte("listen 8080\n")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		log.Fatal(err)
	}
	if _, err := fs.PutFile(ctx, cx, src, dst, true, fs.PutOptions{}); err != nil {
		log.Fatal(err)
	}
	sum, err := fs.Checksum(ctx, cx, dst)
	if err != nil {
		log.Fatal(err)
	}
	want := sha256.Sum256(content)
	fmt.Println("unchanged:", sum.SHA256 == hex.EncodeToString(want[:]), sum.Size, "bytes")
	// Output:
	// unchanged: true 12 bytes
}

// Many calls in flight at once on one link: Go sends a call and returns
// its Future at once, so ten commands cost about one round trip, not ten.
func Example_pipelined() {
	ctx := context.Background()
	ctl := spindle.NewController(spindle.Options{})
	defer ctl.Close()
	cx, err := ctl.Connect(ctx, local.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var calls []*spindle.Future
	for i := range 3 {
		calls = append(calls, cx.Go(ctx, exec.MethodRun, &exec.Cmd{Argv: []string{"echo", "call", strconv.Itoa(i)}}))
	}
	for _, f := range calls {
		var res exec.Result
		if err := f.Wait(&res); err != nil {
			log.Fatal(err)
		}
		fmt.Print(string(res.Stdout))
	}
	// Output:
	// call 0
	// call 1
	// call 2
}
