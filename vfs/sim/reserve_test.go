package sim

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// TestCapacity_AReservationHoldsItsSpaceUntilATruncate: blocks Allocate
// reserves past a file's size count as used, as a real file system's
// statfs counts them, until a truncate gives them back; a write into them
// takes nothing more, and a reservation past the capacity fails with
// ENOSPC (found by the simulator's disk floor: the node counted a frame
// written into its reserved blocks as taken already, and the disk counted
// it at the write, so the free space went under the node's floor).
func TestCapacity_AReservationHoldsItsSpaceUntilATruncate(t *testing.T) {
	d := NewDisk(1)
	d.MkdirAll("/d")
	d.SetCapacity(vfs.Space{Bytes: 1000})
	mustWrite(t, d, "/d/a", make([]byte, 100))
	f, err := d.OpenFile("/d/a", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	free := func() uint64 {
		t.Helper()
		s, err := d.Free("/d")
		if err != nil {
			t.Fatal(err)
		}
		return s.Bytes
	}
	if err := f.Allocate(100, 500); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != 400 {
		t.Fatalf("600 bytes held, 500 of them reserved: %d free, want 400", got)
	}
	if fi, _ := f.Stat(); fi.Size != 100 {
		t.Fatalf("a reservation changed the size to %d", fi.Size)
	}
	if _, err := f.WriteAt(make([]byte, 300), 100); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != 400 {
		t.Fatalf("a write into reserved blocks: %d free, want 400", got)
	}
	if err := f.Allocate(0, 1001); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a reservation past the capacity: %v, want ENOSPC", err)
	}
	if _, err := f.WriteAt(make([]byte, 500), 501); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write 401 bytes past what the file holds, 400 free: %v, want ENOSPC", err)
	}
	if got := free(); got != 400 {
		t.Fatalf("after refused calls: %d free, want 400", got)
	}
	if got := func() uint64 { s, _ := d.ProcessCrash().Free("/d"); return s.Bytes }(); got != 400 {
		t.Fatalf("after a process crash (the kernel keeps the blocks): %d free, want 400", got)
	}
	if err := f.Truncate(400); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != 600 {
		t.Fatalf("a truncate to the size gives the reservation back: %d free, want 600", got)
	}
}
