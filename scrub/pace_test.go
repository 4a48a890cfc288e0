package scrub

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRateHonoured: in a bubble's fake time, a pass reads no faster than
// its rate (every byte is paid for before it is read), and no slower than
// the rate and one step; a pass stopped mid-wait returns at once.
func TestRateHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(6)
		seed(t, d, 0, 2000)
		const rate = 16 << 10
		s, _ := newScrubber(d, &fakeNode{fs: d}, rate)
		start := time.Now()
		s.Pass(bg, nil, nil)
		elapsed := time.Since(start)
		read := int64(testutil.ToFloat64(s.metrics.bytes))
		if read < 4<<10 {
			t.Fatalf("read only %d bytes", read)
		}
		earned := time.Duration(read) * time.Second / rate
		steps := time.Duration(read/pacerStep + 64) // each step's wait is truncated to the nanosecond
		if elapsed < earned-steps {
			t.Fatalf("%d bytes in %v: faster than %d B/s (at least %v)", read, elapsed, rate, earned)
		}
		if elapsed > earned+time.Duration(pacerStep)*time.Second/rate {
			t.Fatalf("%d bytes in %v: slower than %d B/s and a step (%v)", read, elapsed, rate, earned)
		}

		// Stopped mid-wait, a pass returns at the instant it is told.
		s.cfg.Interval = time.Nanosecond // the partition is due again at once
		ctx, cancel := context.WithCancel(bg)
		done := make(chan time.Time)
		go func() {
			s.Pass(ctx, nil, nil)
			done <- time.Now()
		}()
		time.Sleep(time.Second) // fake time: a second into the pass's waits
		synctest.Wait()
		stopped := time.Now()
		cancel()
		if at := <-done; !at.Equal(stopped) {
			t.Fatalf("pass returned %v after it was stopped", at.Sub(stopped))
		}
	})
}

// TestSlowPassNeverStalls: a pass far longer than the watchdog's stall
// time, at a low rate, is never replaced: every paced step beats.
func TestSlowPassNeverStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(7)
		bases := seed(t, d, 0, 2000)
		reg := prometheus.NewRegistry()
		const rate = 512 // a segment's read (about 2 KiB) every 4 s
		loop := Start(Config{FS: d, TopicsDir: topicsDir, Node: &fakeNode{fs: d}, Rate: rate,
			Interval: time.Minute, StallAfter: 20 * time.Second, Registerer: reg})
		defer loop.Close()
		var total int64
		for _, b := range bases[:len(bases)-1] {
			fi, err := d.Stat(filepath.Join(partitionDir(0), segmentName(b)))
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size
		}
		if took := time.Duration(total) * time.Second / rate; took < 3*20*time.Second {
			t.Fatalf("the pass takes %v, not much longer than the stall time", took)
		}
		for {
			time.Sleep(10 * time.Second) // fake time
			synctest.Wait()
			if prog, ok := readProgress(t, d, 0); ok && prog.CompletedUnixMs != 0 {
				break
			}
		}
		restarts := gatherCounter(t, reg, "narad_scrub_restarts")
		if restarts != 0 {
			t.Fatalf("the watchdog replaced the pass %v times", restarts)
		}
	})
}

func gatherCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s among %d families", name, len(families))
	return 0
}

// TestRateBelowMinRateNeverStalls: scrub.New and runtime.Config take any
// positive rate (only the daemon's Validate refuses one under MinRate); at
// 200 B/s one paced 64 KiB step waits 328 s, past DefaultStallAfter, and
// is waited in slices that beat, so the watchdog never replaces the pass.
func TestRateBelowMinRateNeverStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(35)
		l, err := partition.Open(partitionDir(0), partition.Options{FS: d, SegmentMaxBytes: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 * 256 / 4 { // two segments of 256 KiB
			batch := make([]partition.Record, 4)
			for j := range batch {
				batch[j] = partition.Record{Value: bytes.Repeat([]byte{'v'}, 1000)}
			}
			if _, err := l.Produce(bg, batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		loop := Start(Config{FS: d, TopicsDir: topicsDir, Node: &fakeNode{fs: d}, Rate: 200, Interval: time.Minute, Registerer: reg})
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if err := loop.Close(); err != nil {
			t.Fatal(err)
		}
		if restarts := gatherCounter(t, reg, "narad_scrub_restarts"); restarts != 0 {
			t.Fatalf("the watchdog replaced the pass %v times at a rate New accepted", restarts)
		}
	})
}
