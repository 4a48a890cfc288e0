package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// consume leases records of a topic (docs/http-api.md, "Queue consume"),
// answered in JSON, or in the binary consume encoding with Accept:
// api.BatchMediaType (writeConsumeBatch); an error is JSON either way.
// Shutdown ends a long poll with an empty answer, as a fetch's.
func (a *Handler) consume(w http.ResponseWriter, r *http.Request) {
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
	accept, _, _ := mime.ParseMediaType(r.Header.Get("Accept"))
	batch := accept == api.BatchMediaType
	var body api.ConsumeRequest
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
		{"max_records", body.MaxRecords, 1, api.MaxConsumeRecords, &opts.MaxRecords},
		{"max_bytes", body.MaxBytes, 1, api.MaxFetchBytes, &opts.MaxBytes},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi {
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("%s must be from %d to %d, not %d", f.name, f.lo, f.hi, *f.v))
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
		{"lease_ms", body.LeaseMs, 1, api.MaxLeaseMs, &opts.Lease},
		{"wait_ms", body.WaitMs, 0, api.MaxWaitMs, &opts.Wait},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi {
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("%s must be from %d to %d, not %d", f.name, f.lo, f.hi, *f.v))
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
		release, ok := a.takeAnswer(cmp.Or(opts.MaxBytes, api.DefaultFetchBytes))
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
			writeError(w, http.StatusNotFound, api.CodePartitionNotFound, fmt.Sprintf("topic %q has no partition %d", topic, opts.Partition))
			return
		}
		if errors.Is(err, runtime.ErrNotAssigned) && a.opts.Owners != nil && opts.Partition != runtime.AnyPartition {
			a.writeNotOwner(w, topic, opts.Partition) // a consume naming another node's partition
			return
		}
		if errors.Is(err, runtime.ErrTooManyLeased) {
			writeError(w, http.StatusTooManyRequests, api.CodeTooManyLeased,
				fmt.Sprintf("the partitions of topic %q this consume may lease from each hold %d leased records; ack or nack some first", topic, runtime.MaxLeasedPerPartition))
			return
		}
		a.writeNodeError(w, r, err)
		return
	}
	if batch {
		writeConsumeBatch(w, recs)
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
func (a *Handler) nack(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body api.NackRequest
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	if body.LeaseID == nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, "lease_id is required: the lease_id the consume gave the records")
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
	writeJSON(w, http.StatusOK, api.NackAnswer{GivenBack: given})
}
