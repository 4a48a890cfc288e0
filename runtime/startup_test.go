package runtime

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// segmentOpens counts, per partition directory, the opens of a segment
// file on d from now on: every log open opens its active segment, and
// nothing else Start does opens one.
type segmentOpens struct {
	mu  sync.Mutex
	dir map[string]int
}

func countSegmentOpens(d *sim.Disk) *segmentOpens {
	o := &segmentOpens{dir: map[string]int{}}
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpOpen && strings.HasSuffix(c.Path, wire.SegmentFileSuffix) {
			o.mu.Lock()
			o.dir[path.Dir(c.Path)]++
			o.mu.Unlock()
		}
		return nil
	})
	return o
}

func (o *segmentOpens) of(topic string, p int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dir[partitionPath(topic, p)]
}

// hwmOnDisk reads a partition's hwm file: its value, if it holds one.
func hwmOnDisk(t *testing.T, d *sim.Disk, topic string, p int) (int64, bool) {
	t.Helper()
	b, err := vfs.ReadFile(d, path.Join(partitionPath(topic, p), wire.HWMFileName), 64)
	if err != nil {
		return 0, false
	}
	v, present, err := wire.DecodeOffsetFile(b)
	return v, err == nil && present
}

// TestStartup_AfterACleanStopOpensNoneOfThosePastTheBudget: every
// boundary on disk is exact after a clean stop, so Start opens the
// budget's worth of partitions and not one more (no open closed again,
// no eviction); each partition left closed still has its high watermark
// series, and every record and ack is served after, the closed ones
// opened on first use.
func TestStartup_AfterACleanStopOpensNoneOfThosePastTheBudget(t *testing.T) {
	const partitions, budget = 20, 4
	d := newTestDisk(t, 1)
	first := startNode(t, d, Config{MaxOpenLogs: -1})
	if _, _, err := first.CreateTopic(bg, "wide", partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if _, err := first.Produce(bg, "wide", p, recs("wide", p, 0, 2)); err != nil {
			t.Fatal(err)
		}
		if _, err := first.Ack(bg, "wide", p, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	opens := countSegmentOpens(d)
	reg := prometheus.NewRegistry()
	n := startNode(t, d, Config{MaxOpenLogs: budget, ColdWalkInterval: time.Hour, Registerer: reg})
	opened := 0
	for p := range partitions {
		switch opens.of("wide", p) {
		case 0:
		case 1:
			opened++
		default:
			t.Fatalf("partition %d opened %d times by Start", p, opens.of("wide", p))
		}
	}
	if opened != budget || n.reg.Len() != budget || n.reg.Evictions() != 0 {
		t.Fatalf("Start opened %d partitions, %d open, %d evicted; want the budget's %d, none evicted", opened, n.reg.Len(), n.reg.Evictions(), budget)
	}
	var want strings.Builder
	for _, p := range []int{0, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 2, 3, 4, 5, 6, 7, 8, 9} { // as the registry sorts them
		fmt.Fprintf(&want, "partition=%d topic=wide 2\n", p)
	}
	if got := series(t, reg, "narad_partition_high_watermark"); got != want.String() {
		t.Fatalf("high watermark series after Start:\n%s\nwant every partition's:\n%s", got, want.String())
	}
	for p := range partitions {
		got := readValues(t, n, "wide", p)
		if len(got) != 2 || got[0] != fmt.Sprintf("wide/%d/0", p) || got[1] != fmt.Sprintf("wide/%d/1", p) {
			t.Fatalf("partition %d serves %q", p, got)
		}
		st, err := n.ConsumerState(bg, "wide", p)
		if err != nil || st.Frontier != 0 || len(st.AckedAhead) != 1 {
			t.Fatalf("partition %d consumer state %+v, %v; want offset 1 acked ahead", p, st, err)
		}
		if open := n.reg.Len(); open > budget {
			t.Fatalf("%d logs open, budget %d", open, budget)
		}
	}
}

// TestStartup_AfterACrashRecoversEveryPartitionPastTheBudget: on a power
// loss's image, every partition whose boundary file is not exact (none,
// as an open log leaves it; or the zeros a torn close leaves) is opened
// and its boundary written before Start returns, however small the
// budget; the ones a clean close left exact are not opened, but for the
// budget's room after the recovered ones. Every record is served after.
func TestStartup_AfterACrashRecoversEveryPartitionPastTheBudget(t *testing.T) {
	const partitions, budget = 12, 2
	d := newTestDisk(t, 1)
	first := startNode(t, d, Config{MaxOpenLogs: -1})
	if _, _, err := first.CreateTopic(bg, "wide", partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if _, err := first.Produce(bg, "wide", p, recs("wide", p, 0, 3)); err != nil {
			t.Fatal(err)
		}
		if p < partitions/2 { // closed cleanly before the crash; the rest open
			if err := first.reg.CloseLive(key("wide", p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	img := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	// A power loss inside partition 0's close: the file's new size reached
	// the media, its bytes did not.
	if err := vfs.WriteFileAtomic(img, path.Join(partitionPath("wide", 0), wire.HWMFileName), make([]byte, wire.OffsetFileSize)); err != nil {
		t.Fatal(err)
	}
	needs := map[int]bool{0: true}
	for p := partitions / 2; p < partitions; p++ {
		needs[p] = true
		if _, ok := hwmOnDisk(t, img, "wide", p); ok {
			t.Fatalf("partition %d, open at the crash, has a boundary on disk", p)
		}
	}

	opens := countSegmentOpens(img)
	core, logs := observer.New(zapcore.InfoLevel)
	n := startNode(t, img, Config{MaxOpenLogs: budget, ColdWalkInterval: time.Hour, Logger: zap.New(core)})
	for p := range partitions {
		if hwm, ok := hwmOnDisk(t, img, "wide", p); !ok || hwm != 3 {
			t.Fatalf("partition %d after Start: boundary on disk %d, %v; want 3", p, hwm, ok)
		}
		switch got := opens.of("wide", p); {
		case needs[p] && got == 0:
			t.Fatalf("partition %d, its boundary not exact, was not opened by Start", p)
		case !needs[p] && got != 0:
			t.Fatalf("partition %d, its boundary exact, was opened %d times by Start", p, got)
		}
	}
	if n.reg.Len() != budget || n.reg.Evictions() != 0 {
		t.Fatalf("after Start %d open, %d evicted; want %d, none", n.reg.Len(), n.reg.Evictions(), budget)
	}
	if skipped := logs.FilterMessage("startup: skipping a partition that failed to open").Len(); skipped > 0 {
		t.Fatalf("Start skipped %d partitions", skipped)
	}
	lines := logs.FilterMessage("startup: opening partitions").All()
	if last := lines[len(lines)-1].ContextMap(); last["checked"] != int64(partitions) || last["recovered"] != int64(len(needs)) ||
		last["opened"] != int64(budget) || last["skipped"] != int64(0) {
		t.Fatalf("last progress line %v: want %d checked, %d recovered, %d opened", last, partitions, len(needs), budget)
	}
	for p := range partitions {
		if got := readValues(t, n, "wide", p); len(got) != 3 || got[2] != fmt.Sprintf("wide/%d/2", p) {
			t.Fatalf("partition %d serves %q", p, got)
		}
	}
}

// TestStartup_RecoversOneTopicsPartitionsInParallel: the recoveries of
// one topic's partitions overlap. The first open of a segment is held
// until a second one has begun: opened one after another, the second
// never begins, and the bubble, every goroutine in it blocked, fails.
func TestStartup_RecoversOneTopicsPartitionsInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		ms, err := OpenLocalMetastore(d, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		first, err := New(Config{DataDir: dataDir, FS: d, Metastore: ms})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := first.CreateTopic(bg, "wide", 4, Retention{}); err != nil {
			t.Fatal(err)
		}
		for p := range 4 {
			if _, err := first.Produce(bg, "wide", p, recs("wide", p, 0, 1)); err != nil {
				t.Fatal(err)
			}
		}
		img := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced}) // every log open: no boundary on disk
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}

		var mu sync.Mutex
		begun := 0
		second := make(chan struct{})
		img.SetHook(func(c sim.Call) error {
			if c.Op != sim.OpOpen || !strings.HasSuffix(c.Path, wire.SegmentFileSuffix) {
				return nil
			}
			mu.Lock()
			begun++
			nth := begun
			mu.Unlock()
			switch nth {
			case 1:
				<-second
			case 2:
				close(second)
			}
			return nil
		})
		ms, err = OpenLocalMetastore(img, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(Config{DataDir: dataDir, FS: img, Metastore: ms, MaxOpenLogs: 2, ColdWalkInterval: time.Hour, Testing: checkLockOrder})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := n.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if v := n.LockOrderViolations(); len(v) > 0 {
				t.Errorf("lock-order violations: %v", v)
			}
		}()
		if err := n.Start(bg); err != nil {
			t.Fatal(err)
		}
		for p := range 4 {
			if hwm, ok := hwmOnDisk(t, img, "wide", p); !ok || hwm != 1 {
				t.Fatalf("partition %d after Start: boundary on disk %d, %v; want 1", p, hwm, ok)
			}
		}
	})
}

// TestReadBoundary_TellsExactFromNot: what startup reads of a closed
// partition's directory, for each state the hwm file can be in beside
// the segments: only a value a clean close could have left is exact.
func TestReadBoundary_TellsExactFromNot(t *testing.T) {
	offsetFile := func(v int64) []byte {
		b, _ := wire.EncodeOffsetFile(v)
		return b[:]
	}
	segment := func(base int64) string { name, _ := wire.SegmentFileName(base); return name }
	cases := []struct {
		name     string
		files    map[string][]byte // nil: no directory
		exact    bool
		boundary int64
	}{
		{name: "no directory", exact: true},
		{name: "no segment, no file", files: map[string][]byte{}, exact: true},
		{name: "no segment, a value", files: map[string][]byte{"hwm": offsetFile(5)}},
		{name: "a clean close", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": offsetFile(7)}, exact: true, boundary: 7},
		{name: "a clean close after a roll", files: map[string][]byte{segment(0): make([]byte, 100), segment(7): nil, "hwm": offsetFile(7)}, exact: true, boundary: 7},
		{name: "emptied by the first advance", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": {}}},
		{name: "never written", files: map[string][]byte{segment(0): make([]byte, 100)}},
		{name: "empty, no record bytes", files: map[string][]byte{segment(0): nil, segment(9): nil, "hwm": {}}, exact: true, boundary: 9},
		{name: "zeros of a torn close", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": make([]byte, 8)}},
		// A torn sector's random bytes, positive and above the base: more
		// records than 100 bytes of frames can hold (found by review).
		{name: "garbage of a torn close", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": {0x3a, 0x91, 0x07, 0xc4, 0x5e, 0x22, 0xd8, 0x6b}}},
		{name: "past what the newest segment's bytes can hold", files: map[string][]byte{segment(7): make([]byte, 100), "hwm": offsetFile(7 + 4*wire.MaxFrameBytes/wire.RecordLenSize)}},
		{name: "as many as the newest segment's bytes can hold", files: map[string][]byte{segment(7): make([]byte, 100), "hwm": offsetFile(7 + 3*wire.MaxFrameBytes/wire.RecordLenSize)}, exact: true, boundary: 7 + 3*wire.MaxFrameBytes/wire.RecordLenSize},
		{name: "below the newest segment", files: map[string][]byte{segment(0): make([]byte, 100), segment(7): make([]byte, 100), "hwm": offsetFile(3)}},
		{name: "the newest segment's base, bytes in it", files: map[string][]byte{segment(7): make([]byte, 100), "hwm": offsetFile(7)}},
		{name: "past an empty newest segment", files: map[string][]byte{segment(7): nil, "hwm": offsetFile(9)}},
		{name: "short", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": make([]byte, 7)}},
		{name: "negative", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": {0x80, 0, 0, 0, 0, 0, 0, 0}}},
		{name: "too long", files: map[string][]byte{segment(0): make([]byte, 100), "hwm": make([]byte, 100)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := sim.NewDisk(1)
			dir := "/p00000"
			if c.files != nil {
				if err := d.MkdirAll(dir); err != nil {
					t.Fatal(err)
				}
				for name, b := range c.files {
					if err := vfs.WriteFileAtomic(d, path.Join(dir, name), b); err != nil {
						t.Fatal(err)
					}
				}
			}
			b, err := readBoundary(d, dir)
			if err != nil || b.exact != c.exact || (c.exact && b.hwm != c.boundary) {
				t.Fatalf("readBoundary = %d, exact %v, %v; want exact %v (%d)", b.hwm, b.exact, err, c.exact, c.boundary)
			}
		})
	}
}

// TestStartup_KeepsOpenAPartitionWhoseRecoveryCouldNotWriteItsBoundary:
// a torn close left zeros over partition 0's records, and the recovery's
// close then fails to write the boundary: the zeros stay on disk. The
// partition must not be left closed behind them (a describe, its gauge or
// a queue consume's nothingFree would take 0 for its boundary, with
// three records in it): Start opens it and leaves it open, as the Start
// before the check did, whatever the budget (found by review).
func TestStartup_KeepsOpenAPartitionWhoseRecoveryCouldNotWriteItsBoundary(t *testing.T) {
	const partitions, budget = 6, 2
	d := newTestDisk(t, 1)
	first := startNode(t, d, Config{MaxOpenLogs: -1})
	if _, _, err := first.CreateTopic(bg, "wide", partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if _, err := first.Produce(bg, "wide", p, recs("wide", p, 0, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	hwmPath := path.Join(partitionPath("wide", 5), wire.HWMFileName)
	if err := vfs.WriteFileAtomic(d, hwmPath, make([]byte, wire.OffsetFileSize)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpWrite, Path: hwmPath, Nth: 1, Err: syscall.EIO})
	n := startNode(t, d, Config{MaxOpenLogs: budget, ColdWalkInterval: time.Hour})
	if hwm, known, err := n.PeekHighWatermark("wide", 5); err != nil || !known || hwm != 3 {
		t.Fatalf("partition 5 after Start: high watermark %d, known %v, %v; want 3", hwm, known, err)
	}
	if _, ok := n.reg.Lookup(key("wide", 5)); !ok {
		t.Fatal("partition 5, its boundary not on disk, was left closed")
	}
	if got := readValues(t, n, "wide", 5); len(got) != 3 {
		t.Fatalf("partition 5 serves %q", got)
	}
}
