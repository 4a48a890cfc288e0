package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var tiny = Budget{Duration: time.Hour, Bytes: 256 << 10}

// TestEngines_ReadBackWhatTheyWrote: every engine, in a small and a large
// cell, takes its budget of commits and gives back exactly those records.
func TestEngines_ReadBackWhatTheyWrote(t *testing.T) {
	for _, spec := range Engines() {
		for _, c := range []Cell{{256, 16}, {4096, 1}} {
			r, err := RunCell(t.TempDir(), spec, c, tiny)
			if err != nil {
				t.Fatalf("%s, %s: %v", spec.Name, c, err)
			}
			if r.Records == 0 || r.Commits == 0 || r.Records < r.Commits || r.ReadMBPerS <= 0 {
				t.Fatalf("%s, %s: %+v", spec.Name, c, r)
			}
		}
	}
}

// lossy is an engine that gives back one record changed, one dropped, one
// twice, or two swapped.
type lossy struct {
	Engine
	mode string
}

func (l lossy) ReadAll(fn func([]byte)) error {
	i := 0
	var held []byte
	return l.Engine.ReadAll(func(rec []byte) {
		i++
		switch {
		case l.mode == "swap" && i == 3:
			held = append([]byte(nil), rec...)
		case l.mode == "swap" && i == 4:
			fn(rec)
			fn(held)
		case i != 3:
			fn(rec)
		case l.mode == "flip":
			c := append([]byte(nil), rec...)
			c[len(c)/2] ^= 1
			fn(c)
		case l.mode == "twice":
			fn(rec)
			fn(rec)
		}
	})
}

// TestRunCell_FailsOnAWrongReadBack: the check that makes a run fail is
// real: a flipped bit, a lost record, a duplicate and (one producer) two
// records out of order each fail it.
func TestRunCell_FailsOnAWrongReadBack(t *testing.T) {
	for _, mode := range []string{"flip", "drop", "twice", "swap"} {
		spec := EngineSpec{Name: "lossy", Kind: KindBaseline, Open: func(dir string, c Cell) (Engine, error) {
			e, err := openRaw(false)(dir, c)
			return lossy{Engine: e, mode: mode}, err
		}}
		_, err := RunCell(t.TempDir(), spec, Cell{256, 4}, tiny)
		if err == nil || !strings.Contains(err.Error(), "read back") {
			t.Fatalf("%s: %v", mode, err)
		}
	}
}

// TestOpenJetStream_SaysWhenItsStoreCannotBeOpened: a JetStream whose
// store directory cannot be made (here, under a regular file) fails its
// open with that, rather than waiting out the wait for a listener that
// Start, having given up, never opens; the server it started is stopped
// (TestMain checks no goroutine is left).
func TestOpenJetStream_SaysWhenItsStoreCannotBeOpened(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := openJetStream(filepath.Join(file, "store"), Cell{256, 1}); err == nil || !strings.Contains(err.Error(), "did not start") {
		if e != nil {
			e.Close()
		}
		t.Fatalf("open over a file: %v, want the server not started", err)
	}
}

// TestRecord_IsStableAndSized: a record is the same in every run and
// exactly its size.
func TestRecord_IsStableAndSized(t *testing.T) {
	for _, size := range []int{256, 4096} {
		a, b := Record(42, size), Record(42, size)
		if string(a) != string(b) || len(a) != size || string(Record(43, size)) == string(a) {
			t.Fatalf("size %d: %q", size, a)
		}
	}
}

// TestRatios: each result is quoted against raw and the best peer of its
// own cell.
func TestRatios(t *testing.T) {
	rs := []EngineResult{
		{Engine: RawName, Kind: KindBaseline, RecordBytes: 256, Batch: 1, RecordsPerS: 100, ReadMBPerS: 1000},
		{Engine: "p1", Kind: KindPeer, RecordBytes: 256, Batch: 1, RecordsPerS: 80},
		{Engine: "p2", Kind: KindPeer, RecordBytes: 256, Batch: 1, RecordsPerS: 50},
		{Engine: "n", Kind: KindNarad, RecordBytes: 256, Batch: 1, RecordsPerS: 120, ReadMBPerS: 500},
		{Engine: RawName, Kind: KindBaseline, RecordBytes: 256, Batch: 16, RecordsPerS: 1000},
	}
	Ratios(rs)
	if n := rs[3]; n.VsRaw != 1.2 || n.VsBestPeer != 1.5 || n.ReadVsPlain != 0.5 {
		t.Fatalf("%+v", n)
	}
	if Median([]EngineResult{{RecordsPerS: 3}, {RecordsPerS: 1}, {RecordsPerS: 2}}).RecordsPerS != 2 {
		t.Fatal("median of three")
	}
	if Median([]EngineResult{{RecordsPerS: 3}, {RecordsPerS: 1}}).RecordsPerS != 1 {
		t.Fatal("median of two: the slower, never the best")
	}
}

// TestRunOpen: the open suite builds the log it says it measures, an
// empty one too, and opens it both ways; it refuses an active segment
// that would roll.
func TestRunOpen(t *testing.T) {
	res, err := RunOpen(t.TempDir(), OpenShape{History: 70 << 20, Active: 2 << 20}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments < 2 || res.HistoryBytes < 64<<20 || res.ActiveBytes < 2<<20 || res.CleanMicros <= 0 || res.CrashMicros <= 0 {
		t.Fatalf("%+v", res)
	}
	empty, err := RunOpen(t.TempDir(), OpenShape{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if empty.HistoryBytes != 0 || empty.ActiveBytes != 0 || empty.CleanMicros <= 0 {
		t.Fatalf("an empty log: %+v", empty)
	}
	if _, err := RunOpen(t.TempDir(), OpenShape{Active: 64 << 20}, 1); err == nil {
		t.Fatal("an active segment of a whole segment was taken")
	}
}

// TestOpenVsNoHistory: each shape is set against the one of the same
// active size and no history; a shape without one is left at 0.
func TestOpenVsNoHistory(t *testing.T) {
	rs := []OpenResult{
		{Shape: OpenShape{Active: 8}, CleanMicros: 100},
		{Shape: OpenShape{History: 1 << 30, Active: 8}, CleanMicros: 120},
		{Shape: OpenShape{Active: 32}, CleanMicros: 400},
		{Shape: OpenShape{History: 1 << 30, Active: 32}, CleanMicros: 200},
		{Shape: OpenShape{History: 1 << 30, Active: 64}, CleanMicros: 300},
	}
	OpenVsNoHistory(rs)
	for i, want := range []float64{1, 1.2, 1, 0.5, 0} {
		if rs[i].VsNoHistory != want {
			t.Fatalf("%+v: VsNoHistory %v, want %v", rs[i].Shape, rs[i].VsNoHistory, want)
		}
	}
}

// TestRunPartitions: every partition opens and reads back what was
// produced to it.
func TestRunPartitions(t *testing.T) {
	res, err := RunPartitions(t.TempDir(), 20, 10*time.Millisecond, 4, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.OpenLogs != 20 || res.CommitsPerSec <= 0 || res.FDsPerPartition <= 0 {
		t.Fatalf("%+v", res)
	}
}

// TestRunRead: the read suite reads back, in every round, everything it
// wrote, and reports each catch-up once per engine with its median
// round's ratio to the plain read.
func TestRunRead(t *testing.T) {
	if _, err := RunRead(t.TempDir(), Cell{RecordBytes: 256, Batch: 16}, 1<<20, 0); err == nil {
		t.Fatal("ran a catch-up in no rounds")
	}
	res, err := RunRead(t.TempDir(), Cell{RecordBytes: 256, Batch: 16}, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]ReadResult{}
	for _, r := range res {
		key := r.Workload + "/" + r.Engine
		if _, dup := seen[key]; dup {
			t.Fatalf("%s reported twice: %+v", key, res)
		}
		seen[key] = r
		if r.Records < (1<<20)/256 || r.MBPerS <= 0 {
			t.Fatalf("%+v", r)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("want the tail read and two engines' cold and warm catch-ups, got %+v", res)
	}
	for _, w := range []string{ReadCold, ReadWarm} {
		if p, l := seen[w+"/plain read"], seen[w+"/narad Log"]; p.VsPlain != 1 || l.VsPlain <= 0 {
			t.Fatalf("%s: plain %+v, log %+v", w, p, l)
		}
	}
}

func TestMedianRead_TakesTheLowerMiddleRound(t *testing.T) {
	rs := []ReadResult{{MBPerS: 4}, {MBPerS: 1}, {MBPerS: 3}, {MBPerS: 2}}
	if got := medianRead(rs); got.MBPerS != 2 {
		t.Fatalf("median of 1-4 MB/s: got %v, want 2 (the lower middle, as median takes)", got.MBPerS)
	}
	if got := medianRead(rs[:3]); got.MBPerS != 3 {
		t.Fatalf("median of 4, 1, 3: got %v, want 3", got.MBPerS)
	}
}

func TestQuantileOfDelta(t *testing.T) {
	inf := math.Inf(1)
	before := map[float64]float64{0.001: 10, 0.002: 10, 0.004: 10, inf: 10}
	// 100 observations since: 50 up to 1 ms, 40 in (1, 2] ms, 9 in (2, 4]
	// ms, 1 past 4 ms.
	after := map[float64]float64{0.001: 60, 0.002: 100, 0.004: 109, inf: 110}
	for _, c := range []struct{ q, want float64 }{
		{0.5, 0.001},   // the 50th: the top of the first bucket
		{0.7, 0.0015},  // the 70th: half way through (1, 2] ms
		{0.99, 0.004},  // the 99th: the top of (2, 4] ms
		{0.999, 0.004}, // past the last finite bound: that bound
		{0.25, 0.0005}, // a quarter of the way: half the first bucket
	} {
		if got := quantileOfDelta(before, after, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile %v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantileOfDelta(after, after, 0.99); got != 0 {
		t.Errorf("no observations: %v, want 0", got)
	}
}
