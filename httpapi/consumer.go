package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

func (a *Handler) ack(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body api.AckRequest
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	if !validOffsets(w, body.Offsets) {
		return
	}
	frontier, err := a.node.Ack(r.Context(), topic, p, body.Offsets...)
	if errors.Is(err, partition.ErrBeyondHighWatermark) {
		writeError(w, http.StatusBadRequest, api.CodeInvalidOffset, fmt.Sprintf("an offset of %d or above was given; only records below the high watermark (%d now) can be acked",
			slices.Max(body.Offsets), a.hwm(r, topic, p, 0)))
		return
	}
	if errors.Is(err, runtime.ErrAckedAheadFull) {
		writeError(w, http.StatusBadRequest, api.CodeInvalidOffset, fmt.Sprintf("too many offsets acked ahead of the frontier (%d); ack the lowest unacked offsets first", runtime.MaxAckedAhead))
		return
	}
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.AckAnswer{Frontier: frontier})
}

func (a *Handler) consumer(w http.ResponseWriter, r *http.Request) {
	topic, p, ok := a.partitionOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	st, err := a.node.ConsumerState(r.Context(), topic, p)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ConsumerState{AckedAhead: st.AckedAhead, Frontier: st.Frontier,
		HighWatermark: st.HighWatermark, Lag: st.Lag, Leased: st.Leased})
}

// partitionOf reads {topic} and {p}, answering the error itself when
// either is invalid.
func (a *Handler) partitionOf(w http.ResponseWriter, r *http.Request) (string, int, bool) {
	topic, ok := topicOf(w, r)
	if !ok {
		return "", 0, false
	}
	p, ok := partitionParam(r)
	if !ok {
		writeError(w, http.StatusNotFound, api.CodePartitionNotFound, fmt.Sprintf("no partition %q: partitions are numbered from 0", r.PathValue("p")))
		return "", 0, false
	}
	return topic, p, true
}

// validOffsets checks the offsets of an ack or a nack: 1 to
// api.MaxAcks of them, none negative; it answers the error itself.
func validOffsets(w http.ResponseWriter, offsets []int64) bool {
	if len(offsets) == 0 || len(offsets) > api.MaxAcks {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("offsets must hold 1 to %d offsets, not %d", api.MaxAcks, len(offsets)))
		return false
	}
	for i, o := range offsets {
		if o < 0 {
			writeError(w, http.StatusBadRequest, api.CodeInvalidOffset, fmt.Sprintf("offsets[%d] is %d: offsets are not negative", i, o))
			return false
		}
	}
	return true
}
