package bench

import (
	"io"
	"net"
	"sync"
)

// echoServer answers every byte with itself: the floor for a round trip.
type echoServer struct {
	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	cs []net.Conn
}

func startEcho() (*echoServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.cs = append(e.cs, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				io.Copy(c, c) //nolint:errcheck // ends with the connection
				c.Close()
			}()
		}
	}()
	return e, nil
}

func (e *echoServer) Addr() string { return e.ln.Addr().String() }

func (e *echoServer) Close() {
	e.ln.Close()
	e.mu.Lock()
	for _, c := range e.cs {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}
