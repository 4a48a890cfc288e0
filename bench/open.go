package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// OpenShape is a log the open suite builds: about History bytes of
// sealed segments, then Active bytes in its active segment.
type OpenShape struct {
	History int64 `json:"history"`
	Active  int64 `json:"active"`
}

// OpenResult is the open suite's figures for one log shape.
type OpenResult struct {
	Shape        OpenShape `json:"shape"`         // as asked for
	HistoryBytes int64     `json:"history_bytes"` // in sealed segments, as built
	ActiveBytes  int64     `json:"active_bytes"`
	Segments     int       `json:"segments"`
	// Clean: the open after a clean close (the hwm file vouches for the
	// tail: one walk of the active segment). Crash: the open after a crash
	// (the hwm file empty: walk, fsync, drop the pages, walk again). Both
	// with the page cache warm; medians.
	CleanMicros     float64 `json:"clean_open_us"`
	CrashMicros     float64 `json:"crash_open_us"`
	CleanAllocBytes uint64  `json:"clean_open_alloc_bytes"`
	// VsNoHistory: the clean open against the clean open, in the same
	// run, of the shape with the same active segment and no history
	// (OpenVsNoHistory): history should not matter.
	VsNoHistory float64 `json:"clean_vs_no_history"`
}

// OpenVsNoHistory sets each result's VsNoHistory from the result of the
// same active size and no history among rs, when there is one.
func OpenVsNoHistory(rs []OpenResult) {
	for i := range rs {
		for _, base := range rs {
			if base.Shape == (OpenShape{Active: rs[i].Shape.Active}) && base.CleanMicros > 0 {
				rs[i].VsNoHistory = rs[i].CleanMicros / base.CleanMicros
			}
		}
	}
}

// RunOpen builds a log of the shape (64 MiB segments, 16 MiB frames of
// 4 KiB records for the history, then 1 MiB frames for the active
// segment, which must stay below a segment), then opens it reps times
// after a clean close and reps times after a simulated crash.
func RunOpen(base string, shape OpenShape, reps int) (OpenResult, error) {
	if shape.Active >= partition.DefaultSegmentMaxBytes-2<<20 {
		return OpenResult{}, fmt.Errorf("open suite: an active segment of %d bytes would roll", shape.Active)
	}
	dir, err := os.MkdirTemp(base, "open-")
	if err != nil {
		return OpenResult{}, err
	}
	defer os.RemoveAll(dir)
	logDir := filepath.Join(dir, "log")
	opts := partition.Options{FS: vfs.OS{}, Logger: zap.NewNop()}
	l, err := partition.Open(logDir, opts)
	if err != nil {
		return OpenResult{}, err
	}
	big := asRecords(Records(0, 4096, 4096))
	small := asRecords(Records(0, 256, 4096))
	for sealed := int64(0); sealed < shape.History; {
		if _, err := l.Produce(bg, big); err != nil {
			l.Close()
			return OpenResult{}, err
		}
		sealed = int64(len(segmentFiles(logDir))-1) * partition.DefaultSegmentMaxBytes
	}
	activeSize := func() int64 {
		files := segmentFiles(logDir)
		if len(files) == 0 {
			return 0
		}
		fi, err := os.Stat(files[len(files)-1])
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	for activeSize() < shape.Active {
		if _, err := l.Produce(bg, small); err != nil {
			l.Close()
			return OpenResult{}, err
		}
	}
	if err := l.Close(); err != nil {
		return OpenResult{}, err
	}
	files := segmentFiles(logDir)
	res := OpenResult{Shape: shape, Segments: len(files), ActiveBytes: activeSize()}
	for _, f := range files[:max(len(files)-1, 0)] {
		if fi, err := os.Stat(f); err == nil {
			res.HistoryBytes += fi.Size()
		}
	}
	var clean, crash []float64
	for i := range 2 * reps {
		crashed := i%2 == 1
		if crashed {
			// A crash leaves the hwm file empty (it is emptied before the
			// first commit after an open).
			if err := os.WriteFile(filepath.Join(logDir, wire.HWMFileName), nil, 0o600); err != nil {
				return OpenResult{}, err
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		l, err := partition.Open(logDir, opts)
		d := time.Since(t0)
		runtime.ReadMemStats(&after)
		if err != nil {
			return OpenResult{}, err
		}
		if err := l.Close(); err != nil {
			return OpenResult{}, err
		}
		if crashed {
			crash = append(crash, float64(d.Microseconds()))
		} else {
			clean = append(clean, float64(d.Microseconds()))
			res.CleanAllocBytes = after.TotalAlloc - before.TotalAlloc
		}
	}
	res.CleanMicros, res.CrashMicros = median(clean), median(crash)
	return res, nil
}

// segmentFiles lists a log directory's segment files, oldest first.
func segmentFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if _, err := wire.ParseSegmentFileName(e.Name()); err == nil {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out // ReadDir sorts by name: 20-digit names sort by offset
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2] // of an even number, the lower middle one
}
