package partition

import (
	"os"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRecovery_WalkAfterDropCacheSeesTheMediaSize: zeros written ahead of
// the frames whose fdatasync failed are still in the page cache when the
// log reopens (the failing sync marks them clean), but not on the media.
// Recovery's crash path drops the cache and walks again: what it walks
// then is the media's file, shorter than the open's stat said. The walk
// must cover the file as it is then, and find a clean tail, not a torn
// one (nothing was torn: the zeros were only space written ahead).
func TestRecovery_WalkAfterDropCacheSeesTheMediaSize(t *testing.T) {
	d, _ := committedLog(t, 3)
	emptyHWM(t, d)
	f, err := d.OpenFile(activeSeg, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(contentsOf(t, d, activeSeg)))
	if _, err := f.WriteAt(make([]byte, 512), size); err != nil {
		t.Fatal(err)
	}
	in := d.Inject(sim.Fault{Op: sim.OpSync, Nth: 1, Err: syscall.EIO})
	if err := f.Sync(); err == nil {
		t.Fatal("the injected fdatasync failure did not fail")
	}
	in.Remove()
	f.Close()
	metrics := NewMetrics(prometheus.NewRegistry())
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 10, Metrics: metrics})
	defer closeLog(t, l)
	if got := testutil.ToFloat64(metrics.tornTails); got != 0 {
		t.Fatalf("torn tails counted: %v, want 0: the walk after the cache drop covered the stale size", got)
	}
	checkExactlyOnce(t, "after reopen", l, 1, 6)
}
