package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/narad-io/storage/api"
)

// CursorPosition is a fan-out cursor's place in one partition.
type CursorPosition = api.CursorPosition

// Cursor is a fan-out cursor: a named reader of a topic with a position
// of its own in each partition, kept by the daemon across restarts.
type Cursor = api.Cursor

// CursorFrom is where a new cursor starts.
type CursorFrom string

const (
	Earliest CursorFrom = "earliest" // each partition's first record
	Latest   CursorFrom = "latest"   // what commits after the cursor is made
)

// CursorReadOptions shape a read through a cursor.
type CursorReadOptions struct {
	MaxRecords int           // default 1,000
	MaxBytes   int           // default 1 MiB (at least one record comes)
	Wait       time.Duration // at the high watermark, wait this long for a commit
	// Peek reads without moving the cursor; CommitCursor moves it then.
	Peek bool
}

// CursorRecords is a read through a cursor: the records, where the cursor
// stands after them, and how many records of damaged frames it stepped
// over (never served).
type CursorRecords struct {
	Records       []FetchedRecord
	NextOffset    int64
	HighWatermark int64
	Skipped       int64
}

func cursorPath(topic, name string) string {
	return topicPath(topic) + "/cursors/" + url.PathEscape(name)
}

// CreateCursor makes a cursor on every partition of topic; created is
// false when it existed (its positions are left as they were).
// An empty from is Earliest.
func (c *Client) CreateCursor(ctx context.Context, topic, name string, from CursorFrom) (cur Cursor, created bool, err error) {
	return c.createCursor(ctx, topic, name, from, nil)
}

// createCursor is CreateCursor asking node (nil: the client's own),
// which makes the cursor on the partitions it owns.
func (c *Client) createCursor(ctx context.Context, topic, name string, from CursorFrom, node *url.URL) (cur Cursor, created bool, err error) {
	if err := checkCursorName(name); err != nil {
		return cur, false, err
	}
	if from == "" {
		from = Earliest
	}
	start := string(from)
	b, err := jsonBody(api.CreateCursorRequest{From: &start})
	if err != nil {
		return cur, false, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, path: cursorPath(topic, name), body: b, contentType: "application/json", node: node})
	if err != nil {
		return cur, false, err
	}
	defer drain(resp)
	if err := decodeJSON(resp, &cur); err != nil {
		return cur, false, err
	}
	return cur, resp.StatusCode == http.StatusCreated, nil
}

// checkCursorName refuses the names a URL path cannot carry ("." and
// "..", which a path cleans away); the daemon checks the rest.
func checkCursorName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("narad: cursor name %q: want 1 to 100 characters of [A-Za-z0-9._-], not . or ..", name)
	}
	return nil
}

// Cursor returns a cursor's positions; ErrCursorNotFound if the topic has
// none of that name.
func (c *Client) Cursor(ctx context.Context, topic, name string) (Cursor, error) {
	var cur Cursor
	if err := checkCursorName(name); err != nil {
		return cur, err
	}
	return cur, c.doJSON(ctx, http.MethodGet, cursorPath(topic, name), nil, &cur)
}

// DeleteCursor removes a cursor from every partition of its topic.
func (c *Client) DeleteCursor(ctx context.Context, topic, name string) error {
	if err := checkCursorName(name); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, cursorPath(topic, name), nil, nil)
}

// CommitCursor sets a cursor's position in one partition (at most the
// high watermark).
func (c *Client) CommitCursor(ctx context.Context, topic, name string, p int, position int64) error {
	if err := checkCursorName(name); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodPut, cursorPath(topic, name)+"/partitions/"+strconv.Itoa(p), api.CommitCursorRequest{Position: &position}, nil)
}

// ReadCursor reads a partition from a cursor's position and, unless
// Peek, moves the cursor past what it returns.
func (c *Client) ReadCursor(ctx context.Context, topic, name string, p int, opts CursorReadOptions) (CursorRecords, error) {
	if err := checkCursorName(name); err != nil {
		return CursorRecords{}, err
	}
	q := url.Values{"encoding": {"base64"}}
	if opts.MaxRecords > 0 {
		q.Set("max_records", strconv.Itoa(opts.MaxRecords))
	}
	if opts.MaxBytes > 0 {
		q.Set("max_bytes", strconv.Itoa(opts.MaxBytes))
	}
	if opts.Wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(opts.Wait.Milliseconds(), 10))
	}
	if opts.Peek {
		q.Set("advance", "false")
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: cursorPath(topic, name) + "/partitions/" + strconv.Itoa(p) + "/records", query: q})
	if err != nil {
		return CursorRecords{}, err
	}
	defer drain(resp)
	var out api.CursorReadAnswer
	if err := decodeJSON(resp, &out); err != nil {
		return CursorRecords{}, err
	}
	res := CursorRecords{NextOffset: out.NextOffset, HighWatermark: out.HighWatermark, Skipped: out.Skipped, Records: make([]FetchedRecord, len(out.Records))}
	for i, r := range out.Records {
		if res.Records[i], err = fromBase64(r); err != nil {
			return CursorRecords{}, fmt.Errorf("narad: cursor read: record %d: %w", r.Offset, err)
		}
	}
	return res, nil
}
