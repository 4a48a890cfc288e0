package sim

import (
	"os"
	"testing"

	"github.com/narad-io/storage/vfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustWrite writes data to a new (or emptied) file, without a sync.
func mustWrite(t *testing.T, fsys vfs.FS, name string, data []byte) {
	writeFile(t, fsys, name, data, false)
}

// mustWriteSynced is mustWrite and a sync of the file (not of its
// directory).
func mustWriteSynced(t *testing.T, fsys vfs.FS, name string, data []byte) {
	writeFile(t, fsys, name, data, true)
}

func writeFile(t *testing.T, fsys vfs.FS, name string, data []byte, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if !sync {
		return
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
