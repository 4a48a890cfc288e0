package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/narad-io/storage/client"
)

// runQueueConsume leases records of one partition (--partition: from
// its owner, the node asked following a 421 to it), prints them and acks
// them, until a consume finds nothing free or, with follow, until
// interrupted; or, with noAck and no partition, peeks: prints one
// consume's records of the node asked (the partitions it owns, in a
// cluster) and gives them back. A record is acked only once printed: a
// consumer killed in between leaves it to be leased again when its lease
// runs out.
func runQueueConsume(ctx context.Context, c *client.Client, topic string, opts client.ConsumeOptions, follow, noAck bool,
	printer *recordPrinter, out *bufio.Writer, stderr io.Writer) int {
	if follow {
		opts.Wait = 30 * time.Second
	}
	for {
		recs, err := c.Consume(ctx, topic, opts)
		switch {
		case errors.Is(err, context.Canceled):
			return 0
		case err != nil:
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		if len(recs) == 0 && !follow {
			return 0
		}
		type lease struct {
			partition int
			id        uint64
		}
		settle := map[lease][]int64{}
		for _, r := range recs {
			printer.append(r.Partition, client.FetchedRecord{Offset: r.Offset, Key: r.Key, Value: r.Value, CommittedAt: r.CommittedAt})
			k := lease{r.Partition, r.LeaseID}
			settle[k] = append(settle[k], r.Offset)
		}
		_, err = out.Write(printer.buf)
		printer.buf = printer.buf[:0]
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		for k, offsets := range settle {
			if noAck {
				_, err = c.Nack(context.WithoutCancel(ctx), topic, k.partition, k.id, offsets...)
			} else {
				_, err = c.Ack(context.WithoutCancel(ctx), topic, k.partition, offsets...)
			}
			if err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
		if noAck {
			return 0 // what was given back would be leased again at once
		}
	}
}

// runQueueTopic is consume --queue of a whole topic, through a
// client.QueueConsumer: it consumes from every node that owns partitions
// of the topic (in a cluster, not only the node asked) and renews the
// leases of the records it holds until they are printed and acked. With
// follow it runs until interrupted; without, until nothing is left to
// lease (client.QueueConsumerOptions.UntilEmpty): every record it leased
// is printed and acked, and the last consume answered by every owner
// leased nothing. Records leased to other consumers then, or committed
// later, are not waited for. A failed consume of an owner is said on
// stderr and retried; without follow, an owner whose consumes failed
// drainFailures times in a row ends it, exit 1. An interrupt ends it,
// exit 0, giving back (nacking) what it had leased and not acked.
func runQueueTopic(ctx context.Context, c *client.Client, topic string, lease time.Duration, follow bool,
	printer *recordPrinter, out *bufio.Writer, stderr io.Writer) int {
	stderr = &lockedWriter{w: stderr} // the consumer's goroutines say its failed consumes
	opts := client.QueueConsumerOptions{MaxRecords: 1000, Lease: lease, MaxConsumeFailures: drainFailures,
		OnConsumeError: func(node string, err error) {
			fmt.Fprintf(stderr, "consume: node %s: %v (retrying)\n", node, err)
		}}
	if !follow {
		// An owner with nothing free answers after a short poll, not a
		// long one: how long the last round takes.
		opts.UntilEmpty, opts.Wait = true, drainWait
	}
	q, err := c.NewQueueConsumer(ctx, topic, opts)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintln(stderr, "consume:", err)
		return 1
	}
	code := func() int {
		for {
			msgs, err := q.Receive(ctx)
			switch {
			case ctx.Err() != nil || errors.Is(err, io.EOF):
				return 0
			case err != nil:
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
			for _, m := range msgs {
				printer.append(m.Partition, client.FetchedRecord{Offset: m.Offset, Key: m.Key, Value: m.Value, CommittedAt: m.CommittedAt})
			}
			_, err = out.Write(printer.buf)
			printer.buf = printer.buf[:0]
			if err == nil {
				err = out.Flush()
			}
			if err == nil {
				err = q.Ack(context.WithoutCancel(ctx), msgs...)
			}
			if err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
	}()
	if err := q.Close(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintln(stderr, "consume: giving back what was leased and not printed (it comes back when its lease runs out):", err)
	}
	return code
}

// drainWait is each consume's long poll in consume --queue without
// --follow.
const drainWait = 50 * time.Millisecond

// drainFailures is how many consumes of one owner may fail in a row in
// consume --queue without --follow before it exits 1: about 10 s of the
// client's retry schedule. A variable for the tests.
var drainFailures = 10

// lockedWriter serializes the writes to w of several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
