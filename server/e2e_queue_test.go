package server_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_QueueConsume: four concurrent consumers over four partitions
// lease every record exactly once while their leases hold; a lease that
// runs out is leased again (a long poll is woken by the expiry), and a
// nack under that lease's id no longer gives it back; a consume of a
// partition the topic lacks is refused. (That every record not acked
// before a SIGKILL is delivered again is cmd/narad-storaged's
// TestE2E_QueueConsumeAfterSIGKILL.)
func TestE2E_QueueConsume(t *testing.T) {
	const partitions, perPartition = 4, 50
	d := startNode(t, t.TempDir())
	ctx := context.Background()
	c := d.client(client.Options{})
	e2etest.ProduceNumbered(t, ctx, c, "jobs", partitions, perPartition)
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

	if _, err := c.Consume(ctx, "jobs", client.ConsumeOptions{OnlyPartition: true, Partition: 9}); !errors.Is(err, client.ErrPartitionNotFound) {
		t.Fatalf("consume of a partition the topic lacks: %v", err)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
