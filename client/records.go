package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// batchContentType is the API's binary batch encoding.
const batchContentType = "application/vnd.narad.batch"

// Record is a record to produce; a nil Key is no key.
type Record struct {
	Key, Value []byte
}

// FetchedRecord is a committed record.
type FetchedRecord struct {
	Offset      int64
	Key, Value  []byte
	CommittedAt time.Time
}

// Encoding is how Produce sends records.
type Encoding int

const (
	// Binary is the binary batch: exact bytes, the least work for both
	// ends. The default.
	Binary Encoding = iota
	// JSONText is JSON with keys and values as text; a record that is not
	// valid UTF-8 is refused before anything is sent.
	JSONText
	// JSONBase64 is JSON with keys and values base64-encoded.
	JSONBase64
)

// ProduceOption changes how Produce sends.
type ProduceOption func(*produceOptions)

type produceOptions struct{ encoding Encoding }

// WithEncoding sends the records in e.
func WithEncoding(e Encoding) ProduceOption { return func(o *produceOptions) { o.encoding = e } }

// Produced is a produce's answer: the offset of the first record, how
// many there were and the high watermark after them. It comes only after
// the durable commit.
type Produced struct {
	BaseOffset    int64 `json:"base_offset"`
	Count         int64 `json:"count"`
	HighWatermark int64 `json:"high_watermark"`
}

// Produce appends records to a partition as one durable commit; they get
// consecutive offsets. A 503 commit_failed (nothing was kept) is retried.
func (c *Client) Produce(ctx context.Context, topic string, p int, records []Record, opts ...ProduceOption) (Produced, error) {
	var o produceOptions
	for _, f := range opts {
		f(&o)
	}
	req := request{method: http.MethodPost, path: partitionPath(topic, p) + "/records"}
	var err error
	switch o.encoding {
	case Binary:
		req.body, req.contentType = encodeBatch(records), batchContentType
	case JSONText, JSONBase64:
		req.contentType = "application/json"
		if req.body, err = encodeJSONRecords(records, o.encoding == JSONBase64); err != nil {
			return Produced{}, err
		}
		if o.encoding == JSONBase64 {
			req.query = url.Values{"encoding": {"base64"}}
		}
	default:
		return Produced{}, fmt.Errorf("narad: unknown encoding %d", o.encoding)
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.do(ctx, req)
		if errors.Is(err, ErrCommitFailed) && attempt < c.retries {
			if err := backoff(ctx, attempt, err); err != nil {
				return Produced{}, err
			}
			continue
		}
		if err != nil {
			return Produced{}, err
		}
		defer drain(resp)
		var out Produced
		return out, decodeJSON(resp, &out)
	}
}

func encodeBatch(records []Record) []byte {
	var b []byte
	for _, r := range records {
		b = binary.AppendUvarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
		b = binary.AppendUvarint(b, uint64(len(r.Value)))
		b = append(b, r.Value...)
	}
	return b
}

func encodeJSONRecords(records []Record, b64 bool) ([]byte, error) {
	type jsonRecord struct {
		Key   *string `json:"key,omitempty"`
		Value string  `json:"value"`
	}
	out := make([]jsonRecord, len(records))
	text := func(i int, what string, b []byte) (string, error) {
		if b64 {
			return base64.StdEncoding.EncodeToString(b), nil
		}
		if !utf8.Valid(b) {
			return "", fmt.Errorf("narad: record %d: %s is not valid UTF-8; produce it in Binary or JSONBase64", i, what)
		}
		return string(b), nil
	}
	for i, r := range records {
		v, err := text(i, "value", r.Value)
		if err != nil {
			return nil, err
		}
		out[i].Value = v
		if r.Key != nil {
			k, err := text(i, "key", r.Key)
			if err != nil {
				return nil, err
			}
			out[i].Key = &k
		}
	}
	return jsonBody(map[string]any{"records": out})
}

// FetchOptions bound a fetch; zero values take the API's defaults.
type FetchOptions struct {
	MaxRecords int           // default 1,000; at most 10,000
	MaxBytes   int           // default 1 MiB (at least one record comes)
	Wait       time.Duration // at the high watermark, wait this long for a commit (a long poll; at most 60 s)
	// Incarnation, when set, is the topic's incarnation the caller read
	// before: once the name is another topic's (deleted, or deleted and
	// made again) the fetch is ErrTopicNotFound, never the new topic's
	// records at the same offsets.
	Incarnation string
}

// Fetched is a fetch's answer.
type Fetched struct {
	Records       []FetchedRecord
	NextOffset    int64 // where to fetch next
	HighWatermark int64
	Incarnation   string // the topic incarnation the records are of
}

// Fetch reads committed records from offset on. A fetch below the start
// is ErrOffsetDeleted (Error.StartOffset says where records begin); one in
// a damaged frame is ErrRecordUnreadable (Error.NextOffset is past it).
func (c *Client) Fetch(ctx context.Context, topic string, p int, offset int64, opts FetchOptions) (Fetched, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	if opts.MaxRecords > 0 {
		q.Set("max_records", strconv.Itoa(opts.MaxRecords))
	}
	if opts.MaxBytes > 0 {
		q.Set("max_bytes", strconv.Itoa(opts.MaxBytes))
	}
	if opts.Wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(opts.Wait.Milliseconds(), 10))
	}
	if opts.Incarnation != "" {
		q.Set("incarnation", opts.Incarnation)
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: partitionPath(topic, p) + "/records", query: q, accept: batchContentType})
	if err != nil {
		return Fetched{}, err
	}
	defer drain(resp)
	out := Fetched{Incarnation: resp.Header.Get("Narad-Incarnation")}
	if out.Records, err = decodeFetched(bufio.NewReader(resp.Body)); err != nil {
		return out, err
	}
	// A large answer, streamed, gives its boundary after its records: in
	// the trailer, read once the body is.
	if out.NextOffset, err = boundary(resp, "Narad-Next-Offset"); err != nil {
		return out, err
	}
	out.HighWatermark, err = boundary(resp, "Narad-High-Watermark")
	return out, err
}

// boundary reads a fetch answer's offset field from its header, or from
// its trailer when the header lacks it.
func boundary(resp *http.Response, name string) (int64, error) {
	v := resp.Header.Get(name)
	if v == "" {
		v = resp.Trailer.Get(name)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("narad: fetch answer without %s", name)
	}
	return n, nil
}

// decodeFetched reads the binary fetch encoding: for each record int64
// offset, int64 committed_at_ms, uvarint(len(key)) key, uvarint(len(value))
// value.
func decodeFetched(br *bufio.Reader) ([]FetchedRecord, error) {
	var out []FetchedRecord
	var head [16]byte
	for {
		if _, err := io.ReadFull(br, head[:]); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("narad: fetch answer cut short: %w", err)
		}
		r := FetchedRecord{Offset: int64(binary.BigEndian.Uint64(head[:8])), CommittedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(head[8:])))}
		var err error
		if r.Key, err = readChunk(br); err != nil {
			return nil, err
		}
		if r.Value, err = readChunk(br); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
}

// maxChunk bounds one key or value of an answer (the engine's records
// are far smaller), so a corrupt answer never makes the client allocate
// without bound.
const maxChunk = 64 << 20

// chunkStep is the first piece readChunk reads.
const chunkStep = 64 << 10

func readChunk(br *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("narad: fetch answer cut short: %w", err)
	}
	if n > maxChunk {
		return nil, fmt.Errorf("narad: fetch answer has a %d-byte field", n)
	}
	// In pieces, each as large as all before it, joined once: a whole
	// field costs about twice its length, and a length the answer does
	// not hold fails at the answer's end having allocated about twice
	// what it held, never the length it claimed.
	var pieces [][]byte
	for read := uint64(0); read < n || pieces == nil; {
		piece := make([]byte, min(n-read, max(read, chunkStep)))
		if _, err := io.ReadFull(br, piece); err != nil {
			return nil, fmt.Errorf("narad: fetch answer cut short: %w", err)
		}
		pieces = append(pieces, piece)
		read += uint64(len(piece))
	}
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	return bytes.Join(pieces, nil), nil
}

// Ack settles offsets of a partition for its consumer and returns the
// frontier: the lowest offset not yet acked.
func (c *Client) Ack(ctx context.Context, topic string, p int, offsets ...int64) (frontier int64, err error) {
	var out struct {
		Frontier int64 `json:"frontier"`
	}
	err = c.doJSON(ctx, http.MethodPost, partitionPath(topic, p)+"/acks", map[string]any{"offsets": offsets}, &out)
	return out.Frontier, err
}

// ConsumerState is a partition's consumer progress.
type ConsumerState struct {
	Frontier      int64   `json:"frontier"`
	AckedAhead    []int64 `json:"acked_ahead"`
	HighWatermark int64   `json:"high_watermark"`
	Lag           int64   `json:"lag"`    // committed and not acked
	Leased        int     `json:"leased"` // leased to queue consumers, not settled
}

// Consumer returns a partition's consumer progress.
func (c *Client) Consumer(ctx context.Context, topic string, p int) (ConsumerState, error) {
	var st ConsumerState
	return st, c.doJSON(ctx, http.MethodGet, partitionPath(topic, p)+"/consumer", nil, &st)
}

func jsonBody(v any) ([]byte, error) { return json.Marshal(v) }

func decodeJSON(resp *http.Response, out any) error {
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("narad: the answer is not the API's JSON: %w", err)
	}
	return nil
}

// OffsetAt returns the offset of the first record of a partition committed
// at or after at, or the high watermark when none is yet: exact, as commit
// times never decrease along a partition. Fetch from it to read from a
// time.
func (c *Client) OffsetAt(ctx context.Context, topic string, p int, at time.Time) (int64, error) {
	var out struct {
		Offset int64 `json:"offset"`
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: partitionPath(topic, p) + "/offset",
		query: url.Values{"at_ms": {strconv.FormatInt(max(at.UnixMilli(), 0), 10)}}})
	if err != nil {
		return 0, err
	}
	defer drain(resp)
	if err := decodeJSON(resp, &out); err != nil {
		return 0, err
	}
	return out.Offset, nil
}
