package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// results collects a producer's results, in the order they came.
type results struct {
	mu  sync.Mutex
	all []Result
	val [][]byte // the value of each, as produced
}

func (rs *results) done(value []byte) func(Result) {
	return func(r Result) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.all = append(rs.all, r)
		rs.val = append(rs.val, value)
	}
}

func (rs *results) take() ([]Result, [][]byte) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.all), slices.Clone(rs.val)
}

func newProducer(t *testing.T, c *Client, topic string, opts ProducerOptions) *Producer {
	t.Helper()
	p, err := c.NewProducer(context.Background(), topic, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func produce(t *testing.T, p *Producer, rs *results, key, value string) {
	t.Helper()
	r := Record{Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	if err := p.Produce(context.Background(), r, rs.done(r.Value)); err != nil {
		t.Fatal(err)
	}
}

// TestProducer_KeysGoWhereKeyPartitionSaysInEveryProducer: two producers
// (two clients) place every key on KeyPartition's partition, and the
// node holds each record there, at the offset its result gave.
func TestProducer_KeysGoWhereKeyPartitionSaysInEveryProducer(t *testing.T) {
	n := startRealNode(t, nil, Options{})
	n.topic(t, "keyed", 8)
	other, err := New(n.srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.http.CloseIdleConnections()
	var rs results
	for i, c := range []*Client{n.c, other} {
		p := newProducer(t, c, "keyed", ProducerOptions{})
		for k := range 50 {
			produce(t, p, &rs, fmt.Sprintf("key-%d", k), fmt.Sprintf("%d/%d", i, k))
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got, vals := rs.take()
	if len(got) != 100 {
		t.Fatalf("%d results for 100 records", len(got))
	}
	at := map[[2]int64][]byte{}
	for i, r := range got {
		var producer, k int
		fmt.Sscanf(string(vals[i]), "%d/%d", &producer, &k)
		if r.Err != nil || r.Partition != KeyPartition(fmt.Appendf(nil, "key-%d", k), 8) {
			t.Fatalf("key-%d from producer %d: %+v; KeyPartition says %d", k, producer, r, KeyPartition(fmt.Appendf(nil, "key-%d", k), 8))
		}
		at[[2]int64{int64(r.Partition), r.Offset}] = vals[i]
	}
	for p := range 8 {
		for _, rec := range n.records(t, "keyed", p) {
			if want := at[[2]int64{int64(p), rec.Offset}]; !bytes.Equal(rec.Value, want) || KeyPartition(rec.Key, 8) != p {
				t.Fatalf("partition %d offset %d holds %q key %q; its result said %q", p, rec.Offset, rec.Value, rec.Key, want)
			}
			delete(at, [2]int64{int64(p), rec.Offset})
		}
	}
	if len(at) != 0 {
		t.Fatalf("%d acked records are not in the log", len(at))
	}
}

// TestProducer_KeylessRecordsStickToAPartitionPerBatch: records without
// a key fill one partition's batch, then the next partition's: each
// batch one request, the partitions taken in turn.
func TestProducer_KeylessRecordsStickToAPartitionPerBatch(t *testing.T) {
	n := startRealNode(t, nil, Options{})
	n.topic(t, "spread", 4)
	p := newProducer(t, n.c, "spread", ProducerOptions{BatchRecords: 10, Linger: time.Hour, MaxInFlight: 1})
	var rs results
	for i := range 80 {
		produce(t, p, &rs, "", fmt.Sprint(i))
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Results come per partition in order, partitions in any order: put
	// them back in the order produced.
	got, vals := rs.take()
	order := make([]Result, 80)
	for i, r := range got {
		var v int
		fmt.Sscan(string(vals[i]), &v)
		order[v] = r
	}
	first := order[0].Partition
	for i, r := range order {
		batch := i / 10
		if r.Err != nil || r.Partition != (first+batch)%4 || r.Offset != int64(batch/4*10+i%10) {
			t.Fatalf("record %d: %+v; want partition %d offset %d (batches of 10 in turn from %d)", i, r, (first+batch)%4, batch/4*10+i%10, first)
		}
	}
	if st := p.Stats(); st.Requests != 8 || st.Committed != 8 || st.Acked != 80 {
		t.Fatalf("stats %+v; want 8 requests of 10", st)
	}
}

// TestProducer_OrderPerPartitionUnderConcurrentCallers: callers producing
// at once, several requests in flight a partition: each caller's records
// of a key are committed in the order it produced them, results come per
// partition in offset order, and the log holds each record once, where
// its result says.
func TestProducer_OrderPerPartitionUnderConcurrentCallers(t *testing.T) {
	n := startRealNode(t, nil, Options{})
	n.topic(t, "order", 4)
	p := newProducer(t, n.c, "order", ProducerOptions{BatchRecords: 25, MaxInFlight: 4})
	const callers, each = 8, 500
	var mu sync.Mutex
	lastOffset := map[int]int64{}  // partition -> last result's offset
	lastSeq := map[string]int64{}  // caller/key -> offset of its last record
	where := map[[2]int64]string{} // partition/offset -> value
	var failures []string
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("k%d", i%10)
				value := fmt.Sprintf("%d/%s/%d", g, key, i)
				err := p.Produce(context.Background(), Record{Key: []byte(key), Value: []byte(value)}, func(r Result) {
					mu.Lock()
					defer mu.Unlock()
					if last, ok := lastOffset[r.Partition]; r.Err != nil || (ok && r.Offset <= last) {
						failures = append(failures, fmt.Sprintf("%s: %+v after offset %d of its partition", value, r, last))
					}
					lastOffset[r.Partition] = r.Offset
					seq := fmt.Sprintf("%d/%s", g, key)
					if last, ok := lastSeq[seq]; ok && r.Offset <= last {
						failures = append(failures, fmt.Sprintf("%s at %d, before the caller's earlier record at %d", value, r.Offset, last))
					}
					lastSeq[seq] = r.Offset
					where[[2]int64{int64(r.Partition), r.Offset}] = value
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d out of order, first: %s", len(failures), failures[0])
	}
	total := 0
	for part := range 4 {
		for _, rec := range n.records(t, "order", part) {
			if want := where[[2]int64{int64(part), rec.Offset}]; string(rec.Value) != want {
				t.Fatalf("partition %d offset %d holds %q; its result said %q", part, rec.Offset, rec.Value, want)
			}
			total++
		}
	}
	if total != callers*each {
		t.Fatalf("the log holds %d records; %d were produced", total, callers*each)
	}
	if st := p.Stats(); st.Acked != callers*each || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// failRequests wraps a handler: the produce requests whose number (from
// 1, in the order the node reads them) is in fail are answered as fail
// says, the others go through; request 1 waits until three produce
// requests were written, so three are in flight when the first answer
// comes.
type failRequests struct {
	ear  func() *earListener
	fail map[int]func(w http.ResponseWriter, r *http.Request, h http.Handler)
	mu   sync.Mutex
	n    int
}

func (f *failRequests) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.n++
		n := f.n
		f.mu.Unlock()
		if n == 1 {
			f.ear().waitProduces(3)
		}
		if fail := f.fail[n]; fail != nil {
			fail(w, r, h)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// commitFailed answers 503 commit_failed without committing: nothing done.
func commitFailed(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
	w.Header().Set("Retry-After", "0")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, `{"error":{"code":"commit_failed","message":"injected"}}`)
}

// misdirectHere answers 421 naming the node itself as the owner: nothing
// done, the batch may be sent again there.
func misdirectHere(w http.ResponseWriter, r *http.Request, _ http.Handler) {
	w.WriteHeader(http.StatusMisdirectedRequest)
	fmt.Fprintf(w, `{"error":{"code":"not_owner","message":"m"},"owner":{"node_id":"a","addr":%q}}`, "http://"+r.Host)
}

// commitThenDrop commits the request and drops the connection without an
// answer: the client cannot tell it was committed.
func commitThenDrop(w http.ResponseWriter, r *http.Request, h http.Handler) {
	h.ServeHTTP(discard{}, r)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// TestProducer_AFailureInFlightNeverReorders: three requests of one
// partition in flight, some failing. A request answered with nothing
// done is sent again only when no later one was committed (then one at
// a time), else it fails with ErrNotResent; one with no answer fails
// with ErrAmbiguous, or with RetryAmbiguous is sent again (and may be
// stored twice). In every case what the log holds is in the order the
// records were produced, less what failed, plus what a retry of an
// ambiguous failure stored again.
func TestProducer_AFailureInFlightNeverReorders(t *testing.T) {
	for _, tc := range []struct {
		name           string
		fail           map[int]func(http.ResponseWriter, *http.Request, http.Handler)
		retryAmbiguous bool
		want           []string // each batch's outcome: "ok", or the error it wraps
		log            []int    // the batches the log holds, in order
	}{
		{"the middle one answered nothing done", map[int]func(http.ResponseWriter, *http.Request, http.Handler){2: commitFailed},
			false, []string{"ok", "not resent", "ok"}, []int{0, 2}},
		{"the last one answered nothing done", map[int]func(http.ResponseWriter, *http.Request, http.Handler){3: commitFailed},
			false, []string{"ok", "ok", "ok"}, []int{0, 1, 2}},
		{"the last two answered nothing done", map[int]func(http.ResponseWriter, *http.Request, http.Handler){2: commitFailed, 3: commitFailed, 4: commitFailed},
			false, []string{"ok", "ok", "ok"}, []int{0, 1, 2}},
		{"the first one committed and not answered", map[int]func(http.ResponseWriter, *http.Request, http.Handler){1: commitThenDrop},
			false, []string{"ambiguous", "ambiguous", "ambiguous"}, []int{0}},
		{"the same, sent again", map[int]func(http.ResponseWriter, *http.Request, http.Handler){1: commitThenDrop},
			true, []string{"ok", "ok", "ok"}, []int{0, 0, 1, 2}},
		{"the first one answered nothing done, the second committed and not answered", map[int]func(http.ResponseWriter, *http.Request, http.Handler){1: commitFailed, 2: commitThenDrop},
			false, []string{"not resent", "ambiguous", "ambiguous"}, []int{1}},
		{"the first one answered 421, the second committed and not answered", map[int]func(http.ResponseWriter, *http.Request, http.Handler){1: misdirectHere, 2: commitThenDrop},
			false, []string{"not resent", "ambiguous", "ambiguous"}, []int{1}},
		{"the first one answered nothing done, the second committed and not answered, sent again", map[int]func(http.ResponseWriter, *http.Request, http.Handler){1: commitFailed, 2: commitThenDrop},
			true, []string{"not resent", "ok", "ok"}, []int{1, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n *realNode
			f := &failRequests{ear: func() *earListener { return n.ear }, fail: tc.fail}
			n = startRealNode(t, f.wrap, Options{})
			n.topic(t, "inflight", 1)
			p := newProducer(t, n.c, "inflight", ProducerOptions{BatchRecords: 10, Linger: time.Hour, MaxInFlight: 3, RetryAmbiguous: tc.retryAmbiguous})
			var rs results
			for i := range 30 {
				produce(t, p, &rs, "", fmt.Sprintf("b%d-%d", i/10, i%10))
			}
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, vals := rs.take()
			if len(got) != 30 {
				t.Fatalf("%d results", len(got))
			}
			for i, r := range got {
				if string(vals[i]) != fmt.Sprintf("b%d-%d", i/10, i%10) {
					t.Fatalf("result %d is of %s: results out of order", i, vals[i])
				}
				want := tc.want[i/10]
				switch {
				case want == "ok" && r.Err != nil,
					want == "not resent" && !errors.Is(r.Err, ErrNotResent),
					want == "ambiguous" && !errors.Is(r.Err, ErrAmbiguous):
					t.Fatalf("record %s: %+v; want %s", vals[i], r, want)
				}
			}
			var log []string
			for _, rec := range n.records(t, "inflight", 0) {
				log = append(log, string(rec.Value))
			}
			var want []string
			for _, b := range tc.log {
				for i := range 10 {
					want = append(want, fmt.Sprintf("b%d-%d", b, i))
				}
			}
			if strings.Join(log, " ") != strings.Join(want, " ") {
				t.Fatalf("the log holds\n%v\nwant\n%v", log, want)
			}
			for i, r := range got {
				if r.Err == nil && log[r.Offset] != string(vals[i]) {
					t.Fatalf("%s acked at %d, which holds %s", vals[i], r.Offset, log[r.Offset])
				}
			}
		})
	}
}
