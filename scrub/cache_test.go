package scrub

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
)

// TestPageCacheHints: a closed partition's sealed segments, and an open
// log's cold ones, are read from the media and dropped from the page
// cache after (two drops each); an open log's hot segments are read
// through the cache and never dropped.
func TestPageCacheHints(t *testing.T) {
	d := sim.NewDisk(13)
	bases := seed(t, d, 0, 400)
	seed(t, d, 1, 400)
	l, err := partition.Open(partitionDir(1), partition.Options{FS: d, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Read(bases[1]+1, 1, 1<<20); err != nil { // segment 1 is hot
		t.Fatal(err)
	}
	var mu sync.Mutex
	drops := map[string]int{}
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpDropCache {
			mu.Lock()
			drops[c.Path]++
			mu.Unlock()
		}
		return nil
	})
	s, _ := newScrubber(d, &fakeNode{fs: d, logs: map[int]*partition.Log{1: l}}, 1<<30)
	s.Pass(bg, nil, nil)
	d.SetHook(nil)
	for i, b := range bases[:len(bases)-1] {
		closed := drops[filepath.Join(partitionDir(0), segmentName(b))]
		open := drops[filepath.Join(partitionDir(1), segmentName(b))]
		wantOpen := 2
		if i == 1 {
			wantOpen = 0
		}
		if closed != 2 || open != wantOpen {
			t.Fatalf("segment %d: %d drops closed (want 2), %d open (want %d)", i, closed, open, wantOpen)
		}
	}
	if n := drops[filepath.Join(partitionDir(0), segmentName(bases[len(bases)-1]))]; n != 0 {
		t.Fatalf("the active segment's pages dropped %d times", n)
	}
}
