package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
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

// A node makes, lists and removes a cursor on the partitions it owns
// (docs/scaling.md). CreateCursor, Cursor and DeleteCursor cover the
// whole topic: in a cluster they ask each owner the topic's description
// names, each for its own partitions, and put the answers together, so a
// client made with any node's address sees the topic's cursor. A
// partition that moved between the description and the call is asked of
// its new owner, after a fresh description, up to cursorRounds times.

// CreateCursor makes a cursor on every partition of topic; created is
// false when it existed (its positions are left as they were).
// An empty from is Earliest. The answer holds every partition's
// position, in partition order.
func (c *Client) CreateCursor(ctx context.Context, topic, name string, from CursorFrom) (cur Cursor, created bool, err error) {
	if err := checkCursorName(name); err != nil {
		return cur, false, err
	}
	cur, created, err = c.onEveryOwner(ctx, topic, name, func(node *url.URL) (Cursor, bool, error) {
		return c.createCursor(ctx, topic, name, from, node)
	})
	if errors.Is(err, ErrCursorNotFound) && len(cur.Partitions) > 0 {
		err = nil // an owner whose partitions moved away as it made the cursor
	}
	return cur, created, err
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

// Cursor returns a cursor's positions on every partition of its topic
// that has it, in partition order; ErrCursorNotFound if none has.
func (c *Client) Cursor(ctx context.Context, topic, name string) (Cursor, error) {
	if err := checkCursorName(name); err != nil {
		return Cursor{}, err
	}
	cur, _, err := c.onEveryOwner(ctx, topic, name, func(node *url.URL) (Cursor, bool, error) {
		var cur Cursor
		resp, err := c.do(ctx, request{method: http.MethodGet, path: cursorPath(topic, name), node: node})
		if err != nil {
			return cur, false, err
		}
		defer drain(resp)
		return cur, false, decodeJSON(resp, &cur)
	})
	if errors.Is(err, ErrCursorNotFound) && len(cur.Partitions) > 0 {
		err = nil // the owners of the partitions without it
	}
	return cur, err
}

// DeleteCursor removes a cursor from every partition of its topic;
// ErrCursorNotFound if no owner had it.
func (c *Client) DeleteCursor(ctx context.Context, topic, name string) error {
	if err := checkCursorName(name); err != nil {
		return err
	}
	desc, err := c.Topic(ctx, topic)
	if err != nil {
		return err
	}
	var notFound error
	found := false
	for _, addr := range ownerAddrs(desc, nil) {
		node, err := c.nodeAt(addr)
		if err != nil {
			return err
		}
		resp, err := c.do(ctx, request{method: http.MethodDelete, path: cursorPath(topic, name), node: node})
		if errors.Is(err, ErrCursorNotFound) {
			notFound = err
			continue
		}
		if err != nil {
			return err
		}
		drain(resp)
		found = true
	}
	if !found && notFound != nil {
		return notFound
	}
	return nil
}

// onEveryOwner calls op once on each node owning partitions of topic not
// yet answered for, and puts together the positions the answers give of
// the partitions each owns; created is any answer's. A partition no
// answer gave is looked for again on its owner in a fresh description
// when that owner is another node than the one asked, up to cursorRounds
// rounds; one its owner did not give is left out. The first error other
// than ErrCursorNotFound ends it; ErrCursorNotFound is returned when an
// owner answered it (beside the positions the others gave).
func (c *Client) onEveryOwner(ctx context.Context, topic, name string, op func(node *url.URL) (Cursor, bool, error)) (cur Cursor, created bool, err error) {
	cur.Name = name
	desc, err := c.Topic(ctx, topic)
	if err != nil {
		return cur, false, err
	}
	got := map[int]CursorPosition{}
	asked := map[int]string{} // partition -> the owner asked for it
	var notFound error
	for round := 0; ; round++ {
		addrs := ownerAddrs(desc, func(p int, addr string) bool {
			_, ok := got[p]
			was, seen := asked[p]
			return !ok && (!seen || was != addr)
		})
		if len(addrs) == 0 || round == cursorRounds {
			break
		}
		if round > 0 {
			if err := backoff(ctx, round-1, nil); err != nil {
				return cur, created, err
			}
		}
		owner := partitionOwners(desc)
		for _, addr := range addrs {
			node, err := c.nodeAt(addr)
			if err != nil {
				return cur, created, err
			}
			for p, a := range owner {
				if a == addr {
					asked[p] = addr
				}
			}
			answer, made, err := op(node)
			if errors.Is(err, ErrCursorNotFound) {
				notFound = err
				continue
			}
			if err != nil {
				return cur, created, err
			}
			created = created || made
			for _, pos := range answer.Partitions {
				if owner[pos.Partition] == addr {
					got[pos.Partition] = pos
				}
			}
		}
		if len(got) == len(desc.Partitions) {
			break
		}
		if desc, err = c.Topic(ctx, topic); err != nil {
			return cur, created, err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		cur.Partitions = append(cur.Partitions, got[p])
	}
	if len(cur.Partitions) == 0 && notFound == nil {
		notFound = fmt.Errorf("%w: %q on topic %s", ErrCursorNotFound, name, topic)
	}
	return cur, created, notFound
}

// partitionOwners maps each partition of a description to its owner's address:
// "" for the node the client was made with (it serves the partition, or
// names no other owner).
func partitionOwners(desc Topic) map[int]string {
	owner := make(map[int]string, len(desc.Partitions))
	for _, d := range desc.Partitions {
		owner[d.Partition] = ownerOf(d)
	}
	return owner
}

// ownerAddrs returns the owners of a description's partitions that want
// (nil: all) keeps, each once, in order.
func ownerAddrs(desc Topic, want func(p int, addr string) bool) []string {
	set := map[string]bool{}
	for p, addr := range partitionOwners(desc) {
		if want == nil || want(p, addr) {
			set[addr] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
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
