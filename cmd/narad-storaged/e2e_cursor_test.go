package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
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
	d := startDaemon(t, dir)
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
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

	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
	d = startDaemon(t, dir)
	if c, err = client.New(d.addr, client.Options{}); err != nil {
		t.Fatal(err)
	}
	metrics := string(d.req("GET", "/metrics", nil).body)
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
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// TestE2E_CLICursorConsume: consume --cursor prints a partition through a
// cursor and resumes where it stood on the next run; a cursor made
// --from latest prints only what commits after it; --from latest without
// a cursor starts at the high watermark.
func TestE2E_CLICursorConsume(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	expect(t, d.req("PUT", "/v1/topics/c", map[string]any{"partitions": 1}), 201, "")
	produce := func(values ...string) {
		t.Helper()
		var recs []map[string]string
		for _, v := range values {
			recs = append(recs, map[string]string{"value": v})
		}
		expect(t, d.req("POST", "/v1/topics/c/partitions/0/records", map[string]any{"records": recs}), 200, "")
	}
	produce("a", "b", "c")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "c"}, args...)...)
		if code != 0 {
			t.Fatalf("consume %v: exit %d, %s", args, code, errOut)
		}
		return out
	}
	if out := run("--cursor", "audit"); out != "0\t\ta\n1\t\tb\n2\t\tc\n" {
		t.Fatalf("first run: %q", out)
	}
	if out := run("--cursor", "tail", "--from", "latest"); out != "" {
		t.Fatalf("a latest cursor's first run: %q", out)
	}
	produce("d", "e")
	if out := run("--cursor", "audit"); out != "3\t\td\n4\t\te\n" {
		t.Fatalf("second run: %q, want it to resume at 3", out)
	}
	if out := run("--cursor", "tail"); out != "3\t\td\n4\t\te\n" {
		t.Fatalf("the latest cursor: %q", out)
	}
	if out := run("--from", "latest"); out != "" {
		t.Fatalf("--from latest: %q", out)
	}
	if _, _, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "c", "--cursor", "x", "--from", "3"); code != 2 {
		t.Fatalf("--cursor with --from an offset: exit %d, want 2", code)
	}
}
