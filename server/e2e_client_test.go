package server_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
)

// TestE2E_Client: the Go client against a node, every endpoint,
// and the error codes a client meets, each matched by its sentinel.
func TestE2E_Client(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("tok\n"), 0o600)
	d := startNode(t, filepath.Join(dir, "data"), func(c *server.Config) { c.AuthTokenFile = tokenFile })
	ctx := context.Background()
	c := d.client(client.Options{Token: "tok"})
	isErr := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
	}

	top, created, err := c.CreateTopic(ctx, "orders", 2, client.Retention{})
	if err != nil || !created || top.Name != "orders" || len(top.Partitions) != 2 || len(top.Incarnation) != 16 {
		t.Fatalf("create: %+v %v %v", top, created, err)
	}
	if _, created, err := c.CreateTopic(ctx, "orders", 2, client.Retention{}); err != nil || created {
		t.Fatalf("create again: %v %v", created, err)
	}
	_, _, err = c.CreateTopic(ctx, "orders", 3, client.Retention{})
	isErr("create with other settings", err, client.ErrTopicExists)
	_, _, err = c.CreateTopic(ctx, "bad name", 1, client.Retention{})
	isErr("a bad name", err, client.ErrInvalidTopicName)

	exact := []client.Record{{Key: []byte("k"), Value: []byte{0, 0xff, 'x'}}, {Value: []byte("text")}}
	res, err := c.Produce(ctx, "orders", 1, exact)
	if err != nil || res.BaseOffset != 0 || res.Count != 2 || res.HighWatermark != 2 {
		t.Fatalf("produce binary: %+v %v", res, err)
	}
	if res, err = c.Produce(ctx, "orders", 1, exact[1:], client.WithEncoding(client.JSONText)); err != nil || res.BaseOffset != 2 {
		t.Fatalf("produce JSON text: %+v %v", res, err)
	}
	if res, err = c.Produce(ctx, "orders", 1, exact[:1], client.WithEncoding(client.JSONBase64)); err != nil || res.BaseOffset != 3 {
		t.Fatalf("produce JSON base64: %+v %v", res, err)
	}
	_, err = c.Produce(ctx, "orders", 1, nil)
	isErr("an empty produce", err, client.ErrInvalidBody)
	_, err = c.Produce(ctx, "orders", 7, exact)
	isErr("a partition that does not exist", err, client.ErrPartitionNotFound)

	wait, err := c.WaitTopic(ctx, "orders", map[int]int64{0: 0, 1: 0}, time.Minute, top.Incarnation)
	if err != nil || len(wait.Ready) != 1 || wait.Ready[0] != (client.PartitionHighWatermark{Partition: 1, HighWatermark: 4}) || wait.Incarnation != top.Incarnation {
		t.Fatalf("a topic-wide wait with records past a position: %+v %v", wait, err)
	}
	_, err = c.WaitTopic(ctx, "orders", map[int]int64{0: 0}, time.Minute, "0123456789abcdef")
	isErr("a topic-wide wait on another incarnation", err, client.ErrTopicNotFound)
	_, err = c.WaitTopic(ctx, "orders", map[int]int64{7: 0}, time.Minute, "")
	isErr("a topic-wide wait on a partition that does not exist", err, client.ErrPartitionNotFound)
	_, err = c.Produce(ctx, "nope", 0, exact)
	isErr("a topic that does not exist", err, client.ErrTopicNotFound)
	_, err = c.Produce(ctx, "orders", 0, []client.Record{{Value: make([]byte, 65<<20)}})
	isErr("a batch over the bound", err, client.ErrBatchTooLarge)

	f, err := c.Fetch(ctx, "orders", 1, 0, client.FetchOptions{})
	if err != nil || len(f.Records) != 4 || f.NextOffset != 4 || f.HighWatermark != 4 {
		t.Fatalf("fetch: %+v %v", f, err)
	}
	for i, want := range append(append(exact, exact[1]), exact[0]) {
		got := f.Records[i]
		if got.Offset != int64(i) || !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || got.CommittedAt.IsZero() {
			t.Fatalf("record %d: %+v, want %+v", i, got, want)
		}
	}
	_, err = c.Fetch(ctx, "orders", 1, 9, client.FetchOptions{})
	isErr("a fetch past the high watermark", err, client.ErrOffsetBeyondHighWatermark)
	woken := make(chan client.Fetched, 1)
	go func() {
		f, _ := c.Fetch(ctx, "orders", 0, 0, client.FetchOptions{Wait: time.Minute})
		woken <- f
	}()
	if _, err := c.Produce(ctx, "orders", 0, exact[1:]); err != nil {
		t.Fatal(err)
	}
	if f := <-woken; len(f.Records) != 1 || string(f.Records[0].Value) != "text" {
		t.Fatalf("long poll: %+v", f)
	}

	if fr, err := c.Ack(ctx, "orders", 1, 0, 2); err != nil || fr != 1 {
		t.Fatalf("ack: %d %v", fr, err)
	}
	_, err = c.Ack(ctx, "orders", 1, 10)
	isErr("an ack past the high watermark", err, client.ErrInvalidOffset)
	if st, err := c.Consumer(ctx, "orders", 1); err != nil || st.Frontier != 1 || len(st.AckedAhead) != 1 || st.AckedAhead[0] != 2 {
		t.Fatalf("consumer: %+v %v", st, err)
	}

	if top, err = c.SetRetention(ctx, "orders", client.Retention{Ms: 3600000, Bytes: 1 << 30}); err != nil || top.RetentionMs != 3600000 || top.RetentionBytes != 1<<30 {
		t.Fatalf("set retention: %+v %v", top, err)
	}
	// PATCH with one bound keeps the other.
	r := d.req("PATCH", "/v1/topics/orders", `{"retention_bytes": 5000000}`, "Authorization", "Bearer tok")
	e2etest.Expect(t, r, 200, "")
	var desc struct {
		RetentionMs    int64 `json:"retention_ms"`
		RetentionBytes int64 `json:"retention_bytes"`
	}
	r.JSON(t, &desc)
	if desc.RetentionMs != 3600000 || desc.RetentionBytes != 5000000 {
		t.Fatalf("after a PATCH of retention_bytes alone: %+v", desc)
	}
	e2etest.Expect(t, d.req("PATCH", "/v1/topics/orders", `{"retention_bytes": -1}`, "Authorization", "Bearer tok"), 400, "invalid_body")
	if top, err = c.Topic(ctx, "orders"); err != nil || top.Partitions[1].HighWatermark != 4 {
		t.Fatalf("describe: %+v %v", top, err)
	}
	if all, err := c.Topics(ctx); err != nil || len(all) != 1 {
		t.Fatalf("list: %+v %v", all, err)
	}
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Topic(ctx, "orders")
	isErr("a deleted topic", err, client.ErrTopicNotFound)

	anonymous := d.client(client.Options{})
	_, err = anonymous.Topics(ctx)
	isErr("no token", err, client.ErrUnauthorized)
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
