package tool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/wire"
)

// defaultMaxBytes is narad-storaged inspect's --max-bytes default.
const defaultMaxBytes = 200

// inspectRun runs Inspect in text, or in JSON with opts.JSON.
func inspectRun(t *testing.T, opts InspectOptions) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	opts.Messages = &stderr
	problems, err := Inspect(&stdout, opts)
	return exitStatus(problems == 0, err), stdout.String(), stderr.String()
}

// inspectJSONLines runs Inspect in JSON and decodes every line.
func inspectJSONLines(t *testing.T, opts InspectOptions) (int, []inspectFrame) {
	t.Helper()
	opts.JSON = true
	code, stdout, stderr := inspectRun(t, opts)
	var frames []inspectFrame
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f inspectFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("line %q: %v\nstderr: %s", sc.Text(), err, stderr)
		}
		frames = append(frames, f)
	}
	return code, frames
}

// linesWithPrefix returns the lines of out that start with prefix.
func linesWithPrefix(out, prefix string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestInspectFrameHeaders(t *testing.T) {
	tp := buildPartition(t, t.TempDir(), "orders", 0, 40, 3)
	for _, path := range []string{tp.segments[0], tp.active()} {
		frames := framesOf(t, path)
		code, stdout, stderr := inspectRun(t, InspectOptions{Segment: path, MaxBytes: defaultMaxBytes})
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", path, code, stdout, stderr)
		}
		base, _ := wire.ParseSegmentFileName(filepath.Base(path))
		if want := fmt.Sprintf(", first base offset %d (from its name)\n", base); !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
		lines := linesWithPrefix(stdout, "position: ")
		if len(lines) != len(frames) {
			t.Fatalf("%d frame lines, want %d:\n%s", len(lines), len(frames), stdout)
		}
		for i, f := range frames {
			want := fmt.Sprintf("position: %d baseOffset: %d lastOffset: %d count: 3 codec: none uncompressed: %d stored: %d size: %d crc: 0x%08x ok",
				f.pos, f.h.BaseOffset, f.h.EndOffset()-1, f.h.UncompressedSize, f.h.StoredSize, f.h.FrameLen(), f.h.CRC)
			if lines[i] != want {
				t.Errorf("line %d: %q, want %q", i, lines[i], want)
			}
		}
		if len(linesWithPrefix(stdout, "| ")) != 0 {
			t.Error("records printed without Records")
		}
		last := frames[len(frames)-1].h
		want := fmt.Sprintf("summary: %d frames, %d records, offsets %d..%d, 0 problems\n", len(frames), 3*len(frames), base, last.EndOffset()-1)
		if !strings.HasSuffix(stdout, want) {
			t.Errorf("no summary %q in:\n%s", want, stdout)
		}
	}
}

// recordsLog writes one frame of records of every shape inspect renders.
func recordsLog(t *testing.T) testPartition {
	dir := filepath.Join(t.TempDir(), "p00000")
	return buildLog(t, dir, 1, func(int64) []partition.Record {
		return []partition.Record{
			{Key: []byte("user-1"), Value: []byte("hello")},
			{Value: []byte{0, 1, 2, 0xff}},
			{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 300)},
			{Key: []byte("schlüssel"), Value: []byte("line1\nline2")},
		}
	})
}

func TestInspectRecords(t *testing.T) {
	tp := recordsLog(t)
	code, stdout, _ := inspectRun(t, InspectOptions{Segment: tp.active(), Records: true, MaxBytes: defaultMaxBytes})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	records := linesWithPrefix(stdout, "| ")
	if len(records) != 4 {
		t.Fatalf("%d record lines, want 4:\n%s", len(records), stdout)
	}
	time := `committedAt: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`
	for i, want := range []string{
		`^\| offset: 0 ` + time + ` keySize: 6 valueSize: 5 key: "user-1" value: "hello"$`,
		`^\| offset: 1 ` + time + ` keySize: 0 valueSize: 4 key: none value: base64:AAEC/w==$`,
		`^\| offset: 2 ` + time + ` keySize: 1 valueSize: 300 key: "k" value: "x{200}" \(\+100 bytes\)$`,
		`^\| offset: 3 ` + time + ` keySize: 10 valueSize: 11 key: "schlüssel" value: "line1\\nline2"$`,
	} {
		if !regexp.MustCompile(want).MatchString(records[i]) {
			t.Errorf("record line %q does not match %s", records[i], want)
		}
	}

	code, stdout, _ = inspectRun(t, InspectOptions{Segment: tp.active(), Records: true, MaxBytes: 0})
	if code != 0 || !strings.Contains(stdout, `value: "`+strings.Repeat("x", 300)+`"`) {
		t.Errorf("MaxBytes 0: exit %d, value not shown whole:\n%s", code, stdout)
	}
}

func TestInspectJSON(t *testing.T) {
	tp := buildPartition(t, t.TempDir(), "orders", 0, 40, 3)
	frames := framesOf(t, tp.segments[1])
	base, _ := wire.ParseSegmentFileName(filepath.Base(tp.segments[1]))
	code, lines := inspectJSONLines(t, InspectOptions{Segment: tp.segments[1], Records: true, MaxBytes: defaultMaxBytes})
	if code != 0 || len(lines) != len(frames) {
		t.Fatalf("exit %d, %d lines, want %d frames", code, len(lines), len(frames))
	}
	next := base
	for i, l := range lines {
		h := l.Header
		if l.Status != "ok" || !l.CRCOK || h == nil || l.Position != frames[i].pos || h.BaseOffset != next ||
			h.RecordCount != 3 || h.Codec != "none" || h.FrameBytes != frames[i].h.FrameLen() || h.CRC != fmt.Sprintf("0x%08x", frames[i].h.CRC) {
			t.Fatalf("line %d: %+v %+v, frame %+v", i, l, h, frames[i])
		}
		for _, r := range l.Records {
			wantValue := fmt.Sprintf("value-%d-%s", next, strings.Repeat("v", 90))
			if r.Offset != next || r.Key == nil || r.Key.Data != fmt.Sprintf("key-%d", next) || r.Key.Encoding != "text" ||
				r.Value.Data != wantValue || r.Value.Size != len(wantValue) || r.CommittedAtUnixMs <= 0 {
				t.Fatalf("record %+v at offset %d", r, next)
			}
			next++
		}
	}
	if next != frames[len(frames)-1].h.EndOffset() {
		t.Errorf("records end at %d", next)
	}

	// Without Records no record is nested.
	_, lines = inspectJSONLines(t, InspectOptions{Segment: tp.segments[1], MaxBytes: defaultMaxBytes})
	for _, l := range lines {
		if l.Records != nil {
			t.Fatalf("records without Records: %+v", l)
		}
	}
}

func TestInspectDamage(t *testing.T) {
	tp := buildPartition(t, t.TempDir(), "orders", 0, 40, 3)
	path := tp.active()
	frames := framesOf(t, path)
	mid := frames[len(frames)/2]
	last := frames[len(frames)-1]
	flipBit(t, path, mid.pos+wire.FrameHeaderSize+2)
	truncate(t, path, last.pos+last.h.FrameLen()-1)

	code, stdout, _ := inspectRun(t, InspectOptions{Segment: path, MaxBytes: defaultMaxBytes})
	if code != 1 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{
		fmt.Sprintf("position: %d baseOffset: %d lastOffset: %d count: 3 codec: none uncompressed: %d stored: %d size: %d crc: 0x%08x BAD\n",
			mid.pos, mid.h.BaseOffset, mid.h.EndOffset()-1, mid.h.UncompressedSize, mid.h.StoredSize, mid.h.FrameLen(), mid.h.CRC),
		fmt.Sprintf("  problem: damaged frame: offsets %s lost, frames resume at position %d: wire: corrupt: ",
			offsetRange(mid.h.BaseOffset, mid.h.EndOffset()), mid.pos+mid.h.FrameLen()),
		fmt.Sprintf("position: %d baseOffset: %d ", last.pos, last.h.BaseOffset),
		fmt.Sprintf("  problem: torn tail: %d bytes from position %d to the end of the file, where offset %d was expected: wire: truncated: ",
			last.h.FrameLen()-1, last.pos, last.h.BaseOffset),
		"2 problems\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	code, lines := inspectJSONLines(t, InspectOptions{Segment: path, MaxBytes: defaultMaxBytes})
	if code != 1 || len(lines) != len(frames) {
		t.Fatalf("exit %d, %d lines, want %d", code, len(lines), len(frames))
	}
	for i, l := range lines {
		want := "ok"
		switch frames[i] {
		case mid:
			want = "damaged"
			if l.Gap == nil || l.Gap.From == nil || *l.Gap.From != mid.h.BaseOffset || l.Gap.To != mid.h.EndOffset() || l.CRCOK {
				t.Errorf("damaged frame line %+v", l)
			}
		case last:
			want = "torn_tail"
			if l.TornBytes == nil || *l.TornBytes != last.h.FrameLen()-1 || l.Gap != nil {
				t.Errorf("torn tail line %+v", l)
			}
		}
		if l.Status != want || l.Position != frames[i].pos {
			t.Errorf("line %d: status %q at %d, want %q at %d", i, l.Status, l.Position, want, frames[i].pos)
		}
	}
}

func TestInspectNonSegmentName(t *testing.T) {
	tp := buildPartition(t, t.TempDir(), "orders", 0, 40, 3)
	frames := framesOf(t, tp.segments[1])
	b, err := os.ReadFile(tp.segments[1])
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.bin")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := inspectRun(t, InspectOptions{Segment: copyPath, MaxBytes: defaultMaxBytes})
	if code != 0 || !strings.Contains(stdout, "copy.bin is not a segment file name") || len(linesWithPrefix(stdout, "position: ")) != len(frames) {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := inspectRun(t, InspectOptions{Segment: copyPath, JSON: true, MaxBytes: defaultMaxBytes}); code != 0 || !strings.Contains(stderr, "not a segment file name") {
		t.Errorf("JSON: exit %d, stderr %q", code, stderr)
	}
}

func TestInspectMisplacedBaseOffset(t *testing.T) {
	tp := buildPartition(t, t.TempDir(), "orders", 0, 40, 3)
	frames := framesOf(t, tp.segments[0])
	b, err := os.ReadFile(tp.segments[0])
	if err != nil {
		t.Fatal(err)
	}
	// The frames of segment 0 under the name of a segment starting at 4:
	// the first frame (offsets 0..2) is out of place, and so is the second
	// (3..5): the sequence resumes at the first frame past offset 4.
	misnamed := filepath.Join(t.TempDir(), "00000000000000000004.log")
	if err := os.WriteFile(misnamed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, lines := inspectJSONLines(t, InspectOptions{Segment: misnamed, MaxBytes: defaultMaxBytes})
	if code != 1 || len(lines) != len(frames)-1 {
		t.Fatalf("exit %d, %d lines for %d frames: %+v", code, len(lines), len(frames), lines)
	}
	first := lines[0]
	if first.Status != "misplaced" || !first.CRCOK || first.Position != 0 || first.Gap == nil || first.Gap.To != frames[2].h.BaseOffset {
		t.Fatalf("first line %+v", first)
	}
	wantInt(t, "gap from", first.Gap.From, 4)
	wantInt(t, "resume at", first.ResumeAt, frames[2].pos)
	wantInt(t, "expected offset", first.Expected, 4)
	code, stdout, _ := inspectRun(t, InspectOptions{Segment: misnamed, MaxBytes: defaultMaxBytes})
	want := fmt.Sprintf("  problem: misplaced frame: offsets %s lost, frames resume at position %d: valid frame with base offset 0 where offset 4 was expected\n",
		offsetRange(4, frames[2].h.BaseOffset), frames[2].pos)
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, want %q in:\n%s", code, want, stdout)
	}
}

func TestInspectShowBlob(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		max  int
		want string
	}{
		{[]byte("plain"), 200, `"plain"`},
		{[]byte{0xff, 0xfe}, 200, "base64://4="},
		{[]byte("ééé"), 3, `"é" (+4 bytes)`}, // never cut inside a character
		{[]byte("abcdef"), 4, `"abcd" (+2 bytes)`},
		{[]byte{1, 2, 3, 4, 5}, 2, "base64:AQI= (+3 bytes)"},
		{[]byte("tab\there"), 0, `"tab\there"`},
	} {
		if got := showBlob(c.in, c.max).text(); got != c.want {
			t.Errorf("showBlob(%q, %d) = %s, want %s", c.in, c.max, got, c.want)
		}
	}
}

// TestInspectNegativeMaxBytes: a negative MaxBytes is an error, before
// anything is read or written.
func TestInspectNegativeMaxBytes(t *testing.T) {
	var out bytes.Buffer
	if _, err := Inspect(&out, InspectOptions{Segment: "absent.log", MaxBytes: -1}); err == nil || out.Len() != 0 {
		t.Errorf("err %v, wrote %q", err, out.String())
	}
}
