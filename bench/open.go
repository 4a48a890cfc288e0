package bench

import (
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

// OpenResult is the open suite's figures for one log shape.
type OpenResult struct {
	HistoryBytes int64 `json:"history_bytes"` // in sealed segments
	ActiveBytes  int64 `json:"active_bytes"`
	Segments     int   `json:"segments"`
	// Clean: the open after a clean close (the hwm file vouches for the
	// tail: one walk of the active segment). Crash: the open after a crash
	// (the hwm file empty: walk, fsync, drop the pages, walk again). Both
	// with the page cache warm; medians.
	CleanMicros     float64 `json:"clean_open_us"`
	CrashMicros     float64 `json:"crash_open_us"`
	CleanAllocBytes uint64  `json:"clean_open_alloc_bytes"`
	// VsEmpty: the clean open against the clean open of an empty log in
	// the same run (history should not matter).
	VsEmpty float64 `json:"clean_vs_empty"`
}

// RunOpen builds a log of about history bytes of sealed segments and
// active bytes in its active segment (64 MiB segments, 16 MiB frames of
// 4 KiB records, then 1 MiB frames), then opens it reps times after a
// clean close and reps times after a simulated crash.
func RunOpen(base string, history, active int64, reps int) (OpenResult, error) {
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
	for sealed := int64(0); sealed < history; {
		if _, err := l.Produce(bg, big); err != nil {
			l.Close()
			return OpenResult{}, err
		}
		sealed = int64(len(segmentFiles(logDir))-1) * partition.DefaultSegmentMaxBytes
	}
	activeSize := func() int64 {
		files := segmentFiles(logDir)
		fi, err := os.Stat(files[len(files)-1])
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	for activeSize() < active {
		if _, err := l.Produce(bg, small); err != nil {
			l.Close()
			return OpenResult{}, err
		}
	}
	if err := l.Close(); err != nil {
		return OpenResult{}, err
	}
	files := segmentFiles(logDir)
	res := OpenResult{Segments: len(files), ActiveBytes: activeSize()}
	for _, f := range files[:len(files)-1] {
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
