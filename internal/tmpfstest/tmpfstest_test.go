package tmpfstest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/narad-io/storage/vfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as a test's would, without failing the real test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(f string, args ...any) {
	r.failed = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// TestDir_OnATmpfs: the directory is on a tmpfs, and gone after the test.
func TestDir_OnATmpfs(t *testing.T) {
	var dir string
	t.Run("use", func(t *testing.T) {
		dir = Dir(t)
		info, err := vfs.OS{}.DescribeFS(dir)
		if err != nil || info.Type != "tmpfs" {
			t.Fatalf("%s: %+v, %v", dir, info, err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s after the test: %v", dir, err)
	}
}

// TestDir_NoTmpfsFails: where no candidate is a tmpfs, the test fails
// (never skips), naming each place it looked and what it found there.
func TestDir_NoTmpfsFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dirIn(r, []string{missing})
		r.failed = "returned"
	}()
	<-done
	if !strings.Contains(r.failed, "no tmpfs on this machine") || !strings.Contains(r.failed, missing+" (") || !strings.Contains(r.failed, "/dev/shm") {
		t.Fatalf("failed with %q", r.failed)
	}
}
