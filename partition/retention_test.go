package partition

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Tests of docs/design.md, "Retention" (the per-log half: the sweep,
// the time-based roll, the rotation of an idle active segment, the detach
// and unlink, the counters). All of them run in a synctest bubble: segment
// ages come from the bubble's fake clock, through the simulated disk's
// modification times too.

// retentionOptions are 4 KiB-segment options with a retention bound.
func retentionOptions(d *sim.Disk, maxAge time.Duration) Options {
	o := testOptions(d)
	o.RetentionMaxAge = maxAge
	return o
}

// fillSealed produces batches of 10 records from sequence from on until the
// log has at least want sealed segments, then one more record if the active
// segment is empty, and returns the next sequence number.
func fillSealed(t testing.TB, l *Log, d *sim.Disk, seed uint64, from int64, want int) int64 {
	t.Helper()
	next := from
	for len(segmentBases(t, d)) < want+1 {
		produceRecords(t, l, seed, next, 10, 10)
		next += 10
	}
	bases := segmentBases(t, d)
	if b, _ := d.Contents(segmentPathOf(t, bases[len(bases)-1])); len(b) == 0 {
		produceRecords(t, l, seed, next, 1, 1)
		next++
	}
	return next
}

// segmentBytes is the bytes of the test log's segments at bases: a sealed
// segment's file, the active segment's frames.
func segmentBytes(t testing.TB, l *Log, d *sim.Disk, bases []int64) int64 {
	t.Helper()
	var n int64
	v := l.view.Load()
	for _, base := range bases {
		if base == v.active.base {
			n += v.hwmPos // its frames, all committed; its file may hold zeros prepared past them
			continue
		}
		fi, err := d.Stat(segmentPathOf(t, base))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size
	}
	return n
}

// "Retention": in an open log swept every minute, a record lives at most
// MaxSegmentAge + MaxAge + 1 minute (MaxSegmentAge defaulting to MaxAge),
// and every record newer than MaxAge is still there. One record a minute
// for three hours, with segments that roll on size and with segments that
// roll only on age.
func TestRetention_RecordLifetimeBoundedByRollAgePlusMaxAgePlusSweep(t *testing.T) {
	tests := []struct {
		name            string
		segmentMaxBytes int64
	}{
		{"4 KiB segments roll on size", 4 << 10},
		{"1 MiB segments roll only on age", 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const seed = 40
				const maxAge = time.Hour
				const bound = maxAge + maxAge + time.Minute
				d := sim.NewDisk(seed)
				l := openLog(t, Options{FS: d, SegmentMaxBytes: tc.segmentMaxBytes, RetentionMaxAge: maxAge})
				defer closeLog(t, l)
				var written []time.Time
				deletedAny := false
				for minute := range 180 {
					if minute > 0 {
						advanceBy(time.Minute)
					}
					produceRecords(t, l, seed, int64(minute), 1, 1)
					written = append(written, time.Now())
					res, err := l.Sweep(bg)
					if err != nil {
						t.Fatalf("sweep at minute %d: %v", minute, err)
					}
					deletedAny = deletedAny || res.DeletedSegments > 0
					now, start := time.Now(), l.StartOffset()
					for offset, at := range written {
						age := now.Sub(at)
						if age > bound && int64(offset) >= start {
							t.Fatalf("minute %d: record %d is %v old and still held (start offset %d); the bound is %v", minute, offset, age, start, bound)
						}
						if age <= maxAge && int64(offset) < start {
							t.Fatalf("minute %d: record %d is %v old and deleted (start offset %d); retention is %v", minute, offset, age, start, maxAge)
						}
					}
				}
				start := l.StartOffset()
				if !deletedAny || start == 0 {
					t.Fatalf("three hours with a one-hour retention deleted nothing (start offset %d)", start)
				}
				if _, err := l.Read(start-1, 1, 1<<20); !errors.Is(err, ErrOffsetDeleted) {
					t.Fatalf("read at %d, below the start offset %d: %v, want ErrOffsetDeleted", start-1, start, err)
				}
				recs, gaps := readAll(t, l)
				if int64(len(recs)) != 180-start || len(gaps) != 0 {
					t.Fatalf("read %d records, gaps %v; want %d, none", len(recs), gaps, 180-start)
				}
				checkRun(t, seed, start, recs)
			})
		})
	}
}

// "Retention", time-based roll: the flusher rolls the active segment before
// the first write that finds its oldest record at least the roll age old
// (MaxSegmentAge, defaulting to MaxAge; never with neither). A trickle log,
// one tiny record every 10 minutes into 64 MiB segments, against a model.
func TestRetention_TimeBasedRollBeforeFirstWriteOlderThanRollAge(t *testing.T) {
	tests := []struct {
		name          string
		maxSegmentAge time.Duration
		retention     time.Duration
		rollAge       time.Duration
	}{
		{"MaxSegmentAge", 30 * time.Minute, 0, 30 * time.Minute},
		{"roll age defaults to the retention", 0, 40 * time.Minute, 40 * time.Minute},
		{"MaxSegmentAge over the retention", 20 * time.Minute, 2 * time.Hour, 20 * time.Minute},
		{"no retention, no roll age: never rolls on age", 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := sim.NewDisk(41)
				l := openLog(t, Options{FS: d, MaxSegmentAge: tc.maxSegmentAge, RetentionMaxAge: tc.retention})
				defer closeLog(t, l)
				wantBases := []int64{0}
				var oldest time.Time // first write of the active segment
				for i := range int64(25) {
					if i > 0 {
						advanceBy(10 * time.Minute)
					}
					now := time.Now()
					if tc.rollAge > 0 && !oldest.IsZero() && now.Sub(oldest) >= tc.rollAge {
						wantBases = append(wantBases, i)
						oldest = time.Time{}
					}
					if oldest.IsZero() {
						oldest = now
					}
					produceRecords(t, l, 41, i, 1, 1)
					if got := segmentBases(t, d); !slices.Equal(got, wantBases) {
						t.Fatalf("after the write of record %d at +%v: segments %v, want %v", i, 10*time.Minute*time.Duration(i), got, wantBases)
					}
				}
				if tc.rollAge > 0 && len(wantBases) < 3 {
					t.Fatalf("only %d segments: the test did not exercise the roll", len(wantBases))
				}
			})
		})
	}
}

// "Retention", rotation of an idle active segment: the reaper seals an
// active segment whose last write is older than MaxAge and deletes it in
// the same sweep; the log then starts at the high watermark and takes the
// next record at the right offset.
func TestRetention_RotatesIdleActiveSegment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 42
		d := sim.NewDisk(seed)
		l := openLog(t, retentionOptions(d, time.Hour))
		defer closeLog(t, l)
		produceRecords(t, l, seed, 0, 5, 5)
		size := segmentBytes(t, l, d, []int64{0})

		advanceBy(time.Hour) // exactly MaxAge: the last write is not older yet
		res, err := l.Sweep(bg)
		if err != nil || res != (SweepResult{}) {
			t.Fatalf("sweep at exactly MaxAge: %+v, %v; want nothing done", res, err)
		}
		advanceBy(time.Millisecond)
		res, err = l.Sweep(bg)
		want := SweepResult{Rotated: true, DeletedSegments: 1, DeletedBytes: size, DeletedRecords: 5}
		if err != nil || res != want {
			t.Fatalf("sweep past MaxAge: %+v, %v; want %+v", res, err, want)
		}
		if start, hwm := l.StartOffset(), l.HighWatermark(); start != 5 || hwm != 5 {
			t.Fatalf("start offset %d, high watermark %d; want 5, 5", start, hwm)
		}
		if got := segmentBases(t, d); !slices.Equal(got, []int64{5}) {
			t.Fatalf("segments %v, want [5]", got)
		}
		if _, err := l.Read(0, 10, 1<<20); !errors.Is(err, ErrOffsetDeleted) {
			t.Fatalf("read at 0: %v, want ErrOffsetDeleted", err)
		}
		produceRecords(t, l, seed, 5, 2, 2)
		recs, gaps := readAll(t, l)
		if len(recs) != 2 || len(gaps) != 0 {
			t.Fatalf("read %d records, gaps %v; want 2, none", len(recs), gaps)
		}
		checkRun(t, seed, 5, recs)
	})
}

// "Retention", rotation: only a fully committed segment is rotated. One
// holding written records above the high watermark waits, so the
// failed-commit discard always finds them in the active segment; once they
// are committed it goes.
func TestRetention_ActiveSegmentWithUncommittedRecordsIsNotRotated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 43
		d := sim.NewDisk(seed)
		l := openLog(t, retentionOptions(d, time.Hour))
		defer closeLog(t, l)
		produceRecords(t, l, seed, 0, 5, 5)
		if _, err := l.Append(bg, records(seed, 5, 3)); err != nil {
			t.Fatal(err)
		}
		advanceBy(100 * time.Millisecond) // the drain writes them above the boundary
		if frames := framesIn(t, d, segmentPathOf(t, 0)); len(frames) != 2 {
			t.Fatalf("%d frames on disk, want 2 (the commit's and the drain's)", len(frames))
		}
		advanceBy(2 * time.Hour)
		res, err := l.Sweep(bg)
		if err != nil || res != (SweepResult{}) {
			t.Fatalf("sweep with records above the high watermark: %+v, %v; want nothing done", res, err)
		}
		if start, hwm := l.StartOffset(), l.HighWatermark(); start != 0 || hwm != 5 {
			t.Fatalf("start offset %d, high watermark %d; want 0, 5", start, hwm)
		}
		if got := segmentBases(t, d); !slices.Equal(got, []int64{0}) {
			t.Fatalf("segments %v, want [0]", got)
		}

		if err := l.CommitDurable(bg); err != nil {
			t.Fatal(err)
		}
		res, err = l.Sweep(bg)
		if err != nil || !res.Rotated || res.DeletedSegments != 1 || res.DeletedRecords != 8 {
			t.Fatalf("sweep once committed: %+v, %v; want rotated, 1 segment of 8 records deleted", res, err)
		}
		if start := l.StartOffset(); start != 8 {
			t.Fatalf("start offset %d, want 8", start)
		}
	})
}

// "Retention": a sweep detaches expired segments under the actor and
// unlinks the files after, so a slow unlink stalls neither readers nor the
// flusher. The unlink is held back on a channel while a read of a live
// offset and a produce complete.
func TestRetention_UnlinkRunsOutsideTheActor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 44
		d := sim.NewDisk(seed)
		l := openLog(t, retentionOptions(d, time.Hour))
		defer closeLog(t, l)
		next := fillSealed(t, l, d, seed, 0, 4)
		advanceBy(2 * time.Hour)
		produceRecords(t, l, seed, next, 1, 1) // rolls on age: a live segment
		live := next
		next++
		bases := segmentBases(t, d)
		if bases[len(bases)-1] != live {
			t.Fatalf("segments %v: want the live record %d to start the active segment", bases, live)
		}
		expired := bases[:len(bases)-1]

		blocked, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpRemove {
				once.Do(func() {
					close(blocked)
					<-release
				})
			}
			return nil
		})
		type sweepOutcome struct {
			res SweepResult
			err error
		}
		swept := make(chan sweepOutcome, 1)
		go func() {
			res, err := l.Sweep(bg)
			swept <- sweepOutcome{res, err}
		}()
		<-blocked

		// The detach is done and published; the unlink is not.
		if start := l.StartOffset(); start != live {
			t.Errorf("start offset %d while the unlink is held, want %d", start, live)
		}
		if _, err := d.Stat(segmentPathOf(t, expired[0])); err != nil {
			t.Errorf("the held unlink already happened: %v", err)
		}
		res, err := l.Read(live, 10, 1<<20)
		if err != nil || len(res.Records) != 1 {
			t.Errorf("read of live offset %d while the unlink is held: %d records, %v", live, len(res.Records), err)
		}
		produced := make(chan error, 1)
		go func() {
			_, err := l.Produce(bg, records(seed, next, 1))
			produced <- err
		}()
		synctest.Wait()
		select {
		case err := <-produced:
			if err != nil {
				t.Errorf("produce while the unlink is held: %v", err)
			}
		default:
			t.Errorf("produce is stuck behind the held unlink: the unlink runs under the actor")
		}

		close(release)
		out := <-swept
		if out.err != nil || out.res.DeletedSegments != len(expired) || out.res.DeletedRecords != live {
			t.Fatalf("sweep: %+v, %v; want %d segments of %d records deleted", out.res, out.err, len(expired), live)
		}
		if got := segmentBases(t, d); !slices.Equal(got, []int64{live}) {
			t.Fatalf("segments %v after the sweep, want [%d]", got, live)
		}
	})
}

// "Retention": a failed unlink is logged and counted in
// errors_total{component="storage",kind="retention_unlink"}, not dropped;
// the sweep reports it with an error and the next sweep unlinks the file.
// Oldest first: while an older unlink fails, no newer one is unlinked.
func TestRetention_FailedUnlinkCountedAndRetried(t *testing.T) {
	tests := []struct {
		name   string
		sealed int // expired sealed segments before the sweep; 0: rotation of the active one only
	}{
		{"the rotated active segment alone", 0},
		{"several expired segments, the oldest fails", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const seed = 45
				d := sim.NewDisk(seed)
				m := NewMetrics(prometheus.NewRegistry())
				opts := retentionOptions(d, time.Hour)
				opts.Metrics = m
				l := openLog(t, opts)
				defer closeLog(t, l)
				next := int64(5)
				if tc.sealed > 0 {
					next = fillSealed(t, l, d, seed, 0, tc.sealed)
				} else {
					produceRecords(t, l, seed, 0, 5, 5)
				}
				expired := segmentBases(t, d) // the active segment is rotated too
				bytes := segmentBytes(t, l, d, expired)
				advanceBy(2 * time.Hour)

				unlinkErrors := m.Errors.WithLabelValues("storage", "retention_unlink")
				inj := d.Inject(sim.Fault{Op: sim.OpRemove, Path: segmentPathOf(t, expired[0]), Nth: 1, Err: syscall.EIO})
				res, err := l.Sweep(bg)
				if err == nil {
					t.Fatal("a sweep whose unlink failed returned no error")
				}
				want := SweepResult{Rotated: true, FailedUnlinks: len(expired)}
				if res != want {
					t.Fatalf("sweep with a failing unlink: %+v, want %+v", res, want)
				}
				if inj.Fired() != 1 {
					t.Fatalf("the unlink fault fired %d times, want 1", inj.Fired())
				}
				if got := segmentBases(t, d); !slices.Equal(got, append(slices.Clone(expired), next)) {
					t.Fatalf("segments %v after the failed unlink, want %v and the new active %d: no newer unlink past a failed one", got, expired, next)
				}
				if n := testutil.ToFloat64(unlinkErrors); n != 1 {
					t.Fatalf("errors_total{storage,retention_unlink} = %v, want 1", n)
				}
				if start := l.StartOffset(); start != next {
					t.Fatalf("start offset %d, want %d: the segments are detached even if not unlinked", start, next)
				}

				res, err = l.Sweep(bg)
				want = SweepResult{DeletedSegments: len(expired), DeletedBytes: bytes, DeletedRecords: next}
				if err != nil || res != want {
					t.Fatalf("next sweep: %+v, %v; want %+v, nil", res, err, want)
				}
				if got := segmentBases(t, d); !slices.Equal(got, []int64{next}) {
					t.Fatalf("segments %v after the retry, want [%d]", got, next)
				}
				if n := testutil.ToFloat64(unlinkErrors); n != 1 {
					t.Fatalf("errors_total{storage,retention_unlink} = %v after the retry, want still 1", n)
				}
			})
		})
	}
}

// "Retention": a retention change reaches an open log in place
// (SetRetention): the next sweep uses the new bound, and the active
// segment's roll age follows it.
func TestRetention_SetRetentionAppliesInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 46
		d := sim.NewDisk(seed)
		l := openLog(t, testOptions(d)) // no retention
		defer closeLog(t, l)
		next := fillSealed(t, l, d, seed, 0, 3)
		before := segmentBases(t, d)
		advanceBy(2 * time.Hour)

		if res, err := l.Sweep(bg); err != nil || res != (SweepResult{}) {
			t.Fatalf("sweep with no retention: %+v, %v; want nothing done", res, err)
		}
		produceRecords(t, l, seed, next, 1, 1)
		next++
		if got := segmentBases(t, d); !slices.Equal(got, before) {
			t.Fatalf("segments %v, want %v: with no retention nothing rolls on age", got, before)
		}

		if _, err := l.SetRetention(bg, time.Hour, 0); err != nil {
			t.Fatal(err)
		}
		// The roll age follows: the active segment's oldest record is two
		// hours old, so the next write rolls it.
		produceRecords(t, l, seed, next, 1, 1)
		rolledAt := next
		next++
		if got := segmentBases(t, d); !slices.Equal(got, append(slices.Clone(before), rolledAt)) {
			t.Fatalf("segments %v, want %v and %d: the roll age follows the new retention", got, before, rolledAt)
		}
		// The sweep uses the new bound: every segment written two hours
		// ago goes; the one written just now stays.
		res, err := l.Sweep(bg)
		if err != nil || res.Rotated || res.DeletedSegments != len(before)-1 {
			t.Fatalf("sweep with the new retention: %+v, %v; want %d sealed segments deleted, no rotation", res, err, len(before)-1)
		}
		last := before[len(before)-1]
		if start := l.StartOffset(); start != last {
			t.Fatalf("start offset %d, want %d (the segment written to two hours ago and again just now)", start, last)
		}
		recs, _ := readAll(t, l)
		checkRun(t, seed, last, recs)
		if int64(len(recs)) != next-last {
			t.Fatalf("read %d records, want %d", len(recs), next-last)
		}
	})
}

// "Retention": for a segment recovered from disk, the file's mtime is its
// last write. A log written at t0, closed, and reopened 30 minutes later
// deletes its segments once t0 (not the reopen) is older than MaxAge.
func TestRetention_RecoveredSegmentAgesFromMtime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 47
		d := sim.NewDisk(seed)
		l := openLog(t, retentionOptions(d, time.Hour))
		next := fillSealed(t, l, d, seed, 0, 3)
		closeLog(t, l)
		bases := segmentBases(t, d)
		bytes := segmentBytes(t, l, d, bases)

		advanceBy(30 * time.Minute)
		l = openLog(t, retentionOptions(d, time.Hour))
		defer closeLog(t, l)
		advanceBy(29 * time.Minute)
		if res, err := l.Sweep(bg); err != nil || res != (SweepResult{}) {
			t.Fatalf("sweep 59 minutes after the writes: %+v, %v; want nothing done", res, err)
		}
		advanceBy(2 * time.Minute)
		res, err := l.Sweep(bg)
		want := SweepResult{Rotated: true, DeletedSegments: len(bases), DeletedBytes: bytes, DeletedRecords: next}
		if err != nil || res != want {
			t.Fatalf("sweep 61 minutes after the writes (31 after the reopen): %+v, %v; want %+v", res, err, want)
		}
		if start, hwm := l.StartOffset(), l.HighWatermark(); start != next || hwm != next {
			t.Fatalf("start offset %d, high watermark %d; want %d, %d", start, hwm, next, next)
		}
	})
}

// "Retention": deletions export byte and record counters with
// reason="age", matching what the sweeps report, across sweeps.
func TestRetention_DeletionCountersReasonAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 48
		d := sim.NewDisk(seed)
		m := NewMetrics(prometheus.NewRegistry())
		opts := retentionOptions(d, time.Hour)
		opts.Metrics = m
		l := openLog(t, opts)
		defer closeLog(t, l)
		deletedBytes := m.retentionBytes.WithLabelValues("age")
		deletedRecords := m.retentionRecords.WithLabelValues("age")

		var wantBytes, wantRecords int64
		next := int64(0)
		for round := range 3 {
			next = fillSealed(t, l, d, seed, next, 3+round)
			bases := segmentBases(t, d)
			size := segmentBytes(t, l, d, bases) // everything goes, the active segment by rotation
			advanceBy(2 * time.Hour)
			res, err := l.Sweep(bg)
			if err != nil || !res.Rotated || res.DeletedSegments != len(bases) || res.DeletedBytes != size || res.DeletedRecords != next-bases[0] {
				t.Fatalf("round %d: sweep %+v, %v; want rotated, %d segments, %d bytes, %d records deleted",
					round, res, err, len(bases), size, next-bases[0])
			}
			wantBytes += res.DeletedBytes
			wantRecords += res.DeletedRecords
			if got := testutil.ToFloat64(deletedBytes); got != float64(wantBytes) {
				t.Fatalf("round %d: retention deleted bytes{reason=age} = %v, want %d", round, got, wantBytes)
			}
			if got := testutil.ToFloat64(deletedRecords); got != float64(wantRecords) {
				t.Fatalf("round %d: retention deleted records{reason=age} = %v, want %d", round, got, wantRecords)
			}
		}
	})
}

// "Retention", by size: with a byte bound the sweep deletes the oldest
// sealed segments while the log's segments hold more (never the active
// one), counted with reason="size"; reads below the new start answer
// ErrOffsetDeleted; a bound changed in place applies at the next sweep.
func TestRetention_ByteBoundDeletesOldestSealedFirst(t *testing.T) {
	const seed = 47
	d := sim.NewDisk(seed)
	metrics := NewMetrics(prometheus.NewRegistry())
	opts := testOptions(d)
	opts.Metrics = metrics
	l := openLog(t, opts)
	defer closeLog(t, l)
	next := fillSealed(t, l, d, seed, 0, 5)
	bases := segmentBases(t, d)
	total := segmentBytes(t, l, d, bases)
	if expired, _ := l.Expired(bg); expired {
		t.Fatal("expired with no bound")
	}

	// A bound that holds the newest two sealed segments and the active one.
	bound := segmentBytes(t, l, d, bases[len(bases)-3:])
	if _, err := l.SetRetention(bg, 0, bound); err != nil {
		t.Fatal(err)
	}
	if expired, _ := l.Expired(bg); !expired {
		t.Fatalf("not expired: %d bytes held, bound %d", total, bound)
	}
	res, err := l.Sweep(bg)
	if err != nil || res.Rotated || res.DeletedSegments != len(bases)-3 {
		t.Fatalf("sweep: %+v, %v; want the %d oldest sealed segments deleted", res, err, len(bases)-3)
	}
	kept := segmentBases(t, d)
	if !slices.Equal(kept, bases[len(bases)-3:]) {
		t.Fatalf("segments %v, want %v", kept, bases[len(bases)-3:])
	}
	if held := segmentBytes(t, l, d, kept); held > bound {
		t.Fatalf("%d bytes held after the sweep, over the bound %d", held, bound)
	}
	if l.StartOffset() != kept[0] {
		t.Fatalf("start offset %d, want %d", l.StartOffset(), kept[0])
	}
	if _, err := l.Read(0, 1, 1<<20); !errors.Is(err, ErrOffsetDeleted) {
		t.Fatalf("a read below the start: %v, want ErrOffsetDeleted", err)
	}
	recs, _ := readAll(t, l)
	checkRun(t, seed, kept[0], recs)
	if int64(len(recs)) != next-kept[0] {
		t.Fatalf("read %d records, want %d", len(recs), next-kept[0])
	}
	if n := testutil.ToFloat64(metrics.retentionBytes.WithLabelValues(reasonSize)); n != float64(total-segmentBytes(t, l, d, kept)) {
		t.Fatalf("retention_deleted_bytes_total{reason=size} = %v, want %d", n, total-segmentBytes(t, l, d, kept))
	}
	if expired, _ := l.Expired(bg); expired {
		t.Fatal("still expired after the sweep")
	}

	// A bound smaller than the active segment deletes every sealed one and
	// keeps the active segment whole.
	if _, err := l.SetRetention(bg, 0, 1); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Sweep(bg); err != nil || res.DeletedSegments != 2 {
		t.Fatalf("sweep with a 1-byte bound: %+v, %v; want the 2 sealed segments deleted", res, err)
	}
	if got := segmentBases(t, d); len(got) != 1 || got[0] != kept[2] {
		t.Fatalf("segments %v, want the active one, %d", got, kept[2])
	}
}
