package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// topicNode is a fake node serving one topic from memory, as a
// RoundTripper (no network: it runs inside a synctest bubble): the
// topic's description, fetches (binary answers; long polls wait for an
// append, their wait_ms or the request's end), topic-wide waits (unless
// noWait: an older node, without the route), the offset at a time, and a
// cursor's create and commit. Partitions in elsewhere are another node's:
// a fetch of one is answered 421 with that node's address, a wait lists
// it in not_here. It counts the requests in flight, fetches and waits.
type topicNode struct {
	mu          sync.Mutex
	name        string
	incarnation string
	parts       []*fakePartition
	changed     chan struct{}      // closed at each append, then made again
	cursors     map[string][]int64 // a cursor's position in each partition
	elsewhere   map[int]string     // partition -> the address of its owner
	noWait      bool               // answer a wait 404 not_found, as a node without the route
	waitFails   int                // answer the next waits 500, this many
	hwmUnknown  bool               // answer each partition a wait names ready at -1, as a node that cannot read its boundaries
	inFlight    int                // fetches and waits being answered
	maxInFlight int
	fetches     int
	waits       int
	served      []string // "p@offset wait" of each fetch, "wait [p@offset ...] wait" of each wait, in order
}

type fakePartition struct {
	start      int64    // records below it were deleted by retention
	values     []string // offset i holds values[i]
	damageFrom int64    // [damageFrom, damageTo) is a damaged frame
	damageTo   int64
	appended   chan struct{} // closed at each append, then made again
}

func newTopicNode(name string, partitions int) *topicNode {
	n := &topicNode{name: name, incarnation: "00000000000000a1", cursors: map[string][]int64{}, changed: make(chan struct{}), elsewhere: map[int]string{}}
	for range partitions {
		n.parts = append(n.parts, &fakePartition{appended: make(chan struct{})})
	}
	return n
}

// append commits values to partition p and wakes its long polls.
func (n *topicNode) append(p int, values ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fp := n.parts[p]
	fp.values = append(fp.values, values...)
	close(fp.appended)
	fp.appended = make(chan struct{})
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *topicNode) client(opts Options) *Client {
	opts.HTTPClient = &http.Client{Transport: n}
	c, err := New("127.0.0.1:7480", opts)
	if err != nil {
		panic(err)
	}
	return c
}

func jsonAnswer(status int, v any) *http.Response {
	b, _ := json.Marshal(v)
	return answer(status, string(b))
}

func errorAnswer(status int, code string, extra func(*api.ErrorBody)) *http.Response {
	body := api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: code}}
	if extra != nil {
		extra(&body)
	}
	return jsonAnswer(status, body)
}

func (n *topicNode) RoundTrip(r *http.Request) (*http.Response, error) {
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/topics/"), "/")
	if segs[0] != n.name {
		return errorAnswer(404, api.CodeTopicNotFound, nil), nil
	}
	switch {
	case len(segs) == 1 && r.Method == http.MethodGet:
		return n.describe(), nil
	case len(segs) == 2 && segs[1] == "wait" && n.noWait:
		n.mu.Lock()
		defer n.mu.Unlock()
		n.served = append(n.served, "wait (no route)")
		return errorAnswer(404, api.CodeNotFound, nil), nil
	case len(segs) == 2 && segs[1] == "wait" && r.Method == http.MethodPost:
		if resp := n.wait(r); resp != nil {
			return resp, nil
		}
		return nil, r.Context().Err()
	case len(segs) >= 3 && segs[1] == "partitions" && n.owner(segs[2]) != "":
		return misdirected(n.owner(segs[2])), nil
	case len(segs) == 4 && segs[1] == "partitions" && segs[3] == "records":
		p, _ := strconv.Atoi(segs[2])
		if resp := n.fetch(r, p); resp != nil {
			return resp, nil
		}
		return nil, r.Context().Err() // the caller went away during the long poll
	case len(segs) == 4 && segs[1] == "partitions" && segs[3] == "offset":
		p, _ := strconv.Atoi(segs[2])
		n.mu.Lock()
		defer n.mu.Unlock()
		hwm := int64(len(n.parts[p].values))
		at, _ := strconv.ParseInt(r.URL.Query().Get("at_ms"), 10, 64)
		off := min(at, hwm) // the fake's records are committed at their offset, in ms
		return jsonAnswer(200, api.OffsetAnswer{Offset: max(off, n.parts[p].start), HighWatermark: hwm}), nil
	case len(segs) == 3 && segs[1] == "cursors" && r.Method == http.MethodPut:
		return n.putCursor(r, segs[2]), nil
	case len(segs) == 5 && segs[1] == "cursors" && r.Method == http.MethodPut:
		p, _ := strconv.Atoi(segs[4])
		var body api.CommitCursorRequest
		json.NewDecoder(r.Body).Decode(&body)
		n.mu.Lock()
		defer n.mu.Unlock()
		n.cursors[segs[2]][p] = *body.Position
		return jsonAnswer(200, api.CommitCursorAnswer{Position: *body.Position}), nil
	}
	return errorAnswer(404, api.CodeNotFound, nil), nil
}

// owner is the address of the node that owns partition ps, if not this one.
func (n *topicNode) owner(ps string) string {
	p, _ := strconv.Atoi(ps)
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.elsewhere[p]
}

// wait answers a topic-wide wait: the partitions named whose high
// watermark is not their position, once any is, or none at wait_ms;
// those another node owns at once in not_here; 404 topic_not_found for
// another incarnation. It returns nil when the caller went away.
func (n *topicNode) wait(r *http.Request) *http.Response {
	var body api.TopicWaitRequest
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Positions) == 0 {
		return errorAnswer(400, api.CodeInvalidBody, nil)
	}
	waitMs := 0
	if body.WaitMs != nil {
		waitMs = *body.WaitMs
	}
	named := make([]string, len(body.Positions))
	for i, pp := range body.Positions {
		named[i] = fmt.Sprintf("%d@%d", pp.Partition, pp.Offset)
	}
	n.mu.Lock()
	n.waits++
	n.inFlight++
	n.maxInFlight = max(n.maxInFlight, n.inFlight)
	n.served = append(n.served, fmt.Sprintf("wait %v %v", named, time.Duration(waitMs)*time.Millisecond))
	defer func() {
		n.mu.Lock()
		n.inFlight--
		n.mu.Unlock()
	}()
	if n.waitFails > 0 {
		n.waitFails--
		n.mu.Unlock()
		return errorAnswer(500, api.CodeInternal, nil)
	}
	deadline := time.NewTimer(time.Duration(waitMs) * time.Millisecond)
	defer deadline.Stop()
	for {
		if body.Incarnation != "" && body.Incarnation != n.incarnation {
			n.mu.Unlock()
			return errorAnswer(404, api.CodeTopicNotFound, nil)
		}
		out := api.TopicWaitAnswer{Ready: []api.PartitionHighWatermark{}, NotHere: []int{}, Incarnation: n.incarnation}
		for _, pp := range body.Positions {
			if _, ok := n.elsewhere[pp.Partition]; ok {
				out.NotHere = append(out.NotHere, pp.Partition)
			} else if n.hwmUnknown {
				out.Ready = append(out.Ready, api.PartitionHighWatermark{Partition: pp.Partition, HighWatermark: -1})
			} else if hwm := int64(len(n.parts[pp.Partition].values)); hwm != pp.Offset {
				out.Ready = append(out.Ready, api.PartitionHighWatermark{Partition: pp.Partition, HighWatermark: hwm})
			}
		}
		if len(out.Ready) > 0 || len(out.NotHere) > 0 || waitMs == 0 {
			n.mu.Unlock()
			return jsonAnswer(200, out)
		}
		changed := n.changed
		n.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			waitMs = 0
		case <-r.Context().Done():
			return nil
		}
		n.mu.Lock()
	}
}

func (n *topicNode) describe() *http.Response {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := api.TopicDescription{Name: n.name, Incarnation: n.incarnation}
	for p, fp := range n.parts {
		d.Partitions = append(d.Partitions, api.PartitionDescription{Partition: p, StartOffset: fp.start, HighWatermark: int64(len(fp.values))})
	}
	return jsonAnswer(200, d)
}

func (n *topicNode) putCursor(r *http.Request, name string) *http.Response {
	var body api.CreateCursorRequest
	json.NewDecoder(r.Body).Decode(&body)
	n.mu.Lock()
	defer n.mu.Unlock()
	status := 200
	if n.cursors[name] == nil {
		status = 201
		n.cursors[name] = make([]int64, len(n.parts))
		for p, fp := range n.parts {
			if body.From != nil && *body.From == "latest" {
				n.cursors[name][p] = int64(len(fp.values))
			}
		}
	}
	cur := api.Cursor{Name: name}
	for p, pos := range n.cursors[name] {
		hwm := int64(len(n.parts[p].values))
		cur.Partitions = append(cur.Partitions, api.CursorPosition{Partition: p, Position: pos, HighWatermark: hwm, Lag: hwm - pos})
	}
	return jsonAnswer(status, cur)
}

func (n *topicNode) fetch(r *http.Request, p int) *http.Response {
	q := r.URL.Query()
	offset, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
	waitMs, _ := strconv.Atoi(q.Get("wait_ms"))
	maxRecords, _ := strconv.Atoi(q.Get("max_records"))
	if maxRecords == 0 {
		maxRecords = api.DefaultFetchRecords
	}
	n.mu.Lock()
	n.fetches++
	n.inFlight++
	n.maxInFlight = max(n.maxInFlight, n.inFlight)
	n.served = append(n.served, fmt.Sprintf("%d@%d %v", p, offset, time.Duration(waitMs)*time.Millisecond))
	defer func() {
		n.mu.Lock()
		n.inFlight--
		n.mu.Unlock()
	}()
	deadline := time.NewTimer(time.Duration(waitMs) * time.Millisecond)
	defer deadline.Stop()
	for {
		fp := n.parts[p]
		hwm := int64(len(fp.values))
		switch {
		case q.Get("incarnation") != "" && q.Get("incarnation") != n.incarnation:
			n.mu.Unlock()
			return errorAnswer(404, api.CodeTopicNotFound, nil)
		case offset < fp.start:
			n.mu.Unlock()
			return errorAnswer(410, api.CodeOffsetDeleted, func(b *api.ErrorBody) { b.StartOffset = &fp.start })
		case offset >= fp.damageFrom && offset < fp.damageTo:
			n.mu.Unlock()
			return errorAnswer(410, api.CodeRecordUnreadable, func(b *api.ErrorBody) { b.NextOffset = &fp.damageTo })
		case offset > hwm:
			n.mu.Unlock()
			return errorAnswer(416, api.CodeOffsetBeyondHighWatermark, nil)
		case offset == hwm && waitMs > 0:
			appended := fp.appended
			n.mu.Unlock()
			select {
			case <-appended:
				n.mu.Lock()
				continue
			case <-deadline.C:
			case <-r.Context().Done():
				return nil
			}
			n.mu.Lock()
			waitMs = 0
			continue
		}
		var body bytes.Buffer
		bw := api.NewBatchWriter(&body)
		next := offset
		for ; next < hwm && next-offset < int64(maxRecords) && (next < fp.damageFrom || next >= fp.damageTo); next++ {
			bw.Fetched(api.BatchRecord{Offset: next, CommittedAtMs: next, Value: []byte(fp.values[next])})
		}
		n.mu.Unlock()
		return answer(200, body.String(), api.HeaderNextOffset, strconv.FormatInt(next, 10),
			api.HeaderHighWatermark, strconv.FormatInt(hwm, 10), api.HeaderIncarnation, n.incarnation)
	}
}

// stats are the fetches so far and the most requests in flight at once.
func (n *topicNode) stats() (fetches, maxInFlight int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fetches, n.maxInFlight
}

// requests are the fetches and the waits so far.
func (n *topicNode) requests() (fetches, waits int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fetches, n.waits
}

// took returns what the node served since the last took.
func (n *topicNode) took() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.served
	n.served = nil
	return out
}
