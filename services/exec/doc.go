// Package exec is Spindle's command service: it runs processes on an agent,
// either to completion with their output collected in the reply
// ("exec.Run") or attached to a circuit so that stdin and output stream
// while the process runs, optionally on a pseudo-terminal ("exec.Start").
//
// # Methods
//
//	exec.Run     args Cmd         result Result
//	exec.Start   args Cmd         result Result (Stdout and Stderr empty); needs a circuit
//	exec.Attach  args AttachArgs  result Result (Stdout and Stderr empty); needs a circuit
//
// A process that starts and exits with a non-zero status or dies from a
// signal is a successful call: the status is in the Result. A process that
// cannot be started is an error of kind not_found (no such executable or
// directory), permission, or bad_args. When the call is cancelled (by the
// caller, by the call's timeout, or because the link to the caller died)
// the process's whole process group is killed with SIGKILL and the call
// fails with kind canceled or timeout. Cmd.Timeout is different: it is
// enforced on the agent, kills the process group the same way, and the call
// succeeds with Result.TimedOut set.
//
// Cmd.Exe runs a program shipped by content instead of one looked up on
// the agent: its bytes go into the agent's module store with the first
// call, later calls name its sha256, and the agent materialises it once
// as a 0500 file in its private 0700 cache directory
// (store.Materialize, package services/modules/store). With
// Cmd.ExeMemfd it runs from a memfd instead, written nowhere; that is
// off by default, since kernels with vm.memfd_noexec=2, SELinux and
// seccomp policies refuse it and EDR tools alert on fileless execution,
// and where refused the call fails saying so (no silent fallback).
// Package modules is the client side: Put, Run, Program.
//
// Every process runs in a process group of its own (a session of its own
// with a PTY), so that the kill reaches its children too. The group also
// dies with the agent, however the agent ends (SIGKILL included): the
// process has PR_SET_PDEATHSIG, and a watchdog process kills the groups
// of the commands still running once the agent is gone (internal/tether).
// What a command leaves running after it exited is not killed: after the
// process exits, or after the kill, the agent waits at most WaitDelay for
// descendants that still hold the output pipes, then closes them, so a
// backgrounded daemon cannot hang a call.
//
// # exec.Run
//
// Output is collected up to Cmd.MaxOutput bytes per stream (default
// DefaultRunMaxOutput, at most MaxRunOutput so that the reply fits in one
// frame). Output beyond the limit is read and discarded, so the process
// keeps running, and the stream is flagged truncated. Cmd.Stdin is the
// process's whole stdin; without it stdin is /dev/null. Cmd.PTY is refused.
//
// With Cmd.Spill, output reaching the limit is kept instead: the agent
// stops reading the process's output (the process blocks once its pipe
// is full) and replies at once with the output so far and
// Result.Spilled. exec.Attach with that id streams the rest as
// exec.Start's frames, then replies with the real Result; controls
// reach the process group as for exec.Start. A spilled command waits at
// most SpillAttachTimeout for its exec.Attach, and at most MaxSpilled
// wait per agent; past either it is killed. Collect makes both calls: a
// command with little output costs one round trip and no circuit, one
// with more is not cut short.
//
// # exec.Start
//
// The process's stdin is Cmd.Stdin followed by the bytes the caller writes
// on the circuit; the caller half-closes its side of the circuit for EOF.
// (With a PTY, EOF from the caller only stops forwarding: send ^D to make
// the terminal deliver an end of file.)
//
// The process's output travels back on the circuit as frames, forwarded as
// soon as they are read from the process:
//
//	+--------+----------------------+-----------------+
//	| stream | length               | data            |
//	| 1 byte | 4 bytes, big-endian  | length bytes    |
//	+--------+----------------------+-----------------+
//
// stream is 1 for stdout and 2 for stderr; with a PTY all output is
// stream 1. length is at least 1 and at most MaxFrameData. Frames of both
// streams interleave in the order the agent read them. After the last
// frame the agent sends the reply on the bus, and the circuit is closed
// when the handler returns; the reply is sent only once the process has
// exited and all its output is on the circuit. Cmd.MaxOutput (default
// unlimited) caps each stream as for exec.Run, and the Result says which
// streams were truncated.
//
// While the call runs, rpc.OpSignal controls deliver the signal to the
// process group, and rpc.OpResize controls set the PTY's window size (they
// are ignored without a PTY).
//
// # Python modules
//
// An exec.Start call with Cmd.Python (and no PTY) whose command only
// starts a Python interpreter with its stdin as the script (a pipelined
// Ansible module) may run in a fork of the agent's warm runner for that
// interpreter, environment and module_utils (internal/pyrunner) instead:
// same stdin, output, environment and working directory, the status a
// shell would report, and nothing left behind for the next run. The
// command runs as given when no runner can host it. The fork leads its
// own process group, so signals and the kill on cancellation reach it
// and what it started. modules.Runners lists an agent's runners.
package exec
