package datadir

import (
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is left once they end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const dataDir = "/data"

// newTestDisk is a simulated disk holding an empty, durable data
// directory.
func newTestDisk(t *testing.T, seed uint64) *sim.Disk {
	t.Helper()
	d := sim.NewDisk(seed)
	if err := d.MkdirAll(dataDir); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return d
}
