package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/narad-io/storage/api"
)

// Record is a record to produce; a nil Key is no key.
type Record struct {
	Key, Value []byte
}

// FetchedRecord is a committed record. The keys and values of one binary
// fetch answer are slices of the answer, read whole into one buffer (as
// large as the answer, up to the fetch's MaxBytes but for a first record
// larger than that): a record kept after its neighbours are dropped keeps
// that buffer in memory; copy its Key and Value to keep them alone.
// Appending to a Key or Value copies it.
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
type Produced = api.ProduceAnswer

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
		req.body, req.contentType = encodeBatch(records), api.BatchMediaType
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
	var b bytes.Buffer
	bw := api.NewBatchWriter(&b)
	for _, r := range records {
		bw.Record(r.Key, r.Value) // a bytes.Buffer takes every write
	}
	return b.Bytes()
}

func encodeJSONRecords(records []Record, b64 bool) ([]byte, error) {
	out := make([]api.ProduceRecord, len(records))
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
	return jsonBody(api.ProduceRequest{Records: out})
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
	resp, err := c.do(ctx, request{method: http.MethodGet, path: partitionPath(topic, p) + "/records", query: q, accept: api.BatchMediaType})
	if err != nil {
		return Fetched{}, err
	}
	defer drain(resp)
	out := Fetched{Incarnation: resp.Header.Get(api.HeaderIncarnation)}
	if out.Records, err = decodeFetched(resp.Body, resp.ContentLength); err != nil {
		return out, err
	}
	// A large answer, streamed, gives its boundary after its records: in
	// the trailer, read once the body is.
	if out.NextOffset, err = boundary(resp, api.HeaderNextOffset); err != nil {
		return out, err
	}
	out.HighWatermark, err = boundary(resp, api.HeaderHighWatermark)
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

// maxField bounds one key or value of an answer (the engine's records
// are far smaller), so a corrupt answer never makes the client allocate
// without bound.
const maxField = 64 << 20

// decodeFetched reads a binary fetch answer of size bytes (-1: not
// known) whole into one buffer (api.ReadBody: it grows as the bytes come,
// never ahead of them), then takes its records from it (api.BatchSlice),
// their keys and values slices of it, in a list of exactly their number:
// for a large answer of small records an allocation or two rather than
// one a block of records, and no copy of each record out of a read buffer.
func decodeFetched(body io.Reader, size int64) ([]FetchedRecord, error) {
	var buf []byte
	switch {
	case size < 0:
		buf = make([]byte, 0, fetchBufferStart) // answers are mostly larger than api.ReadBody's start
	case size <= maxTrustedLength:
		buf = make([]byte, 0, size) // the node's, for an answer the fetch asked for: read in one buffer
	}
	buf, err := api.ReadBody(body, buf, size)
	if err != nil {
		return nil, fmt.Errorf("narad: fetch answer: %w", err)
	}
	bs := api.NewBatchSlice(buf, maxField)
	n, err := bs.Count(true, math.MaxInt)
	if err != nil {
		return nil, fmt.Errorf("narad: fetch answer: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]FetchedRecord, n)
	for i := range out {
		r, _ := bs.Fetched() // Count read them all without an error
		out[i] = FetchedRecord{Offset: r.Offset, Key: r.Key, Value: r.Value, CommittedAt: time.UnixMilli(r.CommittedAtMs)}
	}
	return out, nil
}

// fetchBufferStart is the first buffer of a fetch answer of a length not
// known (a streamed one, larger than the daemon's write buffer);
// maxTrustedLength the largest Content-Length taken at its word, a buffer
// of it made before its bytes come (a larger one grows with them).
const (
	fetchBufferStart = 64 << 10
	maxTrustedLength = 4 << 20
)

// Ack settles offsets of a partition for its consumer and returns the
// frontier: the lowest offset not yet acked.
func (c *Client) Ack(ctx context.Context, topic string, p int, offsets ...int64) (frontier int64, err error) {
	var out api.AckAnswer
	err = c.doJSON(ctx, http.MethodPost, partitionPath(topic, p)+"/acks", api.AckRequest{Offsets: offsets}, &out)
	return out.Frontier, err
}

// ConsumerState is a partition's consumer progress.
type ConsumerState = api.ConsumerState

// Consumer returns a partition's consumer progress.
func (c *Client) Consumer(ctx context.Context, topic string, p int) (ConsumerState, error) {
	var st ConsumerState
	return st, c.doJSON(ctx, http.MethodGet, partitionPath(topic, p)+"/consumer", nil, &st)
}

func jsonBody(v any) ([]byte, error) { return json.Marshal(v) }

// fromBase64 is a JSON answer's record asked for in base64 (a consume, a
// cursor read), its key and value decoded.
func fromBase64(r api.Record) (FetchedRecord, error) {
	fr := FetchedRecord{Offset: r.Offset, CommittedAt: time.UnixMilli(r.CommittedAtMs)}
	var err error
	if fr.Value, err = base64.StdEncoding.DecodeString(r.Value); err != nil {
		return FetchedRecord{}, errors.New("value is not base64")
	}
	if r.Key != nil {
		if fr.Key, err = base64.StdEncoding.DecodeString(*r.Key); err != nil {
			return FetchedRecord{}, errors.New("key is not base64")
		}
	}
	return fr, nil
}

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
	var out api.OffsetAnswer
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
