package partition

import (
	"errors"
	"path"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The tests of a large frame proven in parts by the lending read that
// first meets it (proof.go, proveInParts): docs/design.md, "Reads verify
// themselves".

// readBufferFS records the largest buffer a ReadAt of a file of the log's
// segments was handed: what a read held to read into.
type readBufferFS struct {
	vfs.FS
	largest *atomic.Int64
}

func (fs readBufferFS) OpenFile(name string, flag int) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return readBufferFile{f, fs.largest}, nil
}

type readBufferFile struct {
	vfs.File
	largest *atomic.Int64
}

func (f readBufferFile) ReadAt(p []byte, off int64) (int, error) {
	for n := int64(cap(p)); n > f.largest.Load(); {
		if f.largest.CompareAndSwap(f.largest.Load(), n) {
			break
		}
	}
	return f.File.ReadAt(p, off)
}

// unprovenLog commits frames of the given record sizes on d, one frame
// each, and opens the log again, so no frame is proven and none cached;
// it returns the log, for the caller to close, and the values by offset.
func unprovenLog(t *testing.T, d *sim.Disk, fs vfs.FS, frames ...[]int) (*Log, map[int64][]byte) {
	t.Helper()
	l := openLog(t, Options{FS: d})
	want := map[int64][]byte{}
	var next int64
	for _, sizes := range frames {
		recs := make([]Record, len(sizes))
		for i, n := range sizes {
			recs[i].Value = bigValue(next+int64(i), n)
			want[next+int64(i)] = recs[i].Value
		}
		produce(t, l, recs)
		next += int64(len(sizes))
	}
	closeLog(t, l)
	return openLog(t, Options{FS: fs, CacheBudget: NewCacheBudget(64 << 20)}), want
}

// spread is n record sizes from 1,000 to 40,000 bytes, no two parts'
// boundaries at a record's start.
func spread(n int) []int {
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 1000 + (i*7919)%39000
	}
	return sizes
}

// TestReadFunc_ALargeFrameNotYetProvenIsProvenInPartsAndLentAsWritten: a
// log just opened proves nothing yet. A lending read that streams a frame
// larger than proveInPartsOver proves it a part at a time and lends it
// from a proof: every record as written, across records cut by parts'
// ends, a record larger than a part, a small frame between, reads starting
// and stopping anywhere; the frames' proofs are kept for the reads after;
// and no read holds a buffer larger than two parts (read whole, the frame
// would be read into a buffer of its size). Reads that take too little
// to stream go the ordinary way.
func TestReadFunc_ALargeFrameNotYetProvenIsProvenInPartsAndLentAsWritten(t *testing.T) {
	var largest atomic.Int64
	d := newDisk(t, 1)
	a := spread(450) // about 9.2 MiB
	b := append(spread(400), 3<<20+4321, 77)
	l, want := unprovenLog(t, d, readBufferFS{d, &largest}, a, []int{10, 20, 30_000}, b)
	defer func() { closeLog(t, l) }()
	end := int64(len(a) + 3 + len(b))
	for _, base := range []int64{0, int64(len(a) + 3)} {
		if l.cache.proof(base) != nil {
			t.Fatalf("a proof of the frame at offset %d before any read", base)
		}
	}

	largest.Store(0)
	if sum, err := l.ReadFunc(0, len(a), 1<<30, asWritten(t, want, nil)); err != nil || sum.Next != int64(len(a)) {
		t.Fatalf("read of the first frame: %+v, %v", sum, err)
	}
	if got := largest.Load(); got > 2*proofPart {
		t.Fatalf("the read of the first frame held a %d-byte buffer: more than two parts", got)
	}
	lendAll(t, l, 0, end, 1<<16, 8<<20, want)
	for _, base := range []int64{0, int64(len(a) + 3)} {
		if l.cache.proof(base) == nil {
			t.Fatalf("the frame at offset %d was lent with no proof kept", base)
		}
	}

	for _, from := range []int64{333, int64(len(a) + 3 + 200), int64(len(a) + 3 + 400)} {
		closeLog(t, l)
		l = openLog(t, Options{FS: d, CacheBudget: NewCacheBudget(64 << 20)})
		lendAll(t, l, from, end, 1<<16, 5<<20, want)
	}
	closeLog(t, l)
	l = openLog(t, Options{FS: d, CacheBudget: NewCacheBudget(64 << 20)})
	for _, lim := range []struct{ records, bytes int }{{7, 1 << 30}, {1 << 16, 300 << 10}} {
		lendAll(t, l, 0, end, lim.records, lim.bytes, want)
	}
}

// damageAfterOpen changes the byte at of the log's first segment.
func damageAfterOpen(t *testing.T, d *sim.Disk, at int64, change func(byte) byte) {
	t.Helper()
	was, err := d.Contents(firstSegment)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Damage(firstSegment, at, []byte{change(was[at])}); err != nil {
		t.Fatal(err)
	}
}

// TestReadFunc_ALargeFrameThatFailsItsProofInPartsIsNeverLent: a byte of
// a frame not yet proven rots, or one of its envelopes is wrong under a
// CRC that matches (the frame is served whole or not at all). The proof
// in parts fails, nothing of the frame is lent, and the read fails as
// reading the frame whole does: unreadable up to the frame's end.
func TestReadFunc_ALargeFrameThatFailsItsProofInPartsIsNeverLent(t *testing.T) {
	a := spread(450)
	lastRecord := int64(wire.FrameHeaderSize) // where the last record's length starts
	for _, n := range a[:len(a)-1] {
		lastRecord += framedBytes(n)
	}
	for name, damage := range map[string]func(d *sim.Disk){
		"a rotted byte in its last part": func(d *sim.Disk) {
			damageAfterOpen(t, d, lastRecord+100, func(b byte) byte { return b ^ 0x10 })
		},
		"a bad envelope under a matching CRC": func(d *sim.Disk) {
			frame, err := d.Contents(firstSegment)
			if err != nil {
				t.Fatal(err)
			}
			h, err := wire.ParseFrameHeader(frame)
			if err != nil {
				t.Fatal(err)
			}
			frame = frame[:h.FrameLen()]
			frame[lastRecord+wire.RecordLenSize] = 0x7f // the envelope's version
			if _, err := wire.PutFrameHeader(frame, h.Codec, h.BaseOffset, int(h.RecordCount), int(h.UncompressedSize)); err != nil {
				t.Fatal(err)
			}
			if err := d.Damage(firstSegment, 0, frame); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDisk(t, 1)
			l, _ := unprovenLog(t, d, d, a)
			defer closeLog(t, l)
			damage(d)
			lent := 0
			_, err := l.ReadFunc(0, 1<<16, 1<<30, func(ReadRecord) error { lent++; return nil })
			var unreadable *UnreadableError
			if !errors.As(err, &unreadable) || unreadable.Next != int64(len(a)) || lent != 0 {
				t.Fatalf("read of the damaged frame: %v, %d records lent; want it unreadable up to offset %d, none lent", err, lent, len(a))
			}
			if l.cache.proof(0) != nil {
				t.Fatal("a proof of a frame that failed it")
			}
		})
	}
}

// TestReadFunc_AFrameProvenInPartsWhoseSecondReadFailsIsReadTheOrdinaryWay:
// the read of a part fails after the proof in parts read it and before
// any record of it was lent. The read goes the ordinary way and serves
// the records when the failure passed, or fails with it when it lasts;
// nothing is lent twice or out of order.
func TestReadFunc_AFrameProvenInPartsWhoseSecondReadFailsIsReadTheOrdinaryWay(t *testing.T) {
	a := spread(450)
	from, at := int64(0), int64(wire.FrameHeaderSize)
	for at < 3*proofPart { // the first record whose length starts in part 3
		at += framedBytes(a[from])
		from++
	}
	for _, lasting := range []bool{false, true} {
		t.Run(map[bool]string{false: "passing", true: "lasting"}[lasting], func(t *testing.T) {
			d := newDisk(t, 1)
			l, want := unprovenLog(t, d, d, a)
			defer closeLog(t, l)
			in := d.Inject(sim.Fault{Op: sim.OpRead, Path: firstSegment, Off: 3*proofPart + 10, Len: 1, Nth: 2, Sticky: lasting, Err: syscall.EIO})
			defer in.Remove()
			next := from
			sum, err := l.ReadFunc(from, 1<<16, 1<<30, func(r ReadRecord) error {
				if r.Offset != next || string(r.Value) != string(want[r.Offset]) {
					t.Fatalf("lent offset %d (%d bytes), want offset %d as written", r.Offset, len(r.Value), next)
				}
				next++
				return nil
			})
			if in.Fired() == 0 {
				t.Fatal("the second read of the part never came")
			}
			if lasting {
				if !errors.Is(err, syscall.EIO) || next != from {
					t.Fatalf("the failure lasting: %+v, %v, lent up to %d; want EIO and nothing lent", sum, err, next)
				}
				return
			}
			if err != nil || sum.Next != int64(len(a)) {
				t.Fatalf("the failure passing: %+v, %v; want every record from %d", sum, err, from)
			}
		})
	}
}

// TestReadFunc_AProofWhoseSegmentCannotBeOpenedFailsTheRead: a proof
// outlives its sealed segment's handle (the segment left the hot set),
// and the segment will not open again (EMFILE). The lending read that
// meets the proof goes the ordinary way at once and fails with the open's
// error, rather than meeting the proof again and again.
func TestReadFunc_AProofWhoseSegmentCannotBeOpenedFailsTheRead(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 1 << 20})
	a := spread(450)
	want := map[int64][]byte{}
	recs := make([]Record, len(a))
	for i, n := range a {
		recs[i].Value = bigValue(int64(i), n)
		want[int64(i)] = recs[i].Value
	}
	produce(t, l, recs)
	for i := range int64(hotSetSize + 1) { // a segment each
		produce(t, l, []Record{{Value: bigValue(int64(len(a))+i, 1<<20+100)}})
	}
	closeLog(t, l)
	l = openLog(t, Options{FS: d, SegmentMaxBytes: 1 << 20, CacheBudget: NewCacheBudget(64 << 20)})
	defer closeLog(t, l)
	if sum, err := l.ReadFunc(0, len(a), 1<<30, asWritten(t, want, nil)); err != nil || sum.Next != int64(len(a)) {
		t.Fatalf("the first read: %+v, %v", sum, err)
	}
	if l.cache.proof(0) == nil {
		t.Fatal("no proof of the first frame")
	}
	for i := range int64(hotSetSize) { // the first segment leaves the hot set
		if _, err := l.ReadFunc(int64(len(a))+i, 1, 1<<30, func(ReadRecord) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var opens atomic.Int64
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpOpen && path.Clean(c.Path) == firstSegment && opens.Add(1) <= 100 {
			return syscall.EMFILE // for long enough to tell one attempt from a loop
		}
		return nil
	})
	defer d.SetHook(nil)
	_, err := l.ReadFunc(0, len(a), 1<<30, func(ReadRecord) error { return nil })
	if !errors.Is(err, syscall.EMFILE) || opens.Load() > 2 {
		t.Fatalf("the read of a proven frame whose segment cannot be opened: %v after %d opens; want EMFILE after one or two", err, opens.Load())
	}
}
