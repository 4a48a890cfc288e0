package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// TestE2E_CLIConsumeFromTime: consume --from TIME starts at the first
// record committed at or after TIME. (The offset endpoint and a fetch
// with at_ms are package server's TestE2E_SeekByTime.)
func TestE2E_CLIConsumeFromTime(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTopic(ctx, "clock", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := c.Produce(ctx, "clock", 0, []client.Record{{Value: fmt.Appendf(nil, "%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.Fetch(ctx, "clock", 0, 0, client.FetchOptions{})
	if err != nil || len(all.Records) != 20 {
		t.Fatalf("fetch: %d records, %v", len(all.Records), err)
	}
	firstAt := func(at time.Time) int64 {
		for _, r := range all.Records {
			if !r.CommittedAt.Before(at) {
				return r.Offset
			}
		}
		return all.HighWatermark
	}
	at := all.Records[10].CommittedAt
	out, errOut, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "clock", "--from", at.Format(time.RFC3339Nano))
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("%d\t\t", firstAt(at))) {
		t.Fatalf("consume --from %s: exit %d, %q %s", at.Format(time.RFC3339Nano), code, out, errOut)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
