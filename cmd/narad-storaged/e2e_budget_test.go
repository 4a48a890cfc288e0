package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/client"
	"golang.org/x/sync/errgroup"
)

// TestE2E_ALowOpenFileLimitServesEveryPartition: under an open-file limit
// of 300 (an open-log budget of 16), a topic of 900 partitions, three
// times the limit, takes a produce to each and serves every record
// exactly, across a restart, with no 500 and no poisoned log: a call that
// found no slot free was answered 503 busy and the client's retry
// succeeded (docs/design.md, "Opening and closing logs"). The daemon warns
// at start that its budget is smaller than the partitions on disk.
func TestE2E_ALowOpenFileLimitServesEveryPartition(t *testing.T) {
	const partitions = 900
	dir := t.TempDir()
	daemonWrap = []string{"bash", "-c", `ulimit -n 300 && exec "$0" "$@"`}
	defer func() { daemonWrap = nil }()
	d := startDaemon(t, dir)
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{Retries: 50})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTopic(ctx, "wide", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	each := func(fn func(p int) error) {
		t.Helper()
		var g errgroup.Group
		g.SetLimit(8)
		for p := range partitions {
			g.Go(func() error { return fn(p) })
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%v\n%s", err, d.log())
		}
	}
	produce := func(round int) {
		each(func(p int) error {
			res, err := c.Produce(ctx, "wide", p, []client.Record{{Value: fmt.Appendf(nil, "%d/%d", p, round)}})
			if err != nil || res.BaseOffset != int64(round) {
				return fmt.Errorf("produce %d to partition %d: %+v, %w", round, p, res, err)
			}
			return nil
		})
	}
	check := func(rounds int) {
		each(func(p int) error {
			f, err := c.Fetch(ctx, "wide", p, 0, client.FetchOptions{})
			if err != nil || len(f.Records) != rounds {
				return fmt.Errorf("fetch partition %d: %d records, %w; want %d", p, len(f.Records), err, rounds)
			}
			for i, r := range f.Records {
				if want := fmt.Sprintf("%d/%d", p, i); string(r.Value) != want {
					return fmt.Errorf("partition %d offset %d: %q, want %q", p, i, r.Value, want)
				}
			}
			return nil
		})
	}
	produce(0)
	check(1)
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
	first := d.log()
	d = startDaemon(t, dir)
	if c, err = client.New(d.addr, client.Options{Retries: 50}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.log(), `"msg":"more partitions on disk than the open-log budget`) || !strings.Contains(d.log(), `"max_open_logs":16`) {
		t.Fatalf("no warning of 900 partitions over a budget of 16:\n%s", d.log())
	}
	check(1)
	produce(1)
	check(2)
	metrics := string(d.req("GET", "/metrics", nil).Body)
	for _, want := range []string{"narad_storage_open_logs_limit 16", "narad_storage_open_logs "} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
	for _, bad := range []string{`"status":500`, "log poisoned", "request failed"} {
		if strings.Contains(first+d.log(), bad) {
			t.Fatalf("the daemon logged %q:\n%s", bad, first+d.log())
		}
	}
}
