package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/narad-io/storage/client"
)

// ManyPartitionsResult is the figures of RunManyPartitions: one topic's
// partitions through narad-storaged, inside its open-log budget and far
// past it, in one run, and what a node of that many partitions costs to
// start, to keep in memory and to record in its metastore.
type ManyPartitionsResult struct {
	Budget  int                `json:"budget"` // narad_storage_open_logs_limit of the daemon
	Inside  OnePerPartition    `json:"inside"`
	Past    OnePerPartition    `json:"past"`
	Ratios  ManyPartitionRatio `json:"ratios"`
	Startup StartupFigures     `json:"startup"`
	Memory  MemoryFigures      `json:"memory"`
	Meta    MetastoreFigures   `json:"metastore"`
}

// OnePerPartition is one record produced to each partition of a topic by
// Clients clients, then each read back.
type OnePerPartition struct {
	Partitions   int     `json:"partitions"`
	Clients      int     `json:"clients"`
	ProducesPerS float64 `json:"produces_per_s"`
	ProduceP50Ms float64 `json:"produce_p50_ms"`
	ProduceP99Ms float64 `json:"produce_p99_ms"`
	ReadsPerS    float64 `json:"reads_per_s"`
	ReadP50Ms    float64 `json:"read_p50_ms"`
	ReadP99Ms    float64 `json:"read_p99_ms"`
}

// ManyPartitionRatio is the past-the-budget figures over the inside ones.
type ManyPartitionRatio struct {
	Produce float64 `json:"produce_x_inside"`
	Read    float64 `json:"read_x_inside"`
}

// StartupFigures: the daemon's SIGTERM at the large count, then the time
// from exec to "ready" after that clean stop and after a SIGKILL with the
// budget's worth of logs open and written to.
type StartupFigures struct {
	StopSecs       float64 `json:"stop_seconds"`
	ReadyCleanSecs float64 `json:"ready_after_clean_stop_seconds"`
	ReadyCrashSecs float64 `json:"ready_after_crash_seconds"`
}

// MemoryFigures: the daemon's resident set (VmRSS, the Go heap as it
// stands, not collected) once ready with no partition, at the large count
// with a budget of 16 (nearly all closed) and with its default budget
// (the budget's worth open after startup), and what each closed and each
// open partition adds.
type MemoryFigures struct {
	EmptyBytes           int64   `json:"rss_empty_bytes"`
	Budget16Bytes        int64   `json:"rss_budget16_bytes"`
	BudgetBytes          int64   `json:"rss_budget_bytes"`
	PerClosedPartition   float64 `json:"rss_bytes_per_closed_partition"`
	PerOpenPartition     float64 `json:"rss_bytes_per_open_partition"`
	OpenAtBudgetOfDaemon int     `json:"open_logs_at_budget"`
}

// MetastoreFigures: the embedded metastore's files at each count, and the
// time of a change (a one-partition topic created: the metastore writes
// its whole state, fsynced, through a rename) at each, the median of 5.
type MetastoreFigures struct {
	InsideBytes   int64   `json:"inside_bytes"`
	PastBytes     int64   `json:"past_bytes"`
	InsideWriteMs float64 `json:"inside_change_ms"`
	PastWriteMs   float64 `json:"past_change_ms"`
}

// RunManyPartitions runs the daemon at bin (serve's flags besides, if
// any) on fresh data directories under base: first a topic of inside
// partitions (within the daemon's budget), then one of past partitions,
// each with one record produced to every partition by clients clients
// and read back, then the stop, the starts after a clean stop and after a
// crash, and the resident set at past partitions with budgets of 16 and
// the default. Every record read back is checked.
func RunManyPartitions(bin, base string, inside, past, clients int, flags ...string) (ManyPartitionsResult, error) {
	var res ManyPartitionsResult
	ctx := context.Background()

	// Inside the budget.
	dirIn, err := os.MkdirTemp(base, "inside-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dirIn)
	d, err := StartDaemon(bin, dirIn, flags...)
	if err != nil {
		return res, err
	}
	c, err := client.New(d.Addr, client.Options{Retries: 50})
	if err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Budget, err = scrapeGauge(d.Addr, "narad_storage_open_logs_limit"); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if inside > res.Budget || past <= res.Budget {
		return res, errors.Join(fmt.Errorf("the daemon's budget is %d: %d partitions are not inside it or %d not past it", res.Budget, inside, past), d.Stop())
	}
	if res.Inside, err = onePerPartition(ctx, c, "wide", inside, clients); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Meta.InsideWriteMs, err = metastoreChange(ctx, c); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Meta.InsideBytes, err = metastoreBytes(dirIn); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if err := d.Stop(); err != nil {
		return res, err
	}

	// Past the budget: an empty daemon's resident set first.
	dir, err := os.MkdirTemp(base, "past-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if d, err = StartDaemon(bin, dir, flags...); err != nil {
		return res, err
	}
	if res.Memory.EmptyBytes, err = daemonRSS(d); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if c, err = client.New(d.Addr, client.Options{Retries: 50}); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Past, err = onePerPartition(ctx, c, "wide", past, clients); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Meta.PastWriteMs, err = metastoreChange(ctx, c); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Meta.PastBytes, err = metastoreBytes(dir); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	t0 := time.Now()
	if err := d.Stop(); err != nil {
		return res, err
	}
	res.Startup.StopSecs = time.Since(t0).Seconds()
	res.Ratios = ManyPartitionRatio{Produce: res.Past.ProducesPerS / res.Inside.ProducesPerS, Read: res.Past.ReadsPerS / res.Inside.ReadsPerS}

	// Ready after the clean stop; the default budget's resident set; then
	// a record more to the budget's worth of partitions and a SIGKILL.
	t0 = time.Now()
	if d, err = StartDaemon(bin, dir, flags...); err != nil {
		return res, err
	}
	res.Startup.ReadyCleanSecs = time.Since(t0).Seconds()
	if res.Memory.BudgetBytes, err = daemonRSS(d); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if res.Memory.OpenAtBudgetOfDaemon, err = scrapeGauge(d.Addr, "narad_storage_open_logs"); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if c, err = client.New(d.Addr, client.Options{Retries: 50}); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	dirty := min(res.Budget, past)
	if err := forEach(dirty, clients, func(p int) error {
		_, err := c.Produce(ctx, "wide", p, []client.Record{{Value: recordValue(p, 1)}})
		return err
	}); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return res, errors.Join(fmt.Errorf("SIGKILL the daemon: %w", err), d.Stop())
	}
	if err := <-d.done; !killed(err) {
		return res, fmt.Errorf("the daemon was to die of the SIGKILL; it ended with %v", err)
	}
	t0 = time.Now()
	if d, err = StartDaemon(bin, dir, flags...); err != nil {
		return res, err
	}
	res.Startup.ReadyCrashSecs = time.Since(t0).Seconds()
	if c, err = client.New(d.Addr, client.Options{Retries: 50}); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	for _, p := range []int{0, dirty / 2, dirty - 1, past - 1} { // what the crash left, spot-checked
		want := 2
		if p >= dirty {
			want = 1
		}
		if err := readBackEach(ctx, c, "wide", p, want); err != nil {
			return res, errors.Join(err, d.Stop())
		}
	}
	if err := d.Stop(); err != nil {
		return res, err
	}

	// Nearly every partition closed: a budget of 16.
	if d, err = StartDaemon(bin, dir, append(slices.Clip(flags), "--max-open-logs", "16")...); err != nil {
		return res, err
	}
	if res.Memory.Budget16Bytes, err = daemonRSS(d); err != nil {
		return res, errors.Join(err, d.Stop())
	}
	if err := d.Stop(); err != nil {
		return res, err
	}
	open := max(res.Memory.OpenAtBudgetOfDaemon-16, 1)
	res.Memory.PerOpenPartition = float64(res.Memory.BudgetBytes-res.Memory.Budget16Bytes) / float64(open)
	res.Memory.PerClosedPartition = (float64(res.Memory.Budget16Bytes-res.Memory.EmptyBytes) - 16*res.Memory.PerOpenPartition) / float64(past-16)
	return res, nil
}

// summary is the cell's ratios, starts, memory and metastore in a line.
func (m ManyPartitionsResult) summary() string {
	return fmt.Sprintf("Past the budget against inside it: produce %.2fx, read %.2fx. Stop %.2f s; ready %.2f s after a clean stop, %.2f s after a crash. "+
		"Resident memory %.0f B a closed partition, %.0f B an open one. Metastore %d B at %d partitions, a change %.1f ms (%d B and %.1f ms at %d).",
		m.Ratios.Produce, m.Ratios.Read, m.Startup.StopSecs, m.Startup.ReadyCleanSecs, m.Startup.ReadyCrashSecs,
		m.Memory.PerClosedPartition, m.Memory.PerOpenPartition, m.Meta.PastBytes, m.Past.Partitions, m.Meta.PastWriteMs,
		m.Meta.InsideBytes, m.Meta.InsideWriteMs, m.Inside.Partitions)
}

// onePerPartition creates topic with n partitions, produces one record to
// each from clients clients, then reads each back.
func onePerPartition(ctx context.Context, c *client.Client, topic string, n, clients int) (OnePerPartition, error) {
	r := OnePerPartition{Partitions: n, Clients: clients}
	if _, _, err := c.CreateTopic(ctx, topic, n, client.Retention{}); err != nil {
		return r, err
	}
	lat := make([]time.Duration, n)
	t0 := time.Now()
	if err := forEach(n, clients, func(p int) error {
		s := time.Now()
		_, err := c.Produce(ctx, topic, p, []client.Record{{Value: recordValue(p, 0)}})
		lat[p] = time.Since(s)
		return err
	}); err != nil {
		return r, err
	}
	r.ProducesPerS = float64(n) / time.Since(t0).Seconds()
	r.ProduceP50Ms, r.ProduceP99Ms = quantileMs(lat, 0.5), quantileMs(lat, 0.99)
	t0 = time.Now()
	if err := forEach(n, clients, func(p int) error {
		s := time.Now()
		err := readBackEach(ctx, c, topic, p, 1)
		lat[p] = time.Since(s)
		return err
	}); err != nil {
		return r, err
	}
	r.ReadsPerS = float64(n) / time.Since(t0).Seconds()
	r.ReadP50Ms, r.ReadP99Ms = quantileMs(lat, 0.5), quantileMs(lat, 0.99)
	return r, nil
}

// killed reports whether err, from a daemon's end, is its death by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// recordValue is the i-th record produced to partition p.
func recordValue(p, i int) []byte { return []byte(fmt.Sprintf("wide/%d/%d", p, i)) }

// readBackEach reads partition p of topic from offset 0 and checks it holds
// exactly the want records produced to it, in order.
func readBackEach(ctx context.Context, c *client.Client, topic string, p, want int) error {
	f, err := c.Fetch(ctx, topic, p, 0, client.FetchOptions{MaxRecords: want + 1})
	if err != nil {
		return fmt.Errorf("partition %d: %w", p, err)
	}
	if len(f.Records) != want || f.HighWatermark != int64(want) {
		return fmt.Errorf("partition %d: %d records read back, high watermark %d; want %d", p, len(f.Records), f.HighWatermark, want)
	}
	for i, r := range f.Records {
		if string(r.Value) != string(recordValue(p, i)) {
			return fmt.Errorf("partition %d offset %d: %q, a record nobody produced there", p, i, r.Value)
		}
	}
	return nil
}

// metastoreChange times the creation of a one-partition topic, 5 times,
// and returns the median in milliseconds: a change the metastore records
// by writing its whole state.
func metastoreChange(ctx context.Context, c *client.Client) (float64, error) {
	var took []time.Duration
	for i := range 5 {
		t0 := time.Now()
		if _, _, err := c.CreateTopic(ctx, fmt.Sprintf("probe-%d", i), 1, client.Retention{}); err != nil {
			return 0, err
		}
		took = append(took, time.Since(t0))
	}
	return quantileMs(took, 0.5), nil
}

// metastoreBytes sums the embedded metastore's files (metastore.json*)
// under dir; a dir with none of them is an error, not a size of 0.
func metastoreBytes(dir string) (int64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "metastore.json*"))
	if err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("no metastore.json* in %s", dir)
	}
	var n int64
	for _, name := range names {
		fi, err := os.Stat(name)
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// quantileMs is the q-quantile of ds, in milliseconds.
func quantileMs(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

// daemonRSS is the daemon's resident set (VmRSS), in bytes, once it holds
// still after ready. The daemon reports ready while its startup's
// allocations may still be reaching the resident set, and nothing it
// exposes says when that is over, so the set is read every 100 ms until
// three readings in a row are within 1 % of each other; a set still moving
// after 10 s is an error, as is one that cannot be read.
func daemonRSS(d *Daemon) (int64, error) {
	const every, bound = 100 * time.Millisecond, 10 * time.Second
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last []int64
	for range bound / every {
		rss, err := readRSS(d.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		last = append(last, rss)
		if n := len(last); n >= 3 {
			lo, hi := slices.Min(last[n-3:]), slices.Max(last[n-3:])
			if hi-lo <= hi/100 {
				return rss, nil
			}
		}
		<-tick.C
	}
	return 0, fmt.Errorf("the daemon's resident set still moving %v after ready: %d bytes at the last reading", bound, last[len(last)-1])
}

// readRSS reads VmRSS of process pid from /proc, in bytes.
func readRSS(pid int) (int64, error) {
	name := fmt.Sprintf("/proc/%d/status", pid)
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: VmRSS: %w", name, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s has no VmRSS line", name)
}

// scrapeGauge reads one unlabelled series of the daemon's /metrics.
func scrapeGauge(addr, name string) (int, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("the daemon's /metrics has no %s", name)
}
