// Package hostvars turns the connection variables of an inventory host,
// in Ansible's vocabulary (ansible_host, ansible_port, ansible_user,
// ansible_password, ansible_ssh_private_key_file, ansible_ssh_common_args,
// host_key_checking, the become_* variables, Spindle's ansible_spindle_via
// and ansible_spindle_target), into what Spindle connects with: a target
// chain (package target) and the ssh connector's options, and a become
// connector. It reads no files, flags or environment: the caller gives
// the variables as resolved (Ansible's connection plugin, or a fleet
// runner reading inventories), so that the same inventory means the same
// connections whoever reads it.
//
// The chain is the via hops (if any), then the host's own hops: its
// target if set, else ssh:[user@]address[:port]. The SSH arguments are
// read as ssh reads them, in the order Ansible's ssh connection passes
// them (ssh_args, host_key_checking, port, private key, user, timeout,
// ssh_common_args, ssh_extra_args), the first value of a setting winning
// and lists (identity files) adding up. User and port name the host's own
// SSH hop; the rest (key files, password, host key policy, timeouts,
// proxies, ssh_config file) are the base of every SSH hop of the chain,
// and what is left unset comes from ssh_config as ssh resolves it.
package hostvars
