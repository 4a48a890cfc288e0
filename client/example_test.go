package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/narad-io/storage/client"
)

// A program talks to a running narad-storaged: create a topic, produce
// exact bytes, follow the partition with long polls, ack what it read.
func Example() {
	ctx := context.Background()
	c, err := client.New("127.0.0.1:7480", client.Options{})
	if err != nil {
		panic(err)
	}
	if _, _, err := c.CreateTopic(ctx, "orders", 4, client.Retention{Ms: 7 * 24 * 3600 * 1000}); err != nil && !errors.Is(err, client.ErrTopicExists) {
		panic(err)
	}
	res, err := c.Produce(ctx, "orders", 0, []client.Record{{Key: []byte("user-42"), Value: []byte(`{"total": 12.5}`)}})
	if err != nil {
		panic(err)
	}
	fmt.Println("acked at offset", res.BaseOffset)
	for offset := int64(0); ; {
		f, err := c.Fetch(ctx, "orders", 0, offset, client.FetchOptions{Wait: 30 * time.Second})
		var e *client.Error
		if errors.As(err, &e) && e.Code == "record_unreadable" {
			offset = *e.NextOffset // a damaged frame: never served, skipped
			continue
		}
		if err != nil {
			panic(err)
		}
		for _, r := range f.Records {
			fmt.Printf("%d: %s\n", r.Offset, r.Value)
			if _, err := c.Ack(ctx, "orders", 0, r.Offset); err != nil {
				panic(err)
			}
		}
		offset = f.NextOffset
	}
}
