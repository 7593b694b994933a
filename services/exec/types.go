package exec

import "time"

// Method names.
const (
	MethodRun   = "exec.Run"
	MethodStart = "exec.Start"
	// MethodAttach delivers the rest of a spilled exec.Run (Cmd.Spill)
	// on a circuit.
	MethodAttach = "exec.Attach"
)

// Bounds of spilled exec.Run commands (Cmd.Spill), per agent.
const (
	// MaxSpilled is how many spilled commands an agent keeps waiting for
	// their exec.Attach at once; one more fails, killed, with
	// errkind.ErrTooLarge.
	MaxSpilled = 64
	// SpillAttachTimeout is how long a spilled command waits for its
	// exec.Attach before the agent kills it.
	SpillAttachTimeout = 30 * time.Second
)

// Output limits and the exec.Start frame format.
const (
	// DefaultRunMaxOutput is exec.Run's per-stream output limit when
	// Cmd.MaxOutput is 0.
	DefaultRunMaxOutput = 1 << 20
	// MaxRunOutput is the largest per-stream limit exec.Run accepts (larger
	// values are lowered to it): two full streams must fit in the reply,
	// which is one bus frame (router.DefaultMaxFrameSize, 4 MiB).
	MaxRunOutput = 3 << 19
	// StreamStdout and StreamStderr are the stream ids of output frames.
	StreamStdout = 1
	StreamStderr = 2
	// FrameHeaderLen is the size of an output frame's header.
	FrameHeaderLen = 5
	// MaxFrameData bounds the data of one output frame. The agent sends at
	// most 32 KiB; clients refuse more than this.
	MaxFrameData = 1 << 20
	// DefaultTerm is TERM for a PTY when Cmd.Term is empty.
	DefaultTerm = "xterm-256color"
	// MaxStdinParts bounds the stdin that Cmd.StdinParts make: parts
	// named by hash cost the caller a few bytes each, and must not let
	// it make the agent allocate without end.
	MaxStdinParts = 64 << 20
	// WaitDelay is how long the agent waits, after the process exited or
	// was killed, for descendants that still hold its output open.
	WaitDelay = 2 * time.Second
)

// Cmd is the argument of exec.Run and exec.Start.
type Cmd struct {
	// Argv is the program and its arguments. A program without a slash is
	// looked up in the agent's PATH. Exactly one of Argv and Shell is set.
	Argv []string `msgpack:"argv,omitempty"`
	// Shell is a command line run with /bin/sh -c.
	Shell string `msgpack:"sh,omitempty"`
	// Stdin is fed to the process first (for exec.Start, before the
	// circuit's bytes).
	Stdin []byte `msgpack:"in,omitempty"`
	// StdinParts, if set, are that first stdin instead (Stdin must be
	// empty): each part's Data, or the bytes stored under its SHA256 in
	// the agent's module store (services/modules/store), or a slice of them
	// (Length). A part with both Data and SHA256 is stored there first,
	// so that later calls name it by hash alone and its bytes cross the
	// link once. A hash the store lacks fails the call before the
	// process starts, with errkind.ErrNotFound and store.NotStored in
	// its text: send the part's Data again. Together the parts make at
	// most MaxStdinParts bytes.
	StdinParts []StdinPart `msgpack:"inp,omitempty"`
	// Exe, if set, is the program Argv runs instead of Argv[0]'s lookup
	// (Argv[0] stays the process's argv[0]): executable bytes in the
	// agent's module store, given as Data (stored then), SHA256 (stored
	// before) or both, as a StdinPart without a slice. The agent
	// materialises them once, in its private cache directory
	// (store.Materialize), and runs them from there. A hash the agent
	// has neither on disk nor in its store fails the call before
	// anything starts, as for StdinParts: send Data again.
	Exe *StdinPart `msgpack:"exe,omitempty"`
	// ExeMemfd runs Exe from a memfd (memfd_create, then execve of
	// /proc/self/fd/N) instead of a file in the cache directory: nothing
	// is written to a file system. It is off by default: kernels with
	// vm.memfd_noexec=2, SELinux and seccomp policies refuse it, and
	// EDR tools flag it as fileless execution. Where the kernel refuses,
	// the call fails with errkind.ErrPermission, saying so, and nothing
	// ran: there is no silent fallback (leave ExeMemfd off for the cache
	// directory). A #! script gets its memfd as fd 3, which its
	// interpreter opens by path; a binary inherits nothing. The bytes
	// come from Data or the store (not from the cache directory).
	ExeMemfd bool `msgpack:"memfd,omitempty"`
	// Python, if set, lets the agent run the command in a fork of its
	// warm Python runner (internal/pyrunner) instead of starting it, for
	// exec.Start without a PTY: the command (Shell or Argv) must be one
	// that only starts Python.Interpreter with stdin as its script, and
	// it is what runs when no runner can (no such interpreter, older
	// than 3.6, no os.fork). The status is then the interpreter's, with
	// a signal's death reported as a shell would: exit code 128+N.
	Python *Python `msgpack:"py,omitempty"`
	// Env sets variables, applied after Unset.
	Env map[string]string `msgpack:"env,omitempty"`
	// Unset removes variables from the starting environment.
	Unset []string `msgpack:"unset,omitempty"`
	// ClearEnv starts from an empty environment instead of the agent's.
	ClearEnv bool `msgpack:"clr,omitempty"`
	// Dir is the working directory; empty means the agent's.
	Dir string `msgpack:"dir,omitempty"`
	// Timeout, if positive, is enforced on the agent: the process group is
	// killed and Result.TimedOut set.
	Timeout time.Duration `msgpack:"to,omitempty"`
	// MaxOutput is the per-stream output limit; 0 means the default
	// (DefaultRunMaxOutput for exec.Run, unlimited for exec.Start).
	MaxOutput int64 `msgpack:"max,omitempty"`
	// Spill, for exec.Run, keeps the output beyond MaxOutput instead of
	// discarding it: the agent stops reading the process's output, which
	// then waits, and replies with the output so far and
	// Result.Spilled; exec.Attach delivers the rest on a circuit. A
	// command whose output fits is one round trip, as without Spill.
	// Collect does both calls.
	Spill bool `msgpack:"spill,omitempty"`
	// PTY runs the process on a pseudo-terminal (exec.Start only).
	PTY bool `msgpack:"pty,omitempty"`
	// Rows and Cols are the PTY's initial size (default 24x80).
	Rows uint16 `msgpack:"rows,omitempty"`
	Cols uint16 `msgpack:"cols,omitempty"`
	// Term is TERM for the PTY (default DefaultTerm). A TERM in Env wins.
	Term string `msgpack:"term,omitempty"`
}

// StdinPart is one piece of Cmd.StdinParts.
type StdinPart struct {
	Data   []byte `msgpack:"d,omitempty"`
	SHA256 []byte `msgpack:"h,omitempty"`
	// Offset and Length, with Length positive, name the bytes
	// [Offset, Offset+Length) of what is stored under SHA256 (no Data):
	// how a sender passes the parts of a payload that a stored one
	// shares with it. Length 0 names all of it.
	Offset int64 `msgpack:"o,omitempty"`
	Length int64 `msgpack:"n,omitempty"`
	// Base64 makes the part the standard base64 encoding (padded, one
	// line) of the bytes it names, which are stored as they are: a
	// payload that carries a binary in base64 (an AnsiballZ module's
	// zip) sends and stores the binary, a quarter smaller. Not with a
	// slice.
	Base64 bool `msgpack:"b64,omitempty"`
	// Shared stores Data as bytes the agent may serve to its children
	// that name them (store.PutShared, package upcall): set it for what
	// is the same for every context (a module's zip, a program), never
	// for bytes that carry a task's arguments or secrets.
	Shared bool `msgpack:"s,omitempty"`
}

// Python describes a pipelined AnsiballZ module run (Cmd.Python).
type Python struct {
	// Interpreter is the absolute path of the Python the command starts.
	Interpreter string `msgpack:"i"`
	// ZipPart is the index in Cmd.StdinParts of the part holding the
	// module's zip in base64, whose ansible.module_utils the runner
	// preloads.
	ZipPart int `msgpack:"z"`
}

// Result is the reply of exec.Run and exec.Start.
type Result struct {
	// ExitCode is the exit status, or -1 when a signal killed the process.
	ExitCode int `msgpack:"code"`
	// Signal names the signal that killed the process ("SIGKILL"), or is
	// empty when it exited.
	Signal string `msgpack:"sig,omitempty"`
	// Stdout and Stderr are the collected output (exec.Run only).
	Stdout []byte `msgpack:"out,omitempty"`
	Stderr []byte `msgpack:"err,omitempty"`
	// StdoutTruncated and StderrTruncated say that output beyond
	// Cmd.MaxOutput was discarded.
	StdoutTruncated bool `msgpack:"outtr,omitempty"`
	StderrTruncated bool `msgpack:"errtr,omitempty"`
	// TimedOut says that Cmd.Timeout passed and the process was killed.
	TimedOut bool `msgpack:"tout,omitempty"`
	// Spilled, in the reply of an exec.Run with Cmd.Spill, names the
	// process, still running, whose output goes on past Stdout and
	// Stderr: exec.Attach with it delivers the rest and the real
	// Result. The other fields are then not yet known.
	Spilled uint64 `msgpack:"spilled,omitempty"`
}

// AttachArgs are exec.Attach's arguments.
type AttachArgs struct {
	// ID is Result.Spilled.
	ID uint64 `msgpack:"id"`
}
