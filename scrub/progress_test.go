package scrub

import (
	"errors"
	"fmt"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

var errCrashed = errors.New("crashed here")

// TestProgressWriteCrashSafe crashes the disk before each file call of a
// progress write in turn, under several power-loss plans: what a restart
// reads is the old progress or the new, never a torn file or a warning,
// and a pass on the rebooted disk runs to its end.
func TestProgressWriteCrashSafe(t *testing.T) {
	plans := []sim.CrashPlan{
		{Data: sim.DropUnsynced},
		{Data: sim.KeepUnsynced, KeepNameOps: -1},
		{Data: sim.TearUnsynced, Seed: 7, KeepNameOps: -1, Garbage: true},
		{Data: sim.TearUnsynced, Seed: 8, KeepNameOps: 1},
	}
	d := sim.NewDisk(4)
	bases := seed(t, d, 0, 200)
	old := wire.ScrubProgress{Next: bases[1], CompletedUnixMs: 1000}
	next := wire.ScrubProgress{Next: bases[2], CompletedUnixMs: 1000}
	s, _ := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	if err := s.saveProgress(partitionKey{"orders", 0}, partitionDir(0), "", old, nil); err != nil {
		t.Fatal(err)
	}
	for pi, plan := range plans {
		for k := 1; ; k++ {
			var crashed *sim.Disk
			calls := 0
			base := d.Crash(sim.CrashPlan{KeepNameOps: -1}) // old progress durable, nothing pending
			base.SetHook(func(c sim.Call) error {
				if calls++; calls == k {
					crashed = base.Crash(plan)
					return errCrashed
				}
				return nil
			})
			s, _ := newScrubber(base, &fakeNode{fs: base}, 1<<30)
			err := s.saveProgress(partitionKey{"orders", 0}, partitionDir(0), "", next, nil)
			base.SetHook(nil)
			if crashed == nil {
				if err != nil {
					t.Fatalf("plan %d: the write with no crash: %v", pi, err)
				}
				if k < 4 {
					t.Fatalf("plan %d: the write made only %d file calls", pi, k-1)
				}
				break // every call of the write has been crashed before
			}
			t.Run(fmt.Sprintf("plan=%d/call=%d", pi, k), func(t *testing.T) {
				s, logs := newScrubber(crashed, &fakeNode{fs: crashed}, 1<<30)
				got := s.loadProgress(partitionDir(0))
				if got != old && got != next {
					t.Fatalf("progress after the crash: %+v, want %+v or %+v", got, old, next)
				}
				if logs.Len() != 0 {
					t.Fatalf("reading it warned: %v", logs.All())
				}
				s.Pass(bg, nil, nil)
				if prog, ok := readProgress(t, crashed, 0); !ok || prog.Next != 0 || prog.CompletedUnixMs <= 1000 {
					t.Fatalf("progress after a pass on the rebooted disk: %+v %v", prog, ok)
				}
			})
		}
	}
}

// TestDamagedProgressStartsOver: a progress file that does not check out
// is logged and read as none: the pass checks the partition from its
// first segment.
func TestDamagedProgressStartsOver(t *testing.T) {
	d := sim.NewDisk(5)
	bases := seed(t, d, 0, 200)
	s, logs := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	if err := s.saveProgress(partitionKey{"orders", 0}, partitionDir(0), "", wire.ScrubProgress{Next: bases[2]}, nil); err != nil {
		t.Fatal(err)
	}
	name := partitionDir(0) + "/" + wire.ScrubProgressFileName
	if err := d.Damage(name, 9, []byte{0xff}); err != nil {
		t.Fatal(err)
	}
	if got := s.loadProgress(partitionDir(0)); got != (wire.ScrubProgress{}) {
		t.Fatalf("damaged progress read as %+v", got)
	}
	if logs.FilterMessageSnippet("progress unreadable").Len() != 1 {
		t.Fatalf("no warning: %v", logs.All())
	}
}
