package reaper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of the reaper loop (docs/design.md, "Retention"). All run in a
// synctest bubble: the loop's timers, the logs' segment times and the
// simulated disk's modification times all read its fake clock. What one
// sweep deletes is partition's and tested there.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

const topicDir = "/data/topics/orders"

// advance moves the bubble's clock forward by d, then waits until every
// goroutine in it is blocked again.
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

func partitionDir(p int) string {
	name, _ := wire.PartitionDirName(p)
	return path.Join(topicDir, name)
}

// openLogs opens n logs of topic "orders" with 4 KiB segments and the
// given retention over d; they are closed when the test ends.
func openLogs(t *testing.T, d *sim.Disk, n int, retention time.Duration) []Target {
	t.Helper()
	var out []Target
	for p := range n {
		l, err := partition.Open(partitionDir(p), partition.Options{FS: d, SegmentMaxBytes: 4 << 10, RetentionMaxAge: retention})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		out = append(out, Target{Topic: "orders", Partition: p, Log: l})
	}
	return out
}

// fill produces 200-byte records into l until its directory holds sealed
// segments sealed segments and a non-empty active one.
func fill(t *testing.T, d *sim.Disk, l *partition.Log, sealed int) {
	t.Helper()
	for seq := 0; len(segmentNames(t, d, l.Dir())) < sealed+1 || l.HighWatermark() == lastBase(t, d, l.Dir()); seq++ {
		if _, err := l.Produce(bg, []partition.Record{{Value: []byte(fmt.Sprintf("%-200d", seq))}}); err != nil {
			t.Fatal(err)
		}
	}
}

func segmentNames(t *testing.T, d *sim.Disk, dir string) []string {
	t.Helper()
	entries, err := d.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := wire.ParseSegmentFileName(e.Name); err == nil {
			out = append(out, e.Name)
		}
	}
	return out
}

func lastBase(t *testing.T, d *sim.Disk, dir string) int64 {
	names := segmentNames(t, d, dir)
	base, _ := wire.ParseSegmentFileName(names[len(names)-1])
	return base
}

// metric is a counter's value, or a histogram's sample count, in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return total
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func startReaper(t *testing.T, targets func() []Target) (*prometheus.Registry, *observer.ObservedLogs, func()) {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	loop := Start(Config{Logger: zap.New(core), Registerer: reg}, targets)
	return reg, logs, func() {
		if err := loop.Close(); err != nil {
			t.Errorf("close the reaper: %v", err)
		}
	}
}

// One loop sweeps every open log each minute: a log with an age bound
// loses its expired segments (its idle active segment rotated and deleted
// too), a log without one keeps everything, a log closed under the pass
// is skipped without a word; sweeps and their durations are counted.
func TestReaper_SweepsEveryOpenLogEachInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(1)
		targets := openLogs(t, d, 3, time.Hour)
		forever := openLogs(t, d, 4, 0)[3]
		for _, tg := range append(targets, forever) {
			fill(t, d, tg.Log, 3)
		}
		closed := targets[2].Log
		all := append(append([]Target(nil), targets...), forever)
		reg, logs, stop := startReaper(t, func() []Target { return all })
		defer stop()

		advance(time.Hour) // passes at every minute: nothing is older than the hour yet
		for _, tg := range all {
			if got := tg.Log.StartOffset(); got != 0 {
				t.Fatalf("%d: start offset %d before anything expired", tg.Partition, got)
			}
		}
		if got := metric(t, reg, "narad_reaper_sweeps_total"); got != 60*4 {
			t.Fatalf("sweeps_total = %v after 60 passes over 4 logs, want 240", got)
		}
		closed.Close()
		advance(2 * time.Minute)
		for _, tg := range targets[:2] {
			if got, hwm := tg.Log.StartOffset(), tg.Log.HighWatermark(); got != hwm {
				t.Fatalf("partition %d: start offset %d, want the high watermark %d: every record expired", tg.Partition, got, hwm)
			}
			if names := segmentNames(t, d, tg.Log.Dir()); len(names) != 1 {
				t.Fatalf("partition %d: segments %v left, want only the fresh active one", tg.Partition, names)
			}
		}
		if got := forever.Log.StartOffset(); got != 0 {
			t.Fatalf("a log without retention lost records: start offset %d", got)
		}
		if got := metric(t, reg, "narad_reaper_sweeps_total"); got != 240+2*3 {
			t.Fatalf("sweeps_total = %v, want 246: the closed log is not counted", got)
		}
		if got := metric(t, reg, "narad_reaper_sweep_duration_seconds"); got != 246 {
			t.Fatalf("sweep_duration_seconds has %v samples, want 246", got)
		}
		if n := logs.FilterLevelExact(zapcore.WarnLevel).Len() + logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 0 {
			t.Fatalf("%d warnings or errors; a log closed under the pass is skipped silently: %v", n, logs.All())
		}
	})
}

// A sweep that panics (here an unlink in partition 1's directory) is
// logged at error with the partition and the stack, counted, and skipped:
// partitions 0 and 2, before and after it in the pass, are swept.
func TestReaper_PanickingSweepLeavesTheOthersSwept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(2)
		targets := openLogs(t, d, 3, time.Hour)
		for _, tg := range targets {
			fill(t, d, tg.Log, 2)
		}
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpRemove && path.Dir(c.Path) == partitionDir(1) {
				panic("unlink exploded")
			}
			return nil
		})
		reg, logs, stop := startReaper(t, func() []Target { return targets })
		defer stop()

		advance(time.Hour + time.Minute)
		for _, p := range []int{0, 2} {
			if names := segmentNames(t, d, partitionDir(p)); len(names) != 1 {
				t.Fatalf("partition %d: segments %v left next to a panicking partition", p, names)
			}
		}
		if got := metric(t, reg, "narad_reaper_panics_total"); got != 1 {
			t.Fatalf("panics_total = %v, want 1", got)
		}
		entries := logs.FilterMessage("supervised loop recovered a panic").All()
		if len(entries) != 1 || entries[0].Level != zapcore.ErrorLevel {
			t.Fatalf("panic log lines: %v", entries)
		}
		fields := entries[0].ContextMap()
		if fields["key"] != "orders/1" || fields["panic"] != "unlink exploded" || !strings.Contains(fmt.Sprint(fields["stack"]), "reaper") {
			t.Fatalf("panic logged with %v, want the partition and the stack", fields)
		}
		d.SetHook(nil)
	})
}

// A pass stuck in an unlink (a blocking fsys hook) for StallAfter is
// replaced (narad_reaper_restarts), and the replacement sweeps the others;
// the stuck unlink, once released, finishes its own partition.
func TestReaper_StalledLoopIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(3)
		targets := openLogs(t, d, 3, time.Hour)
		for _, tg := range targets {
			fill(t, d, tg.Log, 2)
		}
		advance(time.Hour) // everything has expired: the first pass finds it
		release := make(chan struct{})
		var once sync.Once
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpRemove && path.Dir(c.Path) == partitionDir(0) {
				once.Do(func() { <-release })
			}
			return nil
		})
		defer d.SetHook(nil)
		reg, logs, stop := startReaper(t, func() []Target { return targets })
		defer stop()

		advance(time.Minute) // the first pass starts and sticks in partition 0's unlink
		if got := metric(t, reg, "narad_reaper_restarts"); got != 0 {
			t.Fatalf("restarts = %v before StallAfter", got)
		}
		for _, p := range []int{1, 2} {
			if names := segmentNames(t, d, partitionDir(p)); len(names) != 3 {
				t.Fatalf("partition %d swept past a stuck pass: %v", p, names)
			}
		}
		advance(time.Minute) // a minute without a tick
		if got := metric(t, reg, "narad_reaper_restarts"); got != 1 {
			t.Fatalf("restarts = %v after a minute stalled, want 1", got)
		}
		if logs.FilterMessage("supervised loop stalled; worker replaced").Len() != 1 {
			t.Fatal("the replacement was not logged")
		}
		close(release) // the stuck worker finishes its unlinks and stops
		synctest.Wait()
		advance(time.Minute) // the replacement's first pass
		for p := range 3 {
			if names := segmentNames(t, d, partitionDir(p)); len(names) != 1 {
				t.Fatalf("partition %d: segments %v left after the replacement's pass", p, names)
			}
		}
	})
}

// A sweep whose log was closed under it answers ErrLogClosed; the pass
// goes on, and nothing is logged or counted for it.
func TestReaper_SkipsLogsClosedUnderIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(4)
		targets := openLogs(t, d, 2, time.Hour)
		targets[0].Log.Close()
		if _, err := targets[0].Log.Sweep(bg); !errors.Is(err, partition.ErrLogClosed) {
			t.Fatalf("sweep of a closed log: %v, want ErrLogClosed", err)
		}
		reg, logs, stop := startReaper(t, func() []Target { return targets })
		defer stop()
		advance(time.Minute)
		if got := metric(t, reg, "narad_reaper_sweeps_total"); got != 1 {
			t.Fatalf("sweeps_total = %v, want 1 (only the open log)", got)
		}
		if logs.FilterLevelExact(zapcore.WarnLevel).Len() != 0 {
			t.Fatalf("a closed log was logged: %v", logs.All())
		}
	})
}
