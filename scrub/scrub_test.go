package scrub

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/tool"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestPassFindsRotNobodyReads: a flipped byte in a sealed segment of a
// closed partition nobody reads is found in one pass, logged once with
// its partition, segment and byte range, counted, listed by verify at the
// same place, and a read of its offsets answers ErrUnreadable.
func TestPassFindsRotNobodyReads(t *testing.T) {
	d := sim.NewDisk(1)
	bases := seed(t, d, 0, 400)
	seg := filepath.Join(partitionDir(0), segmentName(bases[1]))
	pos, offset := secondFrame(t, d, seg)
	flip(t, d, seg, pos+30)

	s, logs := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s.Pass(bg, nil, nil)
	if n := testutil.ToFloat64(s.metrics.damaged); n != 1 {
		t.Fatalf("damaged frames found: %v, want 1", n)
	}
	warned := logs.FilterMessageSnippet("scrub found a damaged frame").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(warned), logs.All())
	}
	f := warned[0].ContextMap()
	if f["segment"] != segmentName(bases[1]) || f["byte"] != pos || f["offset"] != offset || f["partition"] != int64(0) {
		t.Fatalf("warning fields %v: want segment %s, byte %d, offset %d", f, segmentName(bases[1]), pos, offset)
	}
	if prog, ok := readProgress(t, d, 0); !ok || prog.Next != 0 || prog.CompletedUnixMs == 0 {
		t.Fatalf("progress after a whole pass: %+v %v", prog, ok)
	}
	if got := testutil.ToFloat64(s.metrics.done.WithLabelValues("orders", "0")); got == 0 {
		t.Fatal("no last completion for the partition")
	}

	// A second pass, the partition due again, logs nothing more for the
	// same place.
	s.cfg.Interval = time.Nanosecond
	s.Pass(bg, nil, nil)
	if n := testutil.ToFloat64(s.metrics.damaged); n != 2 {
		t.Fatalf("damaged frames found after a second pass: %v, want 2", n)
	}
	if n := len(logs.FilterMessageSnippet("scrub found a damaged frame").All()); n != 1 {
		t.Fatalf("%d warnings after a second pass, want still 1", n)
	}

	var out bytes.Buffer
	clean, err := tool.Verify(&out, tool.VerifyOptions{DataDir: "/data", FS: d})
	if err != nil || clean {
		t.Fatalf("verify: clean %v, %v", clean, err)
	}
	if !strings.Contains(out.String(), segmentName(bases[1])) {
		t.Fatalf("verify does not list the segment:\n%s", out.String())
	}

	l, err := partition.Open(partitionDir(0), partition.Options{FS: d, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Read(offset, 1, 1<<20); !isUnreadable(err) {
		t.Fatalf("read of offset %d: %v, want ErrUnreadable", offset, err)
	}
}

// TestOpenLogForgetsWhatItCached: rot under a frame an open log has cached
// is served from the cache until the scrub hands its finding to the log;
// after, a read answers ErrUnreadable, and the log has warned once with
// the damage's segment and byte range. The log stays open.
func TestOpenLogForgetsWhatItCached(t *testing.T) {
	d := sim.NewDisk(2)
	bases := seed(t, d, 0, 400)
	core, logLogs := observer.New(zapcore.WarnLevel)
	l, err := partition.Open(partitionDir(0), partition.Options{FS: d, SegmentMaxBytes: 2 << 10, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seg := filepath.Join(partitionDir(0), segmentName(bases[1]))
	pos, offset := secondFrame(t, d, seg)
	contents, err := d.Contents(seg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := wire.CheckFrame(contents[pos:])
	if err != nil {
		t.Fatal(err)
	}
	byteEnd := pos + h.FrameLen()                       // where valid frames resume
	if _, err := l.Read(offset, 1, 1<<20); err != nil { // caches the frame
		t.Fatal(err)
	}
	flip(t, d, seg, pos+30)
	if _, err := l.Read(offset, 1, 1<<20); err != nil {
		t.Fatalf("the cached frame before the scrub: %v", err) // what the scrub must change
	}

	node := &fakeNode{fs: d, logs: map[int]*partition.Log{0: l}}
	s, _ := newScrubber(d, node, 1<<30)
	s.Pass(bg, nil, nil)
	if n := testutil.ToFloat64(s.metrics.damaged); n != 1 {
		t.Fatalf("damaged frames found: %v, want 1", n)
	}
	if _, err := l.Read(offset, 1, 1<<20); !isUnreadable(err) {
		t.Fatalf("read of offset %d after the scrub: %v, want ErrUnreadable", offset, err)
	}
	if l.Closed() {
		t.Fatal("the scrub closed the open log")
	}
	warned := logLogs.FilterMessageSnippet("scrub found a damaged frame").All()
	if len(warned) != 1 {
		t.Fatalf("the log warned %d times, want 1: %v", len(warned), logLogs.All())
	}
	if f := warned[0].ContextMap(); f["segment"] != segmentName(bases[1]) || f["byte"] != pos || f["byte_end"] != byteEnd {
		t.Fatalf("the log's warning %v: want segment %s, bytes %d to %d", f, segmentName(bases[1]), pos, byteEnd)
	}
	if _, err := l.Read(offset+4, 1, 1<<20); err != nil {
		t.Fatalf("the next frame: %v", err)
	}
}

// TestResumesAfterRestart: a pass stopped after its first segment's
// progress is written resumes, in a new scrubber, at the second segment:
// the first is not read again until the next pass.
func TestResumesAfterRestart(t *testing.T) {
	d := sim.NewDisk(3)
	bases := seed(t, d, 0, 400)
	ctx, cancel := context.WithCancel(bg)
	node := &fakeNode{fs: d, onSave: func(n int) {
		if n == 2 { // the second segment's save: the first's is written
			cancel()
		}
	}}
	s, _ := newScrubber(d, node, 1<<30)
	s.Pass(ctx, nil, nil)
	cancel()
	prog, ok := readProgress(t, d, 0)
	if !ok || prog.Next != bases[2] || prog.CompletedUnixMs != 0 {
		t.Fatalf("progress after a stopped pass: %+v %v, want next %d", prog, ok, bases[2])
	}

	reads := countReads(d)
	s2, _ := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s2.Pass(bg, nil, nil)
	for i, b := range bases[:len(bases)-1] {
		n := reads.of(filepath.Join(partitionDir(0), segmentName(b)))
		if i < 2 && n != 0 {
			t.Fatalf("segment %d read again after the restart: %d bytes", i, n)
		}
		if i >= 2 && n == 0 {
			t.Fatalf("segment %d not read after the restart", i)
		}
	}
	if prog, ok := readProgress(t, d, 0); !ok || prog.CompletedUnixMs == 0 || prog.Next != 0 {
		t.Fatalf("progress after the resumed pass: %+v", prog)
	}
}

// TestScrubsAcrossRestarts: a node restarted every 30 minutes (a
// deploy, a crash loop) must still scrub: each start resumes from the
// progress file: the loop's first pass runs at its start, not an
// Interval (an hour) after it.
func TestScrubsAcrossRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(33)
		seed(t, d, 0, 400)
		for range 4 {
			loop := Start(Config{FS: d, TopicsDir: topicsDir, Node: &fakeNode{fs: d}, Rate: 1 << 20})
			time.Sleep(30 * time.Minute)
			synctest.Wait()
			if err := loop.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := readProgress(t, d, 0); !ok {
			t.Fatal("two hours of a node restarted every 30 minutes scrubbed nothing")
		}
	})
}

// TestRecentPartitionLeftWithItsSeries: a pass less than an Interval after
// a partition's last whole pass (a restart's) reads none of it and writes
// no progress, but keeps its series: progress 1, the completion it had.
// Once it is due it is read again.
func TestRecentPartitionLeftWithItsSeries(t *testing.T) {
	d := sim.NewDisk(37)
	bases := seed(t, d, 0, 400)
	s, _ := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s.Pass(bg, nil, nil)
	before, ok := readProgress(t, d, 0)
	if !ok || before.CompletedUnixMs == 0 {
		t.Fatalf("progress after a whole pass: %+v %v", before, ok)
	}

	s2, _ := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	reads := countReads(d)
	s2.Pass(bg, nil, nil)
	d.SetHook(nil)
	for _, b := range bases {
		if n := reads.of(filepath.Join(partitionDir(0), segmentName(b))); n != 0 {
			t.Fatalf("segment %d read %d bytes less than an Interval after the last whole pass", b, n)
		}
	}
	if after, _ := readProgress(t, d, 0); after != before {
		t.Fatalf("progress %+v rewritten to %+v", before, after)
	}
	if got := testutil.ToFloat64(s2.metrics.progress.WithLabelValues("orders", "0")); got != 1 {
		t.Fatalf("progress gauge %v, want 1", got)
	}
	if got := testutil.ToFloat64(s2.metrics.done.WithLabelValues("orders", "0")); got != float64(before.CompletedUnixMs)/1000 {
		t.Fatalf("completion gauge %v, want %v", got, float64(before.CompletedUnixMs)/1000)
	}

	s2.cfg.Interval = time.Nanosecond // due
	reads = countReads(d)
	s2.Pass(bg, nil, nil)
	d.SetHook(nil)
	if n := reads.of(filepath.Join(partitionDir(0), segmentName(bases[0]))); n == 0 {
		t.Fatal("the partition, due, was not read")
	}
}

// TestFailedRollsFileIsNoDamage: a roll whose directory sync fails creates
// the next segment's file and removes it; a listing made in between takes
// the open log's active segment for sealed, and its walk for a segment
// ending short of its successor. The open log does not hold it sealed, so
// nothing is reported.
func TestFailedRollsFileIsNoDamage(t *testing.T) {
	d := sim.NewDisk(42)
	seed(t, d, 0, 400)
	l, err := partition.Open(partitionDir(0), partition.Options{FS: d, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ghost := filepath.Join(partitionDir(0), segmentName(l.HighWatermark()+1000))
	f, err := d.OpenFile(ghost, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, logs := newScrubber(d, &fakeNode{fs: d, logs: map[int]*partition.Log{0: l}}, 1<<30)
	s.Pass(bg, nil, nil)
	if err := d.Remove(ghost); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(s.metrics.damaged); n != 0 || logs.Len() != 0 {
		t.Fatalf("damaged frames %v, warnings %v: the active segment reported as a sealed one", n, logs.All())
	}
}
