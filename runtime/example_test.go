package runtime_test

import (
	"context"
	"fmt"
	"os"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// A broker embeds a node: open it on a data directory, create a topic,
// produce (acked only once durable), read back, ack, close.
func Example() {
	dir, err := os.MkdirTemp("", "narad-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	node, err := runtime.New(runtime.Config{DataDir: dir}) // the real disk, the embedded metastore
	if err != nil {
		panic(err)
	}
	if err := node.Start(ctx); err != nil {
		panic(err)
	}
	if _, _, err := node.CreateTopic(ctx, "orders", 1, runtime.Retention{}); err != nil {
		panic(err)
	}
	base, err := node.Produce(ctx, "orders", 0, []partition.Record{
		{Key: []byte("user-42"), Value: []byte("first")},
		{Value: []byte("second")},
	})
	if err != nil {
		panic(err)
	}
	res, err := node.Read(ctx, "orders", 0, base, 10, 1<<20)
	if err != nil {
		panic(err)
	}
	for _, r := range res.Records {
		fmt.Printf("%d %q %s\n", r.Offset, r.Key, r.Value)
	}
	frontier, err := node.Ack(ctx, "orders", 0, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("frontier", frontier)
	if err := node.Close(); err != nil {
		panic(err)
	}
	// Output:
	// 0 "user-42" first
	// 1 "" second
	// frontier 1
}
