package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// TestTransfer_ListThenInstallElsewhere: the source lists a partition's
// segments and boundary without opening its log; the target installs the
// files, stamps the marker, and serves the same records; a listing of a
// directory whose marker is another incarnation's is refused.
func TestTransfer_ListThenInstallElsewhere(t *testing.T) {
	src := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	rec, _, _ := src.CreateTopic(bg, "orders", 1, Retention{})
	for i := range 20 {
		if _, err := src.Produce(bg, "orders", 0, recs("orders", 0, i*3, 3)); err != nil {
			t.Fatal(err)
		}
	}
	want := readValues(t, src, "orders", 0)
	if _, err := src.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if err := src.CommitCursor(bg, "orders", "audit", 0, 7); err != nil { // in memory only, until the listing
		t.Fatal(err)
	}
	if err := src.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	listing, err := src.TransferListing(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, open := src.reg.Lookup(key("orders", 0)); open {
		t.Fatal("the listing opened the log")
	}
	if !listing.Known || listing.HighWatermark != 60 || len(listing.Segments) < 2 || listing.Incarnation != rec.Incarnation {
		t.Fatalf("listing %+v", listing)
	}
	if fmt.Sprint(listing.Cursors) != "[{cursor.audit 7}]" {
		t.Fatalf("listing's cursors %v, want audit at its newest position 7", listing.Cursors)
	}
	dir := filepath.Join(dataDir, "topics", "orders", "p00000")
	var files []InstallFile
	for _, s := range listing.Segments {
		b, err := src.disk.Contents(filepath.Join(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, InstallFile{Name: s.Name, Data: b})
	}
	hwm, _ := wire.EncodeOffsetFile(listing.HighWatermark)
	files = append(files, InstallFile{Name: wire.HWMFileName, Data: hwm[:]})
	for _, c := range listing.Cursors {
		pos, _ := wire.EncodeOffsetFile(c.Position)
		files = append(files, InstallFile{Name: c.Name, Data: pos[:]})
	}

	dst := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	// The target learns the topic, incarnation included (a metastore
	// replica would); the embedded store makes a new id, so copy it.
	dst.ms.CreateTopic(bg, "orders", 1, Retention{})
	dst.ms.mu.Lock()
	r := dst.ms.topics["orders"]
	r.Incarnation = rec.Incarnation
	dst.ms.topics["orders"] = r
	dst.ms.mu.Unlock()
	// The target has the cursor in memory already (at 0): the install's
	// position must win over it.
	if _, err := dst.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if err := dst.InstallPartition(bg, "orders", 0, "0123456789abcdef", files); !errors.Is(err, ErrStaleIncarnation) {
		t.Fatalf("install of another incarnation: %v", err)
	}
	if err := dst.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, dst, "orders", 0); len(got) != len(want) || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("installed partition serves %d records, want %d", len(got), len(want))
	}
	if got, err := dst.Cursor(bg, "orders", "audit"); err != nil || len(got) != 1 || got[0].Position != 7 {
		t.Fatalf("the moved cursor: %+v, %v; want position 7", got, err)
	}
	if b, _ := dst.disk.Contents(filepath.Join(dataDir, "topics", "orders", wire.IncarnationFileName)); string(b) != string(rec.Incarnation)+"\n" {
		t.Fatalf("install did not stamp the marker: %q", b)
	}
	if err := dst.InstallPartition(bg, "orders", 0, rec.Incarnation, []InstallFile{{Name: "../escape", Data: nil}}); err == nil {
		t.Fatal("install accepted a file name that is not a segment")
	}

	// A stale directory is refused.
	src.reg.CloseLive(key("orders", 0))
	if err := vfs.WriteFileAtomic(src.disk, filepath.Join(dataDir, "topics", "orders", wire.IncarnationFileName), []byte("0123456789abcdef\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := src.TransferListing(bg, "orders", 0); !errors.Is(err, ErrStaleIncarnation) {
		t.Fatalf("listing of a stale directory: %v", err)
	}
}
