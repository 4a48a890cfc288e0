package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/tool"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// seedPartition creates topic orders (one partition) through a node,
// stops it, and fills its partition directory through the engine with
// small segments, so the tests have sealed segments and a multi-frame
// active one to damage. Each record's value is "v<offset>".
func seedPartition(t *testing.T, records int) (dataDir string, segments []string) {
	t.Helper()
	dataDir = t.TempDir()
	d := startNode(t, dataDir)
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	d.stop()
	dir := filepath.Join(dataDir, "topics", "orders", "p00000")
	l, err := partition.Open(dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < records; i += 4 {
		var batch []partition.Record
		for j := i; j < i+4 && j < records; j++ {
			batch = append(batch, partition.Record{Value: []byte(fmt.Sprint("v", j))})
		}
		if _, err := l.Produce(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			segments = append(segments, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(segments)
	if len(segments) < 3 {
		t.Fatalf("only %d segments", len(segments))
	}
	return dataDir, segments
}

// segmentFrames lists the frame positions and base offsets of a segment file.
func segmentFrames(t *testing.T, path string) (pos []int64, base []int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(0); p < int64(len(b)); {
		h, err := wire.CheckFrame(b[p:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, p, err)
		}
		pos, base = append(pos, p), append(base, h.BaseOffset)
		p += h.FrameLen()
	}
	return pos, base
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, at)
	b[0] ^= 0x40
	f.WriteAt(b, at)
}

// verifyExit is the exit status of `narad-storaged verify --data-dir
// dataDir` (0 clean, 1 damage found, 2 unreadable) and what it printed.
func verifyExit(dataDir string) (int, string) {
	var out, errb bytes.Buffer
	clean, err := tool.Verify(&out, tool.VerifyOptions{DataDir: dataDir, Messages: &errb})
	switch {
	case err != nil:
		return 2, out.String() + errb.String() + err.Error()
	case !clean:
		return 1, out.String()
	}
	return 0, out.String()
}

// TestE2E_DamagedSegments: torn and corrupted segment files give the
// design's behaviour over HTTP and in verify: a torn tail (and a zero-filled
// last sector) is cut and the rest served; a bit flip in a middle frame of
// the active segment, or in a sealed segment, is a gap read as 410
// record_unreadable with the offset after it, the records around it
// served; a header claiming a 2 GiB frame is never allocated or served.
func TestE2E_DamagedSegments(t *testing.T) {
	const records = 240
	cases := []struct {
		name      string
		damage    func(t *testing.T, segments []string)
		gapAt     int64 // an offset inside a gap, or -1
		gapNext   int64
		lostAfter int64 // the high watermark after recovery, when a tail is cut; -1: unchanged
	}{
		{"torn tail", func(t *testing.T, s []string) {
			active := s[len(s)-1]
			pos, _ := segmentFrames(t, active)
			os.Truncate(active, pos[len(pos)-1]+10)
		}, -1, 0, -2},
		{"zero-filled last sector", func(t *testing.T, s []string) {
			active := s[len(s)-1]
			fi, _ := os.Stat(active)
			pos, _ := segmentFrames(t, active)
			e2etest.WriteAt(t, active, pos[len(pos)-1], make([]byte, fi.Size()-pos[len(pos)-1]))
		}, -1, 0, -2},
		{"bit flip in a middle frame of the active segment", func(t *testing.T, s []string) {
			active := s[len(s)-1]
			pos, _ := segmentFrames(t, active)
			flipByte(t, active, pos[1]+wire.FrameHeaderSize+5)
		}, -3, 0, -1},
		{"bit flip in a sealed segment", func(t *testing.T, s []string) {
			pos, _ := segmentFrames(t, s[1])
			flipByte(t, s[1], pos[2]+wire.FrameHeaderSize+5)
		}, -4, 0, -1},
		{"a header claiming a 2 GiB frame", func(t *testing.T, s []string) {
			pos, _ := segmentFrames(t, s[0])
			var v [4]byte
			binary.BigEndian.PutUint32(v[:], 0x7FFFFFF0)
			e2etest.WriteAt(t, s[0], pos[1]+19, v[:])
		}, -5, 0, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dataDir, segments := seedPartition(t, records)
			// The offsets the damaged frame held, from the files before.
			var gapFrom, gapTo int64 = -1, -1
			switch c.gapAt {
			case -3:
				pos, base := segmentFrames(t, segments[len(segments)-1])
				_ = pos
				gapFrom, gapTo = base[1], base[2]
			case -4:
				_, base := segmentFrames(t, segments[1])
				gapFrom, gapTo = base[2], base[3]
			case -5:
				_, base := segmentFrames(t, segments[0])
				gapFrom, gapTo = base[1], base[2]
			}
			var tornFrom int64 = -1
			if c.lostAfter == -2 {
				_, base := segmentFrames(t, segments[len(segments)-1])
				tornFrom = base[len(base)-1]
			}
			c.damage(t, segments)
			if code, out := verifyExit(dataDir); code != 1 {
				t.Fatalf("verify of damaged data exited %d:\n%s", code, out)
			}
			d := startNode(t, dataDir)
			var f e2etest.Fetched
			r := d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0&max_records=10000", nil)
			e2etest.Expect(t, r, 200, "")
			r.JSON(t, &f)
			wantHWM := int64(records)
			if tornFrom >= 0 {
				wantHWM = tornFrom
			}
			if f.HighWatermark != wantHWM {
				t.Fatalf("high watermark %d, want %d", f.HighWatermark, wantHWM)
			}
			check := func(recs []struct {
				Offset        int64   `json:"offset"`
				Key           *string `json:"key"`
				Value         string  `json:"value"`
				CommittedAtMs int64   `json:"committed_at_ms"`
			}) {
				for _, rec := range recs {
					if rec.Value != fmt.Sprint("v", rec.Offset) {
						t.Fatalf("offset %d served %q", rec.Offset, rec.Value)
					}
				}
			}
			check(f.Records)
			if gapFrom >= 0 {
				if f.NextOffset != gapFrom {
					t.Fatalf("a fetch reaching the gap stopped at %d, want %d", f.NextOffset, gapFrom)
				}
				r = d.req("GET", fmt.Sprintf("/v1/topics/orders/partitions/0/records?offset=%d", gapFrom), nil)
				e2etest.Expect(t, r, 410, "record_unreadable")
				var e e2etest.ErrorBody
				r.JSON(t, &e)
				if e.NextOffset == nil || *e.NextOffset != gapTo {
					t.Fatalf("record_unreadable next_offset %v, want %d", e.NextOffset, gapTo)
				}
				if strings.Contains(e.Error.Message, dataDir) {
					t.Fatalf("the 410 message shows the server's path: %q", e.Error.Message)
				}
				if c.gapAt == -4 { // found by the read, not by recovery: logged once however often read
					for range 2 {
						e2etest.Expect(t, d.req("GET", fmt.Sprintf("/v1/topics/orders/partitions/0/records?offset=%d", gapFrom), nil), 410, "record_unreadable")
					}
					if n := strings.Count(d.log(), "read met a damaged frame"); n != 1 {
						t.Fatalf("the damaged frame was logged %d times over 3 reads, want once:\n%s", n, d.log())
					}
				}
				r = d.req("GET", fmt.Sprintf("/v1/topics/orders/partitions/0/records?offset=%d&max_records=10000", gapTo), nil)
				e2etest.Expect(t, r, 200, "")
				r.JSON(t, &f)
				check(f.Records)
				if f.NextOffset != records {
					t.Fatalf("after the gap the fetch ends at %d, want %d", f.NextOffset, records)
				}
			}
			// A commit after recovery lands at the boundary.
			var prod struct {
				BaseOffset int64 `json:"base_offset"`
			}
			d.req("POST", "/v1/topics/orders/partitions/0/records", fmt.Sprintf(`{"records":[{"value":"v%d"}]}`, wantHWM)).JSON(t, &prod)
			if prod.BaseOffset != wantHWM {
				t.Fatalf("produce after recovery at %d, want %d", prod.BaseOffset, wantHWM)
			}
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
			if tornFrom >= 0 {
				if code, out := verifyExit(dataDir); code != 0 {
					t.Fatalf("verify after the node cut the torn tail exited %d:\n%s", code, out)
				}
			}
		})
	}
}

// TestE2E_RecreatedTopicNeverServesTheOldIncarnation: a deleted and
// recreated topic starts empty, and serves none of the old incarnation's
// records even when the old directory reappears (restored from a backup,
// or a node that missed the purge).
func TestE2E_RecreatedTopicNeverServesTheOldIncarnation(t *testing.T) {
	dataDir := t.TempDir()
	d := startNode(t, dataDir)
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", `{"records":[{"value":"old-1"},{"value":"old-2"}]}`), 200, "")
	d.stop()
	backup := t.TempDir()
	if err := os.CopyFS(backup, os.DirFS(filepath.Join(dataDir, "topics", "orders"))); err != nil {
		t.Fatal(err)
	}
	d = startNode(t, dataDir)
	e2etest.Expect(t, d.req("DELETE", "/v1/topics/orders", nil), 204, "")
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	d.stop()
	// The old incarnation's directory comes back.
	os.RemoveAll(filepath.Join(dataDir, "topics", "orders"))
	if err := os.CopyFS(filepath.Join(dataDir, "topics", "orders"), os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	d = startNode(t, dataDir)
	defer d.stop()
	var f e2etest.Fetched
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0", nil).JSON(t, &f)
	if len(f.Records) != 0 || f.HighWatermark != 0 {
		t.Fatalf("the recreated topic serves the old incarnation: %+v", f)
	}
	if !strings.Contains(d.log(), "quarantined") {
		t.Fatal("the old directory was not quarantined")
	}
}
