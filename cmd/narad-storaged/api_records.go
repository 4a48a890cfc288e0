package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/wire"
)

// batchContentType is the binary batch encoding of records, in both
// directions.
const batchContentType = "application/vnd.narad.batch"

type jsonRecord struct {
	Key   *string `json:"key,omitempty"`
	Value string  `json:"value"`
}

// produce appends a request's records and answers only after the durable
// commit. Concurrent requests to one partition share a group commit.
func (a *api) produce(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	var records []partition.Record
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == batchContentType {
		records, err = decodeBatch(r.Body)
	} else {
		records, err = decodeJSONRecords(r, r.URL.Query().Get("encoding") == "base64")
	}
	if err != nil {
		a.badBody(w, err)
		return
	}
	if len(records) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_body", "no records")
		return
	}
	for _, rec := range records {
		if len(rec.Key) > wire.MaxKeyBytes {
			writeError(w, http.StatusBadRequest, "invalid_body", fmt.Sprintf("a key of %d bytes; keys are at most %d", len(rec.Key), wire.MaxKeyBytes))
			return
		}
	}
	base, err := a.node.Produce(r.Context(), topic, p, records)
	if err != nil {
		a.writeNodeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"base_offset": base, "count": int64(len(records)), "high_watermark": a.hwm(r, topic, p, base+int64(len(records)))})
}

// hwm is the partition's high watermark now, at least floor.
func (a *api) hwm(r *http.Request, topic string, p int, floor int64) int64 {
	if l, err := a.node.Log(r.Context(), topic, p); err == nil {
		return max(l.HighWatermark(), floor)
	}
	return floor
}

// maxProduceRecords bounds the records of one produce request; with the
// byte bound below it keeps a request's decoding from allocating more than
// a small multiple of its body, whatever the body holds.
const maxProduceRecords = 100000

var errBatchTooLarge = errors.New("batch over the record bound")

// batchBudget counts a request's records as they are decoded.
type batchBudget struct{ records, bytes int }

func (b *batchBudget) add(keyLen, valueLen int) error {
	b.records++
	b.bytes += wire.EnvelopeSize(keyLen, valueLen) + wire.RecordLenSize
	if b.records > maxProduceRecords {
		return fmt.Errorf("%w: more than %d records", errBatchTooLarge, maxProduceRecords)
	}
	if b.bytes > maxBatchBytes {
		return fmt.Errorf("%w: more than %d bytes of records", errBatchTooLarge, maxBatchBytes)
	}
	return nil
}

// maxBatchBytes matches the engine's bound on one Produce call.
const maxBatchBytes = 64 << 20

// decodeJSONRecords streams {"records": [...]} one record at a time, so
// a body of millions of tiny records fails at the bound instead of being
// decoded whole first.
func decodeJSONRecords(r *http.Request, b64 bool) ([]partition.Record, error) {
	dec := json.NewDecoder(r.Body)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	var out []partition.Record
	var budget batchBudget
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok != "records" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			continue
		}
		if err := expectDelim(dec, '['); err != nil {
			return nil, err
		}
		for dec.More() {
			var rec jsonRecord
			if err := dec.Decode(&rec); err != nil {
				return nil, fmt.Errorf("record %d: %w", len(out), err)
			}
			pr, err := recordOf(rec, b64)
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
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return out, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
}

func recordOf(rec jsonRecord, b64 bool) (partition.Record, error) {
	var key []byte
	if rec.Key != nil {
		key = []byte(*rec.Key)
	}
	value := []byte(rec.Value)
	if b64 {
		var err error
		if rec.Key != nil {
			if key, err = base64.StdEncoding.DecodeString(*rec.Key); err != nil {
				return partition.Record{}, fmt.Errorf("key: %w", err)
			}
		}
		if value, err = base64.StdEncoding.DecodeString(rec.Value); err != nil {
			return partition.Record{}, fmt.Errorf("value: %w", err)
		}
	}
	return partition.Record{Key: key, Value: value}, nil
}

// decodeBatch reads the binary batch: for each record uvarint(len(key))
// key uvarint(len(value)) value. Lengths are bounded by the record bound
// and read in steps, so a length larger than the body fails at the body's
// end without being allocated; the record count and total are bounded as
// the records come.
func decodeBatch(body io.Reader) ([]partition.Record, error) {
	br := bufio.NewReader(body)
	var out []partition.Record
	var budget batchBudget
	for {
		if _, err := br.Peek(1); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		key, err := readChunk(br)
		if err != nil {
			return nil, fmt.Errorf("record %d: key: %w", len(out), err)
		}
		value, err := readChunk(br)
		if err != nil {
			return nil, fmt.Errorf("record %d: value: %w", len(out), err)
		}
		if err := budget.add(len(key), len(value)); err != nil {
			return nil, err
		}
		out = append(out, partition.Record{Key: key, Value: value})
	}
}

func readChunk(br *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if n > wire.MaxRecordBytes {
		return nil, fmt.Errorf("length %d over the %d-byte record bound", n, wire.MaxRecordBytes)
	}
	var out []byte
	for remaining := int(n); remaining > 0; {
		step := min(remaining, 64<<10)
		start := len(out)
		out = append(out, make([]byte, step)...)
		if _, err := io.ReadFull(br, out[start:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		remaining -= step
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// fetch serves records below the high watermark; at the high watermark
// with wait_ms it long-polls on the log's broadcast channel.
func (a *api) fetch(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	offset, err := strconv.ParseInt(q.Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, "invalid_offset", "offset must be a non-negative integer")
		return
	}
	maxRecords, ok1 := intParam(q.Get("max_records"), 1000, 1, maxFetchRecords)
	maxBytes, ok2 := intParam(q.Get("max_bytes"), 1<<20, 1, maxFetchBytes)
	waitMs, ok3 := intParam(q.Get("wait_ms"), 0, 0, maxWait)
	if !ok1 || !ok2 || !ok3 {
		writeError(w, http.StatusBadRequest, "invalid_parameter", fmt.Sprintf("max_records 1..%d, max_bytes 1..%d, wait_ms 0..%d", maxFetchRecords, maxFetchBytes, maxWait))
		return
	}
	l, err := a.node.Log(r.Context(), topic, p)
	if err != nil {
		a.writeNodeError(w, err)
		return
	}
	deadline := time.Now().Add(time.Duration(waitMs) * time.Millisecond)
	var res partition.ReadResult
	for {
		wake := l.NotifyC() // fetched before the check, so no commit is missed
		res, err = a.node.Read(r.Context(), topic, p, offset, maxRecords, maxBytes)
		if err != nil || len(res.Records) > 0 || waitMs == 0 || offset < res.HighWatermark {
			break
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			break
		}
		timer := time.NewTimer(remaining)
		closing := false
		select {
		case <-wake:
		case <-timer.C:
		case <-r.Context().Done():
		case <-a.closing:
			closing = true
		}
		timer.Stop()
		if closing || r.Context().Err() != nil {
			break
		}
		if l2, err := a.node.Log(r.Context(), topic, p); err == nil {
			l = l2 // reopened (evicted meanwhile): wait on its channel
		}
	}
	if err != nil {
		if errors.Is(err, partition.ErrOffsetDeleted) {
			start, _ := a.startOffset(r, topic, p)
			writeErrorBody(w, http.StatusGone, "offset_deleted", err.Error(), func(b *errorBody) { b.StartOffset = &start })
			return
		}
		a.writeNodeError(w, err)
		return
	}
	if accept, _, _ := mime.ParseMediaType(r.Header.Get("Accept")); accept == batchContentType {
		writeBatch(w, res)
		return
	}
	writeRecordsJSON(w, res, q.Get("encoding") == "base64")
}

func (a *api) startOffset(r *http.Request, topic string, p int) (int64, error) {
	l, err := a.node.Log(r.Context(), topic, p)
	if err != nil {
		return 0, err
	}
	return l.StartOffset(), nil
}

func intParam(s string, def, lo, hi int) (int, bool) {
	if s == "" {
		return def, true
	}
	v, err := strconv.Atoi(s)
	return v, err == nil && v >= lo && v <= hi
}

type fetchedRecord struct {
	Offset        int64   `json:"offset"`
	Key           *string `json:"key,omitempty"`
	Value         string  `json:"value"`
	CommittedAtMs int64   `json:"committed_at_ms"`
}

func writeRecordsJSON(w http.ResponseWriter, res partition.ReadResult, b64 bool) {
	text := func(b []byte) string {
		if b64 {
			return base64.StdEncoding.EncodeToString(b)
		}
		// Invalid bytes become U+FFFD; encoding=base64 gives exact bytes.
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	out := struct {
		Records       []fetchedRecord `json:"records"`
		NextOffset    int64           `json:"next_offset"`
		HighWatermark int64           `json:"high_watermark"`
	}{Records: make([]fetchedRecord, 0, len(res.Records)), NextOffset: res.Next, HighWatermark: res.HighWatermark}
	for _, rec := range res.Records {
		fr := fetchedRecord{Offset: rec.Offset, Value: text(rec.Value), CommittedAtMs: rec.CommittedAtUnixMs}
		if len(rec.Key) > 0 {
			k := text(rec.Key)
			fr.Key = &k
		}
		out.Records = append(out.Records, fr)
	}
	writeJSON(w, http.StatusOK, out)
}

// writeBatch writes the binary fetch encoding: for each record int64
// offset, int64 committed_at_ms (big-endian), uvarint(len(key)) key
// uvarint(len(value)) value.
func writeBatch(w http.ResponseWriter, res partition.ReadResult) {
	w.Header().Set("Content-Type", batchContentType)
	w.Header().Set("Narad-Next-Offset", strconv.FormatInt(res.Next, 10))
	w.Header().Set("Narad-High-Watermark", strconv.FormatInt(res.HighWatermark, 10))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	var buf []byte
	for _, rec := range res.Records {
		buf = binary.BigEndian.AppendUint64(buf[:0], uint64(rec.Offset))
		buf = binary.BigEndian.AppendUint64(buf, uint64(rec.CommittedAtUnixMs))
		buf = binary.AppendUvarint(buf, uint64(len(rec.Key)))
		buf = append(buf, rec.Key...)
		buf = binary.AppendUvarint(buf, uint64(len(rec.Value)))
		bw.Write(buf)
		bw.Write(rec.Value)
	}
	bw.Flush()
}
