package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// queueNode is a fake node serving one topic's queue consume from
// memory, as a RoundTripper (no network: it runs inside a synctest
// bubble, on its clock): the description, topic-wide consumes (leasing
// from any partition, lowest offset first, with a long poll woken by an
// append, a nack or a lease's end), acks, nacks and lease extensions, as
// docs/http-api.md, "Queue consume", says. It counts what it did.
type queueNode struct {
	mu          sync.Mutex
	name        string
	incarnation string
	parts       [][]*fakeRecord
	changed     chan struct{} // closed at each append, nack or ack, then made again
	nextLease   uint64
	consumes    int
	jsonAnswers int // consumes answered in JSON: asked without Accept: api.BatchMediaType
	extends     int
	expired     int            // deliveries of a record whose earlier lease ran out
	failExtends int            // answer the next extensions 500, this many
	elsewhere   map[int]string // partition -> the address of the node that owns it, if not this one
}

// queueCluster routes each request to the fake node of its host.
type queueCluster map[string]*queueNode

func (c queueCluster) RoundTrip(r *http.Request) (*http.Response, error) {
	return c[r.URL.Host].RoundTrip(r)
}

type fakeRecord struct {
	value      string
	acked      bool
	leaseID    uint64    // 0: never leased
	deadline   time.Time // of the lease leaseID
	given      bool      // nacked since its last lease
	deliveries int
}

func newQueueNode(name string, partitions int) *queueNode {
	return &queueNode{name: name, incarnation: "00000000000000b2", parts: make([][]*fakeRecord, partitions), changed: make(chan struct{}), nextLease: 100,
		elsewhere: map[int]string{}}
}

func (n *queueNode) client() *Client {
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: n}})
	if err != nil {
		panic(err)
	}
	return c
}

// wake wakes the consumes waiting; n.mu is held.
func (n *queueNode) wake() {
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *queueNode) append(p int, values ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, v := range values {
		n.parts[p] = append(n.parts[p], &fakeRecord{value: v})
	}
	n.wake()
}

// free reports that r may be leased at now.
func (r *fakeRecord) free(now time.Time) bool {
	return !r.acked && (r.leaseID == 0 || r.given || !now.Before(r.deadline))
}

// live reports that r is leased under id at now.
func (r *fakeRecord) live(id uint64, now time.Time) bool {
	return !r.acked && !r.given && r.leaseID == id && now.Before(r.deadline)
}

func (n *queueNode) RoundTrip(r *http.Request) (*http.Response, error) {
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/topics/"), "/")
	if segs[0] != n.name {
		return errorAnswer(404, api.CodeTopicNotFound, nil), nil
	}
	switch {
	case len(segs) == 1 && r.Method == http.MethodGet:
		n.mu.Lock()
		defer n.mu.Unlock()
		d := api.TopicDescription{Name: n.name, Incarnation: n.incarnation}
		for p := range n.parts {
			pd := api.PartitionDescription{Partition: p, HighWatermark: int64(len(n.parts[p]))}
			if addr, ok := n.elsewhere[p]; ok {
				pd = api.PartitionDescription{Partition: p, Remote: true, Owner: &api.Owner{NodeID: addr, Addr: addr}}
			}
			d.Partitions = append(d.Partitions, pd)
		}
		return jsonAnswer(200, d), nil
	case len(segs) == 2 && segs[1] == "consume":
		if resp := n.consume(r); resp != nil {
			return resp, nil
		}
		return nil, r.Context().Err()
	case len(segs) == 4 && segs[1] == "partitions":
		p, _ := strconv.Atoi(segs[2])
		if addr, ok := n.elsewhere[p]; ok {
			return misdirected(addr), nil
		}
		var body struct {
			LeaseID *uint64 `json:"lease_id"`
			Offsets []int64 `json:"offsets"`
			LeaseMs *int    `json:"lease_ms"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return errorAnswer(400, api.CodeInvalidBody, nil), nil
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		now := time.Now()
		count := 0
		switch segs[3] {
		case "acks":
			for _, o := range body.Offsets {
				n.parts[p][o].acked = true
			}
			n.wake()
			return jsonAnswer(200, api.AckAnswer{}), nil
		case "nacks":
			for _, o := range body.Offsets {
				if rec := n.parts[p][o]; rec.live(*body.LeaseID, now) {
					rec.given = true
					count++
				}
			}
			n.wake()
			return jsonAnswer(200, api.NackAnswer{GivenBack: count}), nil
		case "extend":
			n.extends++
			if n.failExtends > 0 {
				n.failExtends--
				return errorAnswer(500, api.CodeInternal, nil), nil
			}
			deadline := now.Add(time.Duration(*body.LeaseMs) * time.Millisecond)
			for _, o := range body.Offsets {
				if rec := n.parts[p][o]; rec.live(*body.LeaseID, now) {
					rec.deadline = deadline
					count++
				}
			}
			out := api.ExtendAnswer{Extended: count}
			if count > 0 {
				out.LeaseDeadlineMs = deadline.UnixMilli()
			}
			return jsonAnswer(200, out), nil
		}
	}
	return errorAnswer(404, api.CodeNotFound, nil), nil
}

// consume leases free records, lowest offset first across partitions,
// waiting up to wait_ms for one; nil when the caller went away.
func (n *queueNode) consume(r *http.Request) *http.Response {
	var body api.ConsumeRequest
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return errorAnswer(400, api.CodeInvalidBody, nil)
	}
	maxRecords, leaseMs, waitMs := 100, 30000, 0
	if body.MaxRecords != nil {
		maxRecords = *body.MaxRecords
	}
	if body.LeaseMs != nil {
		leaseMs = *body.LeaseMs
	}
	if body.WaitMs != nil {
		waitMs = *body.WaitMs
	}
	deadline := time.NewTimer(time.Duration(waitMs) * time.Millisecond)
	defer deadline.Stop()
	n.mu.Lock()
	n.consumes++
	for {
		now := time.Now()
		out := api.ConsumeAnswer{Records: []api.LeasedRecord{}}
		ids := map[int]uint64{}
		var nextEnd time.Time
		for p, recs := range n.parts {
			if _, ok := n.elsewhere[p]; ok {
				continue
			}
			for o, rec := range recs {
				if len(out.Records) == maxRecords {
					break
				}
				if !rec.free(now) {
					if !rec.acked && (nextEnd.IsZero() || rec.deadline.Before(nextEnd)) {
						nextEnd = rec.deadline
					}
					continue
				}
				if ids[p] == 0 {
					n.nextLease++
					ids[p] = n.nextLease
				}
				if rec.leaseID != 0 && !rec.given {
					n.expired++
				}
				rec.leaseID, rec.given, rec.deadline = ids[p], false, now.Add(time.Duration(leaseMs)*time.Millisecond)
				rec.deliveries++
				out.Records = append(out.Records, api.LeasedRecord{Partition: p, LeaseID: ids[p], LeaseDeadlineMs: rec.deadline.UnixMilli(),
					Record: api.Record{Offset: int64(o), Value: base64.StdEncoding.EncodeToString([]byte(rec.value)), Encoding: "base64"}})
			}
		}
		if len(out.Records) > 0 || waitMs == 0 {
			n.mu.Unlock()
			return n.consumed(r, out)
		}
		changed := n.changed
		n.mu.Unlock()
		var expiry <-chan time.Time
		if !nextEnd.IsZero() {
			t := time.NewTimer(time.Until(nextEnd))
			defer t.Stop()
			expiry = t.C
		}
		select {
		case <-changed:
		case <-expiry:
		case <-deadline.C:
			waitMs = 0
		case <-r.Context().Done():
			return nil
		}
		n.mu.Lock()
	}
}

// consumed answers a consume's leases as a node does: in the binary
// consume encoding when the request asks for it (Accept), else in JSON.
func (n *queueNode) consumed(r *http.Request, out api.ConsumeAnswer) *http.Response {
	if r.Header.Get("Accept") != api.BatchMediaType {
		n.mu.Lock()
		n.jsonAnswers++
		n.mu.Unlock()
		return jsonAnswer(200, out)
	}
	var b bytes.Buffer
	cw := api.NewConsumeBatchWriter(&b)
	for start := 0; start < len(out.Records); {
		first, end := out.Records[start], start+1
		for end < len(out.Records) && out.Records[end].Partition == first.Partition {
			end++
		}
		cw.Group(api.ConsumeGroup{Partition: first.Partition, LeaseID: first.LeaseID, LeaseDeadlineMs: first.LeaseDeadlineMs, Records: end - start})
		for _, rec := range out.Records[start:end] {
			value, _ := base64.StdEncoding.DecodeString(rec.Value)
			cw.Record(api.BatchRecord{Offset: rec.Offset, CommittedAtMs: rec.CommittedAtMs, Key: []byte{}, Value: value})
		}
		start = end
	}
	return answer(200, b.String(), "Content-Type", api.BatchMediaType, api.HeaderRecords, strconv.Itoa(len(out.Records)))
}

// deliveries lists how many times each record was leased, "p/o:n" for
// those leased more than once.
func (n *queueNode) redelivered() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for p, recs := range n.parts {
		for o, rec := range recs {
			if rec.deliveries > 1 {
				out = append(out, fmt.Sprintf("%d/%d:%d", p, o, rec.deliveries))
			}
		}
	}
	return out
}

// unacked counts the records not acked.
func (n *queueNode) unacked() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, recs := range n.parts {
		for _, rec := range recs {
			if !rec.acked {
				c++
			}
		}
	}
	return c
}

func (n *queueNode) counts() (consumes, extends, expired int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.consumes, n.extends, n.expired
}

// leased counts the records leased and not settled at now.
func (n *queueNode) leased() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	now, c := time.Now(), 0
	for _, recs := range n.parts {
		for _, rec := range recs {
			if rec.leaseID != 0 && rec.live(rec.leaseID, now) {
				c++
			}
		}
	}
	return c
}
