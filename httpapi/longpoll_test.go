package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestFetch_LongPollsDoNotEvictEachOther: three long polls at the high
// watermark of three idle partitions, through an open-log budget of two.
// The third poll's open evicts one of the others' logs; that poll must
// wait for its partition to be opened again, not reopen it (which would
// evict another poll's log, and so on without end: found by review).
// With nothing produced, the budget closes a handful of logs, not
// hundreds; then a produce to each partition answers each poll.
func TestFetch_LongPollsDoNotEvictEachOther(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ms, err := runtime.OpenLocalMetastore(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	node, err := runtime.New(runtime.Config{DataDir: dir, Metastore: ms, MaxOpenLogs: 2, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	topics := []string{"a", "b", "c"}
	for _, topic := range topics {
		if _, _, err := node.CreateTopic(ctx, topic, 1, runtime.Retention{}); err != nil {
			t.Fatal(err)
		}
		if _, err := node.Produce(ctx, topic, 0, []partition.Record{{Value: []byte("old")}}); err != nil {
			t.Fatal(err)
		}
	}
	a := New(node, ms, zap.NewNop(), reg, Options{MaxBody: 1 << 20})
	evictions := func() float64 {
		families, _ := reg.Gather()
		for _, f := range families {
			if f.GetName() == "narad_storage_open_log_budget_evictions_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	poll := func(wait string) []string {
		var wg sync.WaitGroup
		bodies := make([]string, len(topics))
		for i, topic := range topics {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := httptest.NewRecorder()
				a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/topics/"+topic+"/partitions/0/records?offset=1&wait_ms="+wait, nil))
				bodies[i] = w.Body.String()
			}()
		}
		wg.Wait()
		return bodies
	}
	before := evictions()
	poll("500")
	if n := evictions() - before; n > 10 {
		t.Fatalf("%v budget evictions during half a second of three idle long polls: the polls evict each other", n)
	}
	// A produce to a partition whose log was evicted opens it, and the
	// poll waiting for that open reads the record.
	done := make(chan []string, 1)
	go func() { done <- poll("20000") }()
	for _, topic := range topics {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/topics/"+topic+"/partitions/0/records", strings.NewReader(`{"records":[{"value":"new"}]}`)))
		if w.Code != http.StatusOK {
			t.Fatalf("produce to %s: %d %s", topic, w.Code, w.Body)
		}
	}
	for i, body := range <-done {
		if !strings.Contains(body, `"value":"new"`) {
			t.Fatalf("poll of %s: %s", topics[i], body)
		}
	}
}
