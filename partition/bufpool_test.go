package partition

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestGetBuf_AHugeBufferThatFitsNothingIsDropped: a pooled buffer past the
// size classes that does not fit the size asked for is dropped, not put
// back: put back, it would be what every later get finds first (sync.Pool
// hands out its last put first), so every get would allocate and the
// misfit would stay pinned across GCs (found by review). A 40 MiB buffer
// followed by 9 MiB commits: the 9 MiB buffer is reused and the 40 MiB
// one is gone. (Under -race, sync.Pool drops some puts at random, so only
// the misfit's fate is checked there.)
func TestGetBuf_AHugeBufferThatFitsNothingIsDropped(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	runtime.GC() // empty the pools
	_, big := getBuf(40 << 20)
	bigAt := &(*big)[0]
	putBuf(big)

	distinct := map[*byte]bool{}
	for i := range 30 {
		b, p := getBuf(9 << 20)
		distinct[&b[0]] = true
		putBuf(p)
		if i%3 == 2 {
			runtime.GC()
		}
	}
	again, p := getBuf(40 << 20)
	defer putBuf(p)
	if &again[0] == bigAt {
		t.Fatal("the 40 MiB buffer that fit none of the 9 MiB gets is still pooled")
	}
	if !raceEnabled && len(distinct) > 1 {
		t.Fatalf("%d distinct 9 MiB buffers in 30 get and put cycles, want 1", len(distinct))
	}
}

// TestGetBuf_BuffersPastTheHugeBoundAreNotPooled: a buffer for a frame
// near the frame bound (or a corrupt header's claim) is garbage after use.
func TestGetBuf_BuffersPastTheHugeBoundAreNotPooled(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.GC()
	runtime.GC()
	b, p := getBuf(maxHugeBytes + 1)
	at := &b[0]
	putBuf(p)
	again, p2 := getBuf(maxHugeBytes + 1)
	defer putBuf(p2)
	if &again[0] == at {
		t.Fatal("a buffer past maxHugeBytes was pooled")
	}
}

// TestInPlace_ComparesTheFrameWithTheMemoryItPins: a frame cached in
// place must fill at least half of its buffer's capacity, not only of its
// length: a pooled buffer's capacity can be twice its length, and a
// lending scan reuses a buffer grown for a larger frame (found by review:
// a 2.1 MiB frame pinned 8 MiB). What it keeps is the whole capacity.
func TestInPlace_ComparesTheFrameWithTheMemoryItPins(t *testing.T) {
	buf := make([]byte, 2200<<10, 8<<20)
	s := &scanner{buf: buf, at: 4096, n: len(buf)}
	if _, ok := s.inPlace(4096, 2100<<10); ok {
		t.Fatal("a 2.1 MiB frame took a buffer of 8 MiB")
	}
	s.buf = buf[:len(buf):len(buf)]
	if kept, ok := s.inPlace(4096, 2100<<10); !ok || kept != 2200<<10 {
		t.Fatalf("a 2.1 MiB frame in a 2.2 MiB buffer: in place %v, keeping %d bytes", ok, kept)
	}
	if s.giveUpBuffer(); s.buf != nil || s.n != 0 {
		t.Fatal("the scan kept the buffer it gave up")
	}
}
