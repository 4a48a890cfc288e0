package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestReadCursor_APeekLongPollCountsSkippedOnce: a peek (advance=false)
// long poll whose cursor sits on a damaged frame ending at the high
// watermark steps over it at each read; woken by a commit, it answers the
// record and the frame's records counted once, not once per read (found
// by review).
func TestReadCursor_APeekLongPollCountsSkippedOnce(t *testing.T) {
	ctx := context.Background()
	d := sim.NewDisk(1)
	if err := d.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	start := func() (*runtime.Node, runtime.Metastore) {
		ms, err := runtime.OpenLocalMetastore(d, "/data")
		if err != nil {
			t.Fatal(err)
		}
		node, err := runtime.New(runtime.Config{DataDir: "/data", FS: d, Metastore: ms, SegmentMaxBytes: 512})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return node, ms
	}
	node, _ := start()
	if _, _, err := node.CreateTopic(ctx, "jobs", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	dir := "/data/topics/jobs/p00000"
	segments := func() []string {
		entries, _ := d.ReadDir(dir)
		var out []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name, wire.SegmentFileSuffix) {
				out = append(out, filepath.Join(dir, e.Name))
			}
		}
		return out
	}
	// Commit until a roll leaves the active segment empty: the high
	// watermark is then the end of the last sealed segment.
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("no roll left an empty active segment")
		}
		if _, err := node.Produce(ctx, "jobs", 0, []partition.Record{{Value: []byte("vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv")}, {Value: []byte("w")}}); err != nil {
			t.Fatal(err)
		}
		segs := segments()
		if b, _ := d.Contents(segs[len(segs)-1]); len(segs) >= 2 && len(b) == 0 {
			break
		}
	}
	hwm, _ := node.HighWatermark(ctx, "jobs", 0)
	if _, err := node.CreateCursor(ctx, "jobs", "c", runtime.CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments()
	sealed := segs[len(segs)-2]
	b, _ := d.Contents(sealed)
	var lastPos, lastBase int64
	for pos := int64(0); pos < int64(len(b)); {
		h, err := wire.ParseFrameHeader(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		lastPos, lastBase = pos, h.BaseOffset
		pos += h.FrameLen()
	}
	if err := d.Damage(sealed, lastPos+wire.FrameHeaderSize+2, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	node, ms := start()
	defer node.Close()
	if err := node.CommitCursor(ctx, "jobs", "c", 0, lastBase); err != nil {
		t.Fatal(err)
	}
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	read := make(chan struct{})
	var once sync.Once
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && c.Path == sealed {
			once.Do(func() { close(read) }) // the poll's first read, after it took the wake-up channel
		}
		return nil
	})
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest("GET", "/v1/topics/jobs/cursors/c/partitions/0/records?advance=false&wait_ms=60000", nil))
		done <- w
	}()
	<-read
	d.SetHook(nil)
	if _, err := node.Produce(ctx, "jobs", 0, []partition.Record{{Value: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	w := <-done
	var got api.CursorReadAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(got.Records) != 1 || got.Skipped != hwm-lastBase {
		t.Fatalf("peek long poll: %s; want the new record and skipped %d", w.Body, hwm-lastBase)
	}
}
