// Package kubectl starts an agent inside a running Kubernetes pod with
// `kubectl exec -i POD -- sh -c FIRST_STAGE`; the agent binary travels
// over the exec's stdin from the parent's RAM, so the container image
// needs nothing but sh.
package kubectl

import (
	"context"
	"fmt"
	"github.com/spindle-rpc/spindle/internal/lazyre"
	"time"

	"github.com/spindle-rpc/spindle/bootstrap"
	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
)

// Options configures a kubectl hop. It is msgpack-encoded by the
// controller and decoded by the agent that runs kubectl. kubectl exec has
// no user option: the agent runs as the container's user.
type Options struct {
	// Pod is the pod's name, or TYPE/NAME as kubectl takes it
	// ("deploy/web"); required.
	Pod string `msgpack:"pod"`
	// Container picks the pod's container (-c); default kubectl's
	// (the kubectl.kubernetes.io/default-container annotation, or the
	// first).
	Container string `msgpack:"container,omitempty"`
	// Namespace is the pod's namespace; default the kubeconfig's.
	Namespace string `msgpack:"namespace,omitempty"`
	// KubeContext is the kubeconfig context (--context); default the
	// current one.
	KubeContext string `msgpack:"kube_context,omitempty"`
	// Kubeconfig is the kubeconfig file (--kubeconfig); default
	// $KUBECONFIG or ~/.kube/config of the user running kubectl.
	Kubeconfig string `msgpack:"kubeconfig,omitempty"`
	// KubectlPath is the kubectl program; default "kubectl" on the PATH.
	KubectlPath string `msgpack:"kubectl_path,omitempty"`
	// Flags are extra `kubectl exec` flags, placed before the pod name.
	Flags []string `msgpack:"flags,omitempty"`
	// Timeout bounds the start; default container.DefaultTimeout.
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// ContextName overrides the context's name (default
	// "kubectl:[NAMESPACE/]POD[:CONTAINER]").
	ContextName string `msgpack:"context_name,omitempty"`
}

func init() {
	connectors.Register("kubectl", func() connectors.Remote { return &Options{} })
}

// Kind implements connectors.Remote.
func (o Options) Kind() string { return "kubectl" }

// MayBeForeign implements connectors.Foreign: the target may be
// a pod on a node of another architecture.
func (o Options) MayBeForeign() bool { return true }

var _ connectors.Foreign = Options{}

// Name implements connectors.Connector.
func (o Options) Name() string {
	if o.ContextName != "" {
		return o.ContextName
	}
	n := "kubectl:"
	if o.Namespace != "" {
		n += o.Namespace + "/"
	}
	n += o.Pod
	if o.Container != "" {
		n += ":" + o.Container
	}
	return n
}

func (o Options) tool() container.Tool {
	return container.Tool{Name: "kubectl", Path: o.KubectlPath, Option: "KubectlPath",
		Install: "kubectl (https://kubernetes.io/docs/tasks/tools/)", OverNetwork: true}
}

// Argv is the command Start runs, script being the first stage. argv[0]
// is KubectlPath or "kubectl".
func (o Options) Argv(script string) []string {
	argv := []string{"kubectl"}
	if o.KubectlPath != "" {
		argv[0] = o.KubectlPath
	}
	if o.Kubeconfig != "" {
		argv = append(argv, "--kubeconfig="+o.Kubeconfig)
	}
	if o.KubeContext != "" {
		argv = append(argv, "--context="+o.KubeContext)
	}
	argv = append(argv, "exec", "-i")
	if o.Namespace != "" {
		argv = append(argv, "--namespace="+o.Namespace)
	}
	if o.Container != "" {
		argv = append(argv, "--container="+o.Container)
	}
	argv = append(argv, o.Flags...)
	return append(argv, o.Pod, "--", "sh", "-c", script)
}

// Rules classify kubectl's messages.
func (o Options) Rules() []container.Rule {
	ns := ""
	if o.Namespace != "" {
		ns = " -n " + o.Namespace
	}
	return append(container.ShellRules(""), []container.Rule{
		// kubectl checks -c against the pod's spec itself.
		{Match: lazyre.New(`(?i)is not valid for pod`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("pod %q has no container %q: list them with `kubectl get pod %s%s -o jsonpath='{.spec.containers[*].name}'`", o.Pod, o.Container, o.Pod, ns)},
		{Match: lazyre.New(`(?i)\(NotFound\)|pods? "[^"]*" not found`), Err: container.ErrNoContainer,
			Hint: fmt.Sprintf("no pod %q: check the name and namespace with `kubectl get pods%s`", o.Pod, ns)},
		// "unable to upgrade connection: container not found" is the
		// kubelet's: it finds only running containers, so the container
		// is not running yet (a pending pod) or any more.
		{Match: lazyre.New(`(?i)cannot exec into a container in a completed pod|unable to upgrade connection: container not found|container not running|is waiting to start|ContainerCreating`), Err: container.ErrNotRunning,
			Hint: fmt.Sprintf("pod %q (or its container) is not running: see `kubectl describe pod %s%s`", o.Pod, o.Pod, ns)},
		{Match: lazyre.New(`(?i)\(Forbidden\)|forbidden|Unauthorized`), Err: container.ErrPermission,
			Hint: "the kubeconfig's user may not create pods/exec in that namespace (RBAC)"},
		{Match: lazyre.New(`(?i)unable to connect to the server|connection to the server .* was refused|no configuration has been provided|context was not found for specified context|context .* does not exist`), Err: container.ErrNoDaemon,
			Hint: "check the kubeconfig and context (`kubectl config current-context`, `kubectl config get-contexts`) of the user running kubectl"},
	}...)
}

// Start implements connectors.Connector.
func (o Options) Start(ctx context.Context, req connectors.StartRequest) (*bootstrap.Conn, error) {
	var containerErr error
	if o.Container != "" {
		containerErr = container.CheckName("kubectl", "Container", o.Container)
	}
	return container.StartExec(ctx, req, o.Name(), o.tool(), o.Argv, o.Rules(), o.Timeout,
		container.CheckName("kubectl", "Pod", o.Pod), containerErr)
}

var (
	_ connectors.Remote = Options{}
	_ connectors.Remote = (*Options)(nil)
)
