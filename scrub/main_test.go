package scrub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const topicsDir = "/data/topics"

var bg = context.Background()

// partitionDir is topic orders' partition p.
func partitionDir(p int) string {
	name, _ := wire.PartitionDirName(p)
	return filepath.Join(topicsDir, "orders", name)
}

// seed writes records through the engine into partition p of orders on
// disk, in segments of about 2 KiB (one frame of 4 records a produce),
// and closes the log. It returns the segment bases, oldest first.
func seed(t *testing.T, d *sim.Disk, p, records int) []int64 {
	t.Helper()
	l, err := partition.Open(partitionDir(p), partition.Options{FS: d, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < records; i += 4 {
		var batch []partition.Record
		for j := i; j < i+4 && j < records; j++ {
			batch = append(batch, partition.Record{Value: fmt.Appendf(nil, "value-%06d", j)})
		}
		if _, err := l.Produce(bg, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return segmentBases(t, d, partitionDir(p))
}

// seedValues is seed with values of valueLen bytes, so segments roll at
// other offsets than seed's; the log is left closed.
func seedValues(t *testing.T, d *sim.Disk, p, records, valueLen int) []int64 {
	t.Helper()
	l, err := partition.Open(partitionDir(p), partition.Options{FS: d, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < records; i += 4 {
		batch := make([]partition.Record, 4)
		for j := range batch {
			batch[j] = partition.Record{Value: bytes.Repeat([]byte{'v'}, valueLen)}
		}
		if _, err := l.Produce(bg, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return segmentBases(t, d, partitionDir(p))
}

func segmentBases(t *testing.T, fs vfs.FS, dir string) []int64 {
	t.Helper()
	entries, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range entries {
		if b, err := wire.ParseSegmentFileName(e.Name); err == nil {
			bases = append(bases, b)
		}
	}
	if len(bases) < 4 {
		t.Fatalf("only %d segments", len(bases))
	}
	return bases
}

// secondFrame is where the second frame of a segment starts and the
// offset it holds.
func secondFrame(t *testing.T, d *sim.Disk, path string) (pos, base int64) {
	t.Helper()
	b, err := d.Contents(path)
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
	return h.FrameLen(), h2.BaseOffset
}

// flip rots one byte of a file's payload, on the media and in the cache.
func flip(t *testing.T, d *sim.Disk, path string, at int64) {
	t.Helper()
	b, err := d.Contents(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Damage(path, at, []byte{b[at] ^ 0x40}); err != nil {
		t.Fatal(err)
	}
}

// fakeNode owns every partition; its logs are the ones a test opened.
type fakeNode struct {
	fs vfs.FS

	mu     sync.Mutex
	logs   map[int]*partition.Log
	onLook func(p int) // called at every LogIfOpen, outside mu
	saves  int
	onSave func(n int) // called before each progress write
}

func (f *fakeNode) Assigned(context.Context, string, int) (bool, error) { return true, nil }

func (f *fakeNode) LogIfOpen(_ string, p int) (*partition.Log, bool) {
	if f.onLook != nil {
		f.onLook(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.logs[p]
	return l, ok && !l.Closed()
}

func (f *fakeNode) InPartition(_ string, p int, fn func() error) error {
	f.mu.Lock()
	f.saves++
	n, onSave := f.saves, f.onSave
	f.mu.Unlock()
	if onSave != nil {
		onSave(n)
	}
	exists, err := vfs.Exists(f.fs, partitionDir(p))
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("%w: %d", ErrPartitionGone, p)
	}
	return fn()
}

// newScrubber is a scrubber over d at rate (bytes/s), its warnings in
// logs.
func newScrubber(d vfs.FS, node Node, rate int64) (*Scrubber, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	return New(Config{FS: d, TopicsDir: topicsDir, Node: node, Rate: rate, Logger: zap.New(core)}), logs
}

func readProgress(t *testing.T, fs vfs.FS, p int) (wire.ScrubProgress, bool) {
	t.Helper()
	b, err := vfs.ReadFile(fs, filepath.Join(partitionDir(p), wire.ScrubProgressFileName), 1<<10)
	if err != nil {
		return wire.ScrubProgress{}, false
	}
	prog, err := wire.DecodeScrubProgress(b)
	if err != nil {
		t.Fatalf("progress: %v", err)
	}
	return prog, true
}

// readsOf counts, through a hook on d, the bytes read from each file.
type readsOf struct {
	mu    sync.Mutex
	bytes map[string]int64
}

func countReads(d *sim.Disk) *readsOf {
	r := &readsOf{bytes: map[string]int64{}}
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead {
			r.mu.Lock()
			r.bytes[c.Path] += int64(c.Len)
			r.mu.Unlock()
		}
		return nil
	})
	return r
}

func (r *readsOf) of(path string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes[path]
}

func isUnreadable(err error) bool { return errors.Is(err, partition.ErrUnreadable) }
