package e2etest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/vfs"
)

// ProduceLarge commits n records of size bytes of c each to partition 0
// of topic, up to three a request.
func ProduceLarge(t testing.TB, a API, topic string, n, size int, c string) {
	t.Helper()
	record := `{"value":"` + strings.Repeat(c, size) + `"}`
	for n > 0 {
		batch := min(n, 3)
		body := `{"records":[` + strings.Repeat(record+",", batch-1) + record + `]}`
		Expect(t, a.Req(t, "POST", "/v1/topics/"+topic+"/partitions/0/records", body), 200, "")
		n -= batch
	}
}

// ProduceNumbered creates topic with partitions partitions and commits
// perPartition records to each, in one batch a partition, record i of
// partition p holding "p/i".
func ProduceNumbered(t testing.TB, ctx context.Context, c *client.Client, topic string, partitions, perPartition int) {
	t.Helper()
	if _, _, err := c.CreateTopic(ctx, topic, partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		batch := make([]client.Record, perPartition)
		for i := range batch {
			batch[i] = client.Record{Value: fmt.Appendf(nil, "%d/%d", p, i)}
		}
		if _, err := c.Produce(ctx, topic, p, batch); err != nil {
			t.Fatal(err)
		}
	}
}

// CommittedOneByOne creates topic with one partition and commits n
// records to it, record i holding "i", each by a request of its own (so
// their commit times never go back). It returns them as fetched, and
// firstAt: the offset of the first of them committed at or after a time,
// or the high watermark if none was.
func CommittedOneByOne(t testing.TB, ctx context.Context, c *client.Client, topic string, n int) (all client.Fetched, firstAt func(time.Time) int64) {
	t.Helper()
	if _, _, err := c.CreateTopic(ctx, topic, 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.Produce(ctx, topic, 0, []client.Record{{Value: fmt.Appendf(nil, "%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.Fetch(ctx, topic, 0, 0, client.FetchOptions{})
	if err != nil || len(all.Records) != n {
		t.Fatalf("fetch: %d records, %v", len(all.Records), err)
	}
	firstAt = func(at time.Time) int64 {
		for _, r := range all.Records {
			if !r.CommittedAt.Before(at) {
				return r.Offset
			}
		}
		return all.HighWatermark
	}
	return all, firstAt
}

// WriteAt overwrites the file's bytes at pos, as damage on the disk
// would.
func WriteAt(t testing.TB, path string, pos int64, data []byte) {
	t.Helper()
	f, err := vfs.OS{}.OpenFile(path, os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, pos); err != nil {
		t.Fatal(err)
	}
}
