package partition

import (
	"math/bits"
	"sync"
)

// Large buffers for frames being written, for the commit's read-back and
// for lending reads, pooled process-wide by power-of-two size class, so a
// partition commits a 1 MiB batch without allocating (and zeroing) a frame
// and a read-back buffer each time, and no partition keeps one between
// commits (a hundred thousand partitions must not pin a buffer each).
// Buffers past the classes, up to maxHugeBytes, share one pool at their
// exact sizes: rounding a 64 MiB frame up to its class would double what
// it holds.
const (
	minPooledClass = 16       // 64 KiB
	maxPooledClass = 23       // 8 MiB
	maxPooledBytes = 8 << 20  // larger buffers go to hugeBufs
	maxHugeBytes   = 64 << 20 // larger ones (rare: a frame near the bound) are never pooled
)

var (
	bufClasses [maxPooledClass + 1]sync.Pool
	hugeBufs   sync.Pool
)

// getBuf returns a buffer of length n from the pool (nil pointer: not
// pooled). Past maxPooledBytes it takes a pooled buffer that fits n
// without doubling it, or allocates one at n; a pooled one that does not
// fit is dropped, never put back, or it would be what every later get
// finds first.
func getBuf(n int) (buf []byte, pooled *[]byte) {
	if n <= 0 {
		return nil, nil
	}
	if n > maxPooledBytes {
		if p, ok := hugeBufs.Get().(*[]byte); ok && cap(*p) >= n && cap(*p) < 2*n {
			return (*p)[:n], p
		}
		b := make([]byte, n)
		return b, &b
	}
	class := max(bits.Len(uint(n-1)), minPooledClass)
	if p, ok := bufClasses[class].Get().(*[]byte); ok {
		return (*p)[:n], p
	}
	b := make([]byte, 1<<class)
	return b[:n], &b
}

// putBuf returns a buffer getBuf pooled; nil is ignored. Nothing may use
// the buffer after.
func putBuf(p *[]byte) {
	if p == nil {
		return
	}
	*p = (*p)[:cap(*p)]
	if cap(*p) > maxHugeBytes {
		return
	}
	if cap(*p) > maxPooledBytes {
		hugeBufs.Put(p)
		return
	}
	bufClasses[bits.Len(uint(cap(*p)-1))].Put(p)
}
