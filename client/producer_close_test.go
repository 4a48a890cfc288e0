package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/server"
)

// TestProducer_CloseSendsWhatIsPending: records waiting for their linger
// are sent by Close, which returns once each has its result; Produce is
// then refused, and a second Close returns nil.
func TestProducer_CloseSendsWhatIsPending(t *testing.T) {
	n := startRealNode(t, nil, Options{})
	n.topic(t, "pending", 3)
	p := newProducer(t, n.c, "pending", ProducerOptions{Linger: time.Hour})
	var rs results
	for i := range 100 {
		produce(t, p, &rs, fmt.Sprint("k", i), fmt.Sprint(i))
	}
	if got, _ := rs.take(); len(got) != 0 {
		t.Fatalf("%d results before the linger or a flush", len(got))
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := rs.take()
	for _, r := range got {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if len(got) != 100 {
		t.Fatalf("%d results after Close, want 100", len(got))
	}
	if err := p.Produce(context.Background(), Record{Value: []byte("late")}, nil); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("Produce after Close: %v", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	total := 0
	for part := range 3 {
		total += len(n.records(t, "pending", part))
	}
	if total != 100 {
		t.Fatalf("the log holds %d records", total)
	}
}

// TestProducer_ACloseWhoseContextEndsMidFlight: a request in flight and
// two batches behind it when Close's context ends. Close returns an
// *UnsentError counting both; the records in flight fail with
// ErrAmbiguous (the node may commit them yet), the others with
// ErrProducerClosed; every result is given before Close returns. A Flush
// whose context ends first drops nothing and says what waits.
func TestProducer_ACloseWhoseContextEndsMidFlight(t *testing.T) {
	gate := newProduceGate()
	n := startRealNode(t, gate.wrap, Options{})
	defer gate.release() // before the node's cleanup: the handler must end
	n.topic(t, "abandon", 1)
	p := newProducer(t, n.c, "abandon", ProducerOptions{BatchRecords: 10, Linger: time.Hour, MaxInFlight: 1})
	var rs results
	for i := range 30 {
		produce(t, p, &rs, "", fmt.Sprint(i))
	}
	<-gate.arrived // the first batch is at the node

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var unsent *UnsentError
	if err := p.Flush(ctx); !errors.As(err, &unsent) || unsent.Unsent != 20 || unsent.InFlight != 10 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with its context ended: %v; want 20 unsent and 10 in flight", err)
	}
	if got, _ := rs.take(); len(got) != 0 {
		t.Fatalf("a Flush whose context ended gave %d results", len(got))
	}

	if err := p.Close(ctx); !errors.As(err, &unsent) || unsent.Unsent != 20 || unsent.InFlight != 10 {
		t.Fatalf("Close with its context ended: %v; want 20 unsent and 10 in flight", err)
	}
	got, vals := rs.take()
	if len(got) != 30 {
		t.Fatalf("%d results when Close returned, want 30", len(got))
	}
	for i, r := range got {
		inFlight := i < 10
		if string(vals[i]) != fmt.Sprint(i) ||
			inFlight && (!errors.Is(r.Err, ErrAmbiguous) || !errors.Is(r.Err, context.Canceled)) ||
			!inFlight && (!errors.Is(r.Err, ErrProducerClosed) || errors.Is(r.Err, ErrAmbiguous)) {
			t.Fatalf("record %s: %+v", vals[i], r)
		}
	}
	if st := p.Stats(); st.Failed != 30 || st.Requests != 1 {
		t.Fatalf("stats %+v; want 1 request and 30 records failed", st)
	}
}

// TestProducer_ABufferFullBlocksOrFails: with the buffer full (the node
// holding the batches), Produce fails at once with ErrBufferFull under
// FailWhenFull, and otherwise waits: until its context ends (the record
// not taken), or until results give the buffer room back.
func TestProducer_ABufferFullBlocksOrFails(t *testing.T) {
	for _, failWhenFull := range []bool{true, false} {
		t.Run(fmt.Sprint("FailWhenFull=", failWhenFull), func(t *testing.T) {
			gate := newProduceGate()
			n := startRealNode(t, gate.wrap, Options{})
			defer gate.release()
			n.topic(t, "full", 2)
			value := strings.Repeat("v", 100) // 102 bytes encoded, without a key
			p := newProducer(t, n.c, "full", ProducerOptions{BufferBytes: 250, Linger: time.Hour, FailWhenFull: failWhenFull})
			var rs results
			produce(t, p, &rs, "", value)
			produce(t, p, &rs, "", value)
			third := Record{Value: []byte(value)}
			if failWhenFull {
				if err := p.Produce(context.Background(), third, rs.done(third.Value)); !errors.Is(err, ErrBufferFull) {
					t.Fatalf("a record past the buffer: %v, want ErrBufferFull", err)
				}
				gate.release()
				if err := p.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := p.Produce(context.Background(), third, rs.done(third.Value)); err != nil {
					t.Fatalf("once the buffer emptied: %v", err)
				}
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				returned := make(chan error, 1)
				go func() { returned <- p.Produce(ctx, third, rs.done([]byte("never"))) }()
				<-gate.arrived // the full buffer sent what it held
				select {
				case err := <-returned:
					t.Fatalf("Produce returned %v with the buffer full", err)
				default:
				}
				cancel()
				if err := <-returned; !errors.Is(err, context.Canceled) {
					t.Fatalf("a waiting Produce whose context ended: %v", err)
				}
				go func() { returned <- p.Produce(context.Background(), third, rs.done(third.Value)) }()
				gate.release()
				if err := <-returned; err != nil {
					t.Fatalf("Produce once results gave room: %v", err)
				}
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, vals := rs.take()
			if len(got) != 3 {
				t.Fatalf("%d results, want 3 (the record refused has none)", len(got))
			}
			for i, r := range got {
				if r.Err != nil || string(vals[i]) != value {
					t.Fatalf("result %d: %+v of %q", i, r, vals[i])
				}
			}
		})
	}
}

// TestProducer_RecordsItCannotSendAreRefusedAlone: a key over the API's
// 64 KiB, a record over the buffer and a partition the topic does not
// have are refused by Produce, before anything is batched (a key over
// the bound would fail its whole batch at the node).
func TestProducer_RecordsItCannotSendAreRefusedAlone(t *testing.T) {
	n := startRealNode(t, nil, Options{})
	n.topic(t, "bounds", 2)
	p := newProducer(t, n.c, "bounds", ProducerOptions{BufferBytes: 1 << 20})
	ctx := context.Background()
	if err := p.Produce(ctx, Record{Key: make([]byte, 64<<10+1), Value: []byte("v")}, nil); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("a key of 64 KiB + 1: %v", err)
	}
	if err := p.Produce(ctx, Record{Value: make([]byte, 1<<20)}, nil); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("a record over the buffer: %v", err)
	}
	for _, part := range []int{2, -1} {
		if err := p.ProduceTo(ctx, part, Record{Value: []byte("v")}, nil); !errors.Is(err, ErrPartitionNotFound) {
			t.Fatalf("partition %d of 2: %v", part, err)
		}
	}
	var rs results
	if err := p.ProduceTo(ctx, 1, Record{Key: make([]byte, 64<<10), Value: []byte("v")}, rs.done(nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rs.take(); len(got) != 1 || got[0].Err != nil || got[0].Partition != 1 {
		t.Fatalf("a key of 64 KiB to partition 1: %+v", got)
	}
	for _, bad := range []ProducerOptions{{BatchRecords: 100_001}, {BatchBytes: 64<<20 + 1}, {MaxInFlight: -1}, {BufferBytes: -1}} {
		if _, err := n.c.NewProducer(ctx, "bounds", bad); err == nil {
			t.Fatalf("options %+v were taken", bad)
		}
	}
	if _, err := n.c.NewProducer(ctx, "nope", ProducerOptions{}); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("a producer of a topic that is not there: %v", err)
	}
}

// TestProducer_ATopicMadeAgainIsDescribedAgain: a batch answered 404
// (the topic deleted and made again with fewer partitions) fails with
// the answer, and the producer places later records by the new count.
func TestProducer_ATopicMadeAgainIsDescribedAgain(t *testing.T) {
	n := startRealNode(t, nil, Options{})
	n.topic(t, "again", 4)
	p := newProducer(t, n.c, "again", ProducerOptions{Linger: time.Hour})
	ctx := context.Background()
	if err := n.c.DeleteTopic(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	n.topic(t, "again", 2)
	var rs results
	if err := p.ProduceTo(ctx, 3, Record{Value: []byte("to 3")}, rs.done(nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rs.take(); len(got) != 1 || !errors.Is(got[0].Err, ErrPartitionNotFound) {
		t.Fatalf("a record to a partition the topic no longer has: %+v", got)
	}
	if got := p.Partitions(); got != 2 {
		t.Fatalf("after the 404 the producer places by %d partitions, want 2", got)
	}
	if err := p.Produce(ctx, Record{Key: []byte("user-42"), Value: []byte("v")}, rs.done(nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rs.take(); len(got) != 2 || got[1].Err != nil || got[1].Partition != KeyPartition([]byte("user-42"), 2) {
		t.Fatalf("a keyed record after the describe: %+v", got)
	}
}

// TestProducer_AnAnswerThatClosesTheConnectionLosesNoBatch: a batch over
// the node's body bound is answered 413 and the connection closed; the
// next batch, sent by its linger on the closed connection, is sent again
// on a new one (found by the e2e test: it had its outcome at once, no
// answer was coming to wake its sender, and its result never came).
func TestProducer_AnAnswerThatClosesTheConnectionLosesNoBatch(t *testing.T) {
	n := startRealNode(t, nil, Options{}, func(c *server.Config) { c.MaxBodyBytes = 4096 })
	n.topic(t, "closed", 1)
	p := newProducer(t, n.c, "closed", ProducerOptions{BatchBytes: 1000, Linger: time.Millisecond})
	ctx := context.Background()
	results := make(chan Result, 2)
	done := func(r Result) { results <- r }
	if err := p.Produce(ctx, Record{Value: bytes.Repeat([]byte{'v'}, 5000)}, done); err != nil {
		t.Fatal(err)
	}
	if r := <-results; !errors.Is(r.Err, ErrBatchTooLarge) {
		t.Fatalf("a batch over the node's bound: %+v", r)
	}
	// No Flush: its wake-up would hide the bug. The linger sends it.
	if err := p.Produce(ctx, Record{Value: []byte("small")}, done); err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.Err != nil || r.Offset != 0 {
		t.Fatalf("the next batch: %+v", r)
	}
}
