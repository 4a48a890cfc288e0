package sim_test

import (
	"context"
	"fmt"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// A broker's test runs the node on the simulated disk, takes the image a
// power loss right after a commit would leave, and checks that a fresh
// node on it serves the acked record.
func Example_crashImage() {
	ctx := context.Background()
	disk := sim.NewDisk(1)
	if err := disk.MkdirAll("/data"); err != nil {
		panic(err)
	}
	if err := disk.SyncDir("/"); err != nil {
		panic(err)
	}
	node, err := runtime.New(runtime.Config{DataDir: "/data", FS: disk})
	if err != nil {
		panic(err)
	}
	if err := node.Start(ctx); err != nil {
		panic(err)
	}
	node.CreateTopic(ctx, "orders", 1, runtime.Retention{})
	if _, err := node.Produce(ctx, "orders", 0, []partition.Record{{Value: []byte("acked")}}); err != nil {
		panic(err)
	}

	// The power goes: every write no sync carried is lost.
	crashed := disk.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	node.Close()

	after, err := runtime.New(runtime.Config{DataDir: "/data", FS: crashed})
	if err != nil {
		panic(err)
	}
	defer after.Close()
	if err := after.Start(ctx); err != nil {
		panic(err)
	}
	res, err := after.Read(ctx, "orders", 0, 0, 10, 1<<20)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d record(s) after the crash: %s\n", len(res.Records), res.Records[0].Value)
	// Output: 1 record(s) after the crash: acked
}
