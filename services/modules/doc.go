// Package modules ships programs and payloads to an agent's module store
// (package store under it) by content, and runs them from there: the
// bytes cross the link once per agent, later calls name their sha256.
// It also lists the agent's warm Python runners (Runners).
//
// # Methods
//
//	modules.Put      args PutArgs   result none; needs a circuit carrying PutArgs.Size bytes
//	modules.Has      args HasArgs   result bool
//	modules.Runners  args none      result []RunnerStat
//
// modules.Put stores the bytes of its circuit in the agent's store
// (store.Default) once they hash to PutArgs.SHA256; more than the
// store's bound (store.DefaultMax) is refused with errkind.ErrTooLarge
// before anything is read, and the agent holds at most what was sent.
// What it stores is shared (store.PutShared): the agent's children
// that lack it are served it by their parent (package upcall), so Put
// nothing that is not the same for every context below the agent.
// modules.Has says whether the store holds a hash.
//
// # Running a program
//
// Run runs a stored program by hash (exec.Cmd.Exe, exec.Run): the agent
// materialises it once in its private cache directory, or with
// exec.Cmd.ExeMemfd runs it from a memfd. A hash the agent lacks
// (evicted, or a new agent) fails with errkind.ErrNotFound, which
// store.IsNotStored tells from other missing things: Put the bytes and
// run again. Program does that for a caller that keeps the bytes:
//
//	p := modules.NewProgram(data)
//	res, err := p.Run(ctx, cx, exec.Cmd{Argv: []string{"tool", "-v"}})
//
// Program.Run sends no program bytes while the agent has them, and puts
// them once when it does not. Program.Start (exec.Start, stdin and output
// streamed) asks first (modules.Has), since a started command's failure
// arrives only with its reply.
package modules
