package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// testPartition is a partition directory the real engine wrote.
type testPartition struct {
	dir      string
	segments []string // segment file paths, by base offset
	records  int64
	frames   int64
}

func (tp testPartition) active() string { return tp.segments[len(tp.segments)-1] }

// buildPartition writes batches Produce calls of perBatch records each (one
// frame per call) into dataDir/topics/topic/pNNNNN with 4 KiB segments, and
// closes the log (which writes the hwm file).
func buildPartition(t *testing.T, dataDir, topic string, p, batches, perBatch int) testPartition {
	t.Helper()
	dirName, err := wire.PartitionDirName(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, wire.TopicsDirName, topic, dirName)
	return buildLog(t, dir, batches, func(offset int64) []partition.Record {
		records := make([]partition.Record, perBatch)
		for i := range records {
			o := offset + int64(i)
			records[i] = partition.Record{
				Key:   fmt.Appendf(nil, "key-%d", o),
				Value: fmt.Appendf(nil, "value-%d-%s", o, strings.Repeat("v", 90)),
			}
		}
		return records
	})
}

// buildLog produces batches batches, each batch(next offset), into the log
// at dir.
func buildLog(t *testing.T, dir string, batches int, batch func(offset int64) []partition.Record) testPartition {
	t.Helper()
	return buildLogWith(t, dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 4 << 10}, batches, batch)
}

func buildLogWith(t *testing.T, dir string, opts partition.Options, batches int, batch func(offset int64) []partition.Record) testPartition {
	t.Helper()
	l, err := partition.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	tp := testPartition{dir: dir}
	for range batches {
		records := batch(tp.records)
		base, err := l.Produce(context.Background(), records)
		if err != nil {
			t.Fatal(err)
		}
		if base != tp.records {
			t.Fatalf("produce: base %d, want %d", base, tp.records)
		}
		tp.records += int64(len(records))
		tp.frames++
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := wire.ParseSegmentFileName(e.Name()); err == nil {
			tp.segments = append(tp.segments, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(tp.segments)
	return tp
}

// frameLoc is where a frame sits in a segment, found independently of the
// walker under test.
type frameLoc struct {
	pos int64
	h   wire.FrameHeader
}

// framesOf parses the frame headers of an undamaged segment one after
// another.
func framesOf(t *testing.T, path string) []frameLoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames []frameLoc
	for pos := int64(0); pos < int64(len(b)); {
		h, err := wire.CheckFrame(b[pos:])
		if err != nil {
			t.Fatalf("%s at byte %d: %v", path, pos, err)
		}
		frames = append(frames, frameLoc{pos, h})
		pos += h.FrameLen()
	}
	return frames
}

// flipBit flips one bit of the file at byte pos.
func flipBit(t *testing.T, path string, pos int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// exitStatus is what narad-storaged exits with after a tool returned ok
// (clean, or no problem) and err: 0 clean, 1 damage found, 2 no verdict.
func exitStatus(ok bool, err error) int {
	switch {
	case err != nil:
		return 2
	case !ok:
		return 1
	}
	return 0
}

// verifyJSON runs Verify in JSON and decodes its report.
func verifyJSON(t *testing.T, dataDir string) (int, verifyReport, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := exitStatus(Verify(&stdout, VerifyOptions{DataDir: dataDir, JSON: true, Messages: &stderr}))
	var report verifyReport
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("verify in JSON: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return code, report, stderr.String()
}

// verifyText runs Verify in text.
func verifyText(t *testing.T, dataDir string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := exitStatus(Verify(&stdout, VerifyOptions{DataDir: dataDir, Messages: &stderr}))
	return code, stdout.String(), stderr.String()
}

func findPartition(t *testing.T, r verifyReport, topic string, p int) partitionReport {
	t.Helper()
	for _, pr := range r.Partitions {
		if pr.Topic == topic && pr.Partition == p {
			return pr
		}
	}
	t.Fatalf("no report for %s/%d in %+v", topic, p, r.Partitions)
	return partitionReport{}
}

// onlyProblems checks that pr holds exactly the problems of the kinds
// given, in that order, and returns them.
func onlyProblems(t *testing.T, pr partitionReport, kinds ...string) []problem {
	t.Helper()
	var got []string
	for _, p := range pr.Problems {
		got = append(got, p.Kind)
	}
	if strings.Join(got, ",") != strings.Join(kinds, ",") {
		t.Fatalf("problems %v, want %v: %+v", got, kinds, pr.Problems)
	}
	return pr.Problems
}

func wantInt(t *testing.T, what string, got *int64, want int64) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: absent, want %d", what, want)
	}
	if *got != want {
		t.Fatalf("%s: %d, want %d", what, *got, want)
	}
}

// engineNextOffset opens the log with the real engine (which repairs what
// recovery repairs) and returns its high watermark: what verify called the
// next offset must be what an open recovers.
func engineNextOffset(t *testing.T, dir string) int64 {
	t.Helper()
	l, err := partition.Open(dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.HighWatermark()
}

func TestVerifyCleanDir(t *testing.T) {
	dataDir := t.TempDir()
	orders0 := buildPartition(t, dataDir, "orders", 0, 40, 3)
	orders1 := buildPartition(t, dataDir, "orders", 1, 5, 2)
	events0 := buildPartition(t, dataDir, "events", 0, 0, 1)
	if len(orders0.segments) < 3 {
		t.Fatalf("want several segments, got %d", len(orders0.segments))
	}

	code, report, _ := verifyJSON(t, dataDir)
	if code != 0 || !report.Clean {
		t.Fatalf("exit %d, clean %v: %+v", code, report.Clean, report)
	}
	for _, c := range []struct {
		topic string
		p     int
		tp    testPartition
	}{{"orders", 0, orders0}, {"orders", 1, orders1}, {"events", 0, events0}} {
		pr := findPartition(t, report, c.topic, c.p)
		onlyProblems(t, pr)
		if !pr.Clean || pr.Segments != len(c.tp.segments) || pr.Frames != c.tp.frames || pr.Records != c.tp.records || pr.NextOffset != c.tp.records {
			t.Errorf("%s/%d: %+v, want %d segments, %d frames, %d records", c.topic, c.p, pr, len(c.tp.segments), c.tp.frames, c.tp.records)
		}
		if pr.HWM.State != "value" {
			t.Errorf("%s/%d: hwm %+v", c.topic, c.p, pr.HWM)
		}
		wantInt(t, "hwm", pr.HWM.Value, c.tp.records)
		if c.tp.records == 0 {
			if pr.FirstOffset != nil || pr.LastOffset != nil {
				t.Errorf("%s/%d: offsets %v..%v for an empty log", c.topic, c.p, pr.FirstOffset, pr.LastOffset)
			}
			continue
		}
		wantInt(t, "first offset", pr.FirstOffset, 0)
		wantInt(t, "last offset", pr.LastOffset, c.tp.records-1)
	}
	if report.Totals.Partitions != 3 || report.Totals.Records != 40*3+5*2 || report.Totals.DamagedPartitions != 0 {
		t.Errorf("totals %+v", report.Totals)
	}

	code, stdout, _ := verifyText(t, dataDir)
	if code != 0 {
		t.Fatalf("text: exit %d\n%s", code, stdout)
	}
	for _, want := range []string{
		"events/p00000: ok, 1 segments, 0 B, 0 frames, 0 records, no records, next 0, hwm 0\n",
		fmt.Sprintf("orders/p00000: ok, %d segments, ", len(orders0.segments)),
		", 40 frames, 120 records, offsets 0..119, next 120, hwm 120\n",
		"orders/p00001: ok, 1 segments, ",
		": 3 partitions, ",
		"130 records: clean\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestVerifyTornTail(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
	frames := framesOf(t, tp.active())
	last := frames[len(frames)-1]
	truncate(t, tp.active(), last.pos+last.h.FrameLen()/2)

	code, report, _ := verifyJSON(t, dataDir)
	if code != 1 || report.Clean {
		t.Fatalf("exit %d, clean %v", code, report.Clean)
	}
	pr := findPartition(t, report, "orders", 0)
	problems := onlyProblems(t, pr, problemTornTail, problemHWMPastTail)
	torn := problems[0]
	if torn.Segment != filepath.Base(tp.active()) || torn.Sealed {
		t.Errorf("torn tail in %q (sealed %v), want the active %s", torn.Segment, torn.Sealed, filepath.Base(tp.active()))
	}
	wantInt(t, "torn byte", torn.Byte, last.pos)
	wantInt(t, "torn from", torn.From, last.h.BaseOffset)
	wantInt(t, "hwm past tail from", problems[1].From, last.h.BaseOffset)
	wantInt(t, "hwm past tail to", problems[1].To, tp.records)
	if pr.Records != tp.records-int64(last.h.RecordCount) || pr.NextOffset != last.h.BaseOffset {
		t.Errorf("records %d next %d", pr.Records, pr.NextOffset)
	}

	code, stdout, _ := verifyText(t, dataDir)
	want := fmt.Sprintf("  torn tail: %s from byte %d to the end (%d bytes), after offset %d: ",
		filepath.Base(tp.active()), last.pos, last.h.FrameLen()/2, last.h.BaseOffset-1)
	if code != 1 || !strings.Contains(stdout, "orders/p00000: DAMAGED, ") || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, want the line %q in:\n%s", code, want, stdout)
	}
	if got := engineNextOffset(t, tp.dir); got != pr.NextOffset {
		t.Errorf("the engine recovers to %d, verify said %d", got, pr.NextOffset)
	}
}

func TestVerifyZeroFilledLastSector(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
	frames := framesOf(t, tp.active())
	fi, err := os.Stat(tp.active())
	if err != nil {
		t.Fatal(err)
	}
	// The file's size reached the disk, its last sector's data did not.
	sector := (fi.Size() - 1) / 512 * 512
	e2etest.WriteAt(t, tp.active(), sector, make([]byte, fi.Size()-sector))
	first := -1 // the first frame the zeros reach starts the torn tail
	for i, f := range frames {
		if f.pos+f.h.FrameLen() > sector {
			first = i
			break
		}
	}
	if first < 1 {
		t.Fatalf("the zeroed sector at %d reaches frame %d of %d: want a frame before it", sector, first, len(frames))
	}

	code, report, _ := verifyJSON(t, dataDir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	pr := findPartition(t, report, "orders", 0)
	torn := onlyProblems(t, pr, problemTornTail, problemHWMPastTail)[0]
	wantInt(t, "torn byte", torn.Byte, frames[first].pos)
	wantInt(t, "torn from", torn.From, frames[first].h.BaseOffset)
	wantInt(t, "torn bytes", torn.Bytes, fi.Size()-frames[first].pos)
	if pr.NextOffset != frames[first].h.BaseOffset {
		t.Errorf("next offset %d, want %d", pr.NextOffset, frames[first].h.BaseOffset)
	}
	if got := engineNextOffset(t, tp.dir); got != pr.NextOffset {
		t.Errorf("the engine recovers to %d, verify said %d", got, pr.NextOffset)
	}
}

func TestVerifyBitFlipInMiddleFrameOfActiveSegment(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
	frames := framesOf(t, tp.active())
	if len(frames) < 3 {
		t.Fatalf("the active segment holds %d frames, want at least 3", len(frames))
	}
	mid := frames[len(frames)/2]
	flipBit(t, tp.active(), mid.pos+wire.FrameHeaderSize+5)

	code, report, _ := verifyJSON(t, dataDir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	pr := findPartition(t, report, "orders", 0)
	gap := onlyProblems(t, pr, problemGap)[0]
	if gap.Segment != filepath.Base(tp.active()) || gap.Sealed {
		t.Errorf("gap in %q (sealed %v)", gap.Segment, gap.Sealed)
	}
	wantInt(t, "gap from", gap.From, mid.h.BaseOffset)
	wantInt(t, "gap to", gap.To, mid.h.EndOffset())
	wantInt(t, "gap byte", gap.Byte, mid.pos)
	wantInt(t, "gap resume byte", gap.ResumeByte, mid.pos+mid.h.FrameLen())
	if pr.Records != tp.records-int64(mid.h.RecordCount) || pr.Frames != tp.frames-1 || pr.NextOffset != tp.records {
		t.Errorf("frames %d records %d next %d", pr.Frames, pr.Records, pr.NextOffset)
	}

	code, stdout, _ := verifyText(t, dataDir)
	want := fmt.Sprintf("  gap: offsets %d..%d (%d) lost in %s: damage at byte %d, frames resume at byte %d: ",
		mid.h.BaseOffset, mid.h.EndOffset()-1, mid.h.RecordCount, filepath.Base(tp.active()), mid.pos, mid.pos+mid.h.FrameLen())
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, want the line %q in:\n%s", code, want, stdout)
	}
	if got := engineNextOffset(t, tp.dir); got != pr.NextOffset {
		t.Errorf("the engine recovers to %d, verify said %d", got, pr.NextOffset)
	}
}

func TestVerifyBitFlipInSealedSegment(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
	sealed := tp.segments[0]
	frames := framesOf(t, sealed)
	mid := frames[len(frames)/2]
	flipBit(t, sealed, mid.pos+mid.h.FrameLen()-1) // the payload's last byte

	code, report, _ := verifyJSON(t, dataDir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	pr := findPartition(t, report, "orders", 0)
	gap := onlyProblems(t, pr, problemGap)[0]
	if gap.Segment != filepath.Base(sealed) || !gap.Sealed {
		t.Errorf("gap in %q (sealed %v), want the sealed %s", gap.Segment, gap.Sealed, filepath.Base(sealed))
	}
	wantInt(t, "gap from", gap.From, mid.h.BaseOffset)
	wantInt(t, "gap to", gap.To, mid.h.EndOffset())
	wantInt(t, "gap byte", gap.Byte, mid.pos)
	if pr.NextOffset != tp.records || pr.Records != tp.records-int64(mid.h.RecordCount) {
		t.Errorf("next %d records %d", pr.NextOffset, pr.Records)
	}
}

func TestVerifySealedSegmentEndingEarly(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
	sealed := tp.segments[0]
	frames := framesOf(t, sealed)
	last := frames[len(frames)-1]
	truncate(t, sealed, last.pos) // a whole frame gone: no damage left to see

	code, report, _ := verifyJSON(t, dataDir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	missing := onlyProblems(t, findPartition(t, report, "orders", 0), problemMissingOffsets)[0]
	if missing.Segment != filepath.Base(sealed) {
		t.Errorf("missing offsets in %q", missing.Segment)
	}
	wantInt(t, "missing from", missing.From, last.h.BaseOffset)
	wantInt(t, "missing to", missing.To, last.h.EndOffset())
}

func TestVerifyUndecodableFrame(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 10, 3)
	// A frame whose CRC passes, at the right offset, but whose record is
	// not an envelope (version 0x07).
	payload, err := wire.AppendRecordFrame(nil, []byte{0x07, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	if err != nil {
		t.Fatal(err)
	}
	frame, err := wire.AppendFrame(nil, wire.CodecNone, tp.records, 1, len(payload), payload)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(tp.active())
	if err != nil {
		t.Fatal(err)
	}
	e2etest.WriteAt(t, tp.active(), fi.Size(), frame)

	code, report, _ := verifyJSON(t, dataDir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	pr := findPartition(t, report, "orders", 0)
	bad := onlyProblems(t, pr, problemUndecodable)[0]
	wantInt(t, "undecodable from", bad.From, tp.records)
	wantInt(t, "undecodable to", bad.To, tp.records+1)
	wantInt(t, "undecodable byte", bad.Byte, fi.Size())
	if pr.Frames != tp.frames+1 || pr.Records != tp.records || pr.NextOffset != tp.records+1 {
		t.Errorf("frames %d records %d next %d", pr.Frames, pr.Records, pr.NextOffset)
	}
}

func TestVerifyZstdFrames(t *testing.T) {
	dataDir := t.TempDir()
	zstd, err := codec.ByName("zstd")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, wire.TopicsDirName, "orders", "p00000")
	tp := buildLogWith(t, dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 4 << 10, Codec: zstd}, 30, func(offset int64) []partition.Record {
		return []partition.Record{{Key: fmt.Appendf(nil, "k%d", offset), Value: bytes.Repeat([]byte("compressible "), 40)}}
	})
	if h := framesOf(t, tp.active())[0].h; h.Codec != wire.CodecZstd {
		t.Fatalf("codec %d", h.Codec)
	}
	code, report, _ := verifyJSON(t, dataDir)
	pr := findPartition(t, report, "orders", 0)
	if code != 0 || pr.Records != tp.records || pr.Frames != tp.frames {
		t.Fatalf("exit %d: %+v", code, pr)
	}
	code, stdout, _ := inspectRun(t, InspectOptions{Segment: tp.active(), Records: true, MaxBytes: defaultMaxBytes})
	if code != 0 || !strings.Contains(stdout, " codec: zstd ") || !strings.Contains(stdout, `value: "compressible compressible `) {
		t.Errorf("inspect: exit %d:\n%s", code, stdout)
	}
}

func TestVerifyHWMFileStates(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(path string)
		state  string
		code   int
	}{
		{"empty", func(path string) { truncate(t, path, 0) }, "empty", 0},
		{"missing", func(path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "missing", 0},
		{"three bytes", func(path string) { truncate(t, path, 3) }, "damaged", 1},
		{"past the tail", func(path string) {
			b, _ := wire.EncodeOffsetFile(1000)
			e2etest.WriteAt(t, path, 0, b[:])
		}, "value", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dataDir := t.TempDir()
			tp := buildPartition(t, dataDir, "orders", 0, 3, 2)
			c.damage(filepath.Join(tp.dir, wire.HWMFileName))
			code, report, _ := verifyJSON(t, dataDir)
			pr := findPartition(t, report, "orders", 0)
			if code != c.code || pr.HWM.State != c.state {
				t.Errorf("exit %d, hwm %+v, want exit %d and state %q: %+v", code, pr.HWM, c.code, c.state, pr.Problems)
			}
		})
	}
}

// TestVerifyHugeFrameHeader damages frame headers so that they claim huge
// frames: verify reports the damage without allocating what they claim.
func TestVerifyHugeFrameHeader(t *testing.T) {
	setSizes := func(t *testing.T, path string, f frameLoc, size uint32) {
		be := []byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
		e2etest.WriteAt(t, path, f.pos+15, append(be, be...)) // uncompressed, then stored
	}
	for _, c := range []struct {
		name   string
		size   uint32
		middle bool // a middle frame, or the last one
		gap    bool // a gap, or a torn tail
	}{
		// An impossible header: the walk resyncs byte by byte and finds
		// the next frame.
		{"2GiB in a middle frame", 2 << 30, true, true},
		{"2GiB in the last frame", 2 << 30, false, false},
		// A plausible header (both sizes agree, within MaxFrameBytes) that
		// claims bytes past the end: a torn tail outright, as the engine
		// decides it, even with valid frames after it.
		{"200MiB in the last frame", 200 << 20, false, false},
		{"200MiB in a middle frame", 200 << 20, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dataDir := t.TempDir()
			tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
			frames := framesOf(t, tp.active())
			i := len(frames) - 1
			if c.middle {
				i = len(frames) / 2
			}
			setSizes(t, tp.active(), frames[i], c.size)

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			code, report, _ := verifyJSON(t, dataDir)
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew >= 64<<20 {
				t.Errorf("verify allocated %d bytes", grew)
			}
			if code != 1 {
				t.Fatalf("exit %d", code)
			}
			pr := findPartition(t, report, "orders", 0)
			if c.gap {
				gap := onlyProblems(t, pr, problemGap)[0]
				wantInt(t, "gap byte", gap.Byte, frames[i].pos)
				wantInt(t, "gap from", gap.From, frames[i].h.BaseOffset)
				wantInt(t, "gap to", gap.To, frames[i+1].h.BaseOffset)
				wantInt(t, "gap resume byte", gap.ResumeByte, frames[i+1].pos)
			} else {
				torn := onlyProblems(t, pr, problemTornTail, problemHWMPastTail)[0]
				wantInt(t, "torn byte", torn.Byte, frames[i].pos)
				wantInt(t, "torn from", torn.From, frames[i].h.BaseOffset)
			}
			if got := engineNextOffset(t, tp.dir); got != pr.NextOffset {
				t.Errorf("the engine recovers to %d, verify said %d", got, pr.NextOffset)
			}
		})
	}
}

func TestVerifyQuarantinedDirIsNotChecked(t *testing.T) {
	dataDir := t.TempDir()
	buildPartition(t, dataDir, "orders", 0, 3, 2)
	stale := "orders.stale-3f9a1c0e7b2d4a61"
	old := buildPartition(t, dataDir, stale, 0, 3, 2)
	truncate(t, old.active(), 10) // damage nobody will be served
	if err := os.WriteFile(filepath.Join(dataDir, wire.TopicsDirName, "README"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	code, stdout, _ := verifyText(t, dataDir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{stale + ": quarantined, not checked\n", "README: not a topic directory, skipped\n", ": 1 partitions, "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	code, report, _ := verifyJSON(t, dataDir)
	if code != 0 || len(report.Partitions) != 1 || strings.Join(report.Quarantined, ",") != stale {
		t.Errorf("exit %d, partitions %d, quarantined %v", code, len(report.Partitions), report.Quarantined)
	}
}

// TestVerifySetAsideCopiesAreListedNotChecked: the copies a cluster's
// node set aside under lost/ are never served: verify lists each on a
// line, checks none (damage in one is not the data directory's), and
// stays clean.
func TestVerifySetAsideCopiesAreListedNotChecked(t *testing.T) {
	dataDir := t.TempDir()
	buildPartition(t, dataDir, "orders", 0, 3, 2)
	copyDir := filepath.Join(wire.LostDirName, "orders.3f9a1c0e7b2d4a61", "p00001.1767225600000")
	set := buildLog(t, filepath.Join(dataDir, copyDir), 3, func(offset int64) []partition.Record {
		return []partition.Record{{Value: fmt.Appendf(nil, "value-%d", offset)}}
	})
	truncate(t, set.active(), 10) // damage in a copy nobody is served

	code, stdout, _ := verifyText(t, dataDir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{copyDir + ": set aside (", ": 1 partitions, ", ": clean\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	code, report, _ := verifyJSON(t, dataDir)
	if code != 0 || !report.Clean || len(report.Partitions) != 1 || strings.Join(report.SetAside, ",") != copyDir || report.SetAsideUnreadable != "" {
		t.Errorf("exit %d, clean %v, partitions %d, set aside %v (%q)", code, report.Clean, len(report.Partitions), report.SetAside, report.SetAsideUnreadable)
	}
}

func TestVerifyProgressLines(t *testing.T) {
	dataDir := t.TempDir()
	tp := buildPartition(t, dataDir, "orders", 0, 40, 3)
	n := len(tp.segments)
	var progress bytes.Buffer
	v := verifier{files: vfs.OS{}, progress: &progress, progressEvery: 2}
	report, err := v.run(dataDir)
	if err != nil || !report.Clean {
		t.Fatalf("err %v, report %+v", err, report)
	}
	lines := strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n")
	if len(lines) != n/2 {
		t.Fatalf("%d progress lines for %d segments, every 2:\n%s", len(lines), n, progress.String())
	}
	line := regexp.MustCompile(fmt.Sprintf(`^verify: \d+/%d segments, [0-9.]+ (B|KiB|MiB)$`, n))
	for i, l := range lines {
		if !line.MatchString(l) || !strings.HasPrefix(l, fmt.Sprintf("verify: %d/", 2*(i+1))) {
			t.Errorf("progress line %q", l)
		}
	}
}

func TestVerifyHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3_328_599_654: "3.1 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
