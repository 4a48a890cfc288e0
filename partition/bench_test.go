package partition

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Benchmarks run on the real file system in a temporary directory. Quote
// them as ratios against BenchmarkRawAppendFdatasync and the read+crc32c
// baseline measured in the same run: absolute times drift on shared
// machines.

func benchLog(b *testing.B, dir string) *Log {
	b.Helper()
	l, err := Open(dir, Options{FS: vfs.OS{}})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func benchRecords(n, size int) []Record {
	out := make([]Record, n)
	for i := range out {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte('a' + (i+j)%26)
		}
		out[i] = Record{Key: []byte(fmt.Sprint("key-", i)), Value: v}
	}
	return out
}

// frameBytesOf is the size on disk of one frame holding recs (codec none).
func frameBytesOf(recs []Record) int {
	n := wire.FrameHeaderSize
	for _, r := range recs {
		n += wire.RecordLenSize + wire.EnvelopeSize(len(r.Key), len(r.Value))
	}
	return n
}

// BenchmarkRawAppendFdatasync is the physical baseline: a plain append of
// the bytes a one-record commit writes, then fdatasync.
func BenchmarkRawAppendFdatasync(b *testing.B) {
	b.Run("size=256", func(b *testing.B) {
		buf := make([]byte, frameBytesOf(benchRecords(1, 256)))
		f, err := vfs.OS{}.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_RDWR|os.O_CREATE)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		pos := int64(0)
		for b.Loop() {
			if _, err := f.WriteAt(buf, pos); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			pos += int64(len(buf))
		}
	})
}

// BenchmarkCommitDurable: Append then CommitDurable, one frame a commit.
func BenchmarkCommitDurable(b *testing.B) {
	for _, n := range []int{1, 256, 4096} {
		b.Run(fmt.Sprintf("records=%d/size=256", n), func(b *testing.B) {
			l := benchLog(b, b.TempDir())
			defer l.Close()
			recs := benchRecords(n, 256)
			b.SetBytes(int64(frameBytesOf(recs)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(bg, recs); err != nil {
					b.Fatal(err)
				}
				if err := l.CommitDurable(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// batchCells are the batches BenchmarkProduceBatch and its floor,
// BenchmarkRawAppendBatch, commit: small records, and the bench engine
// suite's largest cell (16 MiB a commit).
var batchCells = []struct{ records, size int }{{256, 256}, {4096, 256}, {4096, 4096}}

// BenchmarkProduceBatch: one Produce of a batch, one frame, one fdatasync
// a commit. Quote it against BenchmarkRawAppendBatch, the same bytes in one
// pwrite and fdatasync.
func BenchmarkProduceBatch(b *testing.B) {
	for _, c := range batchCells {
		b.Run(fmt.Sprintf("records=%d/size=%d", c.records, c.size), func(b *testing.B) {
			l := benchLog(b, b.TempDir())
			defer l.Close()
			recs := benchRecords(c.records, c.size)
			b.SetBytes(int64(frameBytesOf(recs)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Produce(bg, recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawAppendBatch is BenchmarkProduceBatch's floor: the bytes of
// its frame appended with one pwrite, then fdatasync.
func BenchmarkRawAppendBatch(b *testing.B) {
	for _, c := range batchCells {
		b.Run(fmt.Sprintf("records=%d/size=%d", c.records, c.size), func(b *testing.B) {
			buf := make([]byte, frameBytesOf(benchRecords(c.records, c.size)))
			f, err := vfs.OS{}.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_RDWR|os.O_CREATE)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(buf)))
			pos := int64(0)
			for b.Loop() {
				if _, err := f.WriteAt(buf, pos); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				pos += int64(len(buf))
			}
		})
	}
}

// BenchmarkProduceConcurrent: producers each calling Produce with one
// 256-byte record; group commit turns waiting produces into one fsync.
func BenchmarkProduceConcurrent(b *testing.B) {
	for _, producers := range []int{1, 32} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			l := benchLog(b, b.TempDir())
			defer l.Close()
			recs := benchRecords(1, 256)
			b.ReportAllocs()
			started := time.Now()
			var wg sync.WaitGroup
			per := b.N/producers + 1
			for range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						if _, err := l.Produce(bg, recs); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*producers)/time.Since(started).Seconds(), "records/s")
		})
	}
}

// BenchmarkReadTail: a reader at the tail, served from the frame cache;
// only the read is timed, not the produce before it.
func BenchmarkReadTail(b *testing.B) {
	l := benchLog(b, b.TempDir())
	defer l.Close()
	recs := benchRecords(16, 256)
	b.SetBytes(16 * 256)
	b.ReportAllocs()
	next := int64(0)
	for b.Loop() {
		b.StopTimer()
		l.Read(next, 1, 1) // at the tail: the next frame written is cached
		if _, err := l.Produce(bg, recs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := l.Read(next, 100, 1<<20)
		if err != nil || len(res.Records) != 16 {
			b.Fatal(len(res.Records), err)
		}
		next = res.Next
	}
}

// BenchmarkReadCold: a sequential read of 16 MiB from the start of a
// reopened log (page cache warm, frame cache cold).
func BenchmarkReadCold(b *testing.B) {
	dir := b.TempDir()
	l := benchLog(b, dir)
	recs := benchRecords(1000, 1024)
	for range 16 {
		if _, err := l.Produce(bg, recs); err != nil {
			b.Fatal(err)
		}
	}
	l.Close()
	l = benchLog(b, dir)
	defer l.Close()
	b.SetBytes(16 * 1000 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		for next := int64(0); next < l.HighWatermark(); {
			res, err := l.Read(next, 1000, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			next = res.Next
		}
	}
}

// BenchmarkReadCatchUpSmallFrames: a sequential read of a trickle-fed
// partition's history, 20,000 frames of one 256-byte record each, from a
// reopened log (page cache warm, frame cache cold). Quote it against
// BenchmarkReadCold's MB/s, large frames of the same bytes.
func BenchmarkReadCatchUpSmallFrames(b *testing.B) {
	dir := b.TempDir()
	opts := Options{FS: vfs.OS{}}
	opts.flush = defaultFlushPolicy
	opts.flush.drainRecords = 1 // one frame a record, synced in the background
	l, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	recs := benchRecords(20000, 256)
	for i := range recs {
		if _, err := l.Append(bg, recs[i:i+1]); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.CommitDurable(bg); err != nil {
		b.Fatal(err)
	}
	l.Close()
	l = benchLog(b, dir)
	defer l.Close()
	b.SetBytes(20000 * 256)
	b.ReportAllocs()
	for b.Loop() {
		l.cache.forgetFrom(0)
		for next := int64(0); next < l.HighWatermark(); {
			res, err := l.Read(next, 1000, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			next = res.Next
		}
	}
}

// BenchmarkOpen: opening is O(active segment): independent of sealed
// history, and the active walk near a plain read + crc32c pass.
func BenchmarkOpen(b *testing.B) {
	b.Run("sealed=256MiB", func(b *testing.B) {
		dir := b.TempDir()
		writeFrames(b, dir, 256<<20, 4<<10, 64<<20, true)
		b.ReportAllocs()
		for b.Loop() {
			l := benchLog(b, dir)
			l.Close()
		}
	})
	b.Run("active=60MiB", func(b *testing.B) {
		dir := b.TempDir()
		writeFrames(b, dir, 60<<20, 4<<10, 64<<20, false)
		b.SetBytes(60 << 20)
		b.ReportAllocs()
		for b.Loop() {
			l := benchLog(b, dir)
			l.Close()
		}
	})
	b.Run("active=60MiB/baseline=read+crc32c", func(b *testing.B) {
		dir := b.TempDir()
		writeFrames(b, dir, 60<<20, 4<<10, 64<<20, false)
		path := filepath.Join(dir, "00000000000000000000.log")
		buf := make([]byte, 1<<20)
		b.SetBytes(60 << 20)
		b.ReportAllocs()
		for b.Loop() {
			f, err := vfs.OS{}.OpenFile(path, os.O_RDONLY)
			if err != nil {
				b.Fatal(err)
			}
			var sum uint32
			for pos := int64(0); ; {
				n, err := f.ReadAt(buf, pos)
				sum = crc32.Update(sum, castagnoli, buf[:n])
				pos += int64(n)
				if err != nil {
					break
				}
			}
			f.Close()
		}
	})
}

// writeFrames lays out, straight through the file system, total bytes of
// frames of about frameSize bytes each in segments of about segment bytes,
// the last of them the active one unless sealAll adds an empty one, and
// an hwm file for a clean close. It bypasses the log, so the setup costs no fsync per frame.
func writeFrames(b *testing.B, dir string, total, frameSize int, segment int64, sealAll bool) {
	b.Helper()
	recs := benchRecords(4, frameSize/4-40)
	bt, err := buildEnvelopes(recs)
	if err != nil {
		b.Fatal(err)
	}
	payload := bt.frame[wire.FrameHeaderSize:]
	offset, written := int64(0), 0
	var f vfs.File
	var size int64
	for written < total {
		if f == nil || size >= segment {
			if f != nil {
				f.Close()
			}
			name, _ := wire.SegmentFileName(offset)
			if f, err = (vfs.OS{}).OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE); err != nil {
				b.Fatal(err)
			}
			size = 0
		}
		frame, err := wire.AppendFrame(nil, wire.CodecNone, offset, len(bt.envs), len(payload), payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(frame, size); err != nil {
			b.Fatal(err)
		}
		size += int64(len(frame))
		written += len(frame)
		offset += int64(len(bt.envs))
	}
	f.Close()
	if sealAll { // an empty active segment after the sealed ones
		name, _ := wire.SegmentFileName(offset)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	hwm, _ := wire.EncodeOffsetFile(offset)
	if err := os.WriteFile(filepath.Join(dir, wire.HWMFileName), hwm[:], 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIdleLogs: 10,000 open logs that nobody writes hold no timer and
// cost no CPU; it reports the CPU they used over an idle second and the
// heap each one holds.
func BenchmarkIdleLogs(b *testing.B) {
	const n = 10000
	for b.Loop() {
		d := sim.NewDisk(1)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		logs := make([]*Log, n)
		for i := range logs {
			l, err := Open(fmt.Sprintf("/data/p%05d", i), Options{FS: d})
			if err != nil {
				b.Fatal(err)
			}
			logs[i] = l
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		cpuBefore := cpuTime()
		<-time.After(time.Second)
		idleCPU := cpuTime() - cpuBefore
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap_bytes/log")
		b.ReportMetric(100*idleCPU.Seconds(), "idle_cpu_%")
		for _, l := range logs {
			l.Close()
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
