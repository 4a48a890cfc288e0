package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narad-io/storage/diskcheck"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// startObserved starts a server on a temporary data directory, listening
// on loopback, its log observed, after configure; it is closed at the
// test's end.
func startObserved(t *testing.T, configure func(*Config)) (*Server, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig(t, "127.0.0.1:0")
	cfg.Logger = zap.New(core)
	configure(&cfg)
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// metricsOf is what GET /metrics serves.
func metricsOf(s *Server) string {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestServer_StartupDiskCheck: Start probes the data directory before it
// serves (its line comes before "listening"), logs what it took against
// its budget and what it measured, and puts the findings and latencies
// in the gauges; on the test's temporary directory it finds no error.
// The budget is the configuration's: at 1 ns the probe takes its one
// round and says the budget was spent.
func TestServer_StartupDiskCheck(t *testing.T) {
	s, logs := startObserved(t, func(*Config) {})
	var order []string
	for _, e := range logs.All() {
		order = append(order, e.Message)
	}
	check, listening := -1, -1
	for i, msg := range order {
		switch msg {
		case "disk check":
			check = i
		case "listening":
			listening = i
		}
	}
	if check < 0 || listening < check {
		t.Fatalf("the disk check's line at %d, listening at %d: %q", check, listening, order)
	}
	line := logs.All()[check]
	fields := line.ContextMap()
	if line.Level != zapcore.InfoLevel || fields["data_dir"] != s.cfg.DataDir || fields["budget"] != diskcheck.DefaultBudget ||
		fields["errors"] != int64(0) || fields["fs_type"] == "" || fields["rounds"].(int64) < 1 {
		t.Fatalf("the disk check's line: %v", fields)
	}
	if _, ok := fields["duration"].(time.Duration); !ok {
		t.Fatalf("no duration in %v", fields)
	}
	for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		t.Errorf("logged at error: %s %v", e.Message, e.ContextMap())
	}
	exposition := metricsOf(s)
	dir := `data_dir="` + s.cfg.DataDir + `"`
	for _, check := range diskcheck.Checks {
		e2etest.ExpectMetric(t, exposition, `narad_disk_check_errors{check="`+check+`",`+dir+`}`, 0)
	}
	for _, series := range []string{`narad_disk_check_duration_seconds{` + dir + `}`, `narad_disk_check_fdatasync_seconds{` + dir + `,stat="p50",write="append"}`,
		`narad_disk_check_dir_fsync_seconds{` + dir + `,stat="max"}`} {
		if v, ok := e2etest.MetricValue(exposition, series); !ok || v <= 0 {
			t.Errorf("%s = %v (present %v)", series, v, ok)
		}
	}
	if !strings.Contains(exposition, "narad_disk_check_info{"+dir+",fs_type=") {
		t.Errorf("no narad_disk_check_info:\n%s", exposition)
	}

	_, logs = startObserved(t, func(c *Config) { c.DiskCheckBudget = Duration(time.Nanosecond) })
	fields = logs.FilterMessage("disk check").All()[0].ContextMap()
	if fields["budget"] != time.Nanosecond || fields["budget_spent"] != true || fields["rounds"] != int64(1) {
		t.Fatalf("a budget of 1ns: %v", fields)
	}
}

// TestServer_DiskCheckOff: a budget of 0 runs no probe: no line, and the
// gauges an alert names are there at zero all the same; a probe file a
// crash left is then left too, and the node serves beside it (it is never
// taken for data), until a start with the check removes it.
func TestServer_DiskCheckOff(t *testing.T) {
	dataDir := t.TempDir()
	leftover := filepath.Join(dataDir, wire.DiskCheckProbePrefix+"0123456789abcdef")
	if err := os.WriteFile(leftover, []byte("a crashed probe's"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, logs := startObserved(t, func(c *Config) { c.DataDir, c.DiskCheckBudget = dataDir, 0 })
	if n := logs.FilterMessage("disk check").Len(); n != 0 {
		t.Fatalf("%d disk check lines with the check off", n)
	}
	exposition := metricsOf(s)
	for _, check := range diskcheck.Checks {
		e2etest.ExpectMetric(t, exposition, `narad_disk_check_warnings{check="`+check+`",data_dir="`+dataDir+`"}`, 0)
	}
	if !s.Ready() {
		t.Fatal("not ready beside a leftover probe file")
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("the leftover with the check off: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, logs = startObserved(t, func(c *Config) { c.DataDir = dataDir })
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("the leftover after a start with the check: %v", err)
	}
	probeFiles := logs.FilterMessage("disk check: " + diskcheck.CheckProbeFiles).All()
	if len(probeFiles) != 1 || !strings.Contains(probeFiles[0].ContextMap()["finding"].(string), "1 a crashed probe left") {
		t.Fatalf("the probe files' finding: %+v", probeFiles)
	}
}

// TestServer_CheckDisk: the command's probe holds the free space against
// the configuration's floor and the open-file limit against the budget
// New would compute: a floor above what any disk has is an error, and a
// budget the limit cannot hold a warning.
func TestServer_CheckDisk(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.MinFreeBytes = 1 << 62
	cfg.MaxOpenLogs = 1 << 40
	r, err := CheckDisk(context.Background(), cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := r.Finding(diskcheck.CheckFreeBytes); f.Severity != diskcheck.Error {
		t.Errorf("free space under the floor: %+v", f)
	}
	if f, _ := r.Finding(diskcheck.CheckDescriptors); f.Severity != diskcheck.Warning || r.Descriptors.OpenLogs != 1<<40 {
		t.Errorf("a budget of 2^40 logs: %+v, %+v", f, r.Descriptors)
	}
	cfg.MaxOpenLogs = 0
	if r, err = CheckDisk(context.Background(), cfg, 0); err != nil {
		t.Fatal(err)
	}
	want := cfg.withDescriptorDefaults()
	d := r.Descriptors
	if d.OpenLogs != want.MaxOpenLogs || d.Needed != uint64(runtime.DescriptorsFor(want.MaxOpenLogs, want.MaxConnections)) {
		t.Errorf("the default budget: %+v, want %d logs beside %d connections", d, want.MaxOpenLogs, want.MaxConnections)
	}
	// The default budget fits the limit unless the limit is under even
	// its floor of 16 logs.
	if f, _ := r.Finding(diskcheck.CheckDescriptors); (f.Severity == diskcheck.OK) != (d.Limit >= d.Needed) {
		t.Errorf("the default budget: %+v for %+v", f, d)
	}
	if _, err := CheckDisk(context.Background(), Config{DataDir: filepath.Join(t.TempDir(), "absent")}, 0); err == nil {
		t.Error("a missing data directory probed")
	}
}

// TestServer_StartEndedDuringTheDiskCheck: a Start whose context ends
// while the startup probe waits on a flush (as Close ends a Start under
// way) returns once that round is done: no further round, nothing
// served, the probe's files removed.
func TestServer_StartEndedDuringTheDiskCheck(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:0")
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	disk := sim.NewDisk(1)
	if err := disk.MkdirAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	inFlush, release := make(chan struct{}), make(chan struct{})
	var syncs atomic.Int32
	disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync && syncs.Add(1) == 1 {
			close(inFlush)
			<-release
		}
		return nil
	})
	s.diskFS = disk
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	<-inFlush
	cancel()
	close(release)
	if err := <-started; !errors.Is(err, context.Canceled) {
		t.Fatalf("Start ended during its disk check: %v", err)
	}
	if n := syncs.Load(); n != 2 {
		t.Fatalf("%d flushes: the round under way ends, no other begins", n)
	}
	if s.served != nil {
		t.Fatal("the API was served")
	}
	entries, err := disk.ReadDir(cfg.DataDir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("left %v (%v)", entries, err)
	}
}
