package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
)

// produce appends a request's records and answers only after the durable
// commit. Concurrent requests to one partition share a group commit.
func (a *Handler) produce(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	q, ok := query(w, r, "encoding")
	if !ok {
		return
	}
	b64, ok := base64Param(w, q)
	if !ok {
		return
	}
	body := a.meterBody(w, r)
	defer body.release()
	var records []partition.Record
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == api.BatchMediaType {
		if q.Has("encoding") {
			writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, "encoding applies to JSON bodies; a binary batch carries bytes as they are")
			return
		}
		var release func()
		if records, release, err = decodeBatch(body, r.ContentLength); release != nil {
			defer release() // after the commit, which copies the records
		}
	} else {
		records, err = decodeJSONRecords(body, b64)
	}
	if body.refused(w) {
		return
	}
	if err != nil {
		a.badBody(w, err)
		return
	}
	if len(records) == 0 {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, "no records")
		return
	}
	for _, rec := range records {
		if len(rec.Key) > wire.MaxKeyBytes {
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("a key of %d bytes; keys are at most %d", len(rec.Key), wire.MaxKeyBytes))
			return
		}
	}
	var registration uint64
	if a.opts.Owners != nil {
		registration = a.opts.Owners.Registration()
	}
	base, err := a.node.Produce(r.Context(), topic, p, records)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	if a.opts.Owners != nil && (!a.opts.Owners.Serving() || a.opts.Owners.Registration() != registration) {
		// Fenced while the commit ran (or fenced and registered again):
		// the partition may be another node's by now, so this copy's
		// records are not acknowledged.
		writeFenced(w, " (the batch was written to this node's copy, which may be set aside: not acknowledged)")
		return
	}
	writeJSON(w, http.StatusOK, api.ProduceAnswer{BaseOffset: base, Count: int64(len(records)), HighWatermark: a.hwm(r, topic, p, base+int64(len(records)))})
}

// admitAnswer takes a records answer's max_bytes from the answer budget,
// or answers 503 busy: the daemon reads and writes at most
// --max-answer-bytes of records answers at once, however many clients
// ask. release gives them back once the answer is written.
func (a *Handler) admitAnswer(w http.ResponseWriter, maxBytes int) (release func(), ok bool) {
	if release, ok = a.takeAnswer(maxBytes); !ok {
		refuseAnswer(w)
	}
	return release, ok
}

// errNoAnswerBudget: the answer budget had no room for a read.
var errNoAnswerBudget = errors.New("no room in --max-answer-bytes")

// refuseAnswer answers a read the answer budget has no room for.
func refuseAnswer(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, api.CodeBusy, "the node writes as many records answers as it takes at once (--max-answer-bytes); nothing was read; retry")
}

// takeAnswer is admitAnswer that answers nothing when the budget has no
// room.
func (a *Handler) takeAnswer(maxBytes int) (release func(), ok bool) {
	n := int64(max(maxBytes, 1))
	if a.answers != nil && !a.answers.TryAcquire(n) {
		return nil, false
	}
	a.answerBytes.Add(n)
	return func() {
		a.answerBytes.Add(-n)
		if a.answers != nil {
			a.answers.Release(n)
		}
	}, true
}

// hwm is the partition's high watermark now, at least floor.
func (a *Handler) hwm(r *http.Request, topic string, p int, floor int64) int64 {
	if l, err := a.node.Log(r.Context(), topic, p); err == nil {
		return max(l.HighWatermark(), floor)
	}
	return floor
}

var errBatchTooLarge = errors.New("batch over the record bound")

// batchBudget counts a request's records as they are decoded, against
// api.MaxProduceRecords and api.MaxProduceBytes (the engine's
// bound on one Produce call, counted as it counts them): a request's
// decoding allocates no more than a small multiple of its body, whatever
// the body holds.
type batchBudget struct{ records, bytes int }

func (b *batchBudget) add(keyLen, valueLen int) error {
	b.records++
	b.bytes += wire.EnvelopeSize(keyLen, valueLen) + wire.RecordLenSize
	if b.records > api.MaxProduceRecords {
		return fmt.Errorf("%w: more than %d records", errBatchTooLarge, api.MaxProduceRecords)
	}
	if b.bytes > api.MaxProduceBytes {
		return fmt.Errorf("%w: more than %d bytes of records", errBatchTooLarge, api.MaxProduceBytes)
	}
	return nil
}

// decodeJSONRecords streams {"records": [...]} one record at a time, so
// a body of millions of tiny records fails at the bound instead of being
// decoded whole first. A record is {"key": text, "value": text}, key
// optional (or null), value required; any other field, a field given
// twice, or text that is not exactly what was sent is refused, naming
// the record.
func decodeJSONRecords(body io.Reader, b64 bool) ([]partition.Record, error) {
	dec := json.NewDecoder(body)
	if tok, err := dec.Token(); err != nil {
		return nil, jsonError(err, nil)
	} else if tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %s", tokenName(tok))
	}
	var out []partition.Record
	var budget batchBudget
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonInsideError(err)
		}
		if tok != "records" {
			return nil, fmt.Errorf("unknown field %q: the body is {\"records\": [...]}", tok)
		}
		if seen {
			return nil, errors.New(`field "records" given twice`)
		}
		seen = true
		if err := expectDelim(dec, '['); err != nil {
			return nil, fmt.Errorf("records: %w", err)
		}
		for dec.More() {
			pr, err := decodeJSONRecord(dec, b64)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", len(out), err)
			}
			if err := budget.add(len(pr.Key), len(pr.Value)); err != nil {
				return nil, err
			}
			out = append(out, pr)
		}
		if err := expectDelim(dec, ']'); err != nil {
			return nil, err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return out, nil
}

// decodeJSONRecord reads one record object of a JSON produce.
func decodeJSONRecord(dec *json.Decoder, b64 bool) (partition.Record, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return partition.Record{}, err
	}
	var key, value json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return partition.Record{}, jsonInsideError(err)
		}
		var dst *json.RawMessage
		switch tok {
		case "key":
			dst = &key
		case "value":
			dst = &value
		default:
			return partition.Record{}, fmt.Errorf(`unknown field %q: a record has only "key" and "value"`, tok)
		}
		if *dst != nil {
			return partition.Record{}, fmt.Errorf("field %q given twice", tok)
		}
		if err := dec.Decode(dst); err != nil {
			return partition.Record{}, jsonInsideError(err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return partition.Record{}, err
	}
	if value == nil {
		return partition.Record{}, errors.New(`no "value" (an empty value is "value": "")`)
	}
	var rec partition.Record
	var err error
	if key != nil && string(key) != "null" {
		if rec.Key, err = recordBytes(key, b64); err != nil {
			return partition.Record{}, fmt.Errorf("key %w", err)
		}
	}
	if rec.Value, err = recordBytes(value, b64); err != nil {
		return partition.Record{}, fmt.Errorf("value %w", err)
	}
	return rec, nil
}

// recordBytes is a key's or value's bytes: the text itself, or the bytes
// it encodes in base64 (standard, padded).
func recordBytes(raw json.RawMessage, b64 bool) ([]byte, error) {
	text, err := jsonText(raw)
	if err != nil {
		return nil, err
	}
	if !b64 {
		return []byte(text), nil
	}
	// Strict, and no line breaks: one text per byte string, never two.
	b, err := base64.StdEncoding.Strict().DecodeString(text)
	if err != nil || strings.ContainsAny(text, "\r\n") {
		return nil, errors.New("is not standard padded base64")
	}
	return b, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonInsideError(err)
	}
	if tok != want {
		return fmt.Errorf("want %s, got %s", delimName(want), tokenName(tok))
	}
	return nil
}

func delimName(d json.Delim) string {
	switch d {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case ']':
		return "the end of the array"
	}
	return "the end of the object"
}

func tokenName(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return delimName(v)
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "true or false"
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

// decodeBatch reads a binary produce body whole into a pooled buffer
// (api.ReadBody: it grows as the bytes come, never ahead of them; size is
// the body's Content-Length, -1 when not known), then takes its records
// from it (api.BatchSlice) into a pooled list of exactly their number,
// their keys and values bounded by the record bound, and their count and
// total by the budget, in order. The records' keys and values are slices
// of the buffer, not copies: release gives the buffer and the list back,
// once the node has copied the records into its frame (runtime.Node.Produce
// does before it returns) and nothing reads them any more. On an error
// there is nothing to release.
//
// A profile of the produce command's 10,000 records of 100 bytes a
// request found the reader of a record at a time (a copy of each out of a
// read buffer, two varint reads through an interface) and the list grown
// as the records came a third of the daemon's CPU; reading the body whole
// and slicing it is a single copy, the kernel's.
func decodeBatch(body io.Reader, size int64) (records []partition.Record, release func(), err error) {
	buf := getBodyBuffer()
	*buf, err = api.ReadBody(body, *buf, size)
	giveBack := func() { putBodyBuffer(buf) }
	if err != nil {
		giveBack()
		return nil, nil, err
	}
	bs := api.NewBatchSlice(*buf, wire.MaxRecordBytes)
	n, countErr := bs.Count(false, api.MaxProduceRecords)
	list := getRecordList(min(n, api.MaxProduceRecords))
	fail := func(err error) ([]partition.Record, func(), error) {
		putRecordList(list)
		giveBack()
		return nil, nil, err
	}
	var budget batchBudget
	for range n {
		key, value, _ := bs.Record() // Count read these without an error
		if err := budget.add(len(key), len(value)); err != nil {
			return fail(err)
		}
		*list = append(*list, partition.Record{Key: key, Value: value})
	}
	if countErr != nil {
		return fail(countErr)
	}
	return *list, func() { putRecordList(list); giveBack() }, nil
}

// The pools of produce bodies and of their record lists: a produce of
// large batches reads each body into a buffer and lists its records
// without allocating either once the pools hold them. A buffer or a list
// larger than the bounds below (a rare huge batch) is left to the
// collector, so the pools keep no more than a few typical requests' worth.
var (
	bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}
	recordLists = sync.Pool{New: func() any { return new([]partition.Record) }}
)

const (
	maxPooledBody    = 4 << 20
	maxPooledRecords = 32 << 10
)

// poisonReleasedBodies (tests set it) overwrites a body's buffer when it
// is given back, so a record still in use after its release reads as
// garbage, never by chance as the bytes it had.
var poisonReleasedBodies = false

func getBodyBuffer() *[]byte {
	b := bodyBuffers.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

func putBodyBuffer(b *[]byte) {
	if poisonReleasedBodies {
		for i := range *b {
			(*b)[i] = 0xA5
		}
	}
	if cap(*b) <= maxPooledBody {
		bodyBuffers.Put(b)
	}
}

// getRecordList returns an empty list with room for n records.
func getRecordList(n int) *[]partition.Record {
	l := recordLists.Get().(*[]partition.Record)
	if cap(*l) < n {
		*l = make([]partition.Record, 0, n)
	}
	return l
}

// putRecordList gives a list back, cleared so it keeps no body's bytes
// alive.
func putRecordList(l *[]partition.Record) {
	clear(*l)
	*l = (*l)[:0]
	if cap(*l) <= maxPooledRecords {
		recordLists.Put(l)
	}
}

// fetch serves records below the high watermark; at the high watermark
// with wait_ms it long-polls on the log's broadcast channel.
func (a *Handler) fetch(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	q, ok := query(w, r, "offset", "at_ms", "max_records", "max_bytes", "wait_ms", "encoding", "incarnation")
	if !ok {
		return
	}
	inc, ok := a.readIncarnation(w, r, q, topic)
	if !ok {
		return
	}
	offset, ok := a.fetchOffset(w, r, q, topic, p)
	if !ok {
		return
	}
	rp, ok := readParamsOf(w, q)
	if !ok {
		return
	}
	l, err := a.node.Log(r.Context(), topic, p)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	// A long poll at the high watermark waits for a commit first: the
	// answer budget is held only while records are read and written.
	deadline := time.Now().Add(time.Duration(rp.waitMs) * time.Millisecond)
	for rp.waitMs > 0 {
		wake := l.NotifyC() // fetched before the check, so no commit is missed
		if offset != l.HighWatermark() {
			break
		}
		var end waitEnd
		if l, end = a.waitForCommit(r, topic, p, l, wake, deadline, inc); end != waitWoken {
			break
		}
	}
	if !a.stillIncarnation(w, r, topic, inc) {
		return
	}
	release, ok := a.admitAnswer(w, rp.maxBytes)
	if !ok {
		return
	}
	defer release()
	accept, _, _ := mime.ParseMediaType(r.Header.Get("Accept"))
	batch := accept == api.BatchMediaType
	s := newRecordStream(w, batch, rp.b64, rp.maxBytes)
	w.Header().Set(api.HeaderIncarnation, string(inc))
	// An HTTP/1.0 client gets no trailers: its binary answer ends where
	// the buffer does, so its boundary goes in the headers.
	sum, err := a.readInto(r.Context(), s, topic, p, offset, rp.maxRecords, rp.maxBytes, batch && !r.ProtoAtLeast(1, 1))
	if errors.Is(err, errNoAnswerBudget) {
		s.fail(refuseAnswer)
		return
	}
	if errors.Is(err, errAnswerFull) {
		err = nil
	}
	if err == nil && a.gone(r, topic, inc) {
		// Deleted, and maybe made again, while the records were read: they
		// may be the next incarnation's, never served as this one's.
		err = fmt.Errorf("%w: %s was deleted while the fetch read it", runtime.ErrTopicNotFound, topic)
	}
	if err != nil {
		s.fail(func(w http.ResponseWriter) { a.writeFetchError(w, r, topic, p, offset, err) })
		return
	}
	next := offset
	if s.count > 0 {
		next = s.last + 1
	}
	s.finish(next, sum.HighWatermark, boundaryJSON(next, sum.HighWatermark, inc))
}

// readInto reads a fetch's records into s from offset: each record the
// read lends is written only into what is left of s's buffer, and the
// buffer flushed between reads (recordStream); a record larger than the
// buffer is read again as a copy and written from it, its bytes past
// maxBytes (a first record) taken from the answer budget
// (errNoAnswerBudget when they do not fit). With whole (a binary answer
// to a client without trailers) the answer ends where the buffer does,
// and a first record larger than it goes out alone with its boundary in
// the headers.
func (a *Handler) readInto(ctx context.Context, s *recordStream, topic string, p int, offset int64, maxRecords, maxBytes int, whole bool) (sum partition.ReadSummary, err error) {
	// Each read goes on after the last record written; with none yet (a
	// first record that did not fit after the answer's opening), from offset.
	for next := offset; s.count < maxRecords; next = max(offset, s.last+1) {
		sum, err = a.node.ReadFunc(ctx, topic, p, next, maxRecords-s.count, maxBytes, s.offer)
		if !errors.Is(err, errBufferFull) {
			return sum, err
		}
		if whole && s.count > 0 {
			return sum, nil
		}
		if s.pending.size <= s.bw.Size() {
			s.flush() // outside the read: it may wait on the client
			continue
		}
		more := s.pending.size - maxBytes
		if a.answers != nil {
			// A record whose encoding passes the whole budget holds all of
			// it (it goes alone), never more: more would never fit.
			more = min(more, int(a.opts.MaxAnswer)-maxBytes)
		}
		if s.count == 0 && more > 0 {
			release, ok := a.takeAnswer(more)
			if !ok {
				return sum, errNoAnswerBudget
			}
			defer release()
		}
		res, err := a.node.Read(ctx, topic, p, s.pending.offset, 1, 1)
		if err != nil {
			return sum, err
		}
		if len(res.Records) != 1 || res.Records[0].Offset != s.pending.offset {
			return sum, fmt.Errorf("offset %d: the record read again is not the one the answer stopped at", s.pending.offset)
		}
		sum.HighWatermark = res.HighWatermark
		if whole {
			s.boundary(s.pending.offset+1, res.HighWatermark)
			s.copied(res.Records[0])
			return sum, nil
		}
		s.copied(res.Records[0])
	}
	return sum, nil
}

// writeFetchError answers a fetch's error: 410 with the partition's start
// for an offset retention deleted, else as every node error.
func (a *Handler) writeFetchError(w http.ResponseWriter, r *http.Request, topic string, p int, offset int64, err error) {
	if errors.Is(err, partition.ErrOffsetDeleted) {
		start, serr := a.startOffset(r, topic, p)
		if serr != nil {
			a.writeNodeError(w, r, serr)
			return
		}
		writeErrorBody(w, http.StatusGone, api.CodeOffsetDeleted,
			fmt.Sprintf("offset %d is below the partition's start_offset %d: retention deleted it", offset, start),
			func(b *errorBody) { b.StartOffset = &start })
		return
	}
	a.writeNodeError(w, r, err)
}

// readIncarnation is the topic's incarnation now, which a read serves:
// with the incarnation parameter, the one the client expects, and 404
// topic_not_found (answered here) when the topic is another one now.
func (a *Handler) readIncarnation(w http.ResponseWriter, r *http.Request, q url.Values, topic string) (wire.IncarnationID, bool) {
	var want wire.IncarnationID
	if q.Has("incarnation") {
		id, err := wire.ParseIncarnationID(q.Get("incarnation"))
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("incarnation must be a topic's incarnation (16 hex digits), not %q", q.Get("incarnation")))
			return "", false
		}
		want = id
	}
	rec, ok, err := a.ms.Topic(r.Context(), topic)
	if err != nil {
		a.writeNodeError(w, r, err)
		return "", false
	}
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, api.CodeTopicNotFound, fmt.Sprintf("no topic %q", topic))
		return "", false
	case want != "" && rec.Incarnation != want:
		writeError(w, http.StatusNotFound, api.CodeTopicNotFound, fmt.Sprintf("topic %q is incarnation %s now: incarnation %s was deleted", topic, rec.Incarnation, want))
		return "", false
	}
	return rec.Incarnation, true
}

// stillIncarnation reports that topic is still incarnation inc, answering
// 404 topic_not_found itself when it is not (deleted, or deleted and made
// again, while a read waited or ran).
func (a *Handler) stillIncarnation(w http.ResponseWriter, r *http.Request, topic string, inc wire.IncarnationID) bool {
	rec, ok, err := a.ms.Topic(r.Context(), topic)
	switch {
	case err != nil:
		a.writeNodeError(w, r, err)
		return false
	case !ok:
		writeError(w, http.StatusNotFound, api.CodeTopicNotFound, fmt.Sprintf("topic %q was deleted while the read waited", topic))
		return false
	case rec.Incarnation != inc:
		writeError(w, http.StatusNotFound, api.CodeTopicNotFound, fmt.Sprintf("topic %q was deleted and made again (incarnation %s, not %s) while the read waited", topic, rec.Incarnation, inc))
		return false
	}
	return true
}

// gone reports, without answering, that topic is no longer incarnation
// inc (a metastore error is not taken for gone: the read goes on).
func (a *Handler) gone(r *http.Request, topic string, inc wire.IncarnationID) bool {
	rec, ok, err := a.ms.Topic(r.Context(), topic)
	return err == nil && (!ok || rec.Incarnation != inc)
}

// waitEnd says why a long poll's wait ended.
type waitEnd int

const (
	waitWoken waitEnd = iota // a commit, or the log open again: read again
	waitOver                 // the deadline, the request's end, shutdown
	waitGone                 // the topic's incarnation inc is gone
)

// waitForCommit waits, until deadline, for the partition to announce a
// commit on l's broadcast channel (wake, fetched before the caller's last
// check). When l closes under the wait (idle eviction, the open-log
// budget, a delete), it waits for someone with a reason to (a produce)
// to open the partition's log again, and never reopens it itself: a long
// poll that reopened its log to wait would evict another waiter's, which
// would do the same, without end (found by review). A delete (or a
// delete and a create) of the topic wakes it too, and it ends at once,
// waitGone: a read never waits out a topic that went, nor crosses into
// its next incarnation. It returns the log to read next (waitWoken).
func (a *Handler) waitForCommit(r *http.Request, topic string, p int, l *partition.Log, wake <-chan struct{}, deadline time.Time, inc wire.IncarnationID) (*partition.Log, waitEnd) {
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, waitOver
		}
		timer := time.NewTimer(remaining)
		select {
		case <-wake:
		case <-timer.C:
		case <-r.Context().Done():
		case <-a.closing:
		}
		timer.Stop()
		if r.Context().Err() != nil || time.Now().After(deadline) {
			return nil, waitOver
		}
		select {
		case <-a.closing:
			return nil, waitOver
		default:
		}
		if !l.Closed() {
			return l, waitWoken
		}
		wake = a.node.LogOpened(topic, p) // taken before the checks: no open and no delete is missed
		if a.gone(r, topic, inc) {
			return nil, waitGone
		}
		if open, ok := a.node.LogIfOpen(topic, p); ok {
			return open, waitWoken
		}
	}
}

// readParams are a read's query parameters, shared by a fetch and a
// read through a cursor.
type readParams struct {
	maxRecords, maxBytes, waitMs int
	b64                          bool
}

// readParamsOf reads max_records, max_bytes, wait_ms and encoding,
// answering the error itself when one is invalid.
func readParamsOf(w http.ResponseWriter, q url.Values) (rp readParams, ok bool) {
	if rp.maxRecords, ok = intParam(w, q, "max_records", api.DefaultFetchRecords, 1, api.MaxFetchRecords); !ok {
		return rp, false
	}
	if rp.maxBytes, ok = intParam(w, q, "max_bytes", api.DefaultFetchBytes, 1, api.MaxFetchBytes); !ok {
		return rp, false
	}
	if rp.waitMs, ok = intParam(w, q, "wait_ms", 0, 0, api.MaxWaitMs); !ok {
		return rp, false
	}
	rp.b64, ok = base64Param(w, q)
	return rp, ok
}

// fetchOffset is where a fetch starts: offset, or the first record
// committed at or after at_ms (exactly one of them).
func (a *Handler) fetchOffset(w http.ResponseWriter, r *http.Request, q url.Values, topic string, p int) (int64, bool) {
	if q.Has("at_ms") {
		if q.Has("offset") {
			writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, "give offset or at_ms, not both")
			return 0, false
		}
		at, ok := atMsParam(w, q)
		if !ok {
			return 0, false
		}
		offset, err := a.node.OffsetAt(r.Context(), topic, p, at)
		if err != nil {
			a.writeNodeError(w, r, err)
			return 0, false
		}
		return offset, true
	}
	offset, ok := decimal(q.Get("offset"))
	if !ok {
		msg := fmt.Sprintf("offset must be an integer from 0 up, not %q", q.Get("offset"))
		if !q.Has("offset") {
			msg = "offset is required (or at_ms): the first offset to read"
		}
		writeError(w, http.StatusBadRequest, api.CodeInvalidOffset, msg)
		return 0, false
	}
	return offset, true
}

// atMsParam reads at_ms: a time in milliseconds since the epoch.
func atMsParam(w http.ResponseWriter, q url.Values) (int64, bool) {
	if len(q["at_ms"]) != 1 {
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, "at_ms is given once: milliseconds since the epoch")
		return 0, false
	}
	at, ok := decimal(q.Get("at_ms"))
	if !ok {
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("at_ms must be milliseconds since the epoch, from 0 up, not %q", q.Get("at_ms")))
		return 0, false
	}
	return at, true
}

// offsetAt answers the offset of the first record committed at or after
// at_ms, or the high watermark when none is.
func (a *Handler) offsetAt(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	q, ok := query(w, r, "at_ms")
	if !ok {
		return
	}
	if !q.Has("at_ms") {
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, "at_ms is required: milliseconds since the epoch")
		return
	}
	at, ok := atMsParam(w, q)
	if !ok {
		return
	}
	offset, err := a.node.OffsetAt(r.Context(), topic, p, at)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.OffsetAnswer{HighWatermark: a.hwm(r, topic, p, offset), Offset: offset})
}

func (a *Handler) startOffset(r *http.Request, topic string, p int) (int64, error) {
	l, err := a.node.Log(r.Context(), topic, p)
	if err != nil {
		return 0, err
	}
	return l.StartOffset(), nil
}
