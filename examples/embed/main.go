// Command narad-embed-example is a program in a module of its own that
// embeds the engine the way a broker would, through its public API only:
// a node on a temporary directory (produce, read back), then the same on
// the public simulated disk, with a crash image taken after a commit and
// reopened. CI builds and runs it, so embedding cannot silently break.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "narad-embed-example:", err)
		os.Exit(1)
	}
	fmt.Println("narad-embed-example: ok")
}

func run() error {
	dir, err := os.MkdirTemp("", "narad-embed")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := roundTrip(nil, dir); err != nil {
		return fmt.Errorf("on the real disk: %w", err)
	}
	disk := sim.NewDisk(1)
	if err := disk.MkdirAll("/data"); err != nil {
		return err
	}
	if err := disk.SyncDir("/"); err != nil {
		return err
	}
	// A power loss right after the commits, the node still running: what
	// it acked is there, whatever the unsynced writes did.
	var crashed *sim.Disk
	if err := roundTrip(disk, "/data", func() { crashed = disk.Crash(sim.CrashPlan{Data: sim.TearUnsynced, Seed: 7}) }); err != nil {
		return fmt.Errorf("on the simulated disk: %w", err)
	}
	return readBack(crashed, "/data", 3)
}

// roundTrip produces three records on a fresh node over files (nil: the
// real disk), reads them back and, the node still open, calls then.
func roundTrip(files vfs.FS, dir string, then ...func()) error {
	ctx := context.Background()
	node, err := startNode(ctx, files, dir)
	if err != nil {
		return err
	}
	defer node.Close()
	if _, _, err := node.CreateTopic(ctx, "events", 1, runtime.Retention{}); err != nil {
		return err
	}
	for i := range 3 {
		if _, err := node.Produce(ctx, "events", 0, []partition.Record{{Value: fmt.Appendf(nil, "event %d", i)}}); err != nil {
			return err
		}
	}
	if err := readAll(ctx, node, 3); err != nil {
		return err
	}
	for _, f := range then {
		f()
	}
	return nil
}

// readBack starts a node on files and checks it serves want records.
func readBack(files vfs.FS, dir string, want int) error {
	ctx := context.Background()
	node, err := startNode(ctx, files, dir)
	if err != nil {
		return err
	}
	defer node.Close()
	return readAll(ctx, node, want)
}

// startNode makes and starts a node on dir over files.
func startNode(ctx context.Context, files vfs.FS, dir string) (*runtime.Node, error) {
	node, err := runtime.New(runtime.Config{DataDir: dir, FS: files})
	if err != nil {
		return nil, err
	}
	if err := node.Start(ctx); err != nil {
		node.Close()
		return nil, err
	}
	return node, nil
}

func readAll(ctx context.Context, node *runtime.Node, want int) error {
	res, err := node.Read(ctx, "events", 0, 0, 100, 1<<20)
	if err != nil {
		return err
	}
	if len(res.Records) != want {
		return fmt.Errorf("read %d records, want %d", len(res.Records), want)
	}
	for i, r := range res.Records {
		if string(r.Value) != fmt.Sprintf("event %d", i) {
			return fmt.Errorf("record %d holds %q", i, r.Value)
		}
	}
	return nil
}
