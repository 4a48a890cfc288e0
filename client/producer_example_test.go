package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"sync"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/server"
)

// exampleNode serves a node on a temporary directory for the examples
// to run against; stop ends it.
func exampleNode() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "narad-example")
	if err != nil {
		panic(err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Listen = dir, "" // served by httptest
	cfg.MinFreeBytes, cfg.MinFreeInodes = 0, 0
	ctx := context.Background()
	s, err := server.New(ctx, cfg)
	if err != nil {
		panic(err)
	}
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(s.Handler())
	return srv.URL, func() {
		srv.Close()
		s.Close()
		os.RemoveAll(dir)
	}
}

// A producer of a whole topic: a record with a key goes to its key's
// partition (the same from every client), the others are spread over
// the partitions a batch at a time. Each record's result comes to its
// callback; Close sends what is left and waits for every result.
func ExampleProducer() {
	addr, stop := exampleNode()
	defer stop()
	ctx := context.Background()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		panic(err)
	}
	if _, _, err := c.CreateTopic(ctx, "orders", 4, client.Retention{}); err != nil {
		panic(err)
	}
	p, err := c.NewProducer(ctx, "orders", client.ProducerOptions{})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	perUser := map[string][]int64{} // offsets of each user's records, in the order produced
	for i := range 30 {
		user := fmt.Sprint("user-", i%3)
		order := client.Record{Key: []byte(user), Value: fmt.Appendf(nil, `{"order": %d}`, i)}
		err := p.Produce(ctx, order, func(r client.Result) {
			if r.Err != nil {
				fmt.Println("not stored:", r.Err) // errors.Is(r.Err, client.ErrAmbiguous): maybe stored
				return
			}
			mu.Lock()
			defer mu.Unlock()
			perUser[user] = append(perUser[user], r.Offset)
		})
		if err != nil {
			panic(err) // not taken: the producer is closed, or the record is too large
		}
	}
	if err := p.Close(ctx); err != nil {
		panic(err)
	}
	for _, user := range []string{"user-0", "user-1", "user-2"} {
		fmt.Printf("%s: partition %d, offsets %v\n", user, client.KeyPartition([]byte(user), 4), perUser[user])
	}
	// Output:
	// user-0: partition 3, offsets [0 1 2 3 4 5 6 7 8 9]
	// user-1: partition 0, offsets [0 1 2 3 4 5 6 7 8 9]
	// user-2: partition 1, offsets [0 1 2 3 4 5 6 7 8 9]
}

// Results on a channel, and what a failure says: ErrAmbiguous when the
// batch may have been stored, the node's answer (an *Error) when it was
// refused, ErrProducerClosed when Close gave up before sending it.
func ExampleProducer_channel() {
	addr, stop := exampleNode()
	defer stop()
	ctx := context.Background()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		panic(err)
	}
	if _, _, err := c.CreateTopic(ctx, "events", 2, client.Retention{}); err != nil {
		panic(err)
	}
	p, err := c.NewProducer(ctx, "events", client.ProducerOptions{BufferBytes: 8 << 20, FailWhenFull: true})
	if err != nil {
		panic(err)
	}
	results := make(chan client.Result, 100) // as many as records: a callback must not block
	for i := range 100 {
		err := p.Produce(ctx, client.Record{Value: fmt.Appendf(nil, "event %d", i)}, func(r client.Result) { results <- r })
		if errors.Is(err, client.ErrBufferFull) {
			fmt.Println("shed load") // FailWhenFull: the caller decides
		}
	}
	if err := p.Close(ctx); err != nil {
		panic(err)
	}
	close(results)
	stored, maybe, refused := 0, 0, 0
	for r := range results {
		var answer *client.Error
		switch {
		case r.Err == nil:
			stored++
		case errors.Is(r.Err, client.ErrAmbiguous):
			maybe++
		case errors.As(r.Err, &answer), errors.Is(r.Err, client.ErrProducerClosed):
			refused++
		}
	}
	fmt.Println(stored, "stored,", maybe, "maybe,", refused, "refused")
	// Output: 100 stored, 0 maybe, 0 refused
}
