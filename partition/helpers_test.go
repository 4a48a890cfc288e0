package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testDir = "/data/topics/orders/p00000"

var bg = context.Background()

// newDisk returns a simulated disk holding the topic directory of
// testDir, durably, as the runtime leaves it before it opens a log.
func newDisk(t testing.TB, seed uint64) *sim.Disk {
	t.Helper()
	d := sim.NewDisk(seed)
	if err := d.MkdirAll("/data/topics/orders"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/data", "/data/topics"} {
		if err := d.SyncDir(p); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// testOptions are small-segment options over a simulated disk.
func testOptions(d *sim.Disk) Options {
	return Options{FS: d, SegmentMaxBytes: 4 << 10}
}

// openLog opens the test log; the test fails if it cannot.
func openLog(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(testDir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

// closeLog closes l and fails the test on error.
func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// value is the bytes of record seq of a test run: a pure function of
// (seed, seq), so any served byte can be checked (docs/durability.md, the oracle).
func value(seed uint64, seq int64) []byte {
	h := fnv.New64a()
	binary.Write(h, binary.BigEndian, seed)
	binary.Write(h, binary.BigEndian, seq)
	n := 20 + int(h.Sum64()%200)
	b := make([]byte, 0, n+20)
	b = fmt.Appendf(b, "seq=%d;", seq)
	for len(b) < n {
		b = binary.BigEndian.AppendUint64(b, h.Sum64())
		h.Write(b[len(b)-8:])
	}
	return b[:n]
}

// seqOf parses the sequence number a value was made for.
func seqOf(v []byte) (int64, bool) {
	var seq int64
	if _, err := fmt.Sscanf(string(v), "seq=%d;", &seq); err != nil {
		return 0, false
	}
	return seq, true
}

// records makes n records for sequence numbers from, from+1, ...
func records(seed uint64, from int64, n int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{Key: []byte(fmt.Sprint("k", from+int64(i))), Value: value(seed, from+int64(i))}
	}
	return out
}

// readAll reads every record from the start to the high watermark,
// stepping over recorded gaps, and returns them with the gaps met.
func readAll(t testing.TB, l *Log) (recs []ReadRecord, gaps []int64) {
	t.Helper()
	offset := l.StartOffset()
	for offset < l.HighWatermark() {
		res, err := l.Read(offset, 1000, 1<<20)
		var unreadable *UnreadableError
		if errors.As(err, &unreadable) {
			gaps = append(gaps, offset)
			offset = unreadable.Next
			continue
		}
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		for _, r := range res.Records {
			r.Key = append([]byte(nil), r.Key...)
			r.Value = append([]byte(nil), r.Value...)
			recs = append(recs, r)
		}
		offset = res.Next
	}
	return recs, gaps
}

// checkRecord fails the test unless r is byte-identical to what the
// producer of its sequence number sent (invariant I1).
func checkRecord(t testing.TB, seed uint64, r ReadRecord) int64 {
	t.Helper()
	seq, ok := seqOf(r.Value)
	if !ok || string(r.Value) != string(value(seed, seq)) || string(r.Key) != fmt.Sprint("k", seq) {
		t.Fatalf("record at offset %d is not one a producer sent: key %q value %q", r.Offset, r.Key, r.Value)
	}
	return seq
}
