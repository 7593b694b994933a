// Package daemon keeps Spindle connections open between commands, as
// OpenSSH's ControlPersist does: the first `spindle run --persist` starts
// a daemon in the background, and every later command with the same
// environment runs on the connections and agents it keeps, for the price
// of one call. The daemon exits once no request has been active for its
// idle time.
//
// The package has three parts, each unaware of the CLI's flags:
//
//   - Server (server.go) owns the process side: a private Unix socket and
//     its pid file, the "ready" notice to whoever started it, signals, and
//     the idle expiry (Server.Begin marks a request active). It hands each
//     client's connection to an Endpoint.
//   - Registry (registry.go) holds the kept connections, keyed by the
//     settings they were made with and the target: shared by every
//     request and every endpoint, a dead one replaced on the next request
//     (GetLive: found dead by a ping, before the request starts anything),
//     one controller (and its shared routes, package target) per settings.
//     How a connection is made is the caller's Dialer: the registry reads
//     no flags and asks no one for passwords itself.
//   - Endpoints speak a protocol to clients. CLIEndpoint (cli.go) serves
//     the spindle CLI's (package proto: a yamux session, four streams)
//     and hands each request to a handler; Client (client.go) is the CLI's
//     side, with Socket, Start, Dial and Stop to find, start, reach and
//     stop the daemon of an environment. Another protocol (say, JSON
//     headers for a client written in another language) is another
//     Endpoint served by the same Server and Registry.
//
// The daemon belongs to one user and one environment: its socket lives in
// a 0700 directory of the user's, and its name hashes the environment and
// the executable (Socket), so a client never reaches a daemon that would
// connect with another SSH agent, ssh_config or spindle.
package daemon
