package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_QueueConsumeAfterSIGKILL: after SIGKILL of the daemon, every
// record leased and not acked before the kill is delivered again
// (at-least-once), and none was lost. (The queue's leases, expiry and
// nacks are tested on a node in process: package server's
// TestE2E_QueueConsume.)
func TestE2E_QueueConsumeAfterSIGKILL(t *testing.T) {
	const partitions, perPartition = 4, 50
	dir := t.TempDir()
	d := startDaemon(t, dir)
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e2etest.ProduceNumbered(t, ctx, c, "jobs", partitions, perPartition)
	type rec struct {
		p int
		o int64
	}
	delivered := map[rec]bool{}
	acked := map[rec]bool{}
	for {
		got, err := c.Consume(ctx, "jobs", client.ConsumeOptions{MaxRecords: 9, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, r := range got {
			delivered[rec{r.Partition, r.Offset}] = true
			if r.Offset%2 == 0 { // the odd ones stay leased, unacked
				if _, err := c.Ack(ctx, "jobs", r.Partition, r.Offset); err != nil {
					t.Fatal(err)
				}
				acked[rec{r.Partition, r.Offset}] = true
			}
		}
	}
	if len(delivered) != partitions*perPartition {
		t.Fatalf("%d records delivered, want %d", len(delivered), partitions*perPartition)
	}
	// A record produced and leased just before the kill, never acked.
	if _, err := c.Produce(ctx, "jobs", 0, []client.Record{{Value: []byte("last")}}); err != nil {
		t.Fatal(err)
	}
	last, err := c.Consume(ctx, "jobs", client.ConsumeOptions{OnlyPartition: true, Partition: 0, Lease: time.Hour})
	if err != nil || len(last) != 1 || last[0].Offset != perPartition {
		t.Fatalf("the last record's lease: %v, %v", last, err)
	}
	delivered[rec{0, perPartition}] = true

	if err := d.stop(syscall.SIGKILL); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("kill: %v", err)
	}
	d = startDaemon(t, dir)
	if c, err = client.New(d.addr, client.Options{}); err != nil {
		t.Fatal(err)
	}
	redelivered := map[rec]bool{}
	for {
		got, err := c.Consume(ctx, "jobs", client.ConsumeOptions{MaxRecords: 1000, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, r := range got {
			redelivered[rec{r.Partition, r.Offset}] = true
		}
	}
	for r := range delivered {
		if !acked[r] && !redelivered[r] {
			t.Fatalf("%v was never acked and is not delivered again after the kill", r)
		}
	}
	if !redelivered[rec{0, perPartition}] {
		t.Fatal("the record leased (never acked) before the kill is not delivered again")
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// TestE2E_CLIQueueConsume: consume --queue --no-ack prints the leased
// records and gives them back; consume --queue prints them again, acks
// them, and a third run finds nothing.
func TestE2E_CLIQueueConsume(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/q", map[string]any{"partitions": 2}), 201, "")
	for p := range 2 {
		e2etest.Expect(t, d.req("POST", fmt.Sprintf("/v1/topics/q/partitions/%d/records", p), map[string]any{"records": []map[string]string{{"value": "a"}, {"value": "b"}}}), 200, "")
	}
	lines := func(out string) []string {
		l := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(l)
		return l
	}
	want := "[0\t0\t\ta 0\t1\t\tb 1\t0\t\ta 1\t1\t\tb]"
	out, errOut, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "q", "--queue", "--no-ack")
	if code != 0 || fmt.Sprint(lines(out)) != want {
		t.Fatalf("--queue --no-ack: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code = cli(t, "", "consume", "--addr", d.addr, "--topic", "q", "--queue", "--json", "--partition", "1")
	if code != 0 || len(lines(out)) != 2 || !strings.HasPrefix(lines(out)[0], `{"partition":1,"offset":0,"value":"a"`) {
		t.Fatalf("--queue --json --partition 1: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code = cli(t, "", "consume", "--addr", d.addr, "--topic", "q", "--queue")
	if code != 0 || fmt.Sprint(lines(out)) != "[0\t0\t\ta 0\t1\t\tb]" {
		t.Fatalf("--queue: exit %d, %q %s", code, out, errOut)
	}
	if out, _, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "q", "--queue"); code != 0 || out != "" {
		t.Fatalf("--queue after every record was acked: exit %d, %q", code, out)
	}
	for _, bad := range [][]string{{"--queue", "--from", "3"}, {"--no-ack"}, {"--queue", "--no-ack", "--follow"}} {
		if _, _, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "q"}, bad...)...); code != 2 {
			t.Fatalf("consume %v: exit %d, want 2", bad, code)
		}
	}
}
