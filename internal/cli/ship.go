package cli

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/modules"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// shipFlags are run's --ship FILE and --memfd: run a local program on
// the targets through their agents' module stores (package modules).
type shipFlags struct {
	path  string
	memfd bool
	prog  *modules.Program // FILE's bytes, once loaded
}

func (s *shipFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&s.path, "ship", "", "run the local program `FILE` on the targets instead of one of theirs, the arguments after -- its arguments: it crosses the link once per agent (kept by hash in the agent's RAM store) and is written once into the agent's private cache directory")
	c.Flags().BoolVar(&s.memfd, "memfd", false, "with --ship: run the program from a memfd instead of the cache directory (fails where the kernel forbids it: vm.memfd_noexec=2, seccomp, SELinux)")
}

// shipping says whether --ship was given.
func (s *shipFlags) shipping() bool { return s.path != "" }

// load reads FILE once, bounded by what an agent's store holds.
func (s *shipFlags) load(cmdPath string) error {
	if !s.shipping() {
		if s.memfd {
			return &usageError{cmd: cmdPath, err: errors.New("--memfd runs a program given with --ship")}
		}
		return nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("--ship: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, store.DefaultMax+1))
	if err != nil {
		return fmt.Errorf("--ship: %w", err)
	}
	if len(data) > store.DefaultMax {
		return fmt.Errorf("--ship %s: larger than an agent's module store (%d MiB): copy it with spindle cp and run it there", s.path, store.DefaultMax>>20)
	}
	s.prog = modules.NewProgram(data)
	return nil
}

// argv is the command line to run: with --ship, FILE's base name as
// argv[0] followed by args; else args.
func (s *shipFlags) argv(args []string) []string {
	if !s.shipping() {
		return args
	}
	return append([]string{filepath.Base(s.path)}, args...)
}

// start starts cmd on cx: the shipped program, put first unless the
// agent has it, or cmd as it is.
func (s *shipFlags) start(ctx stdctx.Context, cx *spindle.Context, cmd exec.Cmd) (*exec.Process, error) {
	if s == nil || s.prog == nil {
		return exec.Start(ctx, cx, cmd)
	}
	cmd.ExeMemfd = s.memfd
	return s.prog.Start(ctx, cx, cmd)
}
