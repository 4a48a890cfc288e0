package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// TestE2E_QueueConsume: four concurrent consumers over four partitions
// lease every record exactly once while their leases hold; a lease that
// runs out is leased again (a long poll is woken by the expiry), and a
// nack under that lease's id no longer gives it back; after
// SIGKILL of the daemon, every record not acked before the kill is
// delivered again (at-least-once), and none was lost.
func TestE2E_QueueConsume(t *testing.T) {
	const partitions, perPartition = 4, 50
	dir := t.TempDir()
	d := startDaemon(t, dir)
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTopic(ctx, "jobs", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		batch := make([]client.Record, perPartition)
		for i := range batch {
			batch[i] = client.Record{Value: fmt.Appendf(nil, "%d/%d", p, i)}
		}
		if _, err := c.Produce(ctx, "jobs", p, batch); err != nil {
			t.Fatal(err)
		}
	}
	type rec struct {
		p int
		o int64
	}
	var mu sync.Mutex
	delivered := map[rec]int{}
	acked := map[rec]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := c.Consume(ctx, "jobs", client.ConsumeOptions{MaxRecords: 9, Lease: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, r := range got {
					if want := fmt.Sprintf("%d/%d", r.Partition, r.Offset); string(r.Value) != want {
						t.Errorf("leased %q at %d/%d", r.Value, r.Partition, r.Offset)
					}
					mu.Lock()
					delivered[rec{r.Partition, r.Offset}]++
					mu.Unlock()
					if r.Offset%2 == 0 { // the odd ones stay leased, unacked
						if _, err := c.Ack(ctx, "jobs", r.Partition, r.Offset); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						acked[rec{r.Partition, r.Offset}] = true
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(delivered) != partitions*perPartition {
		t.Fatalf("%d records delivered, want %d", len(delivered), partitions*perPartition)
	}
	for r, n := range delivered {
		if n != 1 {
			t.Fatalf("%v delivered %d times within its lease", r, n)
		}
	}
	// A short lease on a fresh record: a consume waiting on the topic is
	// woken by its expiry and leases it again.
	if _, err := c.Produce(ctx, "jobs", 0, []client.Record{{Value: []byte("short")}}); err != nil {
		t.Fatal(err)
	}
	short, err := c.Consume(ctx, "jobs", client.ConsumeOptions{OnlyPartition: true, Partition: 0, Lease: 2 * time.Second})
	if err != nil || len(short) != 1 || string(short[0].Value) != "short" {
		t.Fatalf("short lease: %v, %v", short, err)
	}
	again, err := c.Consume(ctx, "jobs", client.ConsumeOptions{Lease: time.Hour, Wait: 30 * time.Second})
	if err != nil || len(again) != 1 || again[0].Offset != short[0].Offset || time.Now().Before(short[0].LeaseDeadline) {
		t.Fatalf("after the lease ran out: %v, %v", again, err)
	}
	if given, err := c.Nack(ctx, "jobs", 0, short[0].LeaseID, again[0].Offset); err != nil || given != 0 {
		t.Fatalf("a nack under the expired lease: %d given back, %v; want 0: the record is another lease's now", given, err)
	}
	if given, err := c.Nack(ctx, "jobs", 0, again[0].LeaseID, again[0].Offset); err != nil || given != 1 {
		t.Fatalf("a nack under the current lease: %d, %v", given, err)
	}
	if back, err := c.Consume(ctx, "jobs", client.ConsumeOptions{OnlyPartition: true, Partition: 0, Lease: time.Hour}); err != nil || len(back) != 1 || back[0].Offset != again[0].Offset {
		t.Fatalf("after the nack: %v, %v; want the nacked record at once", back, err)
	}

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
	if _, err := c.Consume(ctx, "jobs", client.ConsumeOptions{OnlyPartition: true, Partition: 9}); !errors.Is(err, client.ErrPartitionNotFound) {
		t.Fatalf("consume of a partition the topic lacks: %v", err)
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
	expect(t, d.req("PUT", "/v1/topics/q", map[string]any{"partitions": 2}), 201, "")
	for p := range 2 {
		expect(t, d.req("POST", fmt.Sprintf("/v1/topics/q/partitions/%d/records", p), map[string]any{"records": []map[string]string{{"value": "a"}, {"value": "b"}}}), 200, "")
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
