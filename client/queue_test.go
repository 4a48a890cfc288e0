package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/api"
)

// TestConsume_AsksForTheBinaryAnswer: Consume sends Accept:
// application/vnd.narad.batch, and reads the binary answer's groups into
// records under their group's partition, lease id and deadline, an empty
// key empty and not nil; the fake node answers JSON to a consume that
// does not ask, which this test counts (it fails if the client stops
// asking).
func TestConsume_AsksForTheBinaryAnswer(t *testing.T) {
	n := newQueueNode("orders", 3)
	n.append(0, "a", "")
	n.append(2, "c")
	recs, err := n.client().Consume(context.Background(), "orders", ConsumeOptions{Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n.jsonAnswers != 0 {
		t.Fatalf("%d consumes answered in JSON: the client did not ask for the binary answer", n.jsonAnswers)
	}
	want := []struct {
		p      int
		offset int64
		value  string
	}{{0, 0, "a"}, {0, 1, ""}, {2, 0, "c"}}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		r := recs[i]
		if r.Partition != w.p || r.Offset != w.offset || string(r.Value) != w.value || r.Key == nil || r.Value == nil || len(r.Key) != 0 {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
		if r.LeaseDeadline.IsZero() || r.LeaseID == 0 {
			t.Fatalf("record %d: lease %d until %v", i, r.LeaseID, r.LeaseDeadline)
		}
	}
	if recs[0].LeaseID != recs[1].LeaseID || recs[0].LeaseID == recs[2].LeaseID {
		t.Fatalf("lease ids %d %d %d: want partition 0's one, partition 2's another (the fake's)", recs[0].LeaseID, recs[1].LeaseID, recs[2].LeaseID)
	}
}

// TestConsume_ReadsAnOlderDaemonsJSON: a node that answers JSON whatever
// Accept says (one older than the binary answer) is read as before.
func TestConsume_ReadsAnOlderDaemonsJSON(t *testing.T) {
	body, _ := json.Marshal(api.ConsumeAnswer{Records: []api.LeasedRecord{{Partition: 1, LeaseID: 9, LeaseDeadlineMs: 5000,
		Record: api.Record{Offset: 3, Value: base64.StdEncoding.EncodeToString([]byte("v")), Encoding: "base64", CommittedAtMs: 7}}}})
	c := fakeClient(t, func(r *http.Request) *http.Response {
		return answer(200, string(body), "Content-Type", "application/json")
	}, Options{})
	recs, err := c.Consume(context.Background(), "t", ConsumeOptions{})
	if err != nil || len(recs) != 1 || recs[0].Partition != 1 || recs[0].Offset != 3 || string(recs[0].Value) != "v" ||
		recs[0].LeaseID != 9 || recs[0].LeaseDeadline.UnixMilli() != 5000 || recs[0].CommittedAt.UnixMilli() != 7 {
		t.Fatalf("%+v, %v", recs, err)
	}
}

// TestConsume_RefusesACutBinaryAnswer: an answer cut inside a record is
// an error naming the group and record, never records taken as whole.
func TestConsume_RefusesACutBinaryAnswer(t *testing.T) {
	whole := consumeAnswerBinary(2, 3)
	c := fakeClient(t, func(r *http.Request) *http.Response {
		return answer(200, string(whole[:len(whole)-3]), "Content-Type", api.BatchMediaType)
	}, Options{})
	recs, err := c.Consume(context.Background(), "t", ConsumeOptions{})
	if err == nil || recs != nil || !strings.Contains(err.Error(), "group 1 (partition 1): record 2: value: the body ends") {
		t.Fatalf("a cut answer: %d records, %v", len(recs), err)
	}
}

// TestConsume_RefusesABinaryAnswerCutBetweenGroups: an answer cut right
// after a group's last record reads as whole but for its Narad-Records
// header, which says how many records the node sent: short of it, the
// answer is an error. Before, the records read were taken as the answer.
// From a daemon older than the header, the body is taken as it reads.
func TestConsume_RefusesABinaryAnswerCutBetweenGroups(t *testing.T) {
	whole := consumeAnswerBinary(2, 3)
	cut := whole[:len(consumeAnswerBinary(1, 3))]
	for _, tc := range []struct {
		name, header string
		recs         int
		err          string
	}{
		{"with the header", "6", 0, "the body ends after 3 records, Narad-Records says 6"},
		{"from an older daemon", "", 3, ""},
		{"a bad header", "-1", 0, `Narad-Records "-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeClient(t, func(r *http.Request) *http.Response {
				resp := answer(200, string(cut), "Content-Type", api.BatchMediaType)
				if tc.header != "" {
					resp.Header.Set(api.HeaderRecords, tc.header)
				}
				return resp
			}, Options{})
			recs, err := c.Consume(context.Background(), "t", ConsumeOptions{})
			if len(recs) != tc.recs || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("%d records, %v; want %d, %q", len(recs), err, tc.recs, tc.err)
			}
		})
	}
}

// consumeAnswerBinary is a binary consume answer of groups of n records
// of 100-byte values, a partition each.
func consumeAnswerBinary(groups, n int) []byte {
	var b bytes.Buffer
	cw := api.NewConsumeBatchWriter(&b)
	value := bytes.Repeat([]byte("v"), 100)
	for g := range groups {
		cw.Group(api.ConsumeGroup{Partition: g, LeaseID: 1_765_000_000_000_123, LeaseDeadlineMs: 1_765_000_030_000, Records: n})
		for i := range n {
			cw.Record(api.BatchRecord{Offset: int64(1_000_000 + i), CommittedAtMs: 1_765_000_000_000, Key: []byte{}, Value: value})
		}
	}
	return b.Bytes()
}

// consumeAnswerJSON is consumeAnswerBinary's answer in JSON, base64 as
// the client asks a JSON answer.
func consumeAnswerJSON(groups, n int) []byte {
	var out api.ConsumeAnswer
	value := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("v"), 100))
	for g := range groups {
		for i := range n {
			out.Records = append(out.Records, api.LeasedRecord{Partition: g, LeaseID: 1_765_000_000_000_123, LeaseDeadlineMs: 1_765_000_030_000,
				Record: api.Record{Offset: int64(1_000_000 + i), Value: value, Encoding: "base64", CommittedAtMs: 1_765_000_000_000}})
		}
	}
	b, _ := json.Marshal(out)
	return b
}

// BenchmarkConsumeAnswer_Decode: the client's decoding of a consume
// answer of 1,000 records of 100-byte values over 4 partitions, JSON
// (base64, as the client asked before) and binary; ns/record and
// allocs/record are per record.
func BenchmarkConsumeAnswer_Decode(b *testing.B) {
	const groups, n = 4, 250
	for _, tc := range []struct {
		name   string
		body   []byte
		decode func(io.Reader) ([]LeasedRecord, error)
	}{
		{"json", consumeAnswerJSON(groups, n), func(r io.Reader) ([]LeasedRecord, error) {
			return decodeConsumedJSON(&http.Response{Body: io.NopCloser(r)})
		}},
		{"binary", consumeAnswerBinary(groups, n), func(r io.Reader) ([]LeasedRecord, error) {
			return decodeConsumed(r, strconv.Itoa(groups*n))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			var allocs float64
			for b.Loop() {
				recs, err := tc.decode(bytes.NewReader(tc.body))
				if err != nil || len(recs) != groups*n {
					b.Fatalf("%d records, %v", len(recs), err)
				}
			}
			allocs = testing.AllocsPerRun(3, func() { tc.decode(bytes.NewReader(tc.body)) })
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(groups*n), "ns/record")
			b.ReportMetric(allocs/(groups*n), "allocs/record")
		})
	}
}
