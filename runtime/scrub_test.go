package runtime

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/scrub"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// TestScrubFindsRotThenReadsAnswerUnreadable: a byte flipped in a sealed
// segment of an open partition (its frame cached by an earlier read) and
// of a closed one is found by one pass; reads of both ranges then answer
// ErrUnreadable (record_unreadable over HTTP); the pass opened no log and
// closed none, and left each partition a progress file.
func TestScrubFindsRotThenReadsAnswerUnreadable(t *testing.T) {
	d := newTestDisk(t, 42)
	n := startNode(t, d, Config{SegmentMaxBytes: 2 << 10})
	if _, _, err := n.CreateTopic(bg, "orders", 2, Retention{}); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		for i := 0; i < 400; i += 4 {
			if _, err := n.Produce(bg, "orders", p, recs("orders", p, i, 4)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if closed := n.EvictIdle(time.Now().Add(2000 * time.Hour)); closed != 2 {
		t.Fatalf("closed %d logs, want 2", closed)
	}
	readValues(t, n, "orders", 0) // opens partition 0 again and caches its frames
	open, ok := n.LogIfOpen("orders", 0)
	if !ok {
		t.Fatal("partition 0 is not open")
	}

	offsets := make([]int64, 2)
	for p := range 2 {
		dirName, _ := wire.PartitionDirName(p)
		dir := filepath.Join(dataDir, "topics", "orders", dirName)
		entries, err := d.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var segs []string
		for _, e := range entries {
			if _, err := wire.ParseSegmentFileName(e.Name); err == nil {
				segs = append(segs, filepath.Join(dir, e.Name))
			}
		}
		if len(segs) < 3 {
			t.Fatalf("partition %d has %d segments", p, len(segs))
		}
		b, err := d.Contents(segs[1])
		if err != nil {
			t.Fatal(err)
		}
		h, err := wire.CheckFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := wire.CheckFrame(b[h.FrameLen():])
		if err != nil {
			t.Fatal(err)
		}
		offsets[p] = h2.BaseOffset
		if p == 0 { // a read stopping inside the frame caches it
			if _, err := n.Read(bg, "orders", 0, offsets[0], 1, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		at := h.FrameLen() + 40
		if err := d.Damage(segs[1], at, []byte{b[at] ^ 0x10}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Read(bg, "orders", 0, offsets[0], 1, 1<<20); err != nil {
		t.Fatalf("partition 0's cached frame before the scrub: %v", err)
	}

	cfg := n.scrubConfig()
	cfg.Rate = 1 << 30
	scrub.New(cfg).Pass(bg, nil, nil)

	if l, ok := n.LogIfOpen("orders", 0); !ok || l != open || l.Closed() {
		t.Fatal("the scrub closed partition 0's open log")
	}
	if _, ok := n.LogIfOpen("orders", 1); ok {
		t.Fatal("the scrub opened partition 1's log")
	}
	for p := range 2 {
		dirName, _ := wire.PartitionDirName(p)
		if ok, err := vfs.Exists(d, filepath.Join(dataDir, "topics", "orders", dirName, wire.ScrubProgressFileName)); err != nil || !ok {
			t.Fatalf("partition %d has no progress file: %v", p, err)
		}
		if _, err := n.Read(bg, "orders", p, offsets[p], 1, 1<<20); !isUnreadableErr(err) {
			t.Fatalf("partition %d: read at %d after the scrub: %v, want ErrUnreadable", p, offsets[p], err)
		}
	}
}

func isUnreadableErr(err error) bool { return errors.Is(err, partition.ErrUnreadable) }
