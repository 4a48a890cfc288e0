package partition

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Tests of docs/design.md, "Flusher pipeline", and partition/doc.go,
// "Flusher" and R2. Everything that involves time runs in a synctest bubble:
// the log and the disk are made inside it, so the actor's timer runs on the
// bubble's fake clock.

// advanceBy moves a synctest bubble's fake clock forward by d and waits until
// every goroutine of the bubble is blocked again (the actor has finished the
// passes that came due).
func advanceBy(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// segmentPathOf is the path of the test log's segment named for base.
func segmentPathOf(t testing.TB, base int64) string {
	t.Helper()
	name, err := wire.SegmentFileName(base)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(testDir, name)
}

// segmentBases lists the segment files of the test log, by base offset.
func segmentBases(t testing.TB, d *sim.Disk) []int64 {
	t.Helper()
	entries, err := d.ReadDir(testDir)
	if err != nil {
		t.Fatalf("list %s: %v", testDir, err)
	}
	var bases []int64
	for _, e := range entries {
		if base, err := wire.ParseSegmentFileName(e.Name); err == nil {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	return bases
}

// frameSpan is where a frame sits in a segment file.
type frameSpan struct {
	pos, size int64
	base      int64
	count     int
}

func (f frameSpan) end() int64 { return f.base + int64(f.count) }

// framesIn parses the frame headers of a segment file as they are now; the
// file must hold only whole, valid frames.
func framesIn(t testing.TB, d *sim.Disk, path string) []frameSpan {
	t.Helper()
	b, err := d.Contents(path)
	if err != nil {
		t.Fatalf("contents of %s: %v", path, err)
	}
	var out []frameSpan
	for pos := int64(0); pos < int64(len(b)) && !allZero(b[pos:]); {
		h, err := wire.CheckFrame(b[pos:])
		if err != nil {
			t.Fatalf("%s byte %d: %v", path, pos, err)
		}
		out = append(out, frameSpan{pos: pos, size: h.FrameLen(), base: h.BaseOffset, count: int(h.RecordCount)})
		pos += h.FrameLen()
	}
	return out
}

// allZero reports whether b holds only zeros: space preallocated past the
// frames.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// diskCalls records the disk calls a hook sees; safe for concurrent use.
type diskCalls struct {
	mu    sync.Mutex
	calls []sim.Call
}

func (c *diskCalls) hook(call sim.Call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	return nil
}

// count is the number of calls of op on path ("" for any path).
func (c *diskCalls) count(op sim.Op, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.calls {
		if call.Op == op && (path == "" || call.Path == path) {
			n++
		}
	}
	return n
}

// ops is the sequence of calls on path whose op is one of ops.
func (c *diskCalls) ops(path string, ops ...sim.Op) []sim.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []sim.Op
	for _, call := range c.calls {
		if call.Path == path && slices.Contains(ops, call.Op) {
			out = append(out, call.Op)
		}
	}
	return out
}

func (c *diskCalls) all() []sim.Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// "Flusher pipeline": appended records wait in the buffer and a drain runs
// 100 ms after the first of them, writing one frame; nothing appended is
// visible (the high watermark does not move) until CommitDurable, which
// then writes nothing more: the drained frame is the commit's.
func TestFlusher_BackgroundDrainAfter100ms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(1)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)
		seg := segmentPathOf(t, 0)
		var calls diskCalls
		d.SetHook(calls.hook)

		base, err := l.Append(bg, records(1, 0, 3))
		if err != nil || base != 0 {
			t.Fatalf("append: base %d, err %v; want 0, nil", base, err)
		}
		advanceBy(99 * time.Millisecond)
		if n := calls.count(sim.OpWrite, seg); n != 0 {
			t.Fatalf("after 99ms: %d writes to %s, want 0 (drain interval is 100ms)", n, seg)
		}
		if b, _ := d.Contents(seg); len(b) != 0 {
			t.Fatalf("after 99ms the segment holds %d bytes, want 0", len(b))
		}
		advanceBy(time.Millisecond)
		if n := calls.count(sim.OpWrite, seg); n != 1 {
			t.Fatalf("after 100ms: %d writes to %s, want 1", n, seg)
		}
		frames := framesIn(t, d, seg)
		if len(frames) != 1 || frames[0].base != 0 || frames[0].count != 3 {
			t.Fatalf("segment frames %+v, want one frame of 3 records at base 0", frames)
		}

		advanceBy(2 * time.Second) // and the background sync
		if hwm := l.HighWatermark(); hwm != 0 {
			t.Fatalf("high watermark %d after a background drain, want 0: drained records are not visible", hwm)
		}
		res, err := l.Read(0, 100, 1<<20)
		if err != nil || len(res.Records) != 0 || res.Next != 0 {
			t.Fatalf("read at 0 before the commit: %d records, next %d, err %v; want none, 0, nil", len(res.Records), res.Next, err)
		}

		if err := l.CommitDurable(bg); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if hwm := l.HighWatermark(); hwm != 3 {
			t.Fatalf("high watermark %d after the commit, want 3", hwm)
		}
		if n := calls.count(sim.OpWrite, seg); n != 1 {
			t.Fatalf("%d frame writes in all, want 1: the commit writes nothing the drain already wrote", n)
		}
		recs, gaps := readAll(t, l)
		if len(recs) != 3 || len(gaps) != 0 {
			t.Fatalf("read back %d records and gaps %v, want 3 and none", len(recs), gaps)
		}
		for i, r := range recs {
			if seq := checkRecord(t, 1, r); seq != int64(i) || r.Offset != int64(i) {
				t.Fatalf("record %d: offset %d seq %d", i, r.Offset, seq)
			}
		}
	})
}

// bigRecord is one record whose envelope is exactly envelopeBytes long.
func bigRecord(t testing.TB, envelopeBytes int) Record {
	t.Helper()
	key := []byte("big")
	n := envelopeBytes - wire.EnvelopeSize(len(key), 0)
	for wire.EnvelopeSize(len(key), n) > envelopeBytes {
		n--
	}
	for wire.EnvelopeSize(len(key), n) < envelopeBytes {
		n++
	}
	if wire.EnvelopeSize(len(key), n) != envelopeBytes {
		t.Fatalf("no payload size makes a %d-byte envelope", envelopeBytes)
	}
	return Record{Key: key, Value: bytes.Repeat([]byte{'v'}, n)}
}

// "Flusher pipeline": a drain runs at 1,000 records or 1 MiB buffered, at
// once, with no time passing; one record or byte fewer stays buffered.
func TestFlusher_DrainAt1000RecordsOr1MiB(t *testing.T) {
	tests := []struct {
		name       string
		appends    func(t testing.TB) [][]Record
		wantWrites []int // frame writes after each append
		wantCounts []int // record counts of the frames written in the end
	}{
		{
			name:       "999 records stay buffered",
			appends:    func(testing.TB) [][]Record { return [][]Record{records(1, 0, 999)} },
			wantWrites: []int{0},
		},
		{
			name:       "1000 records in one append drain at once",
			appends:    func(testing.TB) [][]Record { return [][]Record{records(1, 0, 1000)} },
			wantWrites: []int{1},
			wantCounts: []int{1000},
		},
		{
			name: "the append that makes 1000 drains them all",
			appends: func(testing.TB) [][]Record {
				return [][]Record{records(1, 0, 600), records(1, 600, 399), records(1, 999, 1)}
			},
			wantWrites: []int{0, 0, 1},
			wantCounts: []int{1000},
		},
		{
			name:       "1 MiB less one byte stays buffered",
			appends:    func(t testing.TB) [][]Record { return [][]Record{{bigRecord(t, 1<<20-1)}} },
			wantWrites: []int{0},
		},
		{
			name:       "1 MiB drains at once",
			appends:    func(t testing.TB) [][]Record { return [][]Record{{bigRecord(t, 1<<20)}} },
			wantWrites: []int{1},
			wantCounts: []int{1},
		},
		{
			name: "two appends reaching 1 MiB together",
			appends: func(t testing.TB) [][]Record {
				return [][]Record{{bigRecord(t, 1<<19)}, {bigRecord(t, 1<<19)}}
			},
			wantWrites: []int{0, 1},
			wantCounts: []int{2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := sim.NewDisk(2)
				l := openLog(t, testOptions(d))
				defer closeLog(t, l)
				seg := segmentPathOf(t, 0)
				var calls diskCalls
				d.SetHook(calls.hook)
				started := time.Now()
				for i, batch := range tc.appends(t) {
					if _, err := l.Append(bg, batch); err != nil {
						t.Fatalf("append %d: %v", i, err)
					}
					if n := calls.count(sim.OpWrite, seg); n != tc.wantWrites[i] {
						t.Fatalf("after append %d: %d frame writes, want %d", i, n, tc.wantWrites[i])
					}
				}
				if elapsed := time.Since(started); elapsed != 0 {
					t.Fatalf("%v of fake time passed; the size drains must not wait for a timer", elapsed)
				}
				var counts []int
				for _, f := range framesIn(t, d, seg) {
					counts = append(counts, f.count)
				}
				if !slices.Equal(counts, tc.wantCounts) {
					t.Fatalf("frames on disk hold %v records, want %v", counts, tc.wantCounts)
				}
			})
		})
	}
}

// "Flusher pipeline": in batched mode a background-written frame is
// synced 1 s after its write, not before.
func TestFlusher_BackgroundSyncOneSecondAfterWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(3)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)
		seg := segmentPathOf(t, 0)
		var calls diskCalls
		d.SetHook(calls.hook)

		if _, err := l.Append(bg, records(3, 0, 4)); err != nil {
			t.Fatal(err)
		}
		advanceBy(100 * time.Millisecond)
		if got := calls.ops(seg, sim.OpWrite, sim.OpSync); !slices.Equal(got, []sim.Op{sim.OpWrite}) {
			t.Fatalf("after the drain: %v, want [write]", got)
		}
		if !d.Pending(seg) {
			t.Fatal("the drained frame is already durable; want it unsynced until the sync interval")
		}
		advanceBy(999 * time.Millisecond)
		if n := calls.count(sim.OpSync, seg); n != 0 {
			t.Fatalf("%d syncs 999ms after the write, want 0", n)
		}
		advanceBy(time.Millisecond)
		if got := calls.ops(seg, sim.OpWrite, sim.OpSync); !slices.Equal(got, []sim.Op{sim.OpWrite, sim.OpSync}) {
			t.Fatalf("1s after the write: %v, want [write sync]", got)
		}
		if d.Pending(seg) {
			t.Fatal("the frame is still unsynced 1s after its write")
		}
		advanceBy(time.Minute)
		if n := len(calls.all()); n != 2 {
			t.Fatalf("%d disk calls in all after a minute, want 2 (one write, one sync): %v", n, calls.all())
		}
	})
}

// partition/doc.go, R2: the flusher never writes a frame while an earlier
// frame of the segment is unsynced; a second background drain syncs the
// first frame before it writes the next.
func TestFlusher_R2_SecondDrainSyncsFirstFrameBeforeWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(4)
		opts := testOptions(d)
		opts.noPrealloc = true // the exact sequence of frame writes and syncs
		l := openLog(t, opts)
		defer closeLog(t, l)
		seg := segmentPathOf(t, 0)
		var calls diskCalls
		d.SetHook(calls.hook)

		if _, err := l.Append(bg, records(4, 0, 2)); err != nil {
			t.Fatal(err)
		}
		advanceBy(100 * time.Millisecond)
		if _, err := l.Append(bg, records(4, 2, 2)); err != nil {
			t.Fatal(err)
		}
		advanceBy(100 * time.Millisecond) // second drain, 200ms: first frame still inside its sync interval
		want := []sim.Op{sim.OpWrite, sim.OpSync, sim.OpWrite}
		if got := calls.ops(seg, sim.OpWrite, sim.OpSync); !slices.Equal(got, want) {
			t.Fatalf("disk calls %v, want %v: the first frame must be synced before the second is written", got, want)
		}
		advanceBy(time.Second)
		want = append(want, sim.OpSync)
		if got := calls.ops(seg, sim.OpWrite, sim.OpSync); !slices.Equal(got, want) {
			t.Fatalf("disk calls %v, want %v", got, want)
		}
		if frames := framesIn(t, d, seg); len(frames) != 2 || frames[1].base != 2 {
			t.Fatalf("frames %+v, want two, the second at base 2", frames)
		}
	})
}

// "Flusher pipeline", flush_interval is not a heartbeat: a pass is owed
// only for buffered records (due 100 ms after the first), unsynced bytes
// (1 s after the first unsynced write) or a failed write to retry; a
// high-watermark advance owes nothing, and a poisoned log nothing.
func TestFlusher_NeedsTimer(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name    string
		state   state
		wantOK  bool
		wantDue time.Time
	}{
		{name: "idle: empty buffer, everything synced", state: state{}},
		{name: "high watermark advanced, nothing owed",
			state: state{nextOffset: 10, written: 10, hwm: 10, writePos: 500, syncedPos: 500, hwmPos: 500}},
		{name: "buffered records: due 100ms after the first append",
			state: state{buffer: [][]byte{{1}}, bufferBytes: 1, bufferSince: t0}, wantOK: true, wantDue: t0.Add(100 * ms)},
		{name: "unsynced bytes: due 1s after the first unsynced write",
			state: state{writePos: 700, syncedPos: 200, unsyncedSince: t0}, wantOK: true, wantDue: t0.Add(time.Second)},
		{name: "buffer and unsynced bytes: the drain comes first",
			state:  state{buffer: [][]byte{{1}}, bufferSince: t0.Add(300 * ms), writePos: 700, unsyncedSince: t0},
			wantOK: true, wantDue: t0.Add(400 * ms)},
		{name: "buffer and unsynced bytes: the sync comes first",
			state:  state{buffer: [][]byte{{1}}, bufferSince: t0.Add(950 * ms), writePos: 700, unsyncedSince: t0},
			wantOK: true, wantDue: t0.Add(time.Second)},
		{name: "poisoned: nothing is owed",
			state: state{poison: errors.New("poisoned"), buffer: [][]byte{{1}}, bufferSince: t0, writePos: 700, unsyncedSince: t0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.state
			s.log = &Log{opts: Options{flush: defaultFlushPolicy}}
			due, ok := s.needsTimer()
			if ok != tc.wantOK || !due.Equal(tc.wantDue) {
				t.Fatalf("needsTimer() = %v, %v; want %v, %v", due, ok, tc.wantDue, tc.wantOK)
			}
		})
	}

	t.Run("failed write to retry: due when its backoff ends, whatever the buffer", func(t *testing.T) {
		s := &state{log: &Log{opts: Options{flush: defaultFlushPolicy}}, unwritten: &pendingFrame{base: 0, count: 1},
			backoffUntil: t0.Add(100 * ms), buffer: [][]byte{{1}}, bufferSince: t0.Add(-time.Hour)}
		due, ok := s.needsTimer()
		if !ok || !due.Equal(t0.Add(100*ms)) {
			t.Fatalf("needsTimer() = %v, %v; want %v, true: a failed write must not make the timer spin", due, ok, t0.Add(100*ms))
		}
	})
	t.Run("failed drain of the buffer: due when its backoff ends, not when the buffer aged", func(t *testing.T) {
		s := &state{log: &Log{opts: Options{flush: defaultFlushPolicy}},
			backoffUntil: t0.Add(100 * ms), buffer: [][]byte{{1}}, bufferSince: t0.Add(-time.Hour)}
		due, ok := s.needsTimer()
		if !ok || !due.Equal(t0.Add(100*ms)) {
			t.Fatalf("needsTimer() = %v, %v; want %v, true", due, ok, t0.Add(100*ms))
		}
	})
}

// "Flusher pipeline": an idle partition holds no timer and uses no CPU.
// After produce and append traffic has settled (every owed drain and sync
// done), an hour of fake time brings not one disk call; and an append into
// the empty buffer arms the timer again.
func TestFlusher_IdleLogDoesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(5)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)
		seg := segmentPathOf(t, 0)
		if _, err := l.Produce(bg, records(5, 0, 3)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(bg, records(5, 3, 2)); err != nil {
			t.Fatal(err)
		}
		advanceBy(100 * time.Millisecond) // drain
		advanceBy(time.Second)            // sync
		if d.Pending(seg) {
			t.Fatal("segment still unsynced after the sync interval")
		}

		var calls diskCalls
		d.SetHook(calls.hook)
		advanceBy(time.Hour)
		if got := calls.all(); len(got) != 0 {
			t.Fatalf("an idle log made %d disk calls in an hour: %v", len(got), got)
		}

		if _, err := l.Append(bg, records(5, 5, 1)); err != nil {
			t.Fatal(err)
		}
		advanceBy(100 * time.Millisecond)
		if n := calls.count(sim.OpWrite, seg); n != 1 {
			t.Fatalf("%d frame writes 100ms after an append into the empty buffer, want 1", n)
		}
	})
}

// "Segments, frames and records": the commit time is raised under the
// partition's produce order if an earlier commit carried a later one, so it
// never decreases along the partition. Produces at advancing fake times keep
// their own times, in order.
func TestFlusher_CommitTimeNonDecreasingAcrossProduces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(6)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)
		var want []int64
		for i := range 40 {
			now := time.Now().UnixMilli()
			if _, err := l.Produce(bg, records(6, int64(i)*2, 2)); err != nil {
				t.Fatal(err)
			}
			want = append(want, now, now)
			advanceBy(time.Duration(i%3) * 7 * time.Millisecond) // some produces share a millisecond
		}
		recs, _ := readAll(t, l)
		if len(recs) != len(want) {
			t.Fatalf("read %d records, want %d", len(recs), len(want))
		}
		for i, r := range recs {
			checkRecord(t, 6, r)
			if r.CommittedAtUnixMs != want[i] {
				t.Fatalf("record %d committed at %d, want %d", i, r.CommittedAtUnixMs, want[i])
			}
			if i > 0 && r.CommittedAtUnixMs < recs[i-1].CommittedAtUnixMs {
				t.Fatalf("commit time decreases at offset %d: %d after %d", i, r.CommittedAtUnixMs, recs[i-1].CommittedAtUnixMs)
			}
		}
	})
}

// TestDrain_ABatchAloneIsWrittenFromItsOwnBytes: a buffer holding one
// batch is drained with no copy, the header put in the room before its
// records; a batch behind another is copied into a frame of both. The
// frames hold the same bytes either way, a commit time raised in place
// included.
func TestDrain_ABatchAloneIsWrittenFromItsOwnBytes(t *testing.T) {
	none, _ := codec.ByID(codec.None)
	s := &state{log: &Log{opts: Options{Codec: none, flush: defaultFlushPolicy}}, commitFloor: 1 << 50}
	first := buildOrFail(t, records(1, 0, 2))
	s.appendEnvelopes(first) // raised to the floor, in place
	alone, err := s.drain()
	if err != nil {
		t.Fatal(err)
	}
	if &alone.bytes[0] != &first.frame[0] || alone.buf != nil {
		t.Fatal("a batch alone was copied into a frame of its own")
	}
	large := buildOrFail(t, records(1, 0, 1000)) // past pooledBatchBytes: its frame is pooled
	s.appendEnvelopes(large)
	pooled, err := s.drain()
	if err != nil {
		t.Fatal(err)
	}
	if large.pooled == nil || pooled.buf != nil || len(pooled.pools) != 1 || pooled.pools[0] != large.pooled || &pooled.bytes[0] != &large.frame[0] || pooled.pinned != cap(*large.pooled) {
		t.Fatal("a large batch alone is not its frame, its pooled buffer carried to the write and counted whole")
	}
	s.nextOffset = 2 // as if the large one had never been
	behind := []batch{buildOrFail(t, records(1, 0, 2)), buildOrFail(t, records(1, 2, 1))}
	for _, b := range behind {
		s.appendEnvelopes(b)
	}
	both, err := s.drain()
	if err != nil {
		t.Fatal(err)
	}
	defer putBuf(both.buf)
	if want := cap(behind[0].frame) + cap(behind[1].frame); both.pinned != want || len(both.pools) != 0 {
		t.Fatalf("a frame of two small batches pins %d bytes in %d pooled buffers, want %d in none", both.pinned, len(both.pools), want)
	}
	if s.bufferFrame != nil || len(s.buffer) != 0 {
		t.Fatal("drain left the buffer's frame behind")
	}
	recs := func(f *pendingFrame) []ReadRecord {
		h, err := wire.ParseFrameHeader(f.bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Verify(f.bytes); err != nil {
			t.Fatal(err)
		}
		got, err := frameEnvelopes(h, h.Stored(f.bytes), nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a, b := recs(alone), recs(both)
	if len(a) != 2 || len(b) != 3 {
		t.Fatalf("frames of %d and %d records, want 2 and 3", len(a), len(b))
	}
	for i, r := range a {
		if r.CommittedAtUnixMs != 1<<50 || !bytes.Equal(r.Value, b[i].Value) || !bytes.Equal(r.Key, b[i].Key) || r.Offset != int64(i) || b[i].Offset != int64(2+i) {
			t.Fatalf("record %d: %+v alone, %+v behind another batch", i, r, b[i])
		}
	}
}

// "Segments, frames and records" (commit time) when the wall clock steps
// back, which a synctest clock cannot do: appendEnvelopes raises an
// envelope stamped before the partition's newest commit time to it, and an
// envelope stamped later raises the floor.
func TestFlusher_AppendEnvelopesRaisesCommitTimeToFloor(t *testing.T) {
	s := &state{log: &Log{opts: Options{flush: defaultFlushPolicy}}, commitFloor: 5000, nextOffset: 7}
	stamps := []int64{4000, 6000, 5500, 6000, 9000}
	var envs [][]byte
	for i, ms := range stamps {
		env, err := wire.AppendEnvelope(nil, []byte{'k', byte('0' + i)}, ms, []byte(strings.Repeat("v", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, env)
	}
	if base := s.appendEnvelopes(batch{envs: envs}); base != 7 {
		t.Fatalf("base %d, want 7", base)
	}
	if s.nextOffset != 12 || len(s.buffer) != 5 {
		t.Fatalf("next offset %d, buffer %d; want 12, 5", s.nextOffset, len(s.buffer))
	}
	want := []int64{5000, 6000, 6000, 6000, 9000}
	for i, env := range s.buffer {
		e, err := wire.ParseEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		if e.CommittedAtUnixMs != want[i] {
			t.Fatalf("envelope %d (stamped %d) commits at %d, want %d", i, stamps[i], e.CommittedAtUnixMs, want[i])
		}
		if string(e.Key) != string([]byte{'k', byte('0' + i)}) || len(e.Payload) != i+1 {
			t.Fatalf("envelope %d: key %q payload %q changed", i, e.Key, e.Payload)
		}
	}
	if s.commitFloor != 9000 {
		t.Fatalf("commit floor %d, want 9000", s.commitFloor)
	}
}
