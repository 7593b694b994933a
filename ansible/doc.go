// Package ansible is Spindle's side of its Ansible connection plugin: an
// Endpoint of the daemon (package daemon) that serves the plugin's
// requests (PROTOCOL.md, "Ansible endpoint"; framing in package
// ansible/wire), and the plugin itself, embedded (Plugin, Install).
//
// Ansible runs each task in a fresh worker process that makes a new
// connection object, so everything that must last lives in the daemon:
// the connection to each host (one per chain and settings, shared by
// concurrent forks and by successive runs, kept in the daemon's
// Registry), and on it one become child per become request (sudo, su or
// doas to a user with given flags and password), kept by the host's
// context. A request is one round trip on its own socket connection; the
// plugin hands local paths for files, so their bytes never pass through
// Python.
//
// The host's variables are read by package hostvars, as Ansible's ssh
// connection reads them, so inventories work unchanged.
package ansible
