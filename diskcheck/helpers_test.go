package diskcheck

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The probe's logic runs on the simulated disk, described as whatever
// file system a test names, with a fake clock that each fdatasync and
// each directory fsync moves by a cost the test chooses: so a test says
// how fast the flushes are, and nothing depends on the machine's.

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// describedDisk is a simulated disk that describes itself as info.
type describedDisk struct {
	*sim.Disk
	info vfs.FSInfo
}

func (d describedDisk) DescribeFS(string) (vfs.FSInfo, error) { return d.info, nil }

// ext4 is a file system on a device with a volatile write cache, as most
// are.
var ext4 = vfs.FSInfo{Type: "ext2/3/4", Magic: 0xEF53, Device: "8:0", WriteCache: vfs.WriteBack}

// fake is a test's disk, clock and the calls they saw.
type fake struct {
	disk  describedDisk
	clock *fakeClock
	// syncCost and dirCost are what an fdatasync and a directory fsync
	// cost on the clock.
	syncCost, dirCost time.Duration

	mu    sync.Mutex
	syncs int // fdatasyncs seen
	// onSync, if set, runs at each fdatasync with its count (1-based).
	onSync func(n int)
}

const dataDir = "/data"

func newFake(t *testing.T, info vfs.FSInfo, syncCost, dirCost time.Duration) *fake {
	t.Helper()
	d := sim.NewDisk(1)
	if err := d.MkdirAll(dataDir); err != nil {
		t.Fatal(err)
	}
	f := &fake{disk: describedDisk{Disk: d, info: info}, clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, syncCost: syncCost, dirCost: dirCost}
	d.SetHook(func(c sim.Call) error {
		switch c.Op {
		case sim.OpSync:
			f.mu.Lock()
			f.syncs++
			n, on := f.syncs, f.onSync
			f.mu.Unlock()
			f.clock.advance(f.syncCost)
			if on != nil {
				on(n)
			}
		case sim.OpSyncDir:
			f.clock.advance(f.dirCost)
		}
		return nil
	})
	return f
}

// options are a probe of the fake's data directory with its clock,
// floors off and no descriptor check, the budget and rounds default.
func (f *fake) options() Options {
	return Options{Dir: dataDir, FS: f.disk, Now: f.clock.Now}
}

func (f *fake) probe(t *testing.T, opts Options) Report {
	t.Helper()
	r, err := Probe(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.expectNoProbeFiles(t)
	return r
}

// expectNoProbeFiles fails unless the data directory holds none of the
// probe's files, in what the process sees.
func (f *fake) expectNoProbeFiles(t *testing.T) {
	t.Helper()
	expectNoProbeFiles(t, f.disk, dataDir)
}

func expectNoProbeFiles(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name, wire.DiskCheckProbePrefix) {
			t.Errorf("the probe left %s in %s", e.Name, dir)
		}
	}
}

// expectFinding fails unless the report's finding of check has severity
// sev and its message holds every one of words.
func expectFinding(t *testing.T, r Report, check string, sev Severity, words ...string) Finding {
	t.Helper()
	f, ok := r.Finding(check)
	if !ok {
		t.Fatalf("no finding for %s in %+v", check, r.Findings)
	}
	if f.Severity != sev {
		t.Errorf("%s: %s (%s), want %s", check, f.Severity, f.Message, sev)
	}
	for _, w := range words {
		if !strings.Contains(f.Message, w) {
			t.Errorf("%s: %q does not say %q", check, f.Message, w)
		}
	}
	return f
}
