package tool

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/vfs"
)

// TestToolsWarnWhenInUse: on a data directory whose lock a process holds,
// Verify and Inspect still read, say so on their messages, and Verify
// says so in its report, in text and in JSON.
func TestToolsWarnWhenInUse(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 3, 2)
	lock, err := datadir.Acquire(vfs.OS{}, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	holder := fmt.Sprintf("process %d", os.Getpid())
	warning := fmt.Sprintf(" warning: %s is in use by %s; reading anyway, but a torn tail may be a write in flight\n", dataDir, holder)

	code, report, messages := verifyJSON(t, dataDir)
	if code != 0 || report.InUseBy != holder || messages != "verify:"+warning {
		t.Errorf("verify in JSON: exit %d, in use by %q, messages %q", code, report.InUseBy, messages)
	}
	code, stdout, _ := verifyText(t, dataDir)
	if note := fmt.Sprintf("note: %s is in use by %s: a torn tail below may be a write in flight\n", dataDir, holder); code != 0 || !strings.HasPrefix(stdout, note) {
		t.Errorf("verify in text: exit %d, want the first line %q:\n%s", code, note, stdout)
	}
	code, _, messages = inspectRun(t, InspectOptions{Segment: tp.active(), MaxBytes: defaultMaxBytes})
	if code != 0 || messages != "inspect:"+warning {
		t.Errorf("inspect: exit %d, messages %q", code, messages)
	}

	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	code, report, messages = verifyJSON(t, dataDir)
	if code != 0 || report.InUseBy != "" || messages != "" {
		t.Errorf("verify once released: exit %d, in use by %q, messages %q", code, report.InUseBy, messages)
	}
}
