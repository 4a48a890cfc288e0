package bench

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	VsPlain     float64 `json:"vs_plain"` // against the plain read of the same workload: a catch-up's, the median of its rounds' ratios
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
//
// A catch-up is measured in rounds, a plain read and narad's (in turn
// first), each round's narad read against its plain read: a disk whose
// speed drifts between two reads (cold reads here ranged over 3x from one
// minute to the next) moves a single round's ratio, and the median of
// rounds' ratios much less. Each engine's figures are its median round's
// (by MB/s), so a ratio is not always the quotient of the two medians.
func RunRead(base string, c Cell, bytes int64, rounds int) ([]ReadResult, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("bench: %d catch-up rounds: want at least one", rounds)
	}
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

	out := []ReadResult{readResult(ReadTail, "narad Log", c, tail, tailRead)}
	for _, workload := range []string{ReadCold, ReadWarm} {
		var plains, logs []ReadResult
		var ratios []float64
		for round := range rounds {
			plain, log, err := catchUpRound(workload, round%2 == 1, c, dir, logDir, raw, written)
			if err != nil {
				return nil, err
			}
			plains, logs = append(plains, plain), append(logs, log)
			ratios = append(ratios, log.MBPerS/plain.MBPerS)
		}
		plain, log := medianRead(plains), medianRead(logs)
		plain.VsPlain, log.VsPlain = 1, median(ratios)
		out = append(out, plain, log)
	}
	return out, nil
}

// catchUpRound reads the history once plainly and once through the log
// (the log first when logFirst: rounds alternate, so neither read always
// finds the disk as the other left it), from the disk (cold: every page
// of dir dropped first, and the log's again after its open has walked
// the active segment) or from the page cache (warm), each read checked
// against what was written.
func catchUpRound(workload string, logFirst bool, c Cell, dir, logDir string, raw Engine, written Verifier) (plain, log ReadResult, err error) {
	if workload == ReadCold {
		if err := dropCaches(dir); err != nil {
			return plain, log, err
		}
	}
	if logFirst {
		if log, err = readThroughLog(workload, c, logDir, written); err != nil {
			return plain, log, err
		}
		plain, err = readPlainly(workload, c, raw, written)
		return plain, log, err
	}
	if plain, err = readPlainly(workload, c, raw, written); err != nil {
		return plain, log, err
	}
	log, err = readThroughLog(workload, c, logDir, written)
	return plain, log, err
}

// readPlainly reads raw's file in 1 MiB reads.
func readPlainly(workload string, c Cell, raw Engine, written Verifier) (ReadResult, error) {
	var got Verifier
	t0 := time.Now()
	if err := raw.ReadAll(got.Add); err != nil {
		return ReadResult{}, err
	}
	d := time.Since(t0)
	if err := written.Check(got); err != nil {
		return ReadResult{}, fmt.Errorf("plain read: %w", err)
	}
	return readResult(workload, "plain read", c, got, d), nil
}

// readThroughLog opens the log (its frame cache empty) and lends every
// record from its first offset on.
func readThroughLog(workload string, c Cell, logDir string, written Verifier) (ReadResult, error) {
	l, err := partition.Open(logDir, partition.Options{FS: vfs.OS{}, Logger: zap.NewNop()})
	if err != nil {
		return ReadResult{}, err
	}
	if workload == ReadCold {
		if err := dropCaches(logDir); err != nil {
			l.Close()
			return ReadResult{}, err
		}
	}
	var got Verifier
	t0 := time.Now()
	err = readLog(l.StartOffset(), l.HighWatermark(), func(o int64, lend func(partition.ReadRecord) error) (partition.ReadSummary, error) {
		return l.ReadFunc(o, 1<<16, 8<<20, lend)
	}, got.Add)
	d := time.Since(t0)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ReadResult{}, err
	}
	if err := written.Check(got); err != nil {
		return ReadResult{}, fmt.Errorf("%s read: %w", workload, err)
	}
	return readResult(workload, "narad Log", c, got, d), nil
}

func readResult(workload, engine string, c Cell, v Verifier, d time.Duration) ReadResult {
	return ReadResult{Workload: workload, Engine: engine, RecordBytes: c.RecordBytes, Batch: c.Batch,
		Records: v.Records(), Seconds: d.Seconds(), RecordsPerS: float64(v.Records()) / d.Seconds(),
		MBPerS: float64(v.Bytes()) / d.Seconds() / 1e6}
}

// medianRead is the round of the median MB/s (of an even count, the
// slower of the middle two, as median takes).
func medianRead(rs []ReadResult) ReadResult {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b ReadResult) int { return cmp.Compare(a.MBPerS, b.MBPerS) })
	return sorted[(len(sorted)-1)/2]
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
