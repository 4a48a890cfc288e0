package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestCLIGC_TheUsersGOGCWins: cliGC sets the client commands' collector
// (GOGC 400 under a soft limit) unless GOGC or GOMEMLIMIT is set.
func TestCLIGC_TheUsersGOGCWins(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	for _, env := range []struct{ gogc, memlimit string }{{"50", ""}, {"", "1GiB"}} {
		t.Setenv("GOGC", env.gogc)
		t.Setenv("GOMEMLIMIT", env.memlimit)
		cliGC(64 << 20)
		if p, l := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64); p != 100 || l != math.MaxInt64 {
			t.Fatalf("GOGC=%q GOMEMLIMIT=%q: cliGC set GOGC %d, limit %d", env.gogc, env.memlimit, p, l)
		}
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	cliGC(64 << 20)
	if p, l := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64); p != cliGCPercent || l != 64<<20 {
		t.Fatalf("no GOGC nor GOMEMLIMIT: GOGC %d, limit %d; want %d and %d", p, l, cliGCPercent, 64<<20)
	}
}
