package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_SeekByTime: for the commit time of every record, the offset
// endpoint and a fetch with at_ms start at the first record committed at
// or after it; a time past every record gives the high watermark.
// (consume --from TIME is cmd/narad-storaged's
// TestE2E_CLIConsumeFromTime.)
func TestE2E_SeekByTime(t *testing.T) {
	d := startNode(t, t.TempDir())
	ctx := context.Background()
	c := d.client(client.Options{})
	all, firstAt := e2etest.CommittedOneByOne(t, ctx, c, "clock", 20)
	for _, r := range all.Records {
		for _, at := range []time.Time{r.CommittedAt, r.CommittedAt.Add(time.Millisecond)} {
			got, err := c.OffsetAt(ctx, "clock", 0, at)
			if err != nil || got != firstAt(at) {
				t.Fatalf("OffsetAt(%v) = %d, %v; want %d", at, got, err, firstAt(at))
			}
		}
	}
	last := all.Records[19].CommittedAt
	if got, err := c.OffsetAt(ctx, "clock", 0, last.Add(time.Hour)); err != nil || got != 20 {
		t.Fatalf("a time past every record: %d, %v; want the high watermark 20", got, err)
	}
	at := all.Records[10].CommittedAt
	var body struct {
		Records []struct {
			Offset int64 `json:"offset"`
		} `json:"records"`
	}
	d.req("GET", fmt.Sprintf("/v1/topics/clock/partitions/0/records?at_ms=%d", at.UnixMilli()), nil).JSON(t, &body)
	if len(body.Records) == 0 || body.Records[0].Offset != firstAt(at) {
		t.Fatalf("fetch with at_ms: %+v, want from %d", body, firstAt(at))
	}
	e2etest.Expect(t, d.req("GET", "/v1/topics/clock/partitions/0/records?at_ms=5&offset=1", nil), 400, "invalid_parameter")
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
