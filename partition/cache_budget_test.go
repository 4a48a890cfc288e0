package partition

import (
	"bytes"
	"testing"
)

// TestCacheBudget_BoundsTheFramesOfEveryLogSharingIt: logs sharing a
// budget never hold more cached frame bytes, once a read is served, than
// it allows; reads stay exact whatever was cached or dropped; a closed log
// gives all its bytes back.
func TestCacheBudget_BoundsTheFramesOfEveryLogSharingIt(t *testing.T) {
	d := newDisk(t, 1)
	if err := d.MkdirAll("/data/topics/orders/p00001"); err != nil {
		t.Fatal(err)
	}
	budget := NewCacheBudget(3 << 10)
	opts := testOptions(d)
	opts.CacheBudget = budget
	a := openLog(t, opts)
	b, err := Open("/data/topics/orders/p00001", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		for _, l := range []*Log{a, b} {
			if _, err := l.Produce(bg, records(1, int64(i*2), 2)); err != nil {
				t.Fatal(err)
			}
		}
	}
	peak := int64(0)
	for pass := range 2 {
		for offset := int64(0); offset < 80; offset++ {
			for _, l := range []*Log{a, b} {
				res, err := l.Read(offset, 1, 1<<20)
				if err != nil || len(res.Records) != 1 || !bytes.Equal(res.Records[0].Value, value(1, offset)) {
					t.Fatalf("pass %d: read at %d: %v", pass, offset, err)
				}
				if used := budget.Used(); used > budget.Limit() {
					t.Fatalf("pass %d offset %d: %d bytes cached, budget %d", pass, offset, used, budget.Limit())
				} else if used > peak {
					peak = used
				}
			}
		}
	}
	if peak == 0 {
		t.Fatal("nothing was ever cached: the test did not exercise the budget")
	}
	closeLog(t, a)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("%d bytes still charged to the budget after every log closed", used)
	}
}
