package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/runtime"
)

// extend moves the deadline of records leased under a lease
// (docs/http-api.md, "Queue consume"), checked as a nack is.
func (a *Handler) extend(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body api.ExtendRequest
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	if body.LeaseID == nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, "lease_id is required: the lease_id the consume gave the records")
		return
	}
	if body.LeaseMs == nil || *body.LeaseMs < 1 || *body.LeaseMs > api.MaxLeaseMs {
		got := "none"
		if body.LeaseMs != nil {
			got = fmt.Sprint(*body.LeaseMs)
		}
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("lease_ms must be from 1 to %d, not %s", api.MaxLeaseMs, got))
		return
	}
	if !validOffsets(w, body.Offsets) {
		return
	}
	lease := time.Duration(*body.LeaseMs) * time.Millisecond
	from := time.Now() // before the node's: the deadline answered is never later than the records'
	extended, err := a.node.ExtendLease(r.Context(), topic, p, *body.LeaseID, lease, body.Offsets...)
	if errors.Is(err, runtime.ErrBadLease) { // the API's bound and the node's agree (a test holds them)
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, err.Error())
		return
	}
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	answer := api.ExtendAnswer{Extended: extended}
	if extended > 0 {
		answer.LeaseDeadlineMs = from.Add(lease).UnixMilli()
	}
	writeJSON(w, http.StatusOK, answer)
}
