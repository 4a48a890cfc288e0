package bench

import (
	"bufio"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// PartitionsResult is the partitions suite's figures for one count.
type PartitionsResult struct {
	Partitions int     `json:"partitions"`
	OpenLogs   int     `json:"open_logs"` // open when idle was measured
	OpenSecs   float64 `json:"open_seconds"`
	// Idle: the node's CPU over IdleSecs with every partition open and
	// nothing happening, as a share of one core; memory and descriptors
	// the open partitions added, per partition.
	IdleSecs        float64 `json:"idle_seconds"`
	IdleCPUPercent  float64 `json:"idle_cpu_percent"`
	RSSPerPartition float64 `json:"rss_bytes_per_partition"`
	FDsPerPartition float64 `json:"fds_per_partition"`
	// Producing: one producer a partition (256 B records, one a
	// commit), all at once, for the produce window.
	Producers     int     `json:"producers"`
	CommitsPerSec float64 `json:"commits_per_s"`
}

// RunPartitions opens n partitions of one topic on a runtime.Node (a
// record produced to each), measures the idle node, then has producers
// partitions commit at once for produceFor.
func RunPartitions(base string, n int, idle time.Duration, producers int, produceFor time.Duration) (PartitionsResult, error) {
	dir, err := os.MkdirTemp(base, "partitions-")
	if err != nil {
		return PartitionsResult{}, err
	}
	defer os.RemoveAll(dir)
	rssBefore, fdsBefore := settledRSS(), openFDs()
	node, err := runtime.New(runtime.Config{DataDir: dir, Logger: zap.NewNop(), MaxOpenLogs: n + 16})
	if err != nil {
		return PartitionsResult{}, err
	}
	defer node.Close()
	res := PartitionsResult{Partitions: n, Producers: producers}
	if _, _, err := node.CreateTopic(bg, benchTopic, n, runtime.Retention{}); err != nil {
		return res, err
	}
	rec := asRecords(Records(0, 1, 256))
	t0 := time.Now()
	if err := forEach(n, 16, func(p int) error {
		_, err := node.Produce(bg, benchTopic, p, rec)
		return err
	}); err != nil {
		return res, err
	}
	res.OpenSecs = time.Since(t0).Seconds()
	for p := range n {
		if _, ok := node.LogIfOpen(benchTopic, p); ok {
			res.OpenLogs++
		}
	}

	cpu0, wall0 := cpuTime(), time.Now()
	<-time.After(idle)
	res.IdleSecs = time.Since(wall0).Seconds()
	res.IdleCPUPercent = 100 * (cpuTime() - cpu0).Seconds() / res.IdleSecs
	res.RSSPerPartition = float64(settledRSS()-rssBefore) / float64(n)
	res.FDsPerPartition = float64(openFDs()-fdsBefore) / float64(n)

	commits := make([]atomic.Int64, n)
	deadline := time.Now().Add(produceFor)
	start := time.Now()
	if err := forEach(producers, producers, func(p int) error {
		for time.Now().Before(deadline) {
			if _, err := node.Produce(bg, benchTopic, p%n, rec); err != nil {
				return err
			}
			commits[p%n].Add(1)
		}
		return nil
	}); err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	total := int64(0)
	// Everything produced reads back: the open's record, then each commit's.
	for p := range n {
		want := 1 + commits[p].Load()
		total += want - 1
		got := int64(0)
		for o := int64(0); o < want; {
			r, err := node.Read(bg, benchTopic, p, o, 10000, 8<<20)
			if err != nil {
				return res, fmt.Errorf("partition %d: read at %d: %w", p, o, err)
			}
			if r.HighWatermark != want {
				return res, fmt.Errorf("partition %d: high watermark %d, %d records were committed", p, r.HighWatermark, want)
			}
			for _, x := range r.Records {
				if string(x.Value) != string(rec[0].Value) {
					return res, fmt.Errorf("partition %d offset %d: a record nobody produced", p, x.Offset)
				}
				got++
			}
			if r.Next <= o {
				break
			}
			o = r.Next
		}
		if got != want {
			return res, fmt.Errorf("partition %d reads back %d records, %d were committed", p, got, want)
		}
	}
	res.CommitsPerSec = float64(total) / elapsed.Seconds()
	return res, nil
}

// forEach runs fn(0..n-1) on workers goroutines; the first error wins.
func forEach(n, workers int, fn func(int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settledRSS is the resident set once the garbage collector has run and
// given back what it could, so a difference of two is what stayed.
func settledRSS() int64 {
	goruntime.GC()
	debug.FreeOSMemory()
	return rss()
}

// rss is the process's resident set, in bytes.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// openFDs counts the process's open descriptors.
func openFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(entries)
}
