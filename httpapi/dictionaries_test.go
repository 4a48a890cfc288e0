package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestDictionary_TrainListAndRefusals: a POST trains a dictionary on the
// topic's records and answers it (201), the GET lists it as current; an
// empty topic, a bad body and an unknown topic answer their errors.
func TestDictionary_TrainListAndRefusals(t *testing.T) {
	var ms runtime.Metastore
	node := startLocalNode(t, func(local *runtime.LocalMetastore) runtime.Metastore {
		ms = local
		return ms
	})
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		return w
	}
	ctx := context.Background()
	if _, _, err := node.CreateTopic(ctx, "t", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	if w := serve(http.MethodPost, "/v1/topics/t/dictionary", `{}`); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), api.CodeDictionaryRefused) {
		t.Fatalf("training an empty topic: %d %s", w.Code, w.Body)
	}
	for i := range 200 {
		rec := partition.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"id":%d,"status":"paid","currency":"EUR","total_cents":%d}`, i, 100+i%37)}
		if _, err := node.Produce(ctx, "t", 0, []partition.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	for body, want := range map[string]int{
		`{"samples": 7}`:         http.StatusBadRequest,
		`{"max_bytes": 100}`:     http.StatusBadRequest,
		`{"sample": 100}`:        http.StatusBadRequest,
		`{"samples": "many"}`:    http.StatusBadRequest,
		`{"max_bytes": 2000000}`: http.StatusBadRequest,
	} {
		if w := serve(http.MethodPost, "/v1/topics/t/dictionary", body); w.Code != want {
			t.Errorf("POST %s: %d %s, want %d", body, w.Code, w.Body, want)
		}
	}
	if w := serve(http.MethodPost, "/v1/topics/nope/dictionary", `{}`); w.Code != http.StatusNotFound {
		t.Fatalf("an unknown topic: %d %s", w.Code, w.Body)
	}

	w := serve(http.MethodPost, "/v1/topics/t/dictionary", `{"samples": 200, "max_bytes": 4096}`)
	var trained api.Dictionary
	if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &trained) != nil || trained.ID == 0 || trained.Samples != 200 || !trained.Current {
		t.Fatalf("training: %d %s", w.Code, w.Body)
	}
	w = serve(http.MethodGet, "/v1/topics/t/dictionaries", "")
	var list api.DictionaryList
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &list) != nil || len(list.Dictionaries) != 1 ||
		list.Dictionaries[0].ID != trained.ID || !list.Dictionaries[0].Current || list.Dictionaries[0].Bytes != trained.Bytes {
		t.Fatalf("listing: %d %s", w.Code, w.Body)
	}
}

// TestTopics_DictionaryAfterIsSetAndDescribed: dictionary_after is taken by
// PUT and PATCH (alone or with retention), described, and refused out of
// its bounds.
func TestTopics_DictionaryAfterIsSetAndDescribed(t *testing.T) {
	var ms runtime.Metastore
	node := startLocalNode(t, func(local *runtime.LocalMetastore) runtime.Metastore {
		ms = local
		return ms
	})
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	serve := func(method, path, body string) (int, api.TopicDescription) {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		var d api.TopicDescription
		json.Unmarshal(w.Body.Bytes(), &d)
		return w.Code, d
	}
	if code, d := serve(http.MethodPut, "/v1/topics/t", `{"partitions": 1, "dictionary_after": 5000}`); code != http.StatusCreated || d.DictionaryAfter != 5000 {
		t.Fatalf("PUT: %d %+v", code, d)
	}
	if code, d := serve(http.MethodPatch, "/v1/topics/t", `{"dictionary_after": 0}`); code != http.StatusOK || d.DictionaryAfter != 0 {
		t.Fatalf("PATCH to 0: %d %+v", code, d)
	}
	if code, d := serve(http.MethodPatch, "/v1/topics/t", `{"dictionary_after": 2000, "retention_ms": 60000}`); code != http.StatusOK || d.DictionaryAfter != 2000 || d.RetentionMs != 60000 {
		t.Fatalf("PATCH with retention: %d %+v", code, d)
	}
	for _, body := range []string{`{"dictionary_after": 5}`, `{"dictionary_after": -1}`, `{"dictionary_after": "soon"}`} {
		if code, _ := serve(http.MethodPatch, "/v1/topics/t", body); code != http.StatusBadRequest {
			t.Errorf("PATCH %s: %d", body, code)
		}
	}
	if code, d := serve(http.MethodGet, "/v1/topics/t", ""); code != http.StatusOK || d.DictionaryAfter != 2000 {
		t.Fatalf("GET: %d %+v", code, d)
	}
}

// TestTopics_ARefusedPatchChangesNothing: a PATCH refused for its
// retention (400) leaves dictionary_after as it was: bad input loses
// nothing and changes nothing. Likewise a PUT of an existing topic that
// conflicts changes nothing.
func TestTopics_ARefusedPatchChangesNothing(t *testing.T) {
	var ms runtime.Metastore
	node := startLocalNode(t, func(local *runtime.LocalMetastore) runtime.Metastore {
		ms = local
		return ms
	})
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	serve := func(method, path, body string) (int, api.TopicDescription) {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		var d api.TopicDescription
		json.Unmarshal(w.Body.Bytes(), &d)
		return w.Code, d
	}
	if code, _ := serve(http.MethodPut, "/v1/topics/t", `{"partitions": 1}`); code != http.StatusCreated {
		t.Fatalf("PUT: %d", code)
	}
	if code, _ := serve(http.MethodPatch, "/v1/topics/t", `{"dictionary_after": 5000, "retention_ms": -1}`); code != http.StatusBadRequest {
		t.Fatalf("PATCH with a bad retention: %d, want 400", code)
	}
	if code, d := serve(http.MethodGet, "/v1/topics/t", ""); code != http.StatusOK || d.DictionaryAfter != 0 {
		t.Fatalf("after a refused PATCH: dictionary_after %d, want 0 (unchanged)", d.DictionaryAfter)
	}
	if code, _ := serve(http.MethodPut, "/v1/topics/t", `{"partitions": 3, "dictionary_after": 5000}`); code < 400 {
		t.Fatalf("PUT of another partition count: %d", code)
	}
	if code, d := serve(http.MethodGet, "/v1/topics/t", ""); code != http.StatusOK || d.DictionaryAfter != 0 {
		t.Fatalf("after a refused PUT: dictionary_after %d, want 0 (unchanged)", d.DictionaryAfter)
	}
}

// TestTopics_APatchRefusedForAStoredRetentionChangesNothing: a topic whose
// stored retention_ms is past runtime.MaxRetentionMs (a record written
// before the bound was checked) refuses a PATCH of retention_bytes at the
// merge (400); the dictionary_after of the same PATCH must not land.
func TestTopics_APatchRefusedForAStoredRetentionChangesNothing(t *testing.T) {
	var ms runtime.Metastore
	node := startLocalNode(t, func(local *runtime.LocalMetastore) runtime.Metastore {
		ms = local
		return ms
	})
	a := New(node, ms, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	serve := func(method, path, body string) (int, api.TopicDescription) {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		var d api.TopicDescription
		json.Unmarshal(w.Body.Bytes(), &d)
		return w.Code, d
	}
	if code, _ := serve(http.MethodPut, "/v1/topics/t", `{"partitions": 1}`); code != http.StatusCreated {
		t.Fatalf("PUT: %d", code)
	}
	if _, err := ms.UpdateRetention(context.Background(), "t", func(r runtime.Retention) (runtime.Retention, error) {
		r.Ms = runtime.MaxRetentionMs + 1 // as an old record may hold
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	code, _ := serve(http.MethodPatch, "/v1/topics/t", `{"dictionary_after": 5000, "retention_bytes": 100}`)
	if code < 400 {
		t.Fatalf("PATCH merged into an out-of-range retention: %d", code)
	}
	if code2, d := serve(http.MethodGet, "/v1/topics/t", ""); code2 != http.StatusOK || d.DictionaryAfter != 0 {
		t.Fatalf("the PATCH was refused (%d) and still set dictionary_after to %d", code, d.DictionaryAfter)
	}
}
