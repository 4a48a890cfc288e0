package partition

import (
	"errors"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// fakeSpace is a SpaceGuard that counts what it takes and what it is
// given back; refuse, when set, decides first.
type fakeSpace struct {
	mu       sync.Mutex
	taken    Allocation
	released Allocation
	asked    []Allocation
	refuse   func(Allocation) bool
}

var errFakeFloor = errors.New("fake floor")

func (g *fakeSpace) Admit(a Allocation) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, a)
	if g.refuse != nil && g.refuse(a) {
		return errFakeFloor
	}
	g.taken.Bytes += a.Bytes
	g.taken.Files += a.Files
	return nil
}

func (g *fakeSpace) Release(a Allocation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released.Bytes += a.Bytes
	g.released.Files += a.Files
}

// held is what the guard took and was not given back yet.
func (g *fakeSpace) held() Allocation {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken.minus(g.released)
}

func (g *fakeSpace) total() Allocation {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken
}

func (g *fakeSpace) set(refuse func(Allocation) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = refuse
}

// logFiles is what the log's segments and time indexes hold: their bytes
// and how many files.
func logFiles(t *testing.T, d *sim.Disk) Allocation {
	t.Helper()
	entries, err := d.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var a Allocation
	for _, e := range entries {
		if !strings.HasSuffix(e.Name, wire.SegmentFileSuffix) && !strings.HasSuffix(e.Name, wire.TimeIndexFileSuffix) {
			continue
		}
		fi, err := d.Stat(path.Join(testDir, e.Name))
		if err != nil {
			t.Fatal(err)
		}
		a.Bytes += fi.Size
		a.Files++
	}
	return a
}

// TestSpace_WhatALogAsksForIsWhatItsFilesTake: what a log asks its space
// guard for (docs/design.md, "A floor of free space") is what its files
// grow by: each produce's frame, less what lands in zeros written ahead,
// the zeros a busy log writes past its frames, and at a roll, by size
// after the commit or by age before the frame (idle, or busy with zeros
// ahead), the time index and the new segment, less the zeros the roll
// gives back. The one difference allowed:
// a sealed segment's time index is counted with an entry for the frame
// that rolled it, which it may not hold (24 bytes). Frames stay small, so
// no blocks are reserved (the simulated disk does not count those).
func TestSpace_WhatALogAsksForIsWhatItsFilesTake(t *testing.T) {
	seed := uint64(time.Now().UnixNano()) // outside the bubble, whose clock starts the same every run
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 7))
		d := newDisk(t, seed)
		g := &fakeSpace{}
		opts := preallocOptions(d)
		opts.SegmentMaxBytes, opts.MaxSegmentAge, opts.Space = 16<<10, 10*time.Second, g
		l := openLog(t, opts)
		defer closeLog(t, l)
		byAge, bySize := 0, 0
		for k, i := 0, int64(0); i < 2000; k++ {
			switch {
			case k%80 == 79:
				<-time.After(11 * time.Second) // idle: the zeros are given back, and the next frame rolls by age
			case k >= 400 && k%3 == 1:
				<-time.After(900 * time.Millisecond) // still busy: zeros stay until a roll by age gives them back
			}
			synctest.Wait()
			files, asked := logFiles(t, d), g.total()
			n := 1 + rng.IntN(3)
			if _, err := l.Produce(bg, records(seed, i, n)); err != nil {
				t.Fatalf("seed %d: produce: %v", seed, err)
			}
			i += int64(n)
			grew, took := logFiles(t, d), g.total()
			grew.Bytes, grew.Files = grew.Bytes-files.Bytes, grew.Files-files.Files
			took.Bytes, took.Files = took.Bytes-asked.Bytes, took.Files-asked.Files
			rolled := grew.Files / 2
			if rolled > 0 && l.view.Load().active.size > 0 {
				byAge++ // before the frame, which opened the new segment
			} else if rolled > 0 {
				bySize++ // after the frame that filled the segment
			}
			if took.Files != grew.Files || took.Bytes < grew.Bytes || took.Bytes > grew.Bytes+24*rolled {
				t.Fatalf("seed %d, produce at offset %d: asked for %+v, the files grew by %+v", seed, i, took, grew)
			}
		}
		if byAge < 3 || bySize < 3 {
			t.Fatalf("seed %d: %d rolls by age, %d by size", seed, byAge, bySize)
		}
	})
}

// TestSpace_ABatchTheGuardRefusesLeavesNothing: a produce or append the
// space guard refuses answers its error, and nothing of it is buffered or
// written; once the guard takes it, the same batch lands at the same
// offset.
func TestSpace_ABatchTheGuardRefusesLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		g := &fakeSpace{}
		opts := preallocOptions(d)
		opts.Space = g
		l := openLog(t, opts)
		defer closeLog(t, l)
		if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
			t.Fatal(err)
		}
		before := logFiles(t, d)
		g.set(func(a Allocation) bool { return a.Bytes > 0 })
		if _, err := l.Produce(bg, records(1, 3, 2)); !errors.Is(err, errFakeFloor) {
			t.Fatalf("a refused produce: %v, want the guard's error", err)
		}
		if _, err := l.Append(bg, records(1, 3, 2)); !errors.Is(err, errFakeFloor) {
			t.Fatalf("a refused append: %v, want the guard's error", err)
		}
		if err := l.CommitDurable(bg); err != nil {
			t.Fatalf("a commit of nothing: %v", err)
		}
		if after := logFiles(t, d); after != before || l.HighWatermark() != 3 {
			t.Fatalf("after the refusals: files %+v (before %+v), high watermark %d, want 3", after, before, l.HighWatermark())
		}
		g.set(nil)
		if base, err := l.Produce(bg, records(1, 3, 2)); err != nil || base != 3 {
			t.Fatalf("the batch once taken: base %d, %v; want 3", base, err)
		}
	})
}

// TestSpace_ZerosTheGuardRefusesAreNotWritten: a busy log whose guard
// takes its frames but not the zeros it would write past them commits
// every frame and writes no zeros (prealloc.go): the space prepared ahead
// never takes a floor the frames left.
func TestSpace_ZerosTheGuardRefusesAreNotWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		g := &fakeSpace{}
		g.set(func(a Allocation) bool { return a.Bytes >= preallocStep(1<<20)/2 }) // a step of zeros, never a frame
		opts := preallocOptions(d)
		opts.Space = g
		l := openLog(t, opts)
		defer closeLog(t, l)
		for i := range int64(20) {
			if _, err := l.Produce(bg, records(1, i, 1)); err != nil {
				t.Fatal(err)
			}
		}
		if size, frames := segmentSize(t, d, l), l.view.Load().active.size; size != frames {
			t.Fatalf("a segment file of %d bytes holding %d bytes of frames: zeros written past the guard", size, frames)
		}
		if taken, files := g.total(), logFiles(t, d); taken.Bytes != files.Bytes {
			t.Fatalf("the guard took %d bytes, the files hold %d", taken.Bytes, files.Bytes)
		}
	})
}

// TestSpace_WhatTheGuardTookIsHeldUntilItsWritesAreDone: a log holds what
// its guard took until nothing of it is still on its way to the file, and
// then gives it back, all of it: at once after a produce (and the zeros it
// wrote ahead), after the commit of appended records, not before; after a
// commit that failed and discarded its batch, and at a close that drops
// buffered records. Nothing is held for ever, so the guard never comes to
// refuse what fits.
func TestSpace_WhatTheGuardTookIsHeldUntilItsWritesAreDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		g := &fakeSpace{}
		opts := preallocOptions(d)
		opts.Space = g
		l := openLog(t, opts)
		check := func(what string, held bool) {
			t.Helper()
			synctest.Wait() // the actor is done with the call
			if h := g.held(); (h != Allocation{}) != held {
				t.Fatalf("%s: %+v held, want held: %v", what, h, held)
			}
		}
		if _, err := l.Append(bg, records(1, 0, 2)); err != nil {
			t.Fatal(err)
		}
		check("records appended, not yet written", true)
		if err := l.CommitDurable(bg); err != nil {
			t.Fatal(err)
		}
		check("after their commit", false)
		for i := range int64(3) { // busy: zeros written ahead too
			if _, err := l.Produce(bg, records(1, 2+i, 1)); err != nil {
				t.Fatal(err)
			}
			check("after a produce", false)
		}
		fault := d.Inject(sim.Fault{Op: sim.OpWrite, Path: l.view.Load().active.path, Err: syscall.EIO})
		if _, err := l.Produce(bg, records(1, 5, 2)); err == nil {
			t.Fatal("a produce whose write fails: no error")
		}
		fault.Remove()
		check("after a failed commit", false)
		if _, err := l.Append(bg, records(1, 5, 2)); err != nil {
			t.Fatal(err)
		}
		check("records appended again", true)
		closeLog(t, l)
		check("after a close that dropped them", false)
		if g.total() == (Allocation{}) {
			t.Fatal("the guard took nothing")
		}
	})
}
