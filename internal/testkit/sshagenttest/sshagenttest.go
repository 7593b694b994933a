// Package sshagenttest serves an ssh-agent on a Unix socket for tests (an
// in-process keyring standing in for the user's ssh-agent).
package sshagenttest

import (
	"net"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh/agent"
)

// Serve serves ring on a Unix socket at path until t ends; it is listening
// when Serve returns.
func Serve(t testing.TB, path string, ring agent.Agent) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				agent.ServeAgent(ring, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}
