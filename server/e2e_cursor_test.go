package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// TestE2E_FanOutCursors: two cursors read one topic each at its own pace;
// a peek leaves the cursor and a commit moves it; a long poll through a
// cursor is woken by a commit; each cursor resumes exactly after a
// restart (its series of narad_fanout_child_dropped_messages at zero from
// the start); after a delete and recreate of the topic the cursor is
// gone; bad names and missing cursors are refused with their codes.
func TestE2E_FanOutCursors(t *testing.T) {
	dir := t.TempDir()
	d := startNode(t, dir)
	ctx := context.Background()
	c := d.client(client.Options{})
	if _, _, err := c.CreateTopic(ctx, "events", 2, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	produce := func(p, from, n int) {
		t.Helper()
		batch := make([]client.Record, n)
		for i := range batch {
			batch[i] = client.Record{Value: fmt.Appendf(nil, "%d/%d", p, from+i)}
		}
		if _, err := c.Produce(ctx, "events", p, batch); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 0, 6)
	cur, created, err := c.CreateCursor(ctx, "events", "audit", client.Earliest)
	if err != nil || !created || len(cur.Partitions) != 2 || cur.Partitions[0].Lag != 6 {
		t.Fatalf("create: %+v %v %v", cur, created, err)
	}
	if _, created, err := c.CreateCursor(ctx, "events", "audit", client.Latest); err != nil || created {
		t.Fatalf("create again: %v %v", created, err)
	}
	if _, _, err := c.CreateCursor(ctx, "events", "live", client.Latest); err != nil {
		t.Fatal(err)
	}
	values := func(r client.CursorRecords) string {
		var out []string
		for _, rec := range r.Records {
			out = append(out, string(rec.Value))
		}
		return strings.Join(out, " ")
	}
	if r, err := c.ReadCursor(ctx, "events", "audit", 0, client.CursorReadOptions{MaxRecords: 4, Peek: true}); err != nil || values(r) != "0/0 0/1 0/2 0/3" {
		t.Fatalf("peek: %q %v", values(r), err)
	}
	if err := c.CommitCursor(ctx, "events", "audit", 0, 2); err != nil {
		t.Fatal(err)
	}
	if r, err := c.ReadCursor(ctx, "events", "audit", 0, client.CursorReadOptions{MaxRecords: 3}); err != nil || values(r) != "0/2 0/3 0/4" || r.NextOffset != 5 {
		t.Fatalf("read after the commit: %q next %d, %v", values(r), r.NextOffset, err)
	}
	if err := c.CommitCursor(ctx, "events", "audit", 0, 99); !errors.Is(err, client.ErrInvalidOffset) {
		t.Fatalf("commit past the high watermark: %v", err)
	}
	// A long poll on the latest cursor, woken by a commit.
	polled := make(chan client.CursorRecords, 1)
	go func() {
		r, err := c.ReadCursor(ctx, "events", "live", 1, client.CursorReadOptions{Wait: 30 * time.Second})
		if err != nil {
			t.Error(err)
		}
		polled <- r
	}()
	produce(1, 0, 1)
	select {
	case r := <-polled: // read after the commit, or woken by it
		if values(r) != "1/0" {
			t.Fatalf("long poll: %q", values(r))
		}
	case <-time.After(25 * time.Second): // a hang, not a wait: the poll's own bound is 30 s
		t.Fatal("the long poll was not woken by the commit")
	}

	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
	d = startNode(t, dir)
	c = d.client(client.Options{})
	metrics := string(d.req("GET", "/metrics", nil).Body)
	for _, want := range []string{`narad_fanout_child_dropped_messages{cursor="audit",topic="events"} 0`, `narad_fanout_child_dropped_messages{cursor="live",topic="events"} 0`, "narad_consumer_corrupt_skipped_total 0"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics after the restart lacks %q", want)
		}
	}
	if r, err := c.ReadCursor(ctx, "events", "audit", 0, client.CursorReadOptions{}); err != nil || values(r) != "0/5" {
		t.Fatalf("audit after the restart: %q %v", values(r), err)
	}
	if r, err := c.ReadCursor(ctx, "events", "live", 1, client.CursorReadOptions{}); err != nil || len(r.Records) != 0 {
		t.Fatalf("live after the restart: %q %v", values(r), err)
	}
	if err := c.DeleteTopic(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTopic(ctx, "events", 2, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cursor(ctx, "events", "audit"); !errors.Is(err, client.ErrCursorNotFound) {
		t.Fatalf("a cursor of the deleted incarnation: %v", err)
	}
	if _, _, err := c.CreateCursor(ctx, "events", "bad name", client.Earliest); !errors.Is(err, client.ErrInvalidCursorName) {
		t.Fatalf("a bad cursor name: %v", err)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
