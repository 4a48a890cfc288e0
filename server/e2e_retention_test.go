package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/server"
)

// TestE2E_RetentionChangeAppliedToAnOpenLogNobodyWrites: a PATCH of
// retention_bytes on a topic that holds records and no bound is applied
// to its open log by itself, with nothing produced after it (found by
// review: nothing was deleted until the next produce, since the change
// closed the log and only a produce reopened it). The reaper's interval is
// an hour and the cold walk is off, so only the sweep the change starts
// can delete.
func TestE2E_RetentionChangeAppliedToAnOpenLogNobodyWrites(t *testing.T) {
	d := startNode(t, t.TempDir(), func(c *server.Config) {
		c.SegmentMaxBytes = 4096
		c.ReaperInterval = server.Duration(time.Hour)
		c.ColdWalkInterval = 0
	})
	ctx := context.Background()
	c := d.client(client.Options{})
	if _, _, err := c.CreateTopic(ctx, "kept", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		rs := make([]client.Record, 10)
		for j := range rs {
			rs[j] = client.Record{Value: fmt.Appendf(nil, "batch %d record %d %080d", i, j, 0)}
		}
		if _, err := c.Produce(ctx, "kept", 0, rs); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Topic(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if p := before.Partitions[0]; p.Segments < 4 || p.StartOffset != 0 || p.HighWatermark != 400 {
		t.Fatalf("before the change: %+v; want 4 segments or more, offsets 0 to 400", p)
	}

	const bound = 8 << 10
	if _, err := c.SetRetention(ctx, "kept", client.Retention{Bytes: bound}); err != nil {
		t.Fatal(err)
	}
	if !d.waitLog(`"msg":"retention deleted segments"`) {
		t.Fatalf("retention deleted nothing:\n%s", d.log())
	}
	after, err := c.Topic(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	p := after.Partitions[0]
	if p.StartOffset == 0 || p.HighWatermark != 400 || p.Segments >= before.Partitions[0].Segments {
		t.Fatalf("after the change: %+v; want the oldest segments gone, the high watermark at 400", p)
	}
	if p.Bytes > bound && p.Segments > 1 {
		t.Fatalf("%d bytes in %d segments, over the %d-byte bound", p.Bytes, p.Segments, bound)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
