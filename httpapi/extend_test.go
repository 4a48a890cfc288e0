package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// post sends body to path and decodes a 200's answer into out, returning
// the status and the error code of any other.
func post(t *testing.T, a http.Handler, path, body string, out any) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	if w.Code != http.StatusOK {
		var e api.ErrorBody
		json.Unmarshal(w.Body.Bytes(), &e)
		return w.Code, e.Error.Code
	}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("%s: %s: %v", path, w.Body.String(), err)
	}
	return w.Code, ""
}

// TestExtend_KeepsTheRecordsLeasedUntilTheNewDeadline: POST .../extend
// under the consume's lease id answers how many records it extended and
// their deadline, and a consume before that deadline leases nothing
// more, though the first lease has run out; under another id it extends
// nothing.
func TestExtend_KeepsTheRecordsLeasedUntilTheNewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node, a := reviewNode(t, Options{})
		if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: []byte("a")}, {Value: []byte("b")}}); err != nil {
			t.Fatal(err)
		}
		var leased api.ConsumeAnswer
		if code, ec := post(t, a, "/v1/topics/t/consume", `{"lease_ms": 1000}`, &leased); code != 200 || len(leased.Records) != 2 {
			t.Fatalf("consume: %d %s %+v", code, ec, leased)
		}
		id := leased.Records[0].LeaseID
		var ext api.ExtendAnswer
		if code, ec := post(t, a, "/v1/topics/t/partitions/0/extend", fmt.Sprintf(`{"lease_id": %d, "offsets": [0, 1, 7], "lease_ms": 60000}`, id+1), &ext); code != 200 || ext.Extended != 0 || ext.LeaseDeadlineMs != 0 {
			t.Fatalf("extend under another id: %d %s %+v; want nothing extended", code, ec, ext)
		}
		now := time.Now()
		if code, ec := post(t, a, "/v1/topics/t/partitions/0/extend", fmt.Sprintf(`{"lease_id": %d, "offsets": [0, 1, 7], "lease_ms": 60000}`, id), &ext); code != 200 || ext.Extended != 2 {
			t.Fatalf("extend: %d %s %+v; want 2 extended", code, ec, ext)
		}
		if want := now.Add(time.Minute).UnixMilli(); ext.LeaseDeadlineMs != want {
			t.Fatalf("lease_deadline_ms %d, want %d", ext.LeaseDeadlineMs, want)
		}
		<-time.After(59 * time.Second) // the first lease (1 s) long over
		var again api.ConsumeAnswer
		if code, ec := post(t, a, "/v1/topics/t/consume", `{}`, &again); code != 200 || len(again.Records) != 0 {
			t.Fatalf("consume before the new deadline: %d %s %+v; want nothing", code, ec, again)
		}
		<-time.After(time.Second)
		if code, ec := post(t, a, "/v1/topics/t/consume", `{}`, &again); code != 200 || len(again.Records) != 2 {
			t.Fatalf("consume at the new deadline: %d %s %+v; want both records", code, ec, again)
		}
	})
}

// TestExtend_Refusals: an extension's body is checked as a nack's is, and
// its lease_ms as a consume's; the answer names what is wrong.
func TestExtend_Refusals(t *testing.T) {
	_, a := reviewNode(t, Options{})
	if runtime.MaxLease != time.Duration(api.MaxLeaseMs)*time.Millisecond {
		t.Fatalf("runtime.MaxLease %v, api.MaxLeaseMs %d: the bounds differ", runtime.MaxLease, api.MaxLeaseMs)
	}
	tooMany := strings.Repeat("1,", api.MaxAcks) + "1"
	for _, c := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"t/partitions/0", `{"offsets": [0], "lease_ms": 1000}`, 400, api.CodeInvalidBody},
		{"t/partitions/0", `{"lease_id": 1, "offsets": [0]}`, 400, api.CodeInvalidBody},
		{"t/partitions/0", `{"lease_id": 1, "offsets": [0], "lease_ms": 0}`, 400, api.CodeInvalidBody},
		{"t/partitions/0", fmt.Sprintf(`{"lease_id": 1, "offsets": [0], "lease_ms": %d}`, api.MaxLeaseMs+1), 400, api.CodeInvalidBody},
		{"t/partitions/0", `{"lease_id": 1, "offsets": [], "lease_ms": 1000}`, 400, api.CodeInvalidBody},
		{"t/partitions/0", `{"lease_id": 1, "offsets": [` + tooMany + `], "lease_ms": 1000}`, 400, api.CodeInvalidBody},
		{"t/partitions/0", `{"lease_id": 1, "offsets": [-1], "lease_ms": 1000}`, 400, api.CodeInvalidOffset},
		{"t/partitions/0", `{"lease_id": 1, "offsets": [0], "lease_ms": 1000, "lease": 5}`, 400, api.CodeInvalidBody},
		{"t/partitions/1", `{"lease_id": 1, "offsets": [0], "lease_ms": 1000}`, 404, api.CodePartitionNotFound},
		{"nope/partitions/0", `{"lease_id": 1, "offsets": [0], "lease_ms": 1000}`, 404, api.CodeTopicNotFound},
	} {
		var ext api.ExtendAnswer
		if code, ec := post(t, a, "/v1/topics/"+c.path+"/extend", c.body, &ext); code != c.status || ec != c.code {
			t.Errorf("%s %.80s: %d %s; want %d %s", c.path, c.body, code, ec, c.status, c.code)
		}
	}
	var ext api.ExtendAnswer
	if code, ec := post(t, a, "/v1/topics/t/partitions/0/extend", fmt.Sprintf(`{"lease_id": 1, "offsets": [0], "lease_ms": %d}`, api.MaxLeaseMs), &ext); code != 200 || ext.Extended != 0 {
		t.Errorf("lease_ms at the bound, nothing leased: %d %s %+v; want 200 and 0", code, ec, ext)
	}
}

// elsewhere is a cluster's view in which another node owns every
// partition.
type elsewhere struct{}

func (elsewhere) Locate(string, int) (cluster.Location, bool) {
	return cluster.Location{NodeID: "n2", Addr: "10.0.0.2:7070"}, true
}
func (elsewhere) Settle(context.Context, string, int) bool { return true }
func (elsewhere) Serving() bool                            { return true }
func (elsewhere) Registration() uint64                     { return 1 }

// notAssigned is a metastore that assigns this node no partition.
type notAssigned struct{ runtime.Metastore }

func (notAssigned) Assigned(context.Context, string, int) (bool, error) { return false, nil }

// TestExtend_AnotherNodesPartitionIsAnswered421: in a cluster, an
// extension of a partition another node owns is sent there, as a nack.
func TestExtend_AnotherNodesPartitionIsAnswered421(t *testing.T) {
	node, served := reviewNode(t, Options{})
	a := New(node, notAssigned{served.ms}, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20, Owners: elsewhere{}})
	var ext api.ExtendAnswer
	if code, ec := post(t, a, "/v1/topics/t/partitions/0/extend", `{"lease_id": 1, "offsets": [0], "lease_ms": 1000}`, &ext); code != http.StatusMisdirectedRequest || ec != api.CodeNotOwner {
		t.Fatalf("extend of another node's partition: %d %s; want 421 not_owner", code, ec)
	}
}
