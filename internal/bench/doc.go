// Package bench is Spindle's benchmark harness, the spindle-bench command
// (`make bench`): each row measures an operation through Spindle and the
// baseline it is compared with (a pipe, OpenSSH, x/crypto/ssh, scp),
// both in the same run, round after round, side by side, and prints one
// JSON object per row. The ssh, via, files and tunnel groups run against
// --ssh-target, or against a throwaway sshd of their own (package
// sshtest) when run as root. It lives apart from the spindle command,
// whose users never need it: it creates users and sudoers entries for
// its throwaway server.
package bench
