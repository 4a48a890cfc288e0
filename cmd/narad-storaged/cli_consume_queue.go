package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/narad-io/storage/client"
)

// runQueueConsume leases records, prints them and acks them (nacks them
// with noAck), until a consume finds nothing free or, with follow, until
// interrupted. Without a partition a consume leases from any of the
// topic's partitions (those the node asked owns, in a cluster). A record
// is acked only once printed: a consumer killed in between leaves it to
// be leased again when its lease runs out.
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

// runQueueFollow is consume --queue --follow of a whole topic, through a
// client.QueueConsumer: it consumes from every node that owns partitions
// of the topic (in a cluster, not only the node asked) and renews the
// leases of the records it holds until they are printed and acked. An
// interrupt ends it, exit 0, giving back (nacking) what it had leased and
// not acked.
func runQueueFollow(ctx context.Context, c *client.Client, topic string, lease time.Duration,
	printer *recordPrinter, out *bufio.Writer, stderr io.Writer) int {
	q, err := c.NewQueueConsumer(ctx, topic, client.QueueConsumerOptions{MaxRecords: 1000, Lease: lease})
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
			case ctx.Err() != nil:
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
