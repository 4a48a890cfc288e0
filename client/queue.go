package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"time"
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
// each record is leased to one caller at a time. ErrTooManyLeased says
// every partition it may lease from holds as many leased records as the
// node allows.
func (c *Client) Consume(ctx context.Context, topic string, opts ConsumeOptions) ([]LeasedRecord, error) {
	body := map[string]int{}
	if opts.OnlyPartition {
		body["partition"] = opts.Partition
	}
	if opts.MaxRecords > 0 {
		body["max_records"] = opts.MaxRecords
	}
	if opts.MaxBytes > 0 {
		body["max_bytes"] = opts.MaxBytes
	}
	if opts.Lease > 0 {
		body["lease_ms"] = int(max(opts.Lease.Milliseconds(), 1))
	}
	if opts.Wait > 0 {
		body["wait_ms"] = int(opts.Wait.Milliseconds())
	}
	b, err := jsonBody(body)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: topicPath(topic) + "/consume",
		query: url.Values{"encoding": {"base64"}}, body: b, contentType: "application/json"})
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	var out struct {
		Records []struct {
			Partition       int     `json:"partition"`
			Offset          int64   `json:"offset"`
			Key             *string `json:"key"`
			Value           string  `json:"value"`
			CommittedAtMs   int64   `json:"committed_at_ms"`
			LeaseDeadlineMs int64   `json:"lease_deadline_ms"`
			LeaseID         uint64  `json:"lease_id"`
		} `json:"records"`
	}
	if err := decodeJSON(resp, &out); err != nil {
		return nil, err
	}
	recs := make([]LeasedRecord, len(out.Records))
	for i, r := range out.Records {
		recs[i] = LeasedRecord{Partition: r.Partition, Offset: r.Offset,
			CommittedAt: time.UnixMilli(r.CommittedAtMs), LeaseDeadline: time.UnixMilli(r.LeaseDeadlineMs), LeaseID: r.LeaseID}
		if recs[i].Value, err = base64.StdEncoding.DecodeString(r.Value); err != nil {
			return nil, fmt.Errorf("narad: consume answer: record %d/%d: value is not base64", r.Partition, r.Offset)
		}
		if r.Key != nil {
			if recs[i].Key, err = base64.StdEncoding.DecodeString(*r.Key); err != nil {
				return nil, fmt.Errorf("narad: consume answer: record %d/%d: key is not base64", r.Partition, r.Offset)
			}
		}
	}
	return recs, nil
}

// Nack gives records of a partition leased under leaseID back for
// redelivery now, and returns how many still were (the rest were acked,
// or their lease ran out and they may be another consumer's now).
func (c *Client) Nack(ctx context.Context, topic string, p int, leaseID uint64, offsets ...int64) (int, error) {
	var out struct {
		GivenBack int `json:"given_back"`
	}
	err := c.doJSON(ctx, http.MethodPost, partitionPath(topic, p)+"/nacks", map[string]any{"lease_id": leaseID, "offsets": offsets}, &out)
	return out.GivenBack, err
}
