package diskcheck

import (
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/narad-io/storage/vfs/sim"
)

// warnedReport is a probe of a disk whose flushes take 2 us (a warning)
// and that cannot fallocate (another), its floor of free space unmet (an
// error), its descriptors short (a warning).
func warnedReport(t *testing.T) Report {
	t.Helper()
	f := newFake(t, ext4, 2*time.Microsecond, 3*time.Microsecond)
	f.disk.Inject(sim.Fault{Op: sim.OpAllocate, Err: syscall.EOPNOTSUPP})
	opts := f.options()
	opts.MinFreeBytes = 1 << 62
	opts.Descriptors = &Descriptors{Limit: 256, OpenLogs: 16, Needed: 448}
	return f.probe(t, opts)
}

// TestWriteText: the text names the directory, the file system, the
// rounds, every latency, every check with its severity, each fix, and
// counts errors and warnings.
func TestWriteText(t *testing.T) {
	r := warnedReport(t)
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"disk check of /data\n", "ext2/3/4 on device 8:0, write cache: write back",
		"64 of 64 in", "fdatasync, append    p50 2µs  p99 2µs  max 2µs  (64 samples)", "directory fsync      p50 3µs",
		"warning  fdatasync    p50 2µs after an append, 2µs after an overwrite: implausibly fast (under 50µs)",
		"error    free_bytes", "warning  fallocate    unsupported", "warning  descriptors  open-file limit 256, under the 448",
		"ok       fs_type", "ok       dir_fsync", "ok       free_inodes", "ok       probe_files",
		"fix: check the drive has power-loss protection (its data sheet", "\n1 errors, 3 warnings\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text does not say %q:\n%s", want, out)
		}
	}
}

// latency is a latency in the JSON document.
type latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
	Max     float64 `json:"max_seconds"`
	Error   string  `json:"error"`
}

// TestWriteJSON: one document, its fields as docs/operations.md gives
// them, decoded with the test's own types.
func TestWriteJSON(t *testing.T) {
	r := warnedReport(t)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Dir        string `json:"dir"`
		FileSystem struct {
			Type, Magic, Device string
			WriteCache          string `json:"write_cache"`
		} `json:"file_system"`
		Append    latency `json:"fdatasync_append"`
		Overwrite latency `json:"fdatasync_overwrite"`
		DirFsync  latency `json:"dir_fsync"`
		Fallocate string  `json:"fallocate"`
		Free      struct {
			Bytes       uint64 `json:"bytes"`
			Inodes      uint64 `json:"inodes"`
			FloorBytes  uint64 `json:"floor_bytes"`
			FloorInodes uint64 `json:"floor_inodes"`
			Error       string `json:"error"`
		} `json:"free"`
		Descriptors struct {
			Limit    *uint64 `json:"limit"`
			OpenLogs int     `json:"open_logs"`
			Needed   uint64  `json:"needed"`
		} `json:"descriptors"`
		Leftovers     int     `json:"leftovers_removed"`
		Rounds        int     `json:"rounds"`
		RoundsPlanned int     `json:"rounds_planned"`
		Budget        float64 `json:"budget_seconds"`
		BudgetSpent   bool    `json:"budget_spent"`
		Duration      float64 `json:"duration_seconds"`
		Findings      []struct {
			Check, Severity, Message, Fix string
		} `json:"findings"`
		Errors   int `json:"errors"`
		Warnings int `json:"warnings"`
	}
	dec := json.NewDecoder(&b)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if doc.Dir != "/data" || doc.FileSystem.Type != "ext2/3/4" || doc.FileSystem.Magic != "0xef53" || doc.FileSystem.WriteCache != "write back" ||
		doc.Append.Samples != 64 || doc.Append.P50 != 2e-6 || doc.Overwrite.Samples != 64 || doc.DirFsync.Samples != 16 || doc.DirFsync.P50 != 3e-6 ||
		!strings.Contains(doc.Fallocate, "not supported") || doc.Free.FloorBytes != 1<<62 ||
		doc.Descriptors.Limit == nil || *doc.Descriptors.Limit != 256 || doc.Descriptors.Needed != 448 ||
		doc.Rounds != 64 || doc.RoundsPlanned != 64 || doc.Budget != 0.5 || doc.BudgetSpent || doc.Duration <= 0 || doc.Errors != 1 || doc.Warnings != 3 || len(doc.Findings) != len(Checks) {
		t.Fatalf("%+v\n%s", doc, b.String())
	}
	if f := doc.Findings[1]; f.Check != CheckFdatasync || f.Severity != "warning" || f.Fix == "" {
		t.Fatalf("%+v", f)
	}
	r.Descriptors.Limit = Unlimited
	b.Reset()
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"limit": null`) {
		t.Fatalf("an unlimited limit:\n%s", b.String())
	}
}

// TestLog: one info line with what was measured and how long the probe
// took against its budget, and one line per warning or error at its
// level with the fix; ok findings only at debug.
func TestLog(t *testing.T) {
	r := warnedReport(t)
	core, logs := observer.New(zapcore.DebugLevel)
	Log(zap.New(core), r)
	summary := logs.FilterMessage("disk check").All()
	if len(summary) != 1 || summary[0].Level != zapcore.InfoLevel {
		t.Fatalf("summary lines: %+v", summary)
	}
	fields := summary[0].ContextMap()
	if fields["duration"] != r.Duration || fields["budget"] != DefaultBudget || fields["fs_type"] != "ext2/3/4" ||
		fields["fdatasync_append_p50"] != 2*time.Microsecond || fields["errors"] != int64(1) || fields["warnings"] != int64(3) {
		t.Fatalf("summary: %v", fields)
	}
	levels := map[string]zapcore.Level{}
	for _, e := range logs.All()[1:] {
		check := e.ContextMap()["check"].(string)
		levels[check] = e.Level
		if e.Level >= zapcore.WarnLevel && e.ContextMap()["fix"] == nil {
			t.Errorf("%s logged without its fix", check)
		}
	}
	want := map[string]zapcore.Level{CheckFSType: zapcore.DebugLevel, CheckFdatasync: zapcore.WarnLevel, CheckDirFsync: zapcore.DebugLevel, CheckFallocate: zapcore.WarnLevel,
		CheckFreeBytes: zapcore.ErrorLevel, CheckFreeInodes: zapcore.DebugLevel, CheckDescriptors: zapcore.WarnLevel, CheckProbeFiles: zapcore.DebugLevel}
	if len(levels) != len(want) {
		t.Fatalf("lines per check: %v", levels)
	}
	for check, level := range want {
		if levels[check] != level {
			t.Errorf("%s at %v, want %v", check, levels[check], level)
		}
	}
}

// TestMetrics: every check's warning and error gauges exist at zero
// before a probe; after it, they say what it found, and the latencies,
// duration and file system are there.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, "/data")
	if n := testutil.CollectAndCount(reg, "narad_disk_check_warnings", "narad_disk_check_errors"); n != 2*len(Checks) {
		t.Fatalf("%d warning and error series before a probe, want %d", n, 2*len(Checks))
	}
	if v := testutil.ToFloat64(m.warnings.WithLabelValues("/data", CheckFdatasync)); v != 0 {
		t.Fatalf("before a probe: %v", v)
	}
	// No probe yet (the check off) is told from one that passed.
	if v := testutil.ToFloat64(m.lastRun.WithLabelValues("/data")); v != 0 {
		t.Fatalf("the last run before a probe: %v", v)
	}
	r := warnedReport(t)
	m.Set(r)
	for _, c := range []struct {
		g    prometheus.Collector
		want float64
	}{
		{m.warnings.WithLabelValues("/data", CheckFdatasync), 1},
		{m.warnings.WithLabelValues("/data", CheckFallocate), 1},
		{m.warnings.WithLabelValues("/data", CheckFSType), 0},
		{m.errors.WithLabelValues("/data", CheckFreeBytes), 1},
		{m.errors.WithLabelValues("/data", CheckFdatasync), 0},
		{m.fdatasync.WithLabelValues("/data", "append", "p50"), 2e-6},
		{m.fdatasync.WithLabelValues("/data", "overwrite", "max"), 2e-6},
		{m.dirFsync.WithLabelValues("/data", "p99"), 3e-6},
		{m.duration.WithLabelValues("/data"), r.Duration.Seconds()},
		{m.info.WithLabelValues("/data", "ext2/3/4", "write back"), 1},
		{m.lastRun.WithLabelValues("/data"), float64(time.Unix(1_700_000_000, 0).Add(r.Duration).UnixNano()) / 1e9},
	} {
		if got := testutil.ToFloat64(c.g); got != c.want {
			t.Errorf("%v: %v, want %v", c.g, got, c.want)
		}
	}
	// Two nodes on one registerer share the gauges, each its own series.
	NewMetrics(reg, "/other")
	if n := testutil.CollectAndCount(reg, "narad_disk_check_warnings"); n != 2*len(Checks) {
		t.Fatalf("%d warning series for two directories", n)
	}
}
