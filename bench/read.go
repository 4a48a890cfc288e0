package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ReadResult is one read workload's figures.
type ReadResult struct {
	Workload    string  `json:"workload"`
	Engine      string  `json:"engine"`
	RecordBytes int     `json:"record_bytes"`
	Batch       int     `json:"batch"`
	Records     int64   `json:"records"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	VsPlain     float64 `json:"vs_plain"` // against the plain read of the same workload
}

// Read workloads.
const (
	ReadCold = "catch-up, cold" // history not in the page cache
	ReadWarm = "catch-up, warm" // history in the page cache, not in the frame cache
	ReadTail = "tail"           // each batch read right after its commit
)

// RunRead measures narad's reads of history of about bytes in cell c, and
// a plain read of the same bytes in one file: a catch-up from the first
// offset with the history's pages dropped, again with them cached, and a
// tail reader that reads each batch as soon as it is committed. Every
// read is checked against what was written.
func RunRead(base string, c Cell, bytes int64) ([]ReadResult, error) {
	dir, err := os.MkdirTemp(base, "read-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	pool := batchPool(c)

	// The plain read: the raw engine's file, read in 1 MiB reads.
	raw, err := openRaw(false)(filepath.Join(dir, "raw"), c)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	var written Verifier
	for i := 0; written.Bytes() < bytes; i++ {
		if err := raw.Commit(pool[i%len(pool)]); err != nil {
			return nil, err
		}
		for _, r := range pool[i%len(pool)] {
			written.Add(r)
		}
	}

	// The log: the same records, then closed and reopened, so nothing is in
	// its frame cache.
	logDir := filepath.Join(dir, "log")
	l, err := partition.Open(logDir, partition.Options{FS: vfs.OS{}, Logger: zap.NewNop(), Codec: mustCodec(codec.None)})
	if err != nil {
		return nil, err
	}
	var tail Verifier
	var tailRead time.Duration
	for i := 0; tail.Bytes() < written.Bytes(); i++ {
		batch := pool[i%len(pool)]
		base, err := l.Produce(bg, asRecords(batch))
		if err != nil {
			l.Close()
			return nil, err
		}
		t0 := time.Now()
		if err := readLog(base, base+int64(len(batch)), func(o int64, lend func(partition.ReadRecord) error) (partition.ReadSummary, error) {
			return l.ReadFunc(o, len(batch), 64<<20, lend)
		}, tail.Add); err != nil {
			l.Close()
			return nil, err
		}
		tailRead += time.Since(t0)
	}
	if err := l.Close(); err != nil {
		return nil, err
	}
	if err := written.Check(tail); err != nil {
		return nil, fmt.Errorf("tail read: %w", err)
	}

	var out []ReadResult
	add := func(workload, engine string, v Verifier, d time.Duration) {
		out = append(out, ReadResult{Workload: workload, Engine: engine, RecordBytes: c.RecordBytes, Batch: c.Batch,
			Records: v.Records(), Seconds: d.Seconds(), RecordsPerS: float64(v.Records()) / d.Seconds(),
			MBPerS: float64(v.Bytes()) / d.Seconds() / 1e6})
	}
	add(ReadTail, "narad Log", tail, tailRead)
	for _, workload := range []string{ReadCold, ReadWarm} {
		if workload == ReadCold {
			if err := dropCaches(dir); err != nil {
				return nil, err
			}
		}
		var plain Verifier
		t0 := time.Now()
		if err := raw.ReadAll(plain.Add); err != nil {
			return nil, err
		}
		add(workload, "plain read", plain, time.Since(t0))
		if err := written.Check(plain); err != nil {
			return nil, fmt.Errorf("plain read: %w", err)
		}
		l, err := partition.Open(logDir, partition.Options{FS: vfs.OS{}, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		if workload == ReadCold {
			// After the open, whose walk of the active segment reads it
			// into the page cache; the log's pages only, so the warm
			// plain read after finds raw's file cached.
			if err := dropCaches(logDir); err != nil {
				l.Close()
				return nil, err
			}
		}
		var got Verifier
		t0 = time.Now()
		err = readLog(l.StartOffset(), l.HighWatermark(), func(o int64, lend func(partition.ReadRecord) error) (partition.ReadSummary, error) {
			return l.ReadFunc(o, 1<<16, 8<<20, lend)
		}, got.Add)
		d := time.Since(t0)
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		if err := written.Check(got); err != nil {
			return nil, fmt.Errorf("%s read: %w", workload, err)
		}
		add(workload, "narad Log", got, d)
	}
	plainOf := map[string]float64{}
	for _, r := range out {
		if r.Engine == "plain read" {
			plainOf[r.Workload] = r.MBPerS
		}
	}
	for i := range out {
		if p := plainOf[out[i].Workload]; p > 0 {
			out[i].VsPlain = out[i].MBPerS / p
		}
	}
	return out, nil
}

func mustCodec(id codec.ID) codec.Codec {
	c, err := codec.ByID(id)
	if err != nil {
		panic(err)
	}
	return c
}

// dropCaches evicts the pages of every file under dir from the page cache
// (posix_fadvise DONTNEED after an fsync, which needs no privilege), so
// the next read comes from the disk.
func dropCaches(dir string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".lock") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}
