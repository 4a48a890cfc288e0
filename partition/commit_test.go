package partition

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// trace records the disk calls made while it is on.
type trace struct {
	calls []sim.Call
	on    bool
}

func (tr *trace) hook(c sim.Call) error {
	if tr.on {
		tr.calls = append(tr.calls, c)
	}
	return nil
}

func (tr *trace) ops() []sim.Op {
	var out []sim.Op
	for _, c := range tr.calls {
		out = append(out, c.Op)
	}
	return out
}

// TestCommit_WriteSyncReadBackThenAdvance: a commit writes one frame,
// fdatasyncs, reads the frame back, and only then moves the high watermark
// (docs/design.md, "Write path").
func TestCommit_WriteSyncReadBackThenAdvance(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, testOptions(d))
	defer closeLog(t, l)
	var tr trace
	d.SetHook(tr.hook)
	defer d.SetHook(nil)
	tr.on = true
	base, err := l.Produce(bg, records(1, 0, 3))
	tr.on = false
	if err != nil || base != 0 {
		t.Fatalf("produce = %d, %v", base, err)
	}
	want := []sim.Op{sim.OpWrite, sim.OpSync, sim.OpRead}
	if got := tr.ops(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("disk calls of a commit = %v, want %v", got, want)
	}
	if l.HighWatermark() != 3 {
		t.Fatalf("high watermark %d, want 3", l.HighWatermark())
	}
	if d.Pending(testDir + "/00000000000000000000.log") {
		t.Fatal("committed frame not synced")
	}
}

// TestCommit_AppendThenCommitDurable: the two-step path buffers, then one
// commit makes everything visible at consecutive offsets.
func TestCommit_AppendThenCommitDurable(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, testOptions(d))
	defer closeLog(t, l)
	for i := range 3 {
		base, err := l.Append(bg, records(1, int64(2*i), 2))
		if err != nil || base != int64(2*i) {
			t.Fatalf("append %d = %d, %v", i, base, err)
		}
	}
	if l.HighWatermark() != 0 {
		t.Fatal("appended records visible before the commit")
	}
	if err := l.CommitDurable(bg); err != nil {
		t.Fatal(err)
	}
	recs, _ := readAll(t, l)
	if len(recs) != 6 {
		t.Fatalf("read %d records, want 6", len(recs))
	}
	for i, r := range recs {
		if seq := checkRecord(t, 1, r); seq != int64(i) || r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d seq %d", i, r.Offset, seq)
		}
	}
}

// TestCommitFailure_EveryStepLeavesNothing fails each disk call of a
// commit in turn (pebble's TestErrors): the hwm file release, a roll, the
// frame write, the fdatasync, the read-back, the discard's truncate. A
// failure leaves nothing of the batch; a retry after a non-fsync failure
// lands exactly one copy at the same offsets; an fsync failure poisons the
// log until it is reopened, and the reopened log holds every committed
// record once (docs/design.md, "Commit failure", "Fsync failure").
func TestCommitFailure_EveryStepLeavesNothing(t *testing.T) {
	for _, prefill := range []int{0, 7, 8} { // 8 commits fill a 4 KiB segment: the next commit rolls first
		for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
			for i := 1; ; i++ {
				if done := commitFailureCase(t, prefill, errno, i); done {
					if i < 4 {
						t.Fatalf("prefill %d: the commit made only %d disk calls", prefill, i-1)
					}
					break
				}
			}
		}
	}
}

// commitFailureCase fails the i-th disk call of a commit; it reports done
// when the commit made fewer than i calls.
func commitFailureCase(t *testing.T, prefill int, errno syscall.Errno, i int) (done bool) {
	name := fmt.Sprintf("prefill=%d/%v/call=%d", prefill, errno, i)
	d := newDisk(t, uint64(i))
	opts := testOptions(d)
	l := openLog(t, opts)
	next := int64(0)
	for range prefill {
		if _, err := l.Produce(bg, records(7, next, 3)); err != nil {
			t.Fatalf("%s: prefill: %v", name, err)
		}
		next += 3
	}
	// Close and reopen, so the first commit has the hwm file to release.
	closeLog(t, l)
	l = openLog(t, opts)
	defer l.Close()

	calls, failed := 0, false
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpClose {
			return nil // a close after a successful sync loses nothing
		}
		calls++
		if calls == i {
			failed = true
			return errno
		}
		return nil
	})
	base, err := l.Produce(bg, records(7, next, 3))
	d.SetHook(nil)
	if !failed {
		if err != nil || base != next {
			t.Fatalf("%s: produce without a fault = %d, %v", name, base, err)
		}
		return true
	}
	if err == nil {
		// The failing call did not belong to the commit's durability
		// (none does today); the commit must then really be whole.
		t.Fatalf("%s: commit succeeded though call %d failed", name, i)
	}
	if l.HighWatermark() != next {
		t.Fatalf("%s: high watermark %d after a failed commit, want %d", name, l.HighWatermark(), next)
	}
	if errno == syscall.ENOSPC && !errors.Is(err, ErrLogPoisoned) && !errors.Is(err, ErrNoSpace) {
		t.Fatalf("%s: ENOSPC failure is not ErrNoSpace: %v", name, err)
	}
	// Nothing of the batch is left behind: a crash now (kernel alive)
	// recovers exactly the committed records.
	crashed := openLog(t, Options{FS: d.ProcessCrash(), SegmentMaxBytes: opts.SegmentMaxBytes})
	if crashed.HighWatermark() != next {
		t.Fatalf("%s: a crash after the failed commit recovers high watermark %d, want %d", name, crashed.HighWatermark(), next)
	}
	crashed.Close()

	if errors.Is(err, ErrLogPoisoned) {
		if _, err := l.Produce(bg, records(7, next, 3)); !errors.Is(err, ErrLogPoisoned) {
			t.Fatalf("%s: produce on a poisoned log: %v", name, err)
		}
		if _, err := l.Append(bg, records(7, next, 1)); !errors.Is(err, ErrLogPoisoned) {
			t.Fatalf("%s: append on a poisoned log: %v", name, err)
		}
		l.Close()
		l = openLog(t, opts) // reopen clears the poison
	}
	base, err = l.Produce(bg, records(7, next, 3))
	if err != nil || base != next {
		t.Fatalf("%s: retry = %d, %v; want offset %d", name, base, err, next)
	}
	checkExactlyOnce(t, name, l, 7, next+3)
	l.Close()
	reopened := openLog(t, opts)
	checkExactlyOnce(t, name+" after reopen", reopened, 7, next+3)
	reopened.Close()
	return false
}

// checkExactlyOnce checks that the log holds sequence numbers 0..n-1, each
// once, at offsets equal to them (invariant I6).
func checkExactlyOnce(t *testing.T, name string, l *Log, seed uint64, n int64) {
	t.Helper()
	recs, gaps := readAll(t, l)
	if len(gaps) > 0 {
		t.Fatalf("%s: gaps at %v", name, gaps)
	}
	if int64(len(recs)) != n {
		t.Fatalf("%s: %d records, want %d", name, len(recs), n)
	}
	for i, r := range recs {
		if seq := checkRecord(t, seed, r); seq != int64(i) || r.Offset != int64(i) {
			t.Fatalf("%s: record %d: offset %d seq %d", name, i, r.Offset, seq)
		}
	}
}

// TestFsyncFailure_PoisonsUntilReopen: every later append, commit and
// produce fails with ErrLogPoisoned wrapping the fsync error; reads of
// committed records go on; the failure is counted; a reopen clears it.
func TestFsyncFailure_PoisonsUntilReopen(t *testing.T) {
	d := newDisk(t, 1)
	metrics := NewMetrics(prometheus.NewRegistry())
	opts := testOptions(d)
	opts.Metrics = metrics
	l := openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 0, 5)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpSync, Nth: 1, Err: syscall.EIO})
	_, err := l.Produce(bg, records(1, 5, 5))
	if !errors.Is(err, ErrLogPoisoned) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit with a failing fsync: %v, want ErrLogPoisoned wrapping EIO", err)
	}
	if got := testutil.ToFloat64(metrics.Errors.WithLabelValues("storage", kindFsyncPoisoned)); got != 1 {
		t.Fatalf("errors_total{kind=fsync_poisoned} = %v, want 1", got)
	}
	for _, op := range []func() error{
		func() error { _, err := l.Append(bg, records(1, 5, 1)); return err },
		func() error { return l.CommitDurable(bg) },
		func() error { _, err := l.Produce(bg, records(1, 5, 1)); return err },
	} {
		if err := op(); !errors.Is(err, ErrLogPoisoned) {
			t.Fatalf("write on a poisoned log: %v", err)
		}
	}
	recs, _ := readAll(t, l)
	if len(recs) != 5 {
		t.Fatalf("reads of a poisoned log: %d records, want the 5 committed", len(recs))
	}
	if err := l.Close(); !errors.Is(err, ErrLogPoisoned) {
		t.Fatalf("close of a poisoned log: %v, want it to report the poison", err)
	}
	l = openLog(t, opts)
	defer closeLog(t, l)
	if base, err := l.Produce(bg, records(1, 5, 5)); err != nil || base != 5 {
		t.Fatalf("produce after reopen = %d, %v", base, err)
	}
	checkExactlyOnce(t, "after reopen", l, 1, 10)
}

// TestFsyncFailure_ReopenThenPowerLoss: after a failed fdatasync the page
// cache holds bytes marked clean that never reached the media. A reopen in
// the same boot must not expose them, or a later power loss takes back
// what it served (docs/design.md R3, matrix row 21).
func TestFsyncFailure_ReopenThenPowerLoss(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 0, 5)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpSync, Nth: 1, Err: syscall.EIO})
	if _, err := l.Produce(bg, records(1, 5, 5)); !errors.Is(err, ErrLogPoisoned) {
		t.Fatalf("want poison, got %v", err)
	}
	l.Close()
	for _, reopen := range []*sim.Disk{d, d.ProcessCrash()} {
		l := openLog(t, Options{FS: reopen, SegmentMaxBytes: opts.SegmentMaxBytes})
		hwm := l.HighWatermark()
		l.Close()
		if hwm != 5 {
			t.Fatalf("reopen after a failed fsync: high watermark %d, want 5", hwm)
		}
		after := openLog(t, Options{FS: reopen.Crash(sim.CrashPlan{}), SegmentMaxBytes: opts.SegmentMaxBytes})
		if after.HighWatermark() < hwm {
			t.Fatalf("power loss took back records a reopen served: %d < %d", after.HighWatermark(), hwm)
		}
		after.Close()
	}
}

// TestCommitFailure_ENOSPCIsErrNoSpaceAndNoPoison (docs/durability.md row 17).
func TestCommitFailure_ENOSPCIsErrNoSpaceAndNoPoison(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, testOptions(d))
	defer closeLog(t, l)
	in := d.Inject(sim.Fault{Op: sim.OpWrite, Sticky: true, Nth: 1, Short: 10, Err: syscall.ENOSPC})
	for range 3 {
		_, err := l.Produce(bg, records(1, 0, 2))
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrCommitFailed) || errors.Is(err, ErrLogPoisoned) {
			t.Fatalf("commit on a full disk: %v", err)
		}
	}
	in.Remove()
	if base, err := l.Produce(bg, records(1, 0, 2)); err != nil || base != 0 {
		t.Fatalf("commit after space freed = %d, %v", base, err)
	}
	checkExactlyOnce(t, "after ENOSPC", l, 1, 2)
}

// TestProduce_GroupCommit: produce calls waiting together are one frame,
// one write, one fdatasync, each with its own consecutive offsets.
func TestProduce_GroupCommit(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, noPrealloc: true}) // counts every write
	defer closeLog(t, l)
	// Hold the first commit's fsync until the others are queued.
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	var syncs, writes int
	d.SetHook(func(c sim.Call) error {
		switch c.Op {
		case sim.OpSync:
			syncs++
			if first {
				first = false
				close(entered)
				<-release
			}
		case sim.OpWrite:
			writes++
		}
		return nil
	})
	defer d.SetHook(nil)
	const producers = 16
	type result struct {
		base int64
		err  error
		seq  int64
	}
	results := make(chan result, producers+1)
	go func() {
		base, err := l.Produce(bg, records(3, 0, 1))
		results <- result{base, err, 0}
	}()
	<-entered
	for p := 1; p <= producers; p++ {
		go func() {
			base, err := l.Produce(bg, records(3, int64(100*p), 3))
			results <- result{base, err, int64(100 * p)}
		}()
	}
	waitQueued(t, l, producers)
	close(release)
	bases := map[int64]int64{}
	for range producers + 1 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		bases[r.base] = r.seq
	}
	if syncs != 2 || writes != 2 {
		t.Fatalf("%d produces took %d writes and %d fsyncs, want 2 and 2", producers+1, writes, syncs)
	}
	recs, _ := readAll(t, l)
	if len(recs) != 1+3*producers {
		t.Fatalf("%d records, want %d", len(recs), 1+3*producers)
	}
	for base, seq := range bases {
		n := int64(3)
		if seq == 0 {
			n = 1
		}
		for j := range n {
			if got := checkRecord(t, 3, recs[base+j]); got != seq+j {
				t.Fatalf("offset %d holds seq %d, want %d: a caller's records are not consecutive", base+j, got, seq+j)
			}
		}
	}
}

// waitQueued waits until n messages sit in the mailbox. The mailbox is a
// channel, so its length is the notification this waits on: it polls it
// between scheduler yields, never by sleeping.
func waitQueued(t *testing.T, l *Log, n int) {
	t.Helper()
	for len(l.mailbox) < n {
		runtime.Gosched()
	}
}

// TestProduce_GroupFailureFailsEveryCaller: nothing of any caller of a
// failed group stays behind.
func TestProduce_GroupFailureFailsEveryCaller(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, noPrealloc: true}) // fails the group's one write
	defer closeLog(t, l)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync && first {
			first = false
			close(entered)
			<-release
		}
		return nil
	})
	defer d.SetHook(nil)
	errs := make(chan error, 5)
	go func() { _, err := l.Produce(bg, records(3, 0, 1)); errs <- err }()
	<-entered
	d.Inject(sim.Fault{Op: sim.OpWrite, Nth: 1, Err: syscall.EIO})
	for p := range 4 {
		go func() { _, err := l.Produce(bg, records(3, int64(10*(p+1)), 2)); errs <- err }()
	}
	waitQueued(t, l, 4)
	close(release)
	failures := 0
	for range 5 {
		if err := <-errs; err != nil {
			if !errors.Is(err, ErrCommitFailed) {
				t.Fatalf("group failure: %v", err)
			}
			failures++
		}
	}
	if failures != 4 {
		t.Fatalf("%d callers failed, want the 4 of the failed group", failures)
	}
	if l.HighWatermark() != 1 {
		t.Fatalf("high watermark %d, want 1", l.HighWatermark())
	}
	if base, err := l.Produce(bg, records(3, 1, 1)); err != nil || base != 1 {
		t.Fatalf("produce after a failed group = %d, %v", base, err)
	}
}

// TestAppend_DiscardedByAnotherCommitIsReported: records an Append
// buffered and another caller's failed commit discarded make the next
// CommitDurable fail, never succeed with nothing.
func TestAppend_DiscardedByAnotherCommitIsReported(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d})
	defer closeLog(t, l)
	if _, err := l.Append(bg, records(1, 0, 2)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpWrite, Nth: 1, Err: syscall.EIO})
	if _, err := l.Produce(bg, records(1, 2, 1)); err == nil {
		t.Fatal("produce with a failing write succeeded")
	}
	if err := l.CommitDurable(bg); !errors.Is(err, ErrCommitFailed) {
		t.Fatalf("CommitDurable after its records were discarded: %v, want ErrCommitFailed", err)
	}
	if err := l.CommitDurable(bg); err != nil {
		t.Fatalf("a later CommitDurable: %v", err)
	}
	if l.HighWatermark() != 0 {
		t.Fatalf("high watermark %d, want 0", l.HighWatermark())
	}
}

// TestCommit_CommitTimeNeverDecreases: a record's commit time is raised to
// the partition's newest (docs/design.md, "Segments, frames and
// records").
func TestCommit_CommitTimeNeverDecreases(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d})
	defer closeLog(t, l)
	// An envelope stamped in the future, then ones stamped now.
	future := buildOrFail(t, []Record{{Value: []byte("future")}})
	setTime(t, future.envs[0], 1<<50)
	if _, err := l.call(bg, &produceMsg{request: newRequest(), batch: future}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	recs, _ := readAll(t, l)
	for _, r := range recs {
		if r.CommittedAtUnixMs != 1<<50 {
			t.Fatalf("record %d committed at %d, below the partition's newest %d", r.Offset, r.CommittedAtUnixMs, int64(1)<<50)
		}
	}
}

func buildOrFail(t *testing.T, recs []Record) batch {
	t.Helper()
	b, err := buildEnvelopes(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func setTime(t *testing.T, env []byte, ms int64) {
	t.Helper()
	if err := wire.SetEnvelopeCommitTime(env, ms); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_NewLogIsDurable: a new log's directory entries and first
// segment survive a power loss right after Open (docs/design.md R7).
func TestOpen_NewLogIsDurable(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, testOptions(d))
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	// No close: a power loss.
	crashed := d.Crash(sim.CrashPlan{})
	l.Close()
	if _, err := crashed.Stat(testDir + "/00000000000000000000.log"); err != nil {
		t.Fatalf("first segment lost in a power loss: %v", err)
	}
	r := openLog(t, Options{FS: crashed, SegmentMaxBytes: 4 << 10})
	defer closeLog(t, r)
	checkExactlyOnce(t, "after power loss", r, 1, 3)
	if fi, err := crashed.Stat(testDir); err != nil || fi.Mode.Perm() != vfs.DirMode&os.ModePerm {
		t.Fatalf("partition dir: %+v %v", fi, err)
	}
}
