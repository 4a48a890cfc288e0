package httpapi

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/scrub"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// scrubNode is a node as the scrubber sees it, from the node's exported
// calls (runtime's own adapter also takes the topic's guard for the
// progress writes, which nothing here races).
type scrubNode struct {
	node *runtime.Node
	ms   runtime.Metastore
}

func (s scrubNode) Assigned(ctx context.Context, topic string, p int) (bool, error) {
	return s.ms.Assigned(ctx, topic, p)
}

func (s scrubNode) LogIfOpen(topic string, p int) (*partition.Log, bool) {
	return s.node.LogIfOpen(topic, p)
}

func (s scrubNode) InPartition(_ string, _ int, fn func() error) error { return fn() }

// TestFetchAfterScrubAnswersUnreadable: a fetch of a record of a sealed
// segment answers 200 from the log's cache after the byte under it rots;
// once a scrub pass has found the rot, the same fetch answers 410
// record_unreadable.
func TestFetchAfterScrubAnswersUnreadable(t *testing.T) {
	ctx := context.Background()
	d := sim.NewDisk(3)
	if err := d.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	ms, err := runtime.OpenLocalMetastore(d, "/data")
	if err != nil {
		t.Fatal(err)
	}
	node, err := runtime.New(runtime.Config{DataDir: "/data", FS: d, Metastore: ms, SegmentMaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, _, err := node.CreateTopic(ctx, "orders", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400; i += 4 {
		batch := make([]partition.Record, 4)
		for j := range batch {
			batch[j] = partition.Record{Value: fmt.Appendf(nil, "value-%06d", i+j)}
		}
		if _, err := node.Produce(ctx, "orders", 0, batch); err != nil {
			t.Fatal(err)
		}
	}
	dir := "/data/topics/orders/p00000"
	entries, err := d.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name, wire.SegmentFileSuffix) {
			segs = append(segs, filepath.Join(dir, e.Name))
		}
	}
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	b, err := d.Contents(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	first, err := wire.CheckFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	second, err := wire.CheckFrame(b[first.FrameLen():])
	if err != nil {
		t.Fatal(err)
	}
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	fetch := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("/v1/topics/orders/partitions/0/records?offset=%d&max_records=1", second.BaseOffset), nil))
		return w
	}
	if w := fetch(); w.Code != 200 { // caches the frame
		t.Fatalf("fetch before the rot: %d %s", w.Code, w.Body)
	}
	at := first.FrameLen() + wire.FrameHeaderSize + 3
	if err := d.Damage(segs[1], at, []byte{b[at] ^ 0x20}); err != nil {
		t.Fatal(err)
	}
	if w := fetch(); w.Code != 200 {
		t.Fatalf("fetch from the cache after the rot: %d %s", w.Code, w.Body) // what the scrub changes
	}

	scrub.New(scrub.Config{FS: d, TopicsDir: "/data/topics", Node: scrubNode{node, ms}, Rate: 1 << 30}).Pass(ctx, nil, nil)
	w := fetch()
	if w.Code != 410 || !strings.Contains(w.Body.String(), "record_unreadable") {
		t.Fatalf("fetch after the scrub: %d %s, want 410 record_unreadable", w.Code, w.Body)
	}
}
