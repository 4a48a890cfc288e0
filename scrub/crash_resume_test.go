package scrub

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCrashMidPassResumes crashes the disk before each file call of a
// whole pass in turn (the segment opens, page cache drops, paced reads,
// progress writes), under several power-loss plans. After each crash a
// new scrubber on the rebooted disk: reads a progress file that is whole
// (no warning) and never claims a segment the crashed pass had not read
// to its end before the crash; resumes at it, reading every sealed
// segment from there on and none before; finds the rot planted in the
// third segment unless the crashed pass had checked that segment already;
// and completes the partition (a partition the crashed pass completed is
// left alone: it is not due for an Interval).
func TestCrashMidPassResumes(t *testing.T) {
	plans := []sim.CrashPlan{
		{Data: sim.DropUnsynced},
		{Data: sim.KeepUnsynced, KeepNameOps: -1},
		{Data: sim.TearUnsynced, Seed: 3, KeepNameOps: 1, Garbage: true},
	}
	d := sim.NewDisk(21)
	bases := seed(t, d, 0, 300)
	if len(bases) < 5 {
		t.Fatalf("only %d segments", len(bases))
	}
	rotten := filepath.Join(partitionDir(0), segmentName(bases[2]))
	pos, _ := secondFrame(t, d, rotten)
	flip(t, d, rotten, pos+30)
	sizes := map[string]int64{}
	for _, b := range bases {
		name := filepath.Join(partitionDir(0), segmentName(b))
		fi, err := d.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = fi.Size
	}
	image := d.Crash(sim.CrashPlan{KeepNameOps: -1}) // everything durable, nothing pending

	for pi, plan := range plans {
		for k := 1; ; k++ {
			disk := image.Crash(sim.CrashPlan{KeepNameOps: -1})
			ctx, cancel := context.WithCancel(bg)
			var (
				mu      sync.Mutex
				calls   int
				crashed *sim.Disk
				read    = map[string]int64{} // bytes read before the crash
			)
			disk.SetHook(func(c sim.Call) error {
				mu.Lock()
				defer mu.Unlock()
				if crashed != nil {
					return errCrashed // the process is gone
				}
				if calls++; calls == k {
					crashed = disk.Crash(plan)
					cancel()
					return errCrashed
				}
				if c.Op == sim.OpRead {
					read[c.Path] += int64(c.Len)
				}
				return nil
			})
			s, _ := newScrubber(disk, &fakeNode{fs: disk}, 1<<30)
			s.Pass(ctx, nil, nil)
			cancel()
			disk.SetHook(nil)
			if crashed == nil {
				if k < 20 {
					t.Fatalf("plan %d: a whole pass made only %d file calls", pi, k-1)
				}
				break // every call of the pass has been crashed before
			}
			t.Run(fmt.Sprintf("plan=%d/call=%d", pi, k), func(t *testing.T) {
				s2, logs := newScrubber(crashed, &fakeNode{fs: crashed}, 1<<30)
				prog := s2.loadProgress(partitionDir(0))
				if logs.Len() != 0 {
					t.Fatalf("reading the progress warned: %v", logs.All())
				}
				for i, b := range bases[:len(bases)-1] {
					name := filepath.Join(partitionDir(0), segmentName(b))
					if bases[i+1] <= prog.Next && read[name] < sizes[name] {
						t.Fatalf("progress %+v claims segment %d, of which the crashed pass read %d of %d bytes",
							prog, i, read[name], sizes[name])
					}
				}
				// The image has no progress: a completion is the crashed
				// pass's, less than an Interval old, so the partition is
				// left until it is due.
				whole := prog.Next == 0 && prog.CompletedUnixMs != 0
				reads := countReads(crashed)
				s2.Pass(bg, nil, nil)
				crashed.SetHook(nil)
				for i, b := range bases[:len(bases)-1] {
					name := filepath.Join(partitionDir(0), segmentName(b))
					checked := whole || bases[i+1] <= prog.Next
					if got := reads.of(name); checked && got != 0 {
						t.Fatalf("segment %d, checked before the crash (progress %+v), read again: %d bytes", i, prog, got)
					} else if !checked && got < sizes[name] {
						t.Fatalf("segment %d not checked after the crash (progress %+v): %d of %d bytes", i, prog, got, sizes[name])
					}
				}
				if want := !whole && bases[3] > prog.Next; want != (testutil.ToFloat64(s2.metrics.damaged) == 1) {
					t.Fatalf("progress %+v: damage found after the crash %v, want it found: %v",
						prog, testutil.ToFloat64(s2.metrics.damaged), want)
				}
				after, ok := readProgress(t, crashed, 0)
				if !ok || after.Next != 0 || after.CompletedUnixMs == 0 {
					t.Fatalf("progress after the resumed pass: %+v %v", after, ok)
				}
				if n := logs.FilterMessageSnippet("scrub: ").Len(); n != 0 {
					t.Fatalf("the resumed pass warned: %v", logs.All())
				}
			})
		}
	}
}
