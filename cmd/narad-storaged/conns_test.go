package main

import (
	"errors"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLimitListener_HoldsAtMostItsCap: with two connections open at a cap
// of two, a third is accepted only once one of them closes (closing one
// twice frees one slot); Close ends an Accept waiting for a slot.
func TestLimitListener_HoldsAtMostItsCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2, prometheus.NewRegistry())
	accepted := make(chan net.Conn)
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				ended <- err
				return
			}
			if open := l.open.Load(); open > 2 {
				t.Errorf("%d connections open, cap 2", open)
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	if len(l.slots) != 2 {
		t.Fatalf("%d slots taken with two connections accepted", len(l.slots))
	}
	first.Close()
	first.Close()
	third := <-accepted
	if len(l.slots) != 2 || l.open.Load() != 2 {
		t.Fatalf("after one close and a third accept: %d slots, %d open", len(l.slots), l.open.Load())
	}
	second.Close()
	third.Close()
	for range 2 { // fill the cap again, so the next Accept waits for a slot
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		defer (<-accepted).Close()
	}
	l.Close()
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
