package scrub

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestSegmentRemovedMidPass: retention removing the next sealed segment
// while the pass checks one is skipped cleanly: no error, no damage, no
// warning, and the pass completes.
func TestSegmentRemovedMidPass(t *testing.T) {
	d := sim.NewDisk(8)
	bases := seed(t, d, 0, 400)
	victim := filepath.Join(partitionDir(0), segmentName(bases[2]))
	looks := 0
	node := &fakeNode{fs: d, onLook: func(int) {
		if looks++; looks == 1 { // checking bases[0]
			if err := d.Remove(victim); err != nil {
				t.Error(err)
			}
		}
	}}
	s, logs := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	if logs.Len() != 0 {
		t.Fatalf("warnings: %v", logs.All())
	}
	if f, dmg := testutil.ToFloat64(s.metrics.failures), testutil.ToFloat64(s.metrics.damaged); f != 0 || dmg != 0 {
		t.Fatalf("read errors %v, damage %v; want none", f, dmg)
	}
	if prog, ok := readProgress(t, d, 0); !ok || prog.CompletedUnixMs == 0 {
		t.Fatalf("pass not completed: %+v %v", prog, ok)
	}
}

// TestPartitionDeletedMidPass: a partition removed while the pass checks
// it is left quietly: no warning, its directory is not recreated by the
// progress write, and the next whole pass drops its series.
func TestPartitionDeletedMidPass(t *testing.T) {
	d := sim.NewDisk(9)
	seed(t, d, 0, 400)
	seed(t, d, 1, 400)
	looks := 0
	node := &fakeNode{fs: d, onLook: func(p int) {
		if looks++; p == 0 && looks == 2 { // within partition 0
			if err := d.RemoveAll(partitionDir(0)); err != nil {
				t.Error(err)
			}
		}
	}}
	reg := prometheus.NewRegistry()
	core, logs := newScrubber(d, node, 1<<30)
	core.metrics = newMetrics(reg, false)
	core.Pass(bg, nil, nil)
	if logs.Len() != 0 {
		t.Fatalf("warnings: %v", logs.All())
	}
	if exists, err := vfs.Exists(d, partitionDir(0)); err != nil || exists {
		t.Fatal("the deleted partition's directory is back")
	}
	if prog, ok := readProgress(t, d, 1); !ok || prog.CompletedUnixMs == 0 {
		t.Fatalf("partition 1 not scrubbed: %+v %v", prog, ok)
	}
	core.Pass(bg, nil, nil)
	if n := testutil.CollectAndCount(core.metrics.done); n != 1 {
		t.Fatalf("%d partition series after the partition is gone, want 1", n)
	}
}

// TestTopicRecreatedMidPass: a topic deleted and made again under the
// pass (its incarnation marker changed) gets none of the pass's progress:
// the new incarnation's first pass checks it from its first segment.
func TestTopicRecreatedMidPass(t *testing.T) {
	d := sim.NewDisk(12)
	seed(t, d, 0, 400)
	marker := filepath.Join(topicsDir, "orders", wire.IncarnationFileName)
	if err := vfs.WriteFileAtomic(d, marker, []byte("aaaaaaaaaaaaaaaa\n")); err != nil {
		t.Fatal(err)
	}
	looks := 0
	node := &fakeNode{fs: d, onLook: func(int) {
		if looks++; looks == 1 {
			if err := vfs.WriteFileAtomic(d, marker, []byte("bbbbbbbbbbbbbbbb\n")); err != nil {
				t.Error(err)
			}
		}
	}}
	s, logs := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	if logs.Len() != 0 {
		t.Fatalf("warnings: %v", logs.All())
	}
	if prog, ok := readProgress(t, d, 0); ok {
		t.Fatalf("the new incarnation got the pass's progress %+v", prog)
	}
}

// TestTopicRecreatedBeforeMarkerReadGetsNoOldProgress: the topic is
// deleted and made again (segments rolled at other offsets, one of them
// rotten) just before the pass reads the partition's incarnation marker.
// The pass reads the marker before it lists the segments, so whatever it
// then records in the new incarnation is true of it: no gap made up from
// the old listing's segment ends, and no progress claiming a segment of
// the new incarnation it did not read whole.
func TestTopicRecreatedBeforeMarkerReadGetsNoOldProgress(t *testing.T) {
	d := sim.NewDisk(31)
	seed(t, d, 0, 400)
	marker := filepath.Join(topicsDir, "orders", wire.IncarnationFileName)
	if err := vfs.WriteFileAtomic(d, marker, []byte("aaaaaaaaaaaaaaaa\n")); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		newBases []int64
		read     = map[string]int64{} // bytes read from the new incarnation's files
	)
	d.SetHook(func(c sim.Call) error {
		mu.Lock()
		recreated := newBases != nil
		mu.Unlock()
		if recreated {
			if c.Op == sim.OpRead {
				mu.Lock()
				read[c.Path] += int64(c.Len)
				mu.Unlock()
			}
			return nil
		}
		if c.Op != sim.OpOpen || c.Path != marker {
			return nil
		}
		hook := d.Hook()
		d.SetHook(nil) // the delete and the create, as fast as a node makes them
		if err := d.RemoveAll(filepath.Join(topicsDir, "orders")); err != nil {
			t.Error(err)
		}
		if err := d.MkdirAll(filepath.Join(topicsDir, "orders")); err != nil {
			t.Error(err)
		}
		if err := vfs.WriteFileAtomic(d, marker, []byte("bbbbbbbbbbbbbbbb\n")); err != nil {
			t.Error(err)
		}
		bases := seedValues(t, d, 0, 200, 100)
		seg := filepath.Join(partitionDir(0), segmentName(bases[1]))
		pos, _ := secondFrame(t, d, seg)
		flip(t, d, seg, pos+30)
		mu.Lock()
		newBases = bases
		mu.Unlock()
		d.SetHook(hook)
		return nil
	})
	s, logs := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s.Pass(bg, nil, nil)
	d.SetHook(nil)
	if newBases == nil {
		t.Fatal("the marker was never read")
	}
	for _, w := range logs.FilterMessageSnippet("damaged frame").All() {
		if f := w.ContextMap(); f["error"] != nil && strings.Contains(fmt.Sprint(f["error"]), "its successor starts at") {
			t.Errorf("a gap made up from the old listing's segment ends: %v", f)
		}
	}
	if prog, ok := readProgress(t, d, 0); ok {
		for i, b := range newBases[:len(newBases)-1] {
			name := filepath.Join(partitionDir(0), segmentName(b))
			fi, err := d.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			claimed := prog.CompletedUnixMs != 0 && prog.Next == 0 || newBases[i+1] <= prog.Next
			if claimed && read[name] < fi.Size {
				t.Errorf("progress %+v in the new incarnation claims its segment %d, read %d of %d bytes", prog, i, read[name], fi.Size)
			}
		}
	}
}

// TestDeletedTopicsRotNotBlamedOnItsSuccessor: the pass opens a rotten
// segment; the topic is deleted and made again (clean) before the pass
// reads it, and the new incarnation's log is open. The rot is in a file
// that is no longer any partition's: it must not be handed to the new
// incarnation's log, which then counts read_corrupt and warns of damage
// its own files do not hold.
func TestDeletedTopicsRotNotBlamedOnItsSuccessor(t *testing.T) {
	d := sim.NewDisk(32)
	bases := seed(t, d, 0, 400)
	marker := filepath.Join(topicsDir, "orders", wire.IncarnationFileName)
	if err := vfs.WriteFileAtomic(d, marker, []byte("aaaaaaaaaaaaaaaa\n")); err != nil {
		t.Fatal(err)
	}
	rotten := filepath.Join(partitionDir(0), segmentName(bases[1]))
	pos, _ := secondFrame(t, d, rotten)
	flip(t, d, rotten, pos+30)

	core, newLogs := observer.New(zapcore.WarnLevel)
	node := &fakeNode{fs: d}
	looks := 0
	var newLog *partition.Log
	node.onLook = func(int) {
		// Look 3 is segment 1's first, just after the pass opened it.
		if looks++; looks != 3 {
			return
		}
		if err := d.RemoveAll(filepath.Join(topicsDir, "orders")); err != nil {
			t.Error(err)
		}
		if err := d.MkdirAll(filepath.Join(topicsDir, "orders")); err != nil {
			t.Error(err)
		}
		if err := vfs.WriteFileAtomic(d, marker, []byte("bbbbbbbbbbbbbbbb\n")); err != nil {
			t.Error(err)
		}
		seed(t, d, 0, 400)
		l, err := partition.Open(partitionDir(0), partition.Options{FS: d, SegmentMaxBytes: 2 << 10, Logger: zap.New(core)})
		if err != nil {
			t.Error(err)
			return
		}
		node.mu.Lock()
		node.logs = map[int]*partition.Log{0: l}
		newLog = l
		node.mu.Unlock()
	}
	s, _ := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	if newLog == nil {
		t.Fatal("the topic was never made again")
	}
	defer newLog.Close()
	if n := newLogs.FilterMessageSnippet("damaged frame").Len(); n != 0 {
		t.Fatalf("the new incarnation's clean log was told of its predecessor's rot: %v", newLogs.All())
	}
}

// TestDamageEndIsTheSizeWalked: a segment that grew between the listing
// and the walk (garbage appended past its last frame) is reported with
// the byte range of what was walked: its damage ends at the size the
// walk read, not the size the listing saw.
func TestDamageEndIsTheSizeWalked(t *testing.T) {
	d := sim.NewDisk(36)
	bases := seed(t, d, 0, 400)
	name := filepath.Join(partitionDir(0), segmentName(bases[1]))
	listed, err := d.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	looks := 0
	node := &fakeNode{fs: d, onLook: func(int) {
		if looks++; looks != 3 { // segment 1's, just after the pass opened it
			return
		}
		f, err := d.OpenFile(name, os.O_WRONLY)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 100), listed.Size); err != nil {
			t.Error(err)
		}
	}}
	s, logs := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	warned := logs.FilterMessageSnippet("scrub found a damaged frame").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(warned), logs.All())
	}
	if f := warned[0].ContextMap(); f["segment"] != segmentName(bases[1]) || f["byte"] != listed.Size || f["byte_end"] != listed.Size+100 {
		t.Fatalf("warning fields %v: want bytes %d to %d", f, listed.Size, listed.Size+100)
	}
}

// TestStopsReadingASegmentUnlinkedUnderIt: retention unlinks the sealed
// segment the pass is reading (1 MiB, 16 paced parts). The pass notices
// within a part and leaves it quietly, as it does a segment removed
// before it opened it, rather than read the unlinked file to its end at
// the paced rate, holding its blocks from the free space retention just
// made (a 1 GiB segment at 4 MiB/s: over four minutes).
func TestStopsReadingASegmentUnlinkedUnderIt(t *testing.T) {
	d := sim.NewDisk(34)
	l, err := partition.Open(partitionDir(0), partition.Options{FS: d, SegmentMaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 * 1024 / 4 { // three segments of 1 MiB, in frames of 4 KiB
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
	victim := filepath.Join(partitionDir(0), segmentName(0))
	var mu sync.Mutex
	removed, after := false, 0
	d.SetHook(func(c sim.Call) error {
		if c.Op != sim.OpRead || c.Path != victim {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if removed {
			after += c.Len
			return nil
		}
		removed = true
		if err := d.Remove(victim); err != nil { // retention's unlink, just before this read
			t.Error(err)
		}
		return nil
	})
	s, logs := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s.Pass(bg, nil, nil)
	d.SetHook(nil)
	if after > 2*pacerStep {
		t.Fatalf("read %d bytes of the segment after retention unlinked it", after)
	}
	if logs.Len() != 0 || testutil.ToFloat64(s.metrics.failures) != 0 {
		t.Fatalf("warnings %v, read errors %v: want none", logs.All(), testutil.ToFloat64(s.metrics.failures))
	}
}

// TestUnreadableSegmentKeepsThePassOpen: a sealed segment whose reads fail
// with EIO is counted and logged with its partition, segment and the byte
// the read failed at; the pass checks the segments after it but records
// no completion, its progress left at the unreadable segment, where the
// next pass resumes and, the disk readable again, completes.
func TestUnreadableSegmentKeepsThePassOpen(t *testing.T) {
	d := sim.NewDisk(38)
	bases := seed(t, d, 0, 400)
	bad := filepath.Join(partitionDir(0), segmentName(bases[1]))
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && c.Path == bad {
			return syscall.EIO
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	s, logs := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s.metrics = newMetrics(reg, false)
	s.Pass(bg, nil, nil)
	d.SetHook(nil)
	if n := testutil.ToFloat64(s.metrics.failures); n != 1 {
		t.Fatalf("read errors %v, want 1", n)
	}
	warned := logs.FilterMessageSnippet("read a sealed segment").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(warned), logs.All())
	}
	if f := warned[0].ContextMap(); f["segment"] != segmentName(bases[1]) || f["partition"] != int64(0) || f["byte"] != int64(0) {
		t.Fatalf("warning fields %v: want segment %s, byte 0", f, segmentName(bases[1]))
	}
	if prog, ok := readProgress(t, d, 0); !ok || prog.Next != bases[1] || prog.CompletedUnixMs != 0 {
		t.Fatalf("progress after a pass with an unreadable segment: %+v %v, want next %d and no completion", prog, ok, bases[1])
	}
	if got := testutil.ToFloat64(s.metrics.done.WithLabelValues("orders", "0")); got != 0 {
		t.Fatalf("completion gauge %v after a pass that could not read a segment", got)
	}
	if got := testutil.ToFloat64(s.metrics.progress.WithLabelValues("orders", "0")); got >= 1 {
		t.Fatalf("progress gauge %v after a pass that could not read a segment", got)
	}

	reads := countReads(d)
	s.Pass(bg, nil, nil)
	d.SetHook(nil)
	if n := reads.of(filepath.Join(partitionDir(0), segmentName(bases[0]))); n != 0 {
		t.Fatalf("segment 0, checked, read again: %d bytes", n)
	}
	if n := reads.of(bad); n == 0 {
		t.Fatal("the unreadable segment was not read again")
	}
	if prog, ok := readProgress(t, d, 0); !ok || prog.Next != 0 || prog.CompletedUnixMs == 0 {
		t.Fatalf("progress after the resumed pass: %+v %v", prog, ok)
	}
}

// TestMarkerlessTopicRecreatedGetsNoProgress: a topic with no incarnation
// id has no marker, so "" reads as "" before and after a delete and
// recreate. Made again (segments rolled at other offsets) just after the
// pass checked a segment and before it writes that progress, the new
// incarnation gets none: the segment checked is no longer under its name
// with the size walked.
func TestMarkerlessTopicRecreatedGetsNoProgress(t *testing.T) {
	d := sim.NewDisk(43)
	seed(t, d, 0, 400)
	recreated := false
	node := &fakeNode{fs: d}
	node.onSave = func(n int) {
		if n != 2 {
			return
		}
		if err := d.RemoveAll(filepath.Join(topicsDir, "orders")); err != nil {
			t.Error(err)
		}
		seedValues(t, d, 0, 200, 100)
		recreated = true
	}
	s, logs := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	if !recreated {
		t.Fatal("the topic was never made again")
	}
	if logs.Len() != 0 {
		t.Fatalf("warnings: %v", logs.All())
	}
	if prog, ok := readProgress(t, d, 0); ok {
		t.Fatalf("the new incarnation got the pass's progress %+v", prog)
	}
}

// TestMarkerlessTopicMadeAgainUnderTheWalkGetsNoProgress: a topic without
// a marker, deleted and made again while a segment of it is walked: the
// walk meets the unlink (fs.ErrNotExist), and the pass writes neither its
// progress nor a completion into the new directory.
func TestMarkerlessTopicMadeAgainUnderTheWalkGetsNoProgress(t *testing.T) {
	d := sim.NewDisk(43)
	seed(t, d, 0, 400)
	looks, recreated := 0, false
	node := &fakeNode{fs: d}
	node.onLook = func(int) {
		if looks++; looks != 3 || recreated { // the second segment's look, after its open
			return
		}
		recreated = true
		if err := d.RemoveAll(filepath.Join(topicsDir, "orders")); err != nil {
			t.Error(err)
		}
		seedValues(t, d, 0, 200, 100)
	}
	s, _ := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	if !recreated {
		t.Fatal("never recreated")
	}
	if prog, ok := readProgress(t, d, 0); ok {
		t.Fatalf("the new incarnation got the pass's progress %+v", prog)
	}
}
