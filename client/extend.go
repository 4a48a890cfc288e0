package client

import (
	"context"
	"net/http"
	"time"

	"github.com/narad-io/storage/api"
)

// ExtendLease keeps records of a partition leased under leaseID for lease
// from now (docs/http-api.md, "Queue consume"), for work slower than the
// lease it was consumed with: NATS's in-progress ack, SQS's visibility
// change. lease is 1 ms to 12 h (less than what is left moves the
// deadline earlier; under a millisecond is sent as one). It returns how
// many records were extended and their new deadline (zero when none
// was): a record not counted was acked, nacked, or its lease ran out and
// it may be another consumer's now, its work done twice.
func (c *Client) ExtendLease(ctx context.Context, topic string, p int, leaseID uint64, lease time.Duration, offsets ...int64) (int, time.Time, error) {
	leaseMs := int(lease.Milliseconds())
	if lease > 0 && leaseMs == 0 {
		leaseMs = 1
	}
	var out api.ExtendAnswer
	err := c.doJSON(ctx, http.MethodPost, partitionPath(topic, p)+"/extend", api.ExtendRequest{LeaseID: &leaseID, Offsets: offsets, LeaseMs: &leaseMs}, &out)
	if err != nil || out.Extended == 0 {
		return out.Extended, time.Time{}, err
	}
	return out.Extended, time.UnixMilli(out.LeaseDeadlineMs), nil
}
