package partition

import (
	"bytes"
	"errors"
	"math"
	"path"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The tests of frame proofs (proof.go): docs/design.md, "Reads verify
// themselves", a large frame lent part by part.

const firstSegment = testDir + "/00000000000000000000.log"

// framedBytes is what a keyless record of a value of n bytes takes in a
// frame: its length and its envelope.
func framedBytes(n int) int64 { return 4 + 10 + int64(n) }

// proofLog opens a log with a cache budget over d.
func proofLog(t *testing.T, d *sim.Disk) *Log {
	t.Helper()
	l := openLog(t, Options{FS: d, CacheBudget: NewCacheBudget(64 << 20)})
	t.Cleanup(func() { closeLog(t, l) })
	return l
}

// produce commits recs and returns their base offset.
func produce(t *testing.T, l *Log, recs []Record) int64 {
	t.Helper()
	base, err := l.Produce(bg, recs)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// lendAll reads [from, to) with ReadFunc at the given limits, checking
// each record against want, and returns how many reads it took.
func lendAll(t *testing.T, l *Log, from, to int64, maxRecords, maxBytes int, want map[int64][]byte) int {
	t.Helper()
	reads := 0
	for next := from; next < to; reads++ {
		sum, err := l.ReadFunc(next, maxRecords, maxBytes, asWritten(t, want, nil))
		if err != nil {
			t.Fatalf("read at %d (limits %d records, %d bytes): %v", next, maxRecords, maxBytes, err)
		}
		if sum.Records == 0 || sum.Next != next+int64(sum.Records) {
			t.Fatalf("read at %d lent %d records, next %d", next, sum.Records, sum.Next)
		}
		next = sum.Next
	}
	return reads
}

// asWritten is a ReadFunc consumer that fails the test on a record whose
// value differs from want's and counts the records in *lent (unless nil).
func asWritten(t *testing.T, want map[int64][]byte, lent *int64) func(ReadRecord) error {
	return func(r ReadRecord) error {
		if !bytes.Equal(r.Value, want[r.Offset]) {
			t.Fatalf("offset %d: lent %d bytes that differ from the %d written", r.Offset, len(r.Value), len(want[r.Offset]))
		}
		if lent != nil {
			*lent++
		}
		return nil
	}
}

// TestReadFunc_AProvenFrameIsLentPartByPartAsWritten: a large frame the
// commit's read-back proved is lent a part at a time: records cut by a
// part's end, a record larger than a part, reads stopping anywhere inside
// and starting at the part that holds their first record, proven frames
// beside a small one; every record exactly as written.
func TestReadFunc_AProvenFrameIsLentPartByPartAsWritten(t *testing.T) {
	d := newDisk(t, 1)
	l := proofLog(t, d)
	want := map[int64][]byte{}
	var next int64
	frame := func(sizes ...int) int64 {
		recs := make([]Record, len(sizes))
		for i, n := range sizes {
			recs[i].Value = bigValue(next+int64(i), n)
			want[next+int64(i)] = recs[i].Value
		}
		base := produce(t, l, recs)
		next += int64(len(sizes))
		return base
	}
	var a, b []int
	for i := range 600 {
		a = append(a, 1000+(i*7919)%9000) // about 3.3 MiB, no record at a part's start
	}
	b = append(b, 100, 5000, 2<<20+12345, 77, 300_000)
	large := []int64{frame(a...), frame(b...)}
	frame(10, 20, 30_000)
	large = append(large, frame(a[:300]...))
	end := next
	for _, base := range large {
		if l.cache.proof(base) == nil {
			t.Fatalf("the commit's read-back left no proof of the frame at offset %d", base)
		}
	}

	lendAll(t, l, 0, end, 1<<16, 8<<20, want)
	lendAll(t, l, 0, end, 1<<16, 5<<20, want)

	// A read from record 450 of the first frame reads from the part that
	// holds it on, nothing before (the ordinary way reads the frame from
	// its start, or serves it from the cache).
	at := int64(wire.FrameHeaderSize)
	for _, n := range a[:450] {
		at += framedBytes(n)
	}
	var lowest atomic.Int64
	lowest.Store(1 << 62)
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && path.Clean(c.Path) == firstSegment && c.Off < lowest.Load() {
			lowest.Store(c.Off)
		}
		return nil
	})
	lendAll(t, l, 450, end, 1<<16, 8<<20, want)
	d.SetHook(nil)
	if got := lowest.Load(); got != at/proofPart*proofPart {
		t.Fatalf("a read from record 450 (byte %d) read from byte %d, want the start of its part, %d", at, got, at/proofPart*proofPart)
	}

	// Reads that take less than proofStreamMin each go the ordinary way:
	// read once, served from the cache after.
	for _, lim := range []struct{ records, bytes int }{{7, 1 << 30}, {1 << 16, 300 << 10}, {1, 1}} {
		lendAll(t, l, 0, end, lim.records, lim.bytes, want)
	}
}

// TestReadFunc_SmallReadsOfAProvenFrameReadItOnce: a consumer taking a
// hundred records a read from a proven frame reads the frame from the
// disk about once, as it did before proofs: it goes the ordinary way and
// the frame is served from the cache, not part by part a read.
func TestReadFunc_SmallReadsOfAProvenFrameReadItOnce(t *testing.T) {
	d := newDisk(t, 1)
	l := proofLog(t, d)
	recs := bigRecords(0, 4000, 1000) // about 4 MiB
	want := map[int64][]byte{}
	for i, r := range recs {
		want[int64(i)] = r.Value
	}
	produce(t, l, recs)
	if l.cache.proof(0) == nil {
		t.Fatal("no proof of the frame")
	}
	var read atomic.Int64
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && path.Clean(c.Path) == firstSegment {
			read.Add(int64(c.Len))
		}
		return nil
	})
	defer d.SetHook(nil)
	lendAll(t, l, 0, 4000, 100, 1<<30, want)
	frame := int64(wire.FrameHeaderSize) + 4000*framedBytes(1000)
	if got := read.Load(); got > frame+readWindowMax {
		t.Fatalf("reads of 100 records read %d bytes of a frame of %d", got, frame)
	}
}

// damagedPartLog commits one frame of 40 records of 100 KiB (four parts
// and more) and returns the log, the values and the byte of the segment
// holding the middle of record 25's value.
func damagedPartLog(t *testing.T) (*sim.Disk, *Log, map[int64][]byte, int64) {
	t.Helper()
	const n, size = 40, 100 << 10
	d := newDisk(t, 1)
	l := proofLog(t, d)
	recs := bigRecords(0, n, size)
	want := map[int64][]byte{}
	for i, r := range recs {
		want[int64(i)] = r.Value
	}
	produce(t, l, recs)
	if l.cache.proof(0) == nil {
		t.Fatal("no proof of the frame")
	}
	return d, l, want, wire.FrameHeaderSize + 25*framedBytes(size) + 4 + 10 + size/2
}

// TestReadFunc_AProvenPartWhoseBytesChangedIsNeverLent: a byte of a
// proven frame rots after the proof. The records of the parts before it
// are lent (their bytes are the ones proven), none from the part that
// changed; the next read finds the frame damaged, as a read of any
// frame whose CRC fails does, and the proof is gone.
func TestReadFunc_AProvenPartWhoseBytesChangedIsNeverLent(t *testing.T) {
	d, l, want, at := damagedPartLog(t)
	if err := d.Damage(firstSegment, at, []byte{want[25][len(want[25])/2] ^ 0x40}); err != nil {
		t.Fatal(err)
	}
	var lent int64
	sum, err := l.ReadFunc(0, 1<<16, 1<<30, asWritten(t, want, &lent))
	if err != nil {
		t.Fatalf("the read that met the changed part: %v", err)
	}
	if sum.Next != lent || lent == 0 || lent > 25 {
		t.Fatalf("lent offsets [0, %d), next %d: want the records of the parts before the changed one", lent, sum.Next)
	}
	if l.cache.proof(0) != nil {
		t.Fatal("the proof outlived a part that no longer matches it")
	}
	var unreadable *UnreadableError
	if _, err := l.ReadFunc(sum.Next, 1<<16, 1<<30, func(ReadRecord) error { return nil }); !errors.As(err, &unreadable) || unreadable.Next != 40 {
		t.Fatalf("the next read: %v, want the frame unreadable up to offset 40", err)
	}
}

// TestReadFunc_DamageFoundTheOrdinaryWayEndsTheProof: a byte of a proven
// frame's first part rots. A lending read from record 30 streams the
// parts from its own on, whose bytes are the ones proven; a read that
// meets the damage the ordinary way forgets the proof, and from then on
// every read of the frame finds it damaged.
func TestReadFunc_DamageFoundTheOrdinaryWayEndsTheProof(t *testing.T) {
	d, l, want, _ := damagedPartLog(t)
	at := int64(wire.FrameHeaderSize) + 2*framedBytes(100<<10) + 100 // in record 2's value
	if err := d.Damage(firstSegment, at, []byte{want[2][86] ^ 1}); err != nil {
		t.Fatal(err)
	}
	lendAll(t, l, 30, 40, 1<<16, 1<<30, want)
	var unreadable *UnreadableError
	if _, err := l.Read(0, 1<<16, 1<<30); !errors.As(err, &unreadable) {
		t.Fatalf("Read of the damaged frame: %v", err)
	}
	if l.cache.proof(0) != nil {
		t.Fatal("the proof outlived the damage a read found")
	}
	if _, err := l.ReadFunc(30, 1<<16, 1<<30, func(ReadRecord) error { return nil }); !errors.As(err, &unreadable) || unreadable.Next != 40 {
		t.Fatalf("a lending read of the damaged frame after: %v", err)
	}
}

// TestReadFunc_AProvenFrameWhoseReadFailsIsReadTheOrdinaryWay: a part's
// read fails with EIO after records of the frame were lent. The read ends
// there; the next goes the ordinary way, and serves the frame when the
// failure passed, or fails with it when it lasts.
func TestReadFunc_AProvenFrameWhoseReadFailsIsReadTheOrdinaryWay(t *testing.T) {
	for _, lasting := range []bool{false, true} {
		t.Run(map[bool]string{false: "passing", true: "lasting"}[lasting], func(t *testing.T) {
			d, l, want, _ := damagedPartLog(t)
			f := sim.Fault{Op: sim.OpRead, Path: firstSegment, Off: 2 * proofPart, Len: 1, Nth: 1, Err: syscall.EIO}
			if lasting {
				f.Nth, f.Sticky = 0, true
			}
			in := d.Inject(f)
			defer in.Remove()
			sum, err := l.ReadFunc(0, 1<<16, 1<<30, asWritten(t, want, nil))
			if err != nil || sum.Records == 0 || sum.Next >= 40 || in.Fired() != 1 {
				t.Fatalf("the read whose part failed: %+v, %v (fault fired %d times); want the records before the part", sum, err, in.Fired())
			}
			_, err = l.ReadFunc(sum.Next, 1<<16, 1<<30, asWritten(t, want, nil))
			if lasting != errors.Is(err, syscall.EIO) || !lasting && err != nil {
				t.Fatalf("the next read, the failure lasting %v: %v", lasting, err)
			}
		})
	}
}

// TestCommit_AFailedCommitForgetsTheProofsItsReadBackMade: a commit whose
// read-back proved a large frame and then failed on the next frame
// discards both, and the proof with them (docs/design.md, "Commit
// failure": the caches forget the cut frames); the retry is read back as
// written.
func TestCommit_AFailedCommitForgetsTheProofsItsReadBackMade(t *testing.T) {
	d := newDisk(t, 1)
	l := proofLog(t, d)
	// Over the drain's 1 MiB: written as its own frame by the append; and
	// over the read-back's window, so the read-back reads the next frame
	// on its own.
	first := bigRecords(0, 9, 1<<20)
	frameLen := int64(wire.FrameHeaderSize) + 9*framedBytes(1<<20)
	var armed, proven atomic.Bool
	d.SetHook(func(c sim.Call) error {
		if armed.Load() && c.Op == sim.OpRead && path.Clean(c.Path) == firstSegment && c.Off >= frameLen {
			proven.Store(l.cache.proof(0) != nil)
			return syscall.EIO
		}
		return nil
	})
	defer d.SetHook(nil)
	if _, err := l.Append(bg, first); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if _, err := l.Produce(bg, bigRecords(3, 1, 100)); err == nil {
		t.Fatal("a commit whose read-back failed succeeded")
	}
	armed.Store(false)
	if !proven.Load() {
		t.Fatal("the read-back had not proved the first frame when it met the second: the test does not test the discard")
	}
	if l.cache.proof(0) != nil || l.HighWatermark() != 0 {
		t.Fatalf("after the failed commit: proof %v, high watermark %d; want neither", l.cache.proof(0) != nil, l.HighWatermark())
	}
	retry := bigRecords(0, 4, 400<<10)
	produce(t, l, retry)
	want := map[int64][]byte{}
	for i, r := range retry {
		want[int64(i)] = r.Value
	}
	lendAll(t, l, 0, 4, 1<<16, 1<<30, want)
}

// TestFrameCache_ProofsAreBoundedAndCountAgainstTheBudget: a log keeps at
// most proofEntries proofs, the oldest going first; their memory is held
// of the node's budget while they are kept and given back when they are
// forgotten or the log closes.
func TestFrameCache_ProofsAreBoundedAndCountAgainstTheBudget(t *testing.T) {
	budget := NewCacheBudget(1 << 20)
	c := &frameCache{budget: budget}
	seg := &segment{}
	for i := range int64(proofEntries + 5) {
		c.putProof(&frameProof{seg: seg, pos: i << 21, bytes: 2 << 20, base: 10 * i, end: 10*i + 10, sums: make([]wire.FrameSum, 2), firsts: make([]partFirst, 2)})
	}
	if len(c.proofs) != proofEntries || c.proof(0) != nil || c.proof(10*proofEntries+45) == nil {
		t.Fatalf("%d proofs kept, the oldest kept %v", len(c.proofs), c.proof(0) != nil)
	}
	held := func() int64 {
		var n int64
		for _, p := range c.proofs {
			n += int64(p.memory())
		}
		return n
	}
	if budget.Used() != held() || held() == 0 {
		t.Fatalf("budget used %d, proofs hold %d", budget.Used(), held())
	}
	c.forgetFrom(10 * 40)
	if c.proof(10*40) != nil || c.proof(10*39) == nil || budget.Used() != held() {
		t.Fatalf("after forgetting from offset 400: budget used %d, proofs hold %d", budget.Used(), held())
	}
	if c.provenAt(seg, 39<<21) != true || c.provenAt(seg, 40<<21) {
		t.Fatal("provenAt disagrees with the proofs kept")
	}
	c.close()
	if budget.Used() != 0 || c.proof(10*39) != nil {
		t.Fatalf("after close the budget holds %d", budget.Used())
	}
	c.putProof(&frameProof{seg: seg, base: 0, end: 10, sums: make([]wire.FrameSum, 1)})
	if c.proof(0) != nil {
		t.Fatal("a closed cache kept a proof")
	}
}

// TestReadFunc_AProvenFrameWhoseHeaderCRCRottedIsDamaged: the magic and
// the CRC field, which the part sums leave out, are checked too when a
// read streams part 0: a proven frame whose CRC field rotted is never
// lent, and the read finds it damaged as Read does.
func TestReadFunc_AProvenFrameWhoseHeaderCRCRottedIsDamaged(t *testing.T) {
	for _, at := range []int64{0, 23} { // the magic, the CRC
		d, l, _, _ := damagedPartLog(t)
		if err := d.Damage(firstSegment, at, []byte{0xde, 0xad}); err != nil {
			t.Fatal(err)
		}
		var unreadable *UnreadableError
		if _, err := l.ReadFunc(0, 1<<16, 1<<30, func(r ReadRecord) error {
			t.Fatalf("lent offset %d of a frame whose header rotted (byte %d)", r.Offset, at)
			return nil
		}); !errors.As(err, &unreadable) || l.cache.proof(0) != nil {
			t.Fatalf("header byte %d rotted: %v, proof kept %v", at, err, l.cache.proof(0) != nil)
		}
	}
}

// TestReadFunc_ARecordLimitOfMaxIntStreams: a caller with no record
// limit (math.MaxInt) streams a proven frame like one with a large limit.
func TestReadFunc_ARecordLimitOfMaxIntStreams(t *testing.T) {
	p := &frameProof{base: 0, end: 2, bytes: 8<<20 + 4}
	for _, maxRecords := range []int{math.MaxInt, 1 << 16} {
		if rd := (reader{maxRecords: maxRecords, maxBytes: math.MaxInt}); !rd.streams(p) {
			t.Fatalf("a read of at most %d records does not stream a frame of two 4 MiB records", maxRecords)
		}
	}
	small := &frameProof{base: 0, end: 1000, bytes: 8 << 20}
	if rd := (reader{maxRecords: 100, maxBytes: math.MaxInt}); rd.streams(small) {
		t.Fatal("a read of 100 records of 8 KiB streams the frame")
	}
}
