package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// consumeAs posts a consume's body, asking for the binary answer when
// batch, and returns the recorded answer.
func consumeAs(a http.Handler, topic, body string, batch bool) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/topics/"+topic+"/consume", strings.NewReader(body))
	if batch {
		req.Header.Set("Accept", api.BatchMediaType)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, req)
	return w
}

// TestConsume_AnswersBinaryWhenAskedAndJSONOtherwise: with Accept:
// application/vnd.narad.batch a consume answers its leases grouped by
// partition, each group under the lease id and deadline the node gave
// (a nack under the group's id gives its records back), its records as
// produced, empty keys and values and a value larger than the write
// buffer among them; without it the same records come in JSON, as
// before; nothing to lease is an empty binary answer.
func TestConsume_AnswersBinaryWhenAskedAndJSONOtherwise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node, a := reviewNode(t, Options{})
		ctx := context.Background()
		if _, _, err := node.CreateTopic(ctx, "m", 3, runtime.Retention{}); err != nil {
			t.Fatal(err)
		}
		produced := map[int][]partition.Record{}
		for p := range 3 {
			recs := []partition.Record{{Key: []byte(fmt.Sprint("k", p)), Value: []byte(fmt.Sprint("v", p))}, {Value: []byte{}}}
			if p == 1 {
				recs = append(recs, partition.Record{Key: []byte("big"), Value: bytes.Repeat([]byte{byte(p)}, answerBufferSize+100)})
			}
			if _, err := node.Produce(ctx, "m", p, recs); err != nil {
				t.Fatal(err)
			}
			produced[p] = recs
		}
		w := consumeAs(a, "m", `{"lease_ms": 5000, "max_records": 100}`, true)
		if w.Code != 200 || w.Header().Get("Content-Type") != api.BatchMediaType {
			t.Fatalf("binary consume: %d %s: %.200s", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if want := len(produced[0]) + len(produced[1]) + len(produced[2]); w.Header().Get(api.HeaderRecords) != strconv.Itoa(want) {
			t.Fatalf("binary consume of %d records: %s %q", want, api.HeaderRecords, w.Header().Get(api.HeaderRecords))
		}
		deadline := time.Now().Add(5 * time.Second).UnixMilli()
		cr := api.NewConsumeBatchReader(bytes.NewReader(w.Body.Bytes()), 64<<20)
		groups := map[int]api.ConsumeGroup{}
		got := map[int][]api.BatchRecord{}
		for {
			g, r, err := cr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if seen, ok := groups[g.Partition]; ok && seen != g {
				t.Fatalf("partition %d in two groups: %+v and %+v", g.Partition, seen, g)
			}
			groups[g.Partition] = g
			got[g.Partition] = append(got[g.Partition], r)
		}
		for p, recs := range produced {
			g := groups[p]
			if g.Records != len(recs) || len(got[p]) != len(recs) || g.LeaseDeadlineMs != deadline {
				t.Fatalf("partition %d: group %+v of %d records; want %d, deadline %d", p, g, len(got[p]), len(recs), deadline)
			}
			for i, r := range got[p] {
				if r.Offset != int64(i) || !bytes.Equal(r.Key, recs[i].Key) || !bytes.Equal(r.Value, recs[i].Value) || r.CommittedAtMs == 0 {
					t.Fatalf("partition %d record %d: %d %q (%d bytes of value)", p, i, r.Offset, r.Key, len(r.Value))
				}
			}
			var nacked api.NackAnswer
			offsets, _ := json.Marshal([]int64{0, 1, 2}[:len(recs)])
			if code, ec := post(t, a, fmt.Sprintf("/v1/topics/m/partitions/%d/nacks", p), fmt.Sprintf(`{"lease_id": %d, "offsets": %s}`, g.LeaseID, offsets), &nacked); code != 200 || nacked.GivenBack != len(recs) {
				t.Fatalf("nack of partition %d under the group's lease id %d: %d %s %+v", p, g.LeaseID, code, ec, nacked)
			}
		}

		w = consumeAs(a, "m", `{"max_records": 100}`, false)
		var answer api.ConsumeAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("JSON consume: %d %s %v: %.200s", w.Code, w.Header().Get("Content-Type"), err, w.Body)
		}
		if want := len(produced[0]) + len(produced[1]) + len(produced[2]); len(answer.Records) != want {
			t.Fatalf("JSON consume of what was given back: %d records, want %d", len(answer.Records), want)
		}

		w = consumeAs(a, "m", `{}`, true)
		if w.Code != 200 || w.Header().Get("Content-Type") != api.BatchMediaType || w.Body.Len() != 0 || w.Header().Get(api.HeaderRecords) != "0" {
			t.Fatalf("binary consume of nothing: %d %s, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
	})
}

// TestConsume_ABinaryConsumeAnswersErrorsInJSON: asked for binary, a
// consume refused (a partition the topic lacks, a bad body, no room in
// the answer budget) still answers the API's JSON error.
func TestConsume_ABinaryConsumeAnswersErrorsInJSON(t *testing.T) {
	node, a := reviewNode(t, Options{MaxAnswer: 10})
	if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		code int
		ec   string
	}{
		{`{"partition": 7}`, 404, api.CodePartitionNotFound},
		{`{"max_records": 0}`, 400, api.CodeInvalidBody},
		{`{"max_bytes": 11}`, 503, api.CodeBusy},
	} {
		w := consumeAs(a, "t", tc.body, true)
		var e api.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != tc.code || e.Error.Code != tc.ec || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s %v: %s; want %d %s in JSON", tc.body, w.Code, w.Header().Get("Content-Type"), err, w.Body, tc.code, tc.ec)
		}
	}
}
