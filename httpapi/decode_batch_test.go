package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/internal/testmem"
)

// TestDecodeBatch_ATinyBodyTakesATinyBuffer: a 3-byte binary produce body
// is decoded with buffers the size its Content-Length says (or small ones
// when it says none), not 64 KiB each: ten thousand such requests must
// not hold memory the in-flight byte budget never sees.
func TestDecodeBatch_ATinyBodyTakesATinyBuffer(t *testing.T) {
	body := api.AppendRecord(nil, nil, []byte("x"))
	for _, size := range []int64{int64(len(body)), -1} {
		var n int
		var err error
		got := testmem.Allocated(func() {
			recs, release, e := decodeBatch(bytes.NewReader(body), size)
			n, err = len(recs), e
			release()
		})
		if err != nil || n != 1 {
			t.Fatalf("Content-Length %d: %d records, %v", size, n, err)
		}
		if got > 16<<10 {
			t.Fatalf("Content-Length %d: decoding a 3-byte body allocated %d bytes; want at most 16 KiB", size, got)
		}
	}
}

// batchOf is a binary produce body of n records of a 2-byte key and a
// 98-byte value (100 bytes, as the produce command's bench lines).
func batchOf(n int) []byte {
	var body []byte
	for i := range n {
		body = api.AppendRecord(body, []byte("k1"), fmt.Appendf(nil, "%098d", i))
	}
	return body
}

// TestDecodeBatch_TheRecordListIsExactAndInOrder: whatever the number of
// records, the list holds them in order, exactly their number, also in a
// list and a buffer given back by a larger body before.
func TestDecodeBatch_TheRecordListIsExactAndInOrder(t *testing.T) {
	for _, n := range []int{10000, 1, 64, 65, 1088, 1089, 10000} {
		body := batchOf(n)
		recs, release, err := decodeBatch(bytes.NewReader(body), int64(len(body)))
		if err != nil || len(recs) != n {
			t.Fatalf("%d records: %d decoded, %v", n, len(recs), err)
		}
		for i, r := range recs {
			if string(r.Key) != "k1" || !bytes.Equal(r.Value, fmt.Appendf(nil, "%098d", i)) {
				t.Fatalf("%d records: record %d is %q %q", n, i, r.Key, r.Value)
			}
		}
		release()
	}
}

// TestDecodeBatch_RecordsAreTheBodysUntilReleased: a body's records are
// slices of its pooled buffer, valid until released: the tests poison a
// buffer given back, so a record read after its release (or a buffer
// given back twice, or to another body while in use) shows.
func TestDecodeBatch_RecordsAreTheBodysUntilReleased(t *testing.T) {
	body := batchOf(100)
	recs, release, err := decodeBatch(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	value := recs[7].Value
	if !bytes.Equal(value, fmt.Appendf(nil, "%098d", 7)) {
		t.Fatalf("record 7 is %q", value)
	}
	release()
	if bytes.Equal(value, fmt.Appendf(nil, "%098d", 7)) {
		t.Fatal("a record read after its body was released still reads as it was: the tests' poison is off")
	}
}

// TestProduce_TheCommitHasTheBodysBytes: concurrent binary produces, each
// body released (and poisoned) once answered, commit their own bytes:
// the handler keeps a body until the node has copied its records.
func TestProduce_TheCommitHasTheBodysBytes(t *testing.T) {
	node, a := reviewNode(t, Options{})
	srv := httptest.NewServer(a)
	defer srv.Close()
	const requests, each = 8, 500
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body []byte
			for j := range each {
				body = api.AppendRecord(body, nil, fmt.Appendf(nil, "request %d record %d", i, j))
			}
			resp, err := http.Post(srv.URL+"/v1/topics/t/partitions/0/records", api.BatchMediaType, bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for offset := int64(0); offset < requests*each; {
		res, err := node.Read(context.Background(), "t", 0, offset, 10000, 64<<20)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("read at %d: %d records, %v", offset, len(res.Records), err)
		}
		for _, r := range res.Records {
			var i, j int
			if _, err := fmt.Sscanf(string(r.Value), "request %d record %d", &i, &j); err != nil || seen[string(r.Value)] {
				t.Fatalf("offset %d holds %q", r.Offset, r.Value)
			}
			seen[string(r.Value)] = true
		}
		offset = res.Records[len(res.Records)-1].Offset + 1
	}
	if len(seen) != requests*each {
		t.Fatalf("%d distinct records of %d", len(seen), requests*each)
	}
}

// TestDecodeBatch_ADeclaredLengthAllocatesNothingAhead: a body that
// declares 64 MiB and holds one record allocates about what it holds,
// with or without --max-inflight-bytes, and takes from the budget only
// what it sent.
func TestDecodeBatch_ADeclaredLengthAllocatesNothingAhead(t *testing.T) {
	for _, budget := range []int64{0, 8 << 20} {
		a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 64 << 20, MaxInflight: budget})
		body := api.AppendRecord(nil, nil, []byte("x"))
		r := httptest.NewRequest("POST", "/v1/topics/t/partitions/0/records", bytes.NewReader(body))
		r.ContentLength = 64 << 20
		m := a.meterBody(httptest.NewRecorder(), r)
		got := testmem.Allocated(func() {
			recs, release, err := decodeBatch(m, r.ContentLength)
			if err != nil || len(recs) != 1 {
				t.Errorf("budget %d: %d records, %v", budget, len(recs), err)
				return
			}
			release()
		})
		if got > 256<<10 || m.held != int64(len(body)) {
			t.Fatalf("budget %d: a 3-byte body declared as 64 MiB allocated %d bytes and held %d of the budget", budget, got, m.held)
		}
		m.release()
	}
}

// TestDecodeBatch_ABodyThatFitsTheBudgetAloneIsTaken: with
// --max-inflight-bytes equal to --max-body-bytes (the least the
// configuration allows), a body just under the bound, alone, is taken
// whole.
func TestDecodeBatch_ABodyThatFitsTheBudgetAloneIsTaken(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20, MaxInflight: 1 << 20})
	body := batchOf(10000) // 1,020,000 bytes
	r := httptest.NewRequest("POST", "/v1/topics/t/partitions/0/records", bytes.NewReader(body))
	m := a.meterBody(httptest.NewRecorder(), r)
	defer m.release()
	recs, release, err := decodeBatch(m, r.ContentLength)
	if err != nil || len(recs) != 10000 {
		t.Fatalf("a %d-byte body alone under a budget of %d: %d records, %v (held %d)", len(body), 1<<20, len(recs), err, m.held)
	}
	release()
}

// TestDecodeBatch_AStalledBodyHoldsOnlyWhatItSent: a body that declares
// 64 MiB, sends one record and stalls leaves the rest of an 8 MiB budget
// to a 4 MiB body beside it.
func TestDecodeBatch_AStalledBodyHoldsOnlyWhatItSent(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 64 << 20, MaxInflight: 8 << 20})
	stall := &stallingReader{first: api.AppendRecord(nil, nil, []byte("x")), stalled: make(chan struct{}), gone: make(chan struct{})}
	hr := httptest.NewRequest("POST", "/v1/topics/t/partitions/0/records", stall)
	hr.ContentLength = 64 << 20
	stalled := a.meterBody(httptest.NewRecorder(), hr)
	done := make(chan error, 1)
	go func() {
		_, _, err := decodeBatch(stalled, hr.ContentLength)
		done <- err
	}()
	<-stall.stalled // its first record read, the decoder waits for more
	beside := a.meterBody(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/topics/t/partitions/1/records", bytes.NewReader(make([]byte, 4<<20))))
	_, err := io.Copy(io.Discard, beside)
	beside.release()
	close(stall.gone) // the stalled client goes away
	if cut := <-done; cut == nil {
		t.Error("a body that ended 64 MiB short decoded without an error")
	}
	held := stalled.held
	stalled.release()
	if err != nil {
		t.Fatalf("a 4 MiB body under an 8 MiB budget beside a stalled body holding %d bytes: %v", held, err)
	}
}

// stallingReader gives its first bytes, then blocks until gone closes
// (stalled closes when the second read starts), then fails.
type stallingReader struct {
	first         []byte
	stalled, gone chan struct{}
	reads         int
}

func (s *stallingReader) Read(p []byte) (int, error) {
	s.reads++
	if s.reads == 1 {
		return copy(p, s.first), nil
	}
	if s.reads == 2 {
		close(s.stalled)
	}
	<-s.gone
	return 0, io.ErrUnexpectedEOF
}

// BenchmarkDecodeBatch: a binary body of 10,000 records of 100 bytes (the
// produce command's request in the bench's cli suite).
func BenchmarkDecodeBatch(b *testing.B) {
	body := batchOf(10000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		_, release, err := decodeBatch(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}
