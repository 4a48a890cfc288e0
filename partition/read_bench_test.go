package partition

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// BenchmarkReadFunc: a catch-up consumer lending every record of 64 MiB
// of history (page cache warm, frame cache cold) and checksumming each
// one, in frames of 1, 16 and 4096 records, beside plain, the same files
// read in 1 MiB reads with the same checksum over each record-sized run
// of bytes: quote log as a ratio to plain from the same run.
func BenchmarkReadFunc(b *testing.B) {
	for _, cell := range []struct{ records, size int }{{1, 256}, {16, 256}, {4096, 256}, {4096, 4096}} {
		b.Run(fmt.Sprintf("records=%d/size=%d", cell.records, cell.size), func(b *testing.B) {
			dir := b.TempDir()
			history := writeHistory(b, dir, cell.records, cell.size, 64<<20)
			readFuncCell(b, dir, history, cell.size)
		})
	}
}

// readFuncCell times plain and the log reading the history in dir.
func readFuncCell(b *testing.B, dir string, history int64, size int) {
	b.Run("plain", func(b *testing.B) {
		segments, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		buf := make([]byte, 1<<20)
		b.SetBytes(history)
		var sum uint32
		for b.Loop() {
			for _, path := range segments {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				for pos := int64(0); ; {
					n, err := f.ReadAt(buf, pos)
					for rec := buf[:n]; len(rec) >= size; rec = rec[size:] {
						sum += crc32.Checksum(rec[:size], castagnoli)
					}
					pos += int64(n)
					if err != nil {
						break
					}
				}
				f.Close()
			}
		}
	})
	b.Run("log", func(b *testing.B) {
		readFuncLog(b, dir, history, Options{FS: vfs.OS{}, CacheBudget: NewCacheBudget(512 << 20)}, 8<<20) // a runtime.Node's
	})
	// A log opened with default Options (an embedder of the log alone)
	// beside one with a node's budget, both reading in 1 MiB parts: a
	// frame larger than a part is read and checked once either way.
	b.Run("log-1MiB-reads-default-options", func(b *testing.B) {
		readFuncLog(b, dir, history, Options{FS: vfs.OS{}}, 1<<20)
	})
	b.Run("log-1MiB-reads-node-budget", func(b *testing.B) {
		readFuncLog(b, dir, history, Options{FS: vfs.OS{}, CacheBudget: NewCacheBudget(512 << 20)}, 1<<20)
	})
}

// readFuncLog times a log opened on dir with opts lending every record of
// the history in reads of at most maxBytes, its frame cache emptied first.
func readFuncLog(b *testing.B, dir string, history int64, opts Options, maxBytes int) {
	l, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var sum uint32
	lend := func(r ReadRecord) error {
		sum += crc32.Checksum(r.Value, castagnoli)
		return nil
	}
	b.SetBytes(history)
	b.ReportAllocs()
	for b.Loop() {
		l.cache.forgetFrom(0)
		for next := int64(0); next < l.HighWatermark(); {
			res, err := l.ReadFunc(next, 1<<16, maxBytes, lend)
			if err != nil {
				b.Fatal(err)
			}
			next = res.Next
		}
	}
}

// castagnoli is the checksum a benchmark's consumer takes of each record.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeHistory writes about total bytes of values to a log in dir, in
// frames of records records of size bytes each, with one fdatasync at
// the end, and returns the values' bytes.
func writeHistory(b *testing.B, dir string, records, size int, total int64) int64 {
	b.Helper()
	opts := Options{FS: vfs.OS{}}
	opts.flush = defaultFlushPolicy
	opts.flush.drainRecords, opts.flush.drainBytes = records, maxBatchBytes // one frame a batch, written in the background
	l, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchRecords(records, size)
	for i := range batch {
		batch[i].Key = nil
	}
	var written int64
	for ; written < total; written += int64(records * size) {
		if _, err := l.Append(bg, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.CommitDurable(bg); err != nil {
		b.Fatal(err)
	}
	return written
}
