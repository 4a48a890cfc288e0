package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// Bounds of one queue consume.
const (
	maxConsumeRecords = 10000
	maxLeaseMs        = 12 * 60 * 60 * 1000 // 12 h
)

// consumeRequest is a queue consume's body; every field is optional.
type consumeRequest struct {
	Partition  *int `json:"partition"`
	MaxRecords *int `json:"max_records"`
	MaxBytes   *int `json:"max_bytes"`
	LeaseMs    *int `json:"lease_ms"`
	WaitMs     *int `json:"wait_ms"`
}

// consume leases records of a topic (docs/http-api.md, "Queue consume").
// Shutdown ends a long poll with an empty answer, as a fetch's.
func (a *api) consume(w http.ResponseWriter, r *http.Request) {
	topic, ok := topicOf(w, r)
	if !ok {
		return
	}
	q, ok := query(w, r, "encoding")
	if !ok {
		return
	}
	b64, ok := base64Param(w, q)
	if !ok {
		return
	}
	var body consumeRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &body); err != nil {
			a.badBody(w, err)
			return
		}
	}
	opts := runtime.ConsumeOptions{Partition: runtime.AnyPartition}
	for _, f := range []struct {
		name    string
		v       *int
		lo, hi  int
		setting *int
	}{
		{"partition", body.Partition, 0, maxPartitions - 1, &opts.Partition},
		{"max_records", body.MaxRecords, 1, maxConsumeRecords, &opts.MaxRecords},
		{"max_bytes", body.MaxBytes, 1, maxFetchBytes, &opts.MaxBytes},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi {
			writeError(w, http.StatusBadRequest, "invalid_body", fmt.Sprintf("%s must be from %d to %d, not %d", f.name, f.lo, f.hi, *f.v))
			return
		}
		*f.setting = *f.v
	}
	for _, f := range []struct {
		name    string
		v       *int
		lo, hi  int
		setting *time.Duration
	}{
		{"lease_ms", body.LeaseMs, 1, maxLeaseMs, &opts.Lease},
		{"wait_ms", body.WaitMs, 0, maxWait, &opts.Wait},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi {
			writeError(w, http.StatusBadRequest, "invalid_body", fmt.Sprintf("%s must be from %d to %d, not %d", f.name, f.lo, f.hi, *f.v))
			return
		}
		*f.setting = time.Duration(*f.v) * time.Millisecond
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	closing := make(chan struct{})
	go func() {
		select {
		case <-a.closing:
			close(closing)
			cancel()
		case <-ctx.Done():
		}
	}()
	// The answer budget is taken for each attempt to lease, never while
	// the consume waits; what an attempt that leased took is given back
	// once the answer is written.
	var held func()
	defer func() {
		if held != nil {
			held()
		}
	}()
	opts.Admit = func() (func(), error) {
		release, ok := a.takeAnswer(cmp.Or(opts.MaxBytes, 1<<20)) // the default max_bytes when none is given
		if !ok {
			return nil, errNoAnswerBudget
		}
		held = release
		return func() { release(); held = nil }, nil
	}
	recs, err := a.node.Consume(ctx, topic, opts)
	select {
	case <-closing:
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	default:
	}
	if err != nil {
		if errors.Is(err, errNoAnswerBudget) {
			refuseAnswer(w)
			return
		}
		if errors.Is(err, runtime.ErrPartitionNotFound) {
			writeError(w, http.StatusNotFound, "partition_not_found", fmt.Sprintf("topic %q has no partition %d", topic, opts.Partition))
			return
		}
		if errors.Is(err, runtime.ErrNotAssigned) && a.opts.owners != nil && opts.Partition != runtime.AnyPartition {
			a.writeNotOwner(w, topic, opts.Partition) // a consume naming another node's partition
			return
		}
		if errors.Is(err, runtime.ErrTooManyLeased) {
			writeError(w, http.StatusTooManyRequests, "too_many_leased",
				fmt.Sprintf("the partitions of topic %q this consume may lease from each hold %d leased records; ack or nack some first", topic, runtime.MaxLeasedPerPartition))
			return
		}
		a.writeNodeError(w, r, err)
		return
	}
	s := newRecordStream(w, false, b64, opts.MaxBytes)
	s.writeAll(len(recs), func(i int) (partition.ReadRecord, string) {
		rec := recs[i]
		return rec.ReadRecord, fmt.Sprintf(`,"partition":%d,"lease_deadline_ms":%d,"lease_id":%d`, rec.Partition, rec.LeaseDeadline.UnixMilli(), rec.LeaseID)
	})
	s.finish(0, 0, nil)
}

// nack gives leased records back for redelivery.
func (a *api) nack(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body struct {
		LeaseID *uint64 `json:"lease_id"`
		Offsets []int64 `json:"offsets"`
	}
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	if body.LeaseID == nil {
		writeError(w, http.StatusBadRequest, "invalid_body", "lease_id is required: the lease_id the consume gave the records")
		return
	}
	if !validOffsets(w, body.Offsets) {
		return
	}
	given, err := a.node.Nack(r.Context(), topic, p, *body.LeaseID, body.Offsets...)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"given_back": given})
}
