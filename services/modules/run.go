package modules

import (
	"context"
	"crypto/sha256"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/rpc"
	"github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/modules/store"
)

// Run runs the program stored under sum on c to completion (exec.Run)
// as cmd says: cmd.Argv are its arguments, Argv[0] its argv[0], and
// cmd.Exe must be nil (Run names sum there, with no bytes). A program c
// has neither materialised nor stored fails before anything starts with
// an error for which store.IsNotStored is true: Put it and run again.
func Run(ctx context.Context, c rpc.Caller, sum [sha256.Size]byte, cmd exec.Cmd) (*exec.Result, error) {
	if err := byHash(&cmd, sum); err != nil {
		return nil, err
	}
	return exec.Run(ctx, c, cmd)
}

// byHash makes cmd run the program stored under sum.
func byHash(cmd *exec.Cmd, sum [sha256.Size]byte) error {
	if cmd.Exe != nil {
		return errkind.Errorf(errkind.ErrBadArgs, "modules: Cmd.Exe is set; the program is the stored one")
	}
	if len(cmd.Argv) == 0 {
		return errkind.Errorf(errkind.ErrBadArgs, "modules: a stored program needs Argv (its first word the process's argv[0])")
	}
	cmd.Exe = &exec.StdinPart{SHA256: sum[:]}
	return nil
}

// Program is a program a caller keeps and runs on agents through their
// module stores: its bytes cross the link to an agent only when the
// agent lacks them. Safe for concurrent use.
type Program struct {
	data []byte
	sum  [sha256.Size]byte
}

// NewProgram returns the program made of data, which it keeps: the
// caller must not change it.
func NewProgram(data []byte) *Program {
	return &Program{data: data, sum: sha256.Sum256(data)}
}

// SHA256 is the program's hash, by which agents store it.
func (p *Program) SHA256() [sha256.Size]byte { return p.sum }

// Run runs the program on c as Run does, and when c lacks it puts it
// (Put) and runs it again, once.
func (p *Program) Run(ctx context.Context, c rpc.Caller, cmd exec.Cmd) (*exec.Result, error) {
	res, err := Run(ctx, c, p.sum, cmd)
	if !store.IsNotStored(err) {
		return res, err
	}
	if _, err := Put(ctx, c, p.data); err != nil {
		return nil, err
	}
	return Run(ctx, c, p.sum, cmd)
}

// Start starts the program on c as exec.Start does, after putting it
// unless c's store has it (Has): a started command's failure comes with
// its reply, after stdin may have been spent. A program evicted between
// the two calls fails at Process.Wait as Run does, before it ran.
func (p *Program) Start(ctx context.Context, c rpc.Caller, cmd exec.Cmd) (*exec.Process, error) {
	if err := byHash(&cmd, p.sum); err != nil {
		return nil, err
	}
	has, err := Has(ctx, c, p.sum)
	if err != nil {
		return nil, err
	}
	if !has {
		if _, err := Put(ctx, c, p.data); err != nil {
			return nil, err
		}
	}
	return exec.Start(ctx, c, cmd)
}
