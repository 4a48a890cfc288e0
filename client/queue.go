package client

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/narad-io/storage/api"
)

// ConsumeOptions shape a queue consume. The zero value leases up to 100
// records of any partition for 30 s and answers at once.
type ConsumeOptions struct {
	// OnlyPartition leases from Partition alone; otherwise from any.
	OnlyPartition bool
	Partition     int
	MaxRecords    int           // default 100; at most 10,000
	MaxBytes      int           // default 1 MiB (at least one record comes)
	Lease         time.Duration // default 30 s; at most 12 h
	Wait          time.Duration // with nothing free, wait this long for a record (at most 60 s)
}

// LeasedRecord is a record leased to the caller until LeaseDeadline:
// Ack settles it, Nack (with its LeaseID) gives it back; unsettled at the
// deadline, it is leased to another consumer.
type LeasedRecord struct {
	Partition     int
	Offset        int64
	Key, Value    []byte
	CommittedAt   time.Time
	LeaseDeadline time.Time
	LeaseID       uint64 // one per partition a consume leased from; never repeated for a partition
}

// Consume leases records of a topic (docs/http-api.md, "Queue consume"):
// each record is leased to one caller at a time. It asks for the binary
// answer (a daemon older than it answers JSON, read as well). ErrTooManyLeased says
// every partition it may lease from holds as many leased records as the
// node allows.
func (c *Client) Consume(ctx context.Context, topic string, opts ConsumeOptions) ([]LeasedRecord, error) {
	return c.consume(ctx, nil, topic, opts)
}

// consume is Consume asked of node (nil: the client's own): a
// QueueConsumer asks each owner of the topic's partitions.
func (c *Client) consume(ctx context.Context, node *url.URL, topic string, opts ConsumeOptions) ([]LeasedRecord, error) {
	var body api.ConsumeRequest
	if opts.OnlyPartition {
		body.Partition = &opts.Partition
	}
	if opts.MaxRecords > 0 {
		body.MaxRecords = &opts.MaxRecords
	}
	if opts.MaxBytes > 0 {
		body.MaxBytes = &opts.MaxBytes
	}
	if opts.Lease > 0 {
		leaseMs := int(max(opts.Lease.Milliseconds(), 1))
		body.LeaseMs = &leaseMs
	}
	if opts.Wait > 0 {
		waitMs := int(opts.Wait.Milliseconds())
		body.WaitMs = &waitMs
	}
	b, err := jsonBody(body)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: topicPath(topic) + "/consume",
		query: url.Values{"encoding": {"base64"}}, body: b, contentType: "application/json", accept: api.BatchMediaType, node: node})
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == api.BatchMediaType {
		return decodeConsumed(resp.Body, resp.Header.Get(api.HeaderRecords))
	}
	// A daemon older than the binary answer answers JSON, base64 as asked.
	return decodeConsumedJSON(resp)
}

// decodeConsumedJSON reads a JSON consume answer, its records in base64.
func decodeConsumedJSON(resp *http.Response) ([]LeasedRecord, error) {
	var out api.ConsumeAnswer
	if err := decodeJSON(resp, &out); err != nil {
		return nil, err
	}
	recs := make([]LeasedRecord, len(out.Records))
	for i, r := range out.Records {
		fr, err := fromBase64(r.Record)
		if err != nil {
			return nil, fmt.Errorf("narad: consume answer: record %d/%d: %w", r.Partition, r.Offset, err)
		}
		recs[i] = LeasedRecord{Partition: r.Partition, Offset: r.Offset, Key: fr.Key, Value: fr.Value,
			CommittedAt: fr.CommittedAt, LeaseDeadline: time.UnixMilli(r.LeaseDeadlineMs), LeaseID: r.LeaseID}
	}
	return recs, nil
}

// decodeConsumed reads a binary consume answer (api.ConsumeBatchReader),
// small keys and values packed as a fetch's: a key or value is empty, never
// nil, when it is. count is the answer's Narad-Records header: the body
// must hold that many records (a body cut between two groups reads as
// whole otherwise); empty, from a daemon older than the header, the body
// is taken as it reads.
func decodeConsumed(body io.Reader, count string) ([]LeasedRecord, error) {
	want := -1
	if count != "" {
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 || n > api.MaxConsumeRecords {
			return nil, fmt.Errorf("narad: consume answer: %s %q: want 0 to %d", api.HeaderRecords, count, api.MaxConsumeRecords)
		}
		want = n
	}
	cr := api.NewConsumeBatchReader(body, maxField)
	cr.PackSmall()
	var out []LeasedRecord
	for {
		g, r, err := cr.Next()
		if err == io.EOF {
			if want >= 0 && len(out) != want {
				return nil, fmt.Errorf("narad: consume answer: the body ends after %d records, %s says %d", len(out), api.HeaderRecords, want)
			}
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("narad: consume answer: %w", err)
		}
		out = append(out, LeasedRecord{Partition: g.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
			CommittedAt: time.UnixMilli(r.CommittedAtMs), LeaseDeadline: time.UnixMilli(g.LeaseDeadlineMs), LeaseID: g.LeaseID})
	}
}

// Nack gives records of a partition leased under leaseID back for
// redelivery now, and returns how many still were (the rest were acked,
// or their lease ran out and they may be another consumer's now).
func (c *Client) Nack(ctx context.Context, topic string, p int, leaseID uint64, offsets ...int64) (int, error) {
	var out api.NackAnswer
	err := c.doJSON(ctx, http.MethodPost, partitionPath(topic, p)+"/nacks", api.NackRequest{LeaseID: &leaseID, Offsets: offsets}, &out)
	return out.GivenBack, err
}
