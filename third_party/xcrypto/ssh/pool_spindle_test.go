package ssh

// Spindle's test of the pooled packet buffers (buffer.go): channel data
// read through the pool arrives intact, on several channels and on stderr
// at once, while readers lag behind writers, so that a packet returned to
// the pool before it was read would be overwritten by a later one.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand"
	"net"
	"sync"
	"testing"
)

func TestPooledPacketsArriveIntact(t *testing.T) {
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewSignerFromKey(hostKey)
	if err != nil {
		t.Fatal(err)
	}
	serverConf := &ServerConfig{NoClientAuth: true}
	serverConf.AddHostKey(signer)
	clientConf := &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	const channels = 3
	const size = 6 << 20
	// stream i of channel c: stdout (0) or stderr (1), a deterministic
	// pseudo-random byte sequence, sent in writes of varying sizes.
	stream := func(c, i int) []byte {
		b := make([]byte, size)
		mrand.New(mrand.NewSource(int64(c*2 + i + 1))).Read(b)
		return b
	}

	serverErr := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer nc.Close()
		sconn, chans, reqs, err := NewServerConn(nc, serverConf)
		if err != nil {
			serverErr <- err
			return
		}
		go DiscardRequests(reqs)
		var wg sync.WaitGroup
		n := 0
		for nch := range chans {
			ch, creqs, err := nch.Accept()
			if err != nil {
				serverErr <- err
				return
			}
			go DiscardRequests(creqs)
			c := n
			n++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ch.Close()
				var sw sync.WaitGroup
				for i, w := range []io.Writer{ch, ch.Stderr()} {
					sw.Add(1)
					go func() {
						defer sw.Done()
						data := stream(c, i)
						r := mrand.New(mrand.NewSource(int64(c)))
						for len(data) > 0 {
							k := min(len(data), 1+r.Intn(96<<10))
							if _, err := w.Write(data[:k]); err != nil {
								return
							}
							data = data[k:]
						}
					}()
				}
				sw.Wait()
			}()
			if n == channels {
				break
			}
		}
		wg.Wait()
		// Closing the socket before the client has read everything
		// would reset the connection: wait for the client to hang up.
		sconn.Wait()
		serverErr <- nil
	}()

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, chans, reqs, err := NewClientConn(nc, ln.Addr().String(), clientConf)
	if err != nil {
		t.Fatal(err)
	}
	client := NewClient(conn, chans, reqs)

	var wg sync.WaitGroup
	errs := make(chan error, 2*channels)
	for c := 0; c < channels; c++ {
		ch, creqs, err := client.OpenChannel("spindle-test", nil)
		if err != nil {
			t.Fatal(err)
		}
		go DiscardRequests(creqs)
		for i, r := range []io.Reader{ch, ch.Stderr()} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Small, irregular reads: the reader lags, and packets
				// are read in several pieces.
				h := sha256.New()
				buf := make([]byte, 7000)
				var got int
				for {
					k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(buf))))
					n, err := r.Read(buf[:1+int(k.Int64())])
					h.Write(buf[:n])
					got += n
					if err == io.EOF {
						break
					}
					if err != nil {
						errs <- fmt.Errorf("channel %d stream %d: %v", c, i, err)
						return
					}
				}
				want := sha256.Sum256(stream(c, i))
				if got != size || !bytes.Equal(h.Sum(nil), want[:]) {
					errs <- fmt.Errorf("channel %d stream %d: %d bytes, content differs: %v", c, i, got, !bytes.Equal(h.Sum(nil), want[:]))
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	client.Close()
	if err := <-serverErr; err != nil {
		t.Fatal(err)
	}
}
