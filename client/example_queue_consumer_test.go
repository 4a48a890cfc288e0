package client_test

import (
	"context"
	"fmt"
	"sort"

	"github.com/narad-io/storage/client"
)

// A queue consumer works a whole topic: each record is leased to one
// consumer at a time, acked once done, or nacked to be delivered again.
// Leases of records still in work are renewed by the consumer itself;
// Close gives back what was not settled. (The example starts a node of
// its own on a temporary directory; a program gives client.New its
// daemon's address.)
func ExampleQueueConsumer() {
	n, err := startNode()
	if err != nil {
		panic(err)
	}
	defer n.stop()
	ctx := context.Background()
	c, err := client.New(n.Addr, client.Options{HTTPClient: n.http})
	if err != nil {
		panic(err)
	}
	if _, _, err := c.CreateTopic(ctx, "jobs", 3, client.Retention{}); err != nil {
		panic(err)
	}
	for p, values := range [][]string{{"resize a.png", "resize b.png"}, {"mail bob"}, {"bill acme"}} {
		for _, v := range values {
			if _, err := c.Produce(ctx, "jobs", p, []client.Record{{Value: []byte(v)}}); err != nil {
				panic(err)
			}
		}
	}

	q, err := c.NewQueueConsumer(ctx, "jobs", client.QueueConsumerOptions{})
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	var done []string
	tried := map[string]bool{}
	for len(done) < 4 {
		msgs, err := q.Receive(ctx)
		if err != nil {
			panic(err)
		}
		for _, m := range msgs {
			if string(m.Value) == "mail bob" && !tried["mail bob"] {
				tried["mail bob"] = true // the mail server was down: try again
				if err := m.Nack(ctx); err != nil {
					panic(err)
				}
				continue
			}
			done = append(done, fmt.Sprintf("partition %d offset %d: %s", m.Partition, m.Offset, m.Value))
			if err := m.Ack(ctx); err != nil {
				panic(err)
			}
		}
	}
	sort.Strings(done) // partitions come in no set order
	for _, d := range done {
		fmt.Println(d)
	}
	// Output:
	// partition 0 offset 0: resize a.png
	// partition 0 offset 1: resize b.png
	// partition 1 offset 0: mail bob
	// partition 2 offset 0: bill acme
}
