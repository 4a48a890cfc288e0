package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_ProduceCoversTheTopic: produce spreads lines without a key
// over every partition, a batch at a time; --key-separator takes each
// line's key and sends it to KeyPartition's partition (a line without
// the separator has no key); --partition pins every line to one.
func TestE2E_ProduceCoversTheTopic(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/spread", map[string]any{"partitions": 4}), 201, "")
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := func() map[int][]client.FetchedRecord {
		out := map[int][]client.FetchedRecord{}
		for p := range 4 {
			f, err := c.Fetch(ctx, "spread", p, 0, client.FetchOptions{MaxRecords: 10000})
			if err != nil {
				t.Fatal(err)
			}
			out[p] = f.Records
		}
		return out
	}

	var in strings.Builder
	for i := range 400 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	out, errOut, code := cli(t, in.String(), "produce", "--addr", d.addr, "--topic", "spread", "--batch-size", "25", "-v")
	if code != 0 || !strings.HasPrefix(out, "produced 400 records to spread in 16 requests, over 4 partitions\n") {
		t.Fatalf("produce: exit %d, %q %s", code, out, errOut)
	}
	for p, recs := range all() {
		if len(recs) != 100 || !strings.Contains(out, fmt.Sprintf("spread/%d: offsets 0..99\n", p)) {
			t.Fatalf("partition %d holds %d of 400 lines sent in batches of 25; want 100\n%s", p, len(recs), out)
		}
	}

	in.Reset()
	for i := range 40 {
		fmt.Fprintf(&in, "user-%d:order %d\n", i%8, i)
	}
	in.WriteString("no separator here\n")
	out, errOut, code = cli(t, in.String(), "produce", "--addr", d.addr, "--topic", "spread", "--key-separator", ":")
	if code != 0 || !strings.HasPrefix(out, "produced 41 records to spread in ") {
		t.Fatalf("produce --key-separator: exit %d, %q %s", code, out, errOut)
	}
	keyed, keyless := 0, 0
	for p, recs := range all() {
		for _, r := range recs[100:] {
			switch {
			case len(r.Key) == 0 && string(r.Value) == "no separator here":
				keyless++
			case len(r.Key) > 0 && KeyOf(r.Value) == string(r.Key) && client.KeyPartition(r.Key, 4) == p:
				keyed++
			default:
				t.Fatalf("partition %d holds key %q value %q", p, r.Key, r.Value)
			}
		}
	}
	if keyed != 40 || keyless != 1 {
		t.Fatalf("%d keyed and %d keyless records; want 40 and 1", keyed, keyless)
	}

	out, errOut, code = cli(t, "a\nb\nc\n", "produce", "--addr", d.addr, "--topic", "spread", "--partition", "2", "--key-separator", ":")
	if code != 0 || !strings.HasPrefix(out, "produced 3 records to spread/2 in 1 requests, offsets ") {
		t.Fatalf("produce --partition 2: exit %d, %q %s", code, out, errOut)
	}
	if _, errOut, code = cli(t, "a\n", "produce", "--addr", d.addr, "--topic", "spread", "--partition", "4"); code != 1 || !strings.Contains(errOut, "partition 4: spread has 4 partitions") {
		t.Fatalf("produce --partition 4 of 4: exit %d, %s", code, errOut)
	}
	if _, errOut, code = cli(t, "a\n", "produce", "--addr", d.addr, "--topic", "spread", "--key", "k", "--key-separator", ":"); code != 2 {
		t.Fatalf("produce --key and --key-separator: exit %d, %s", code, errOut)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// KeyOf is the user of an "order" line's value: the records of
// TestE2E_ProduceCoversTheTopic carry "order i" for user i%8.
func KeyOf(value []byte) string {
	var i int
	fmt.Sscanf(string(value), "order %d", &i)
	return fmt.Sprint("user-", i%8)
}

// TestE2E_ProduceSaysEachLineThatFailed: a line the command cannot
// send (a key over 64 KiB, bad base64) or the daemon refuses (its batch
// over --max-body-bytes) is said on stderr by its number, the others are
// produced, and the exit status is 1.
func TestE2E_ProduceSaysEachLineThatFailed(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--max-body-bytes", "4096")
	e2etest.Expect(t, d.req("PUT", "/v1/topics/lines", map[string]any{"partitions": 2}), 201, "")
	in := "ok-1:v\n" + strings.Repeat("k", 64<<10+1) + ":v\nok-3:v\nbig:" + strings.Repeat("v", 5000) + "\nok-5:v\n"
	out, errOut, code := cli(t, in, "produce", "--addr", d.addr, "--topic", "lines", "--key-separator", ":", "--batch-bytes", "1000")
	if code != 1 || !strings.Contains(errOut, "line 2: narad: record too large: a key of 65537 bytes") ||
		!strings.Contains(errOut, "line 4: narad: batch_too_large (413)") ||
		!strings.Contains(errOut, "produce: 2 of 5 lines failed") || !strings.HasPrefix(out, "produced 3 records to lines") {
		t.Fatalf("a key over 64 KiB, a batch over the daemon's bound: exit %d, %q %s", code, out, errOut)
	}
	// "a2V5" is "key", "dmFsdWU=" "value"; "!!" is no base64.
	out, errOut, code = cli(t, "a2V5:dmFsdWU=\n!!:dmFsdWU=\na2V5:!!\n", "produce", "--addr", d.addr, "--topic", "lines", "--key-separator", ":", "--base64")
	if code != 1 || !strings.Contains(errOut, "line 2: key is not base64") || !strings.Contains(errOut, "line 3: value is not base64") ||
		!strings.HasPrefix(out, fmt.Sprintf("produced 1 records to lines/%d in 1 requests", client.KeyPartition([]byte("key"), 2))) {
		t.Fatalf("bad base64: exit %d, %q %s", code, out, errOut)
	}
	f, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Fetch(context.Background(), "lines", client.KeyPartition([]byte("key"), 2), 0, client.FetchOptions{})
	if err != nil || len(got.Records) == 0 || string(got.Records[len(got.Records)-1].Value) != "value" {
		t.Fatalf("the base64 line: %+v %v", got, err)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
