package kubectl_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle/connectors"
	"github.com/spindle-rpc/spindle/connectors/container"
	"github.com/spindle-rpc/spindle/connectors/kubectl"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		o          kubectl.Options
		argv, name string
	}{
		{kubectl.Options{Pod: "web-0"}, "kubectl exec -i web-0 -- sh -c S", "kubectl:web-0"},
		{kubectl.Options{Pod: "web-0", Namespace: "prod", Container: "app"},
			"kubectl exec -i --namespace=prod --container=app web-0 -- sh -c S", "kubectl:prod/web-0:app"},
		{kubectl.Options{Pod: "deploy/web", KubeContext: "kind-a", Kubeconfig: "/k/config", KubectlPath: "/opt/kubectl", Flags: []string{"--pod-running-timeout=5s"}},
			"/opt/kubectl --kubeconfig=/k/config --context=kind-a exec -i --pod-running-timeout=5s deploy/web -- sh -c S", "kubectl:deploy/web"},
	} {
		if got := strings.Join(c.o.Argv("S"), " "); got != c.argv {
			t.Errorf("%+v: argv %q, want %q", c.o, got, c.argv)
		}
		if got := c.o.Name(); got != c.name {
			t.Errorf("%+v: name %q, want %q", c.o, got, c.name)
		}
	}
}

func TestRegistry(t *testing.T) {
	o := kubectl.Options{Pod: "p", Container: "c", Namespace: "n", KubeContext: "k", Kubeconfig: "/f", KubectlPath: "/x",
		Flags: []string{"-q"}, Timeout: time.Second, ContextName: "n"}
	b, _ := msgpack.Marshal(o)
	newZero, ok := connectors.Lookup("kubectl")
	if !ok {
		t.Fatal("kubectl not registered")
	}
	r := newZero()
	if err := msgpack.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	if got := *r.(*kubectl.Options); !reflect.DeepEqual(got, o) || r.Kind() != "kubectl" {
		t.Errorf("round trip: %+v", got)
	}
}

// Messages of kubectl 1.2x (from its sources and issues; there is no
// cluster where these tests run: integration/containers_test.go runs the
// connector through a stand-in that prints them).
func TestRules(t *testing.T) {
	rules := (kubectl.Options{Pod: "web-0", Container: "app"}).Rules()
	for out, want := range map[string]error{
		`Error from server (NotFound): pods "web-0" not found`:                                                                             container.ErrNoContainer,
		`error: container app is not valid for pod web-0 out of: main, sidecar`:                                                            container.ErrNoContainer,
		`error: unable to upgrade connection: container not found ("app")`:                                                                 container.ErrNotRunning,
		"Error in configuration: context was not found for specified context: kind-b":                                                      container.ErrNoDaemon,
		"error: cannot exec into a container in a completed pod; current phase is Succeeded":                                               container.ErrNotRunning,
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`: container.ErrNoShell,
		`Error from server (Forbidden): pods "web-0" is forbidden: User "bob" cannot create resource "pods/exec"`:                          container.ErrPermission,
		"The connection to the server localhost:8080 was refused - did you specify the right host or port?":                                container.ErrNoDaemon,
		"something else": nil,
	} {
		got := container.Classify(out, rules)
		if (want == nil) != (got == nil) || !errors.Is(got, want) {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}
