package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/client"
)

// TestE2E_TheFloorOnARealFullDisk: the daemon on a 24 MiB tmpfs with a
// floor of 8 MiB. Produce of 1 MiB batches is refused with 507 no_space
// at the floor, before the file system's ENOSPC: every batch acked before
// is served exactly, the refused one left nothing (the high watermark did
// not move), and once a retention change lets the reaper delete the full
// segments, produce is accepted again by itself (docs/design.md, "A floor
// of free space").
//
// The tmpfs is mounted in a mount namespace of the daemon's own (unshare),
// so the test needs no privilege beyond what unshare -rm takes.
func TestE2E_TheFloorOnARealFullDisk(t *testing.T) {
	dir := t.TempDir()
	daemonWrap = []string{"unshare", "-rm", "sh", "-c",
		`mount -t tmpfs -o size=24m tmpfs "` + dir + `" && exec "$0" "$@"`}
	defer func() { daemonWrap = nil }()
	d := startDaemon(t, dir, "--min-free-bytes", "8388608", "--reaper-interval", "1s")
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTopic(ctx, "fill", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	batch := func(i int) []client.Record {
		rs := make([]client.Record, 16)
		for j := range rs {
			v := make([]byte, 64<<10)
			copy(v, fmt.Sprintf("batch %d record %d", i, j))
			rs[j] = client.Record{Value: v}
		}
		return rs
	}
	acked := 0
	for ; ; acked++ {
		_, err := c.Produce(ctx, "fill", 0, batch(acked))
		if errors.Is(err, client.ErrNoSpace) {
			var e *client.Error
			if !errors.As(err, &e) || !strings.Contains(e.Message, "under the node's floor") {
				t.Fatalf("batch %d refused by the file system, not by the floor: %v", acked, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("batch %d: %v\n%s", acked, err, d.log())
		}
		if acked == 24 {
			t.Fatal("24 MiB taken on a 24 MiB file system with an 8 MiB floor: the floor did not hold")
		}
	}
	if acked < 8 {
		t.Fatalf("refused after %d MiB of 16 MiB above the floor", acked)
	}
	for offset := int64(0); offset < int64(acked*16); {
		f, err := c.Fetch(ctx, "fill", 0, offset, client.FetchOptions{MaxBytes: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if f.HighWatermark != int64(acked*16) {
			t.Fatalf("high watermark %d after %d acked batches of 16 and a refused one", f.HighWatermark, acked)
		}
		for _, r := range f.Records {
			want := batch(int(r.Offset / 16))[r.Offset%16].Value
			if string(r.Value) != string(want) {
				t.Fatalf("offset %d: the record served is not the one acked", r.Offset)
			}
		}
		offset = f.NextOffset
	}
	// A second's age bound: it reaches the open log in place, and the
	// reaper seals the active segment once its last write is that old and
	// deletes it, freeing the disk; nothing is written meanwhile.
	if _, err := c.SetRetention(ctx, "fill", client.Retention{Ms: 1000}); err != nil {
		t.Fatal(err)
	}
	if !d.waitLog(`"msg":"retention deleted segments"`) {
		t.Fatalf("retention deleted nothing:\n%s", d.log())
	}
	// The guard reads the free space again at most 100 ms after the
	// delete: produce until it takes the batch.
	for try := 0; ; try++ {
		res, err := c.Produce(ctx, "fill", 0, batch(acked))
		if err == nil {
			if res.BaseOffset != int64(acked*16) {
				t.Fatalf("the batch after the refusal got offset %d, want %d", res.BaseOffset, acked*16)
			}
			break
		}
		if !errors.Is(err, client.ErrNoSpace) || try == 100000 {
			t.Fatalf("produce once retention freed the disk: %v", err)
		}
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
