package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/api"
)

// fakeQueueCluster is two fake nodes of a topic "q" of three partitions
// sharing one state: the first owns partitions 0 and 1, the second 2. A
// node's topic-wide consume leases from the partitions it owns (binary
// answer), a consume naming another's partition is answered 421 with
// its owner, as are acks and nacks of it; each node counts the consumes
// it answered, by partition named (-1 none).
type fakeQueueCluster struct {
	mu       sync.Mutex
	nodes    [2]*httptest.Server
	owner    [3]int      // partition -> node index
	values   [3][]string // partition -> its records' values
	leased   [3][]bool
	acked    [3][]bool
	consumes [2]map[int]int
	lease    uint64
	// refuse, when set, answers a node's consume in its place (an
	// error) when it returns true; f.mu is held.
	refuse func(node int, w http.ResponseWriter) bool
}

func newFakeQueueCluster(t *testing.T) *fakeQueueCluster {
	f := &fakeQueueCluster{owner: [3]int{0, 0, 1}}
	for i := range f.nodes {
		f.consumes[i] = map[int]int{}
		f.nodes[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(i, w, r) }))
		t.Cleanup(f.nodes[i].Close)
	}
	return f
}

func (f *fakeQueueCluster) append(p int, values ...string) {
	f.values[p] = append(f.values[p], values...)
	f.leased[p] = append(f.leased[p], make([]bool, len(values))...)
	f.acked[p] = append(f.acked[p], make([]bool, len(values))...)
}

func (f *fakeQueueCluster) notOwner(w http.ResponseWriter, p int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMisdirectedRequest)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeNotOwner, Message: "not mine"},
		Owner: &api.Owner{NodeID: strconv.Itoa(f.owner[p]), Addr: f.nodes[f.owner[p]].URL}})
}

func (f *fakeQueueCluster) serve(node int, w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/topics/q"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/topics/q":
		d := api.TopicDescription{Name: "q", Incarnation: "00000000000000c3"}
		for p, o := range f.owner {
			pd := api.PartitionDescription{Partition: p, Owner: &api.Owner{NodeID: strconv.Itoa(o), Addr: f.nodes[o].URL}}
			pd.Remote = o != node
			if !pd.Remote {
				pd.HighWatermark = int64(len(f.values[p]))
			}
			d.Partitions = append(d.Partitions, pd)
		}
		json.NewEncoder(w).Encode(d)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/topics/q/consume":
		if f.refuse != nil && f.refuse(node, w) {
			return
		}
		var body api.ConsumeRequest
		json.NewDecoder(r.Body).Decode(&body)
		named := -1
		if body.Partition != nil {
			named = *body.Partition
			if f.owner[named] != node {
				f.notOwner(w, named)
				return
			}
		}
		f.consumes[node][named]++
		maxRecords := 100
		if body.MaxRecords != nil {
			maxRecords = *body.MaxRecords
		}
		var b bytes.Buffer
		cw := api.NewConsumeBatchWriter(&b)
		for p := range f.owner {
			if f.owner[p] != node || (named >= 0 && p != named) || maxRecords == 0 {
				continue
			}
			var offsets []int
			for o := range f.values[p] {
				if !f.leased[p][o] && len(offsets) < maxRecords {
					offsets = append(offsets, o)
				}
			}
			if len(offsets) == 0 {
				continue
			}
			maxRecords -= len(offsets)
			f.lease++
			cw.Group(api.ConsumeGroup{Partition: p, LeaseID: f.lease, LeaseDeadlineMs: 1 << 50, Records: len(offsets)})
			for _, o := range offsets {
				f.leased[p][o] = true
				cw.Record(api.BatchRecord{Offset: int64(o), CommittedAtMs: 1, Key: []byte{}, Value: []byte(f.values[p][o])})
			}
		}
		w.Header().Set("Content-Type", api.BatchMediaType)
		w.Write(b.Bytes())
	case len(segs) == 4 && segs[1] == "partitions":
		p, _ := strconv.Atoi(segs[2])
		if f.owner[p] != node {
			f.notOwner(w, p)
			return
		}
		var body api.NackRequest
		json.NewDecoder(r.Body).Decode(&body)
		for _, o := range body.Offsets {
			switch segs[3] {
			case "acks":
				f.acked[p][o] = true
			case "nacks":
				f.leased[p][o] = false
			}
		}
		switch segs[3] {
		case "acks":
			json.NewEncoder(w).Encode(api.AckAnswer{})
		case "nacks":
			json.NewEncoder(w).Encode(api.NackAnswer{GivenBack: len(body.Offsets)})
		default:
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
		}
	default:
		http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
	}
}

// unacked lists the records not acked, "p/o".
func (f *fakeQueueCluster) unacked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for p := range f.acked {
		for o, a := range f.acked[p] {
			if !a {
				out = append(out, fmt.Sprintf("%d/%d", p, o))
			}
		}
	}
	return out
}

func sortedLines(out string) []string {
	l := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(l)
	return l
}

// TestConsumeQueue_CoversEveryOwnerUntilNothingIsLeft: consume --queue
// without --follow, asked of the first node, leases, prints and acks the
// records of both nodes' partitions (more than one consume's worth on
// one), and ends, exit 0, once a consume of each owner leased nothing.
// Before, it consumed from the node asked alone and left partition 2's
// records.
func TestConsumeQueue_CoversEveryOwnerUntilNothingIsLeft(t *testing.T) {
	f := newFakeQueueCluster(t)
	var want []string
	for p := range 3 {
		var values []string
		for o := range 1500 * (p%2 + 1) / 2 {
			values = append(values, fmt.Sprintf("v%d-%d", p, o))
			want = append(want, fmt.Sprintf("%d\t%d\t\tv%d-%d", p, o, p, o))
		}
		f.append(p, values...)
	}
	slices.Sort(want)
	var out, errb bytes.Buffer
	if code := runConsume([]string{"--addr", f.nodes[0].URL, "--topic", "q", "--queue"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := sortedLines(out.String()); !slices.Equal(got, want) {
		t.Fatalf("printed %d lines, want %d: %q...", len(got), len(want), got[:min(len(got), 5)])
	}
	if left := f.unacked(); len(left) != 0 {
		t.Fatalf("not acked: %v", left)
	}
}

// TestConsumeQueue_APartitionIsLeasedFromItsOwner: consume --queue
// --partition 2, asked of the node that does not own it, follows the 421
// to the owner, leases there and only partition 2's records, acks them
// there, and ends when a consume of it leases nothing.
func TestConsumeQueue_APartitionIsLeasedFromItsOwner(t *testing.T) {
	f := newFakeQueueCluster(t)
	f.append(0, "a")
	f.append(2, "c0", "c1")
	var out, errb bytes.Buffer
	if code := runConsume([]string{"--addr", f.nodes[0].URL, "--topic", "q", "--queue", "--partition", "2"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got, want := sortedLines(out.String()), []string{"2\t0\t\tc0", "2\t1\t\tc1"}; !slices.Equal(got, want) {
		t.Fatalf("printed %q, want %q", got, want)
	}
	f.mu.Lock()
	consumes := fmt.Sprint(f.consumes)
	f.mu.Unlock()
	if left := f.unacked(); !slices.Equal(left, []string{"0/0"}) || consumes != "[map[] map[2:2]]" {
		t.Fatalf("not acked %v (want partition 0's alone); consumes answered by each node, by partition: %s", left, consumes)
	}
}
