package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/narad-io/storage/api"
)

// TestExtendLease_SendsTheLeaseAndReadsTheAnswer: ExtendLease posts the
// lease id, the offsets and the lease in milliseconds (a sub-millisecond
// lease as one) to the partition's extend, and returns the count and the
// deadline; nothing extended returns no deadline; a refusal is the
// code's error.
func TestExtendLease_SendsTheLeaseAndReadsTheAnswer(t *testing.T) {
	var got []api.ExtendRequest
	var paths []string
	c := fakeClient(t, func(r *http.Request) *http.Response {
		b, _ := io.ReadAll(r.Body)
		var req api.ExtendRequest
		if err := json.Unmarshal(b, &req); err != nil || r.Method != http.MethodPost {
			return answer(400, `{"error":{"code":"invalid_body","message":"m"}}`)
		}
		got, paths = append(got, req), append(paths, r.URL.Path)
		switch *req.LeaseMs {
		case 30000:
			return answer(200, `{"extended":2,"lease_deadline_ms":1765000030000}`)
		case 0:
			return answer(400, `{"error":{"code":"invalid_body","message":"lease_ms must be from 1 to 43200000, not 0"}}`)
		}
		return answer(200, `{"extended":0,"lease_deadline_ms":0}`)
	}, Options{})
	ctx := context.Background()
	n, deadline, err := c.ExtendLease(ctx, "jobs", 3, 1765000000000123, 30*time.Second, 41, 42)
	if err != nil || n != 2 || !deadline.Equal(time.UnixMilli(1765000030000)) {
		t.Fatalf("extend: %d, %v, %v", n, deadline, err)
	}
	if paths[0] != "/v1/topics/jobs/partitions/3/extend" || *got[0].LeaseID != 1765000000000123 || len(got[0].Offsets) != 2 || got[0].Offsets[1] != 42 {
		t.Fatalf("sent %s %+v", paths[0], got[0])
	}
	n, deadline, err = c.ExtendLease(ctx, "jobs", 3, 1, time.Microsecond, 41)
	if err != nil || n != 0 || !deadline.IsZero() || *got[1].LeaseMs != 1 {
		t.Fatalf("a microsecond's lease: %d, %v, %v, sent %d ms; want nothing extended, no deadline, 1 ms sent", n, deadline, err, *got[1].LeaseMs)
	}
	if _, _, err := c.ExtendLease(ctx, "jobs", 3, 1, 0, 41); !errors.Is(err, ErrInvalidBody) {
		t.Fatalf("a lease of 0: %v; want ErrInvalidBody", err)
	}
}

// TestExtendLease_FollowsTheOwner: an extension of a partition another
// node owns is sent again to the owner a 421 names.
func TestExtendLease_FollowsTheOwner(t *testing.T) {
	cl := &cluster{nodes: map[string]func(*http.Request) *http.Response{
		"127.0.0.1:7480": func(*http.Request) *http.Response { return misdirected("http://10.0.0.2:7480") },
		"10.0.0.2:7480": func(*http.Request) *http.Response {
			return answer(200, `{"extended":1,"lease_deadline_ms":1765000030000}`)
		},
	}}
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cl}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := c.ExtendLease(context.Background(), "jobs", 0, 1, time.Second, 5); err != nil || n != 1 {
		t.Fatalf("extend through a 421: %d, %v; want 1 from the owner", n, err)
	}
	want := []string{"127.0.0.1:7480 POST /v1/topics/jobs/partitions/0/extend", "10.0.0.2:7480 POST /v1/topics/jobs/partitions/0/extend"}
	if took := cl.took(); len(took) != 2 || took[0] != want[0] || took[1] != want[1] {
		t.Fatalf("calls %q, want %q", took, want)
	}
}
