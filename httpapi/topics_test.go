package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// startLocalNode starts a node on an embedded metastore in a fresh data
// directory, through wrap, and closes it when the test ends.
func startLocalNode(t *testing.T, wrap func(*runtime.LocalMetastore) runtime.Metastore) *runtime.Node {
	t.Helper()
	dir := t.TempDir()
	local, err := runtime.OpenLocalMetastore(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	node, err := runtime.New(runtime.Config{DataDir: dir, Metastore: wrap(local)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	if err := node.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return node
}

// barrierMetastore holds every retention update until two have arrived,
// so two PATCHes are both past their reads before either writes.
type barrierMetastore struct {
	*runtime.LocalMetastore
	arrived sync.WaitGroup
}

func (m *barrierMetastore) UpdateRetention(ctx context.Context, name string, change func(runtime.Retention) (runtime.Retention, error)) (runtime.TopicRecord, error) {
	m.arrived.Done()
	m.arrived.Wait()
	return m.LocalMetastore.UpdateRetention(ctx, name, change)
}

// TestPatchTopic_TwoBoundsAtOnceBothLand: a PATCH of retention_ms and one
// of retention_bytes at once both land (found by review: each kept the
// other bound from a record read before the other's write, and one was
// lost though both answered 200). The merge is the metastore's, under its
// lock.
func TestPatchTopic_TwoBoundsAtOnceBothLand(t *testing.T) {
	var ms *barrierMetastore
	node := startLocalNode(t, func(local *runtime.LocalMetastore) runtime.Metastore {
		ms = &barrierMetastore{LocalMetastore: local}
		return ms
	})
	local := ms.LocalMetastore
	if _, _, err := node.CreateTopic(context.Background(), "t", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	ms.arrived.Add(2)
	var wg sync.WaitGroup
	for _, body := range []string{`{"retention_ms": 60000}`, `{"retention_bytes": 1048576}`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := httptest.NewRecorder()
			a.ServeHTTP(w, httptest.NewRequest(http.MethodPatch, "/v1/topics/t", strings.NewReader(body)))
			if w.Code != http.StatusOK {
				t.Errorf("PATCH %s: %d %s", body, w.Code, w.Body)
			}
		}()
	}
	wg.Wait()
	rec, _, _ := local.Topic(context.Background(), "t")
	if rec.RetentionMs != 60000 || rec.RetentionBytes != 1048576 {
		t.Fatalf("the record holds retention_ms=%d retention_bytes=%d, want 60000 and 1048576", rec.RetentionMs, rec.RetentionBytes)
	}
}

// TestTopics_AnAgeBoundNoDurationHoldsIsRefused: a retention_ms past
// runtime.MaxRetentionMs is a 400 on create and on change, never a topic
// whose age bound wraps to microseconds when made a duration (found by
// review: 18446744073710 ms became 448 us and the sweep deleted every
// sealed segment); the longest bound is taken.
func TestTopics_AnAgeBoundNoDurationHoldsIsRefused(t *testing.T) {
	var ms runtime.Metastore
	node := startLocalNode(t, func(local *runtime.LocalMetastore) runtime.Metastore {
		ms = local
		return ms
	})
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	serve := func(method, body string) int {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(method, "/v1/topics/t", strings.NewReader(body)))
		return w.Code
	}
	for _, ms := range []string{"18446744073710", fmt.Sprint(runtime.MaxRetentionMs + 1)} {
		if code := serve(http.MethodPut, `{"partitions": 1, "retention_ms": `+ms+`}`); code != http.StatusBadRequest {
			t.Fatalf("create with retention_ms %s: %d", ms, code)
		}
	}
	if code := serve(http.MethodPut, `{"partitions": 1, "retention_ms": `+fmt.Sprint(runtime.MaxRetentionMs)+`}`); code != http.StatusCreated {
		t.Fatalf("create with the longest age bound: %d", code)
	}
	if code := serve(http.MethodPatch, `{"retention_ms": `+fmt.Sprint(runtime.MaxRetentionMs+1)+`}`); code != http.StatusBadRequest {
		t.Fatalf("change to an age bound past the longest: %d", code)
	}
}
