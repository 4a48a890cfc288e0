package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Engine is one engine opened on a directory of its own.
type Engine interface {
	// Commit makes batch durable before it returns. An engine whose spec
	// has Producers > 1 takes concurrent calls.
	Commit(batch [][]byte) error
	// ReadAll calls fn with every committed record; rec is valid only
	// during the call.
	ReadAll(fn func(rec []byte)) error
	Close() error
}

// Kinds of engine: the floor and ceiling the others are quoted against,
// narad itself, and the engines a user would pick instead.
const (
	KindBaseline = "baseline"
	KindNarad    = "narad"
	KindPeer     = "peer"
)

// EngineSpec names an engine and opens it.
type EngineSpec struct {
	Name      string
	Kind      string
	Producers int // concurrent committers; 0 means 1
	Open      func(dir string, c Cell) (Engine, error)
}

func (s EngineSpec) producers() int { return max(s.Producers, 1) }

// Cell is one point of the workload matrix.
type Cell struct {
	RecordBytes int
	Batch       int
}

func (c Cell) String() string { return fmt.Sprintf("%s x %d", sizeName(c.RecordBytes), c.Batch) }

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// Matrix is the engine suite's cells: the seven, small records in
// every batch size and large ones alone, in mid batches and in big ones.
var Matrix = []Cell{
	{256, 1}, {256, 16}, {256, 256}, {256, 4096},
	{4096, 1}, {4096, 256}, {4096, 4096},
}

// Budget bounds one measurement: it stops at whichever comes first.
type Budget struct {
	Duration time.Duration
	Bytes    int64
}

// EngineResult is one engine's figures in one cell (the median of the
// repetitions by records/s).
type EngineResult struct {
	Engine      string  `json:"engine"`
	Kind        string  `json:"kind"`
	RecordBytes int     `json:"record_bytes"`
	Batch       int     `json:"batch"`
	Producers   int     `json:"producers"`
	Records     int64   `json:"records"`
	Commits     int64   `json:"commits"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Micros   float64 `json:"commit_p50_us"`
	P99Micros   float64 `json:"commit_p99_us"`
	ReadMBPerS  float64 `json:"read_mb_per_s"`
	ReadRecPerS float64 `json:"read_records_per_s"`
	// Ratios in the same cell of the same run.
	VsRaw       float64 `json:"vs_raw"`
	VsBestPeer  float64 `json:"vs_best_peer"`
	ReadVsPlain float64 `json:"read_vs_plain"`
}

// RunCell measures one engine in one cell once, in a new directory under
// base that it removes after: commits until the budget is spent, then a
// read back of everything, checked against what was written.
func RunCell(base string, spec EngineSpec, c Cell, budget Budget) (EngineResult, error) {
	dir, err := os.MkdirTemp(base, "engine-")
	if err != nil {
		return EngineResult{}, err
	}
	defer removeSettled(dir)
	e, err := spec.Open(filepath.Join(dir, "data"), c)
	if err != nil {
		return EngineResult{}, fmt.Errorf("%s: open: %w", spec.Name, err)
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	pool := batchPool(c)
	n := spec.producers()
	type producer struct {
		written Verifier
		commits int64
		hist    *hdrhistogram.Histogram
		err     error
	}
	ps := make([]producer, n)
	perProducer := budget.Bytes / int64(n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range ps {
		p := &ps[i]
		p.hist = hdrhistogram.New(1, histMaxMicros, 3)
		wg.Go(func() {
			for j := i; ; j += n {
				batch := pool[j%len(pool)]
				t0 := time.Now()
				if err := e.Commit(batch); err != nil {
					p.err = fmt.Errorf("%s: commit: %w", spec.Name, err)
					return
				}
				_ = p.hist.RecordValue(min(max(time.Since(t0).Microseconds(), 1), histMaxMicros))
				p.commits++
				for _, r := range batch {
					p.written.Add(r)
				}
				if p.written.Bytes() >= perProducer || time.Since(start) >= budget.Duration {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	written := ps[0].written // one producer: its order is checked too
	hist := hdrhistogram.New(1, histMaxMicros, 3)
	var commits int64
	for i, p := range ps {
		if p.err != nil {
			return EngineResult{}, p.err
		}
		if i > 0 {
			written.Merge(p.written)
		}
		hist.Merge(p.hist)
		commits += p.commits
	}

	read, readElapsed, err := readBack(e, written)
	if err != nil {
		return EngineResult{}, fmt.Errorf("%s, %s: %w", spec.Name, c, err)
	}
	closed = true
	if err := e.Close(); err != nil {
		return EngineResult{}, fmt.Errorf("%s: close: %w", spec.Name, err)
	}
	return EngineResult{
		Engine: spec.Name, Kind: spec.Kind, RecordBytes: c.RecordBytes, Batch: c.Batch, Producers: n,
		Records: written.Records(), Commits: commits, Seconds: elapsed,
		RecordsPerS: float64(written.Records()) / elapsed,
		MBPerS:      float64(written.Bytes()) / elapsed / 1e6,
		P50Micros:   float64(hist.ValueAtQuantile(50)),
		P99Micros:   float64(hist.ValueAtQuantile(99)),
		ReadMBPerS:  float64(read.Bytes()) / readElapsed / 1e6,
		ReadRecPerS: float64(read.Records()) / readElapsed,
	}, nil
}

// removeSettled removes an engine's data and waits until the file
// system has committed the removal (sync), so its journal commit, and on
// a disk mounted with discard the trims of the blocks freed (hundreds of
// MiB after a large cell), land before the next engine's measurement
// rather than inside it.
func removeSettled(dir string) {
	os.RemoveAll(dir)
	unix.Sync()
}

// Read-back passes: at least readPasses, and more until they have taken
// readMinTime, so a cell whose data reads back in a millisecond is not
// measured on one pass's warm-up.
const (
	readPasses  = 3
	readMinTime = 250 * time.Millisecond
)

// readBack reads everything back, pass after pass, each checked against
// what was written, and returns one pass's records and its time: the
// median pass's.
func readBack(e Engine, written Verifier) (Verifier, float64, error) {
	var read Verifier
	var times []float64
	var total time.Duration
	for len(times) < readPasses || total < readMinTime {
		read = Verifier{}
		start := time.Now()
		if err := e.ReadAll(read.Add); err != nil {
			return read, 0, fmt.Errorf("read back: %w", err)
		}
		took := time.Since(start)
		if err := written.Check(read); err != nil {
			return read, 0, err
		}
		times = append(times, took.Seconds())
		total += took
	}
	slices.Sort(times)
	return read, times[len(times)/2], nil
}

// batchPool is the batches a cell's producers cycle through: distinct
// records, at least 8,192 of them, so a codec sees varied data and the
// generator's cost stays out of the measurement.
func batchPool(c Cell) [][][]byte {
	batches := max(1, (8192+c.Batch-1)/c.Batch)
	pool := make([][][]byte, batches)
	for i := range pool {
		pool[i] = Records(int64(i*c.Batch), c.Batch, c.RecordBytes)
	}
	return pool
}

// histMaxMicros is the longest latency the histograms hold, 10 minutes;
// a longer one is recorded as that.
const histMaxMicros = int64(10 * time.Minute / time.Microsecond)

// Median returns the result with the median records/s; of an even number,
// the lower of the two in the middle (of two runs, the slower).
func Median(rs []EngineResult) EngineResult {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b EngineResult) int {
		switch {
		case a.RecordsPerS < b.RecordsPerS:
			return -1
		case a.RecordsPerS > b.RecordsPerS:
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2]
}

// Ratios fills each result's ratios against the results of its cell: raw
// (the engine named RawName) for commits and reads, and the best peer for
// commits.
func Ratios(rs []EngineResult) {
	type key struct{ size, batch int }
	raw := map[key]EngineResult{}
	best := map[key]float64{}
	for _, r := range rs {
		k := key{r.RecordBytes, r.Batch}
		if r.Engine == RawName {
			raw[k] = r
		}
		if r.Kind == KindPeer {
			best[k] = max(best[k], r.RecordsPerS)
		}
	}
	for i := range rs {
		k := key{rs[i].RecordBytes, rs[i].Batch}
		if b, ok := raw[k]; ok && b.RecordsPerS > 0 {
			rs[i].VsRaw = rs[i].RecordsPerS / b.RecordsPerS
			rs[i].ReadVsPlain = rs[i].ReadMBPerS / b.ReadMBPerS
		}
		if b := best[k]; b > 0 {
			rs[i].VsBestPeer = rs[i].RecordsPerS / b
		}
	}
}
