package partition

import (
	"math/bits"
	"sync"
)

// Large buffers for frames being written and for the commit's read-back,
// pooled process-wide by power-of-two size class, so a partition commits
// a 1 MiB batch without allocating (and zeroing) a frame and a read-back
// buffer each time, and no partition keeps one between commits (a
// hundred thousand partitions must not pin a buffer each).
const (
	minPooledClass = 16      // 64 KiB
	maxPooledClass = 23      // 8 MiB
	maxPooledBytes = 8 << 20 // larger buffers are not pooled
)

var bufClasses [maxPooledClass + 1]sync.Pool

// getBuf returns a buffer of length n from the pool (nil pointer: not
// pooled). Past maxPooledBytes a buffer is allocated at its size: rounding
// a 64 MiB frame up to its class would double what it holds.
func getBuf(n int) (buf []byte, pooled *[]byte) {
	class := max(bits.Len(uint(n-1)), minPooledClass)
	if n <= 0 || n > maxPooledBytes {
		return make([]byte, n), nil
	}
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
	class := bits.Len(uint(cap(*p) - 1))
	*p = (*p)[:cap(*p)]
	bufClasses[class].Put(p)
}
