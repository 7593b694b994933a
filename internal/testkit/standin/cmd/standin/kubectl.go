package main

import (
	"strings"

	"github.com/spindle-rpc/spindle/internal/testkit/standin"
)

// kubectl's global (persistent) flags, also accepted after "exec"
// (pflag): a selection of kubectl 1.2x's.
var kubectlGlobal = map[string]bool{
	"kubeconfig": true, "context": true, "namespace": true, "cluster": true, "user": true,
	"server": true, "request-timeout": true, "v": true, "insecure-skip-tls-verify": false,
}

var kubectlGlobalFlags = flagSet{long: kubectlGlobal, short: map[byte]string{'n': "namespace", 's': "server", 'v': "v"}}

// kubectl exec's flags (k8s.io/kubectl/pkg/cmd/exec), globals included.
var kubectlExecFlags = func() flagSet {
	long := map[string]bool{"stdin": false, "tty": false, "container": true, "quiet": false,
		"pod-running-timeout": true, "filename": true}
	for k, v := range kubectlGlobal {
		long[k] = v
	}
	return flagSet{long: long, short: map[byte]string{'i': "stdin", 't': "tty", 'c': "container",
		'q': "quiet", 'f': "filename", 'n': "namespace", 's': "server", 'v': "v"}}
}()

// kubectl takes `kubectl [GLOBAL] exec [FLAGS] POD [FLAGS] -- COMMAND…`
// as kubectl 1.2x does (exec.go's Complete, Validate and Run), with the
// World's pods as the cluster.
func kubectl(w standin.World, argv []string) (*launch, *failure) {
	global, sub, rest, err := kubectlGlobalFlags.split(argv)
	if err != nil {
		return nil, fail(1, "error: %v\nSee 'kubectl --help' for usage.", err)
	}
	if sub != "exec" {
		return nil, notSimulated("only `kubectl exec` is simulated, not %q", sub)
	}
	p, err := kubectlExecFlags.parse(rest)
	if err != nil {
		return nil, fail(1, "error: %v\nSee 'kubectl exec --help' for usage.", err)
	}
	for k, v := range global.flags {
		p.flags[k] = append(v, p.flags[k]...)
	}
	// Exactly one argument, the pod, before "--"; the command after it.
	if p.dash != 1 && len(p.args) > 1 {
		return nil, fail(1, "error: exec [POD] [COMMAND] is not supported anymore. Use exec [POD] -- [COMMAND] instead\nSee 'kubectl exec -h' for help and examples")
	}
	if len(p.args) == 0 || p.dash == 0 {
		return nil, fail(1, "error: pod, type/name or --filename must be specified")
	}
	pod, command := p.args[0], p.args[1:]
	if len(command) == 0 {
		return nil, fail(1, "error: you must specify at least one command for the container")
	}
	if c := p.last("context"); c != "" && !contains(w.Contexts, c) {
		return nil, fail(1, "Error in configuration: context was not found for specified context: %s", c)
	}
	if w.Down {
		return nil, fail(1, "The connection to the server localhost:8080 was refused - did you specify the right host or port?")
	}
	ns := p.last("namespace")
	if ns == "" {
		ns = "default"
	}
	name := pod
	if t, n, ok := strings.Cut(pod, "/"); ok && (t == "pod" || t == "pods" || t == "po") {
		name = n
	}
	o, ok := w.Objects[ns+"/"+name]
	if !ok {
		return nil, fail(1, "Error from server (NotFound): pods %q not found", name)
	}
	if o.State == "Succeeded" || o.State == "Failed" {
		return nil, fail(1, "error: cannot exec into a container in a completed pod; current phase is %s", o.State)
	}
	ctr := p.last("container")
	if ctr == "" {
		if len(o.Containers) == 0 {
			return nil, notSimulated("pod %s/%s has no containers in %s", ns, name, standin.WorldFile)
		}
		ctr = o.Containers[0]
		if len(o.Containers) > 1 && !p.has("quiet") {
			errorf("Defaulted container %q out of: %s", ctr, strings.Join(o.Containers, ", "))
		}
	} else if !contains(o.Containers, ctr) {
		return nil, fail(1, "error: container %s is not valid for pod %s out of: %s", ctr, name, strings.Join(o.Containers, ", "))
	}
	// The kubelet finds only running containers (kubelet.findContainer).
	if o.State != "Running" {
		return nil, fail(1, "error: unable to upgrade connection: container not found (%q)", ctr)
	}
	l := &launch{argv: command, dir: "/", uid: -1, gid: -1,
		env:       []string{"PATH=" + defaultPath, "HOSTNAME=" + name, "HOME=/root"},
		stdinNull: !p.has("stdin"),
		notFound: func(cmd string) *failure {
			return fail(126, "OCI runtime exec failed: exec failed: unable to start container process: exec: %q: executable file not found in $PATH: unknown\ncommand terminated with exit code 126", cmd)
		},
	}
	// -t without -i is dropped; with -i, on a terminal, the command
	// would get a pseudo-terminal.
	if p.has("tty") && p.has("stdin") {
		if isTerminal(0) {
			return nil, notSimulated("-i -t on a terminal puts the command on a pseudo-terminal")
		}
		if !p.has("quiet") {
			errorf("Unable to use a TTY - input is not a terminal or the right kind of file")
		}
	}
	return l, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
