package ansible

import "testing"

// The commands Ansible 2.14 to 2.22 send for a home directory, and some
// that only look alike.
func TestEchoHomeUser(t *testing.T) {
	for cmd, want := range map[string]string{
		"echo ~":                                 "",
		"echo ~ && sleep 0":                      "",
		"/bin/sh -c 'echo ~ && sleep 0'":         "",
		"/bin/sh -c 'echo ~'":                    "",
		"echo ~deploy":                           "deploy",
		"/bin/sh -c 'echo ~app_1.x && sleep 0'":  "app_1.x",
		"/bin/sh -c 'echo ~www-data && sleep 0'": "www-data",
	} {
		if got, ok := echoHomeUser(cmd); !ok || got != want {
			t.Errorf("%q: %q, %v; want %q", cmd, got, ok, want)
		}
	}
	for _, cmd := range []string{"echo ~/x", "echo ~ ; id", "/bin/sh -c 'echo ~ && sleep 0' x", "echo  ~", "echo ~-x",
		"/bin/sh -c 'echo ~ && sleep 0", "echo ~$(id)", "/bin/bash -c 'echo ~'", "echo ~\n"} {
		if u, ok := echoHomeUser(cmd); ok {
			t.Errorf("%q taken for a home question (of %q)", cmd, u)
		}
	}
}
