package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/diskcheck"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/internal/tmpfstest"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// startObserved starts a server on a temporary data directory, listening
// on loopback, its log observed, with the disk check on (testConfig has
// it off) unless configure turns it off; it is closed at the test's end.
func startObserved(t *testing.T, configure func(*Config)) (*Server, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig(t, "127.0.0.1:0")
	cfg.Logger = zap.New(core)
	cfg.DiskCheckBudget = Duration(diskcheck.DefaultBudget)
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

// TestServer_StartupDiskCheck: Start probes the data directory once it
// serves (answering 503 not_ready meanwhile) and before it is ready (its
// line comes between "listening" and "ready"), logs what it took against
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
	check, listening, ready := -1, -1, -1
	for i, msg := range order {
		switch msg {
		case "disk check":
			check = i
		case "listening":
			listening = i
		case "ready":
			ready = i
		}
	}
	if listening < 0 || check < listening || ready < check {
		t.Fatalf("the disk check's line at %d, listening at %d, ready at %d: %q", check, listening, ready, order)
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
	for _, series := range []string{`narad_disk_check_duration_seconds{` + dir + `}`, `narad_disk_check_last_run_timestamp_seconds{` + dir + `}`,
		`narad_disk_check_fdatasync_seconds{` + dir + `,stat="p50",write="append"}`,
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
	// ... and the last run's time says none ran.
	e2etest.ExpectMetric(t, exposition, `narad_disk_check_last_run_timestamp_seconds{data_dir="`+dataDir+`"}`, 0)
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

// TestServer_StartupOnATmpfsWarns: a node started on a tmpfs warns of it
// (a test or a throwaway node may run on one), where the command's probe
// (CheckDisk) holds it an error; the node is ready all the same.
func TestServer_StartupOnATmpfsWarns(t *testing.T) {
	dir := tmpfstest.Dir(t)
	s, logs := startObserved(t, func(c *Config) { c.DataDir = dir })
	found := logs.FilterMessage("disk check: " + diskcheck.CheckFSType).All()
	if len(found) != 1 || found[0].Level != zapcore.WarnLevel || !s.Ready() {
		t.Fatalf("ready %v; the fs_type finding: %+v", s.Ready(), found)
	}
	e2etest.ExpectMetric(t, metricsOf(s), `narad_disk_check_warnings{check="fs_type",data_dir="`+dir+`"}`, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := CheckDisk(context.Background(), Config{DataDir: dir}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := r.Finding(diskcheck.CheckFSType); f.Severity != diskcheck.Error {
		t.Fatalf("the command's probe on a tmpfs: %+v", f)
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

// heldFlush is a simulated data directory for the startup probe whose
// first fdatasync waits until the test releases it: a flush that hangs.
type heldFlush struct {
	disk             *sim.Disk
	inFlush, release chan struct{}
	syncs            atomic.Int32
}

func holdFirstFlush(t *testing.T, s *Server) *heldFlush {
	t.Helper()
	h := &heldFlush{disk: sim.NewDisk(1), inFlush: make(chan struct{}), release: make(chan struct{})}
	if err := h.disk.MkdirAll(s.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	h.disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync && h.syncs.Add(1) == 1 {
			close(h.inFlush)
			<-h.release
		}
		return nil
	})
	s.disk.fs = h.disk
	return h
}

// expectNoFiles fails unless the probe removed its files.
func (h *heldFlush) expectNoFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := h.disk.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("left %v (%v)", entries, err)
	}
}

// TestServer_StartEndedDuringTheDiskCheck: a Start whose context ends
// while the startup probe waits on a flush (as Close ends a Start under
// way) returns at once, the node not started; the probe ends after the
// round under way, none begun after it, its files removed.
func TestServer_StartEndedDuringTheDiskCheck(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:0")
	cfg.DiskCheckBudget = Duration(diskcheck.DefaultBudget)
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := holdFirstFlush(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	<-h.inFlush
	cancel()
	if err := <-started; !errors.Is(err, context.Canceled) {
		t.Fatalf("Start ended during its disk check: %v", err)
	}
	if s.Ready() {
		t.Fatal("ready after a Start ended during its disk check")
	}
	close(h.release)
	<-s.disk.done
	if n := h.syncs.Load(); n != 2 {
		t.Fatalf("%d flushes: the round under way ends, no other begins", n)
	}
	h.expectNoFiles(t, cfg.DataDir)
}

// TestServer_HungFlushHoldsNeitherStartNorClose: a flush of the startup
// probe that does not return holds the start only until the budget and
// its margin have passed (the test's own timer stands for it): /healthz
// answers and /readyz says 503 not_ready meanwhile, then the start goes
// on and the node is ready, with a warning naming the flush and the
// stalled gauge at 1. Close does not wait for the flush past its
// timeout. Once the flush returns the probe ends: its report logged, its
// files removed, its goroutine gone (goleak checks at the end).
func TestServer_HungFlushHoldsNeitherStartNorClose(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig(t, "127.0.0.1:0")
	cfg.Logger = zap.New(core)
	cfg.DiskCheckBudget = Duration(diskcheck.DefaultBudget)
	cfg.ShutdownTimeout = Duration(time.Millisecond)
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := holdFirstFlush(t, s)
	expired := make(chan time.Time, 1)
	var bound time.Duration
	s.disk.timer = func(d time.Duration) (<-chan time.Time, func() bool) {
		bound = d
		return expired, func() bool { return true }
	}
	started := make(chan error, 1)
	go func() { started <- s.Start(context.Background()) }()
	<-h.inFlush
	node := e2etest.API{Base: "http://" + s.Addr().String(), HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	e2etest.Expect(t, node.Req(t, "GET", "/healthz", nil), 200, "")
	e2etest.Expect(t, node.Req(t, "GET", "/readyz", nil), 503, api.CodeNotReady)
	expired <- time.Now()
	if err := <-started; err != nil {
		t.Fatalf("Start with a hung flush: %v", err)
	}
	if !s.Ready() || bound != time.Duration(cfg.DiskCheckBudget)+diskCheckMargin {
		t.Fatalf("ready %v; waited %v", s.Ready(), bound)
	}
	stalled := logs.FilterMessage("disk check: stalled").All()
	if len(stalled) != 1 || stalled[0].Level != zapcore.WarnLevel || stalled[0].ContextMap()["call"] != "fdatasync" ||
		!strings.Contains(stalled[0].ContextMap()["finding"].(string), "a fdatasync took over") {
		t.Fatalf("the stall's warning: %+v", stalled)
	}
	e2etest.ExpectMetric(t, metricsOf(s), `narad_disk_check_stalled{data_dir="`+cfg.DataDir+`"}`, 1)
	if n := logs.FilterMessage("disk check").Len(); n != 0 {
		t.Fatalf("a report before the probe ended: %d", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessage("disk check: still stalled at close; its probe files are left for the next start's check to remove").Len(); n != 1 {
		t.Fatalf("%d warnings of a probe still stalled at close", n)
	}
	close(h.release)
	<-s.disk.done
	if n := logs.FilterMessage("disk check").Len(); n != 1 {
		t.Fatalf("%d reports once the flush returned", n)
	}
	h.expectNoFiles(t, cfg.DataDir)
}
