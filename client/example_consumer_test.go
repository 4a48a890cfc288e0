package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/narad-io/storage/client"
)

// A consumer reads a whole topic, every partition in offset order, through
// a fan-out cursor: it commits what it printed, so a second run resumes
// after it. (The example starts a node of its own on a temporary
// directory; a program gives client.New its daemon's address.)
func ExampleConsumer() {
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
	if _, _, err := c.CreateTopic(ctx, "orders", 3, client.Retention{}); err != nil {
		panic(err)
	}
	for p, values := range [][]string{{"a", "b"}, {"c"}, {"d", "e", "f"}} {
		for _, v := range values {
			if _, err := c.Produce(ctx, "orders", p, []client.Record{{Value: []byte(v)}}); err != nil {
				panic(err)
			}
		}
	}

	consume := func() {
		k, err := c.NewConsumer(ctx, "orders", client.ConsumerOptions{Cursor: "audit"})
		if err != nil {
			panic(err)
		}
		defer k.Close()
		var lines []string
		for {
			b, err := k.Poll(ctx) // without Follow: io.EOF once every partition is read
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				panic(err)
			}
			for _, r := range b.Records {
				lines = append(lines, fmt.Sprintf("partition %d offset %d: %s", b.Partition, r.Offset, r.Value))
			}
			if err := k.Commit(ctx); err != nil { // past what was processed
				panic(err)
			}
		}
		sort.Strings(lines) // partitions come in no set order; each in its own
		fmt.Println(len(lines), "records")
		for _, l := range lines {
			fmt.Println(l)
		}
	}
	consume()
	if _, err := c.Produce(ctx, "orders", 1, []client.Record{{Value: []byte("g")}}); err != nil {
		panic(err)
	}
	consume() // resumes where the cursor stands
	// Output:
	// 6 records
	// partition 0 offset 0: a
	// partition 0 offset 1: b
	// partition 1 offset 0: c
	// partition 2 offset 0: d
	// partition 2 offset 1: e
	// partition 2 offset 2: f
	// 1 records
	// partition 1 offset 1: g
}
