package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
)

// waitTopic waits for records in any of the partitions a reader names
// (docs/http-api.md, "Wait for records across a topic"): one long poll
// for a reader of many partitions, holding no log open. Shutdown ends it
// with an empty answer, as a fetch's.
func (a *Handler) waitTopic(w http.ResponseWriter, r *http.Request) {
	topic, ok := topicOf(w, r)
	if !ok {
		return
	}
	var body api.TopicWaitRequest
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	positions, problem := positionsOf(body)
	if problem != "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, problem)
		return
	}
	var inc wire.IncarnationID
	if body.Incarnation != "" {
		id, err := wire.ParseIncarnationID(body.Incarnation)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("incarnation must be a topic's incarnation (16 hex digits), not %q", body.Incarnation))
			return
		}
		inc = id
	}
	wait := time.Duration(0)
	if body.WaitMs != nil {
		wait = time.Duration(*body.WaitMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	go func() {
		select {
		case <-a.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	out, err := a.node.WaitTopic(ctx, topic, inc, positions)
	switch {
	case errors.Is(err, runtime.ErrPartitionNotFound):
		writeError(w, http.StatusNotFound, api.CodePartitionNotFound, fmt.Sprintf("topic %q has fewer partitions than the wait names", topic))
		return
	case err != nil:
		a.writeNodeError(w, r, err)
		return
	}
	answer := api.TopicWaitAnswer{Ready: []api.PartitionHighWatermark{}, NotHere: out.NotHere, Incarnation: string(out.Incarnation)}
	if answer.NotHere == nil {
		answer.NotHere = []int{}
	}
	for _, p := range out.Ready {
		answer.Ready = append(answer.Ready, api.PartitionHighWatermark{Partition: p.Partition, HighWatermark: p.HighWatermark})
	}
	writeJSON(w, http.StatusOK, answer)
}

// positionsOf checks a wait's positions and wait_ms, and maps them by
// partition; problem says what is wrong, or is "".
func positionsOf(body api.TopicWaitRequest) (positions map[int]int64, problem string) {
	switch n := len(body.Positions); {
	case n == 0:
		return nil, "positions must name at least one partition"
	case n > api.MaxWaitPositions:
		return nil, fmt.Sprintf("positions may name at most %d partitions, not %d", api.MaxWaitPositions, n)
	}
	if body.WaitMs != nil && (*body.WaitMs < 0 || *body.WaitMs > api.MaxWaitMs) {
		return nil, fmt.Sprintf("wait_ms must be from 0 to %d, not %d", api.MaxWaitMs, *body.WaitMs)
	}
	positions = make(map[int]int64, len(body.Positions))
	for _, pp := range body.Positions {
		if pp.Partition < 0 || pp.Partition >= maxPartitions {
			return nil, fmt.Sprintf("partition must be from 0 to %d, not %d", maxPartitions-1, pp.Partition)
		}
		if pp.Offset < 0 {
			return nil, fmt.Sprintf("offset of partition %d must not be negative, not %d", pp.Partition, pp.Offset)
		}
		if _, twice := positions[pp.Partition]; twice {
			return nil, fmt.Sprintf("partition %d is named twice", pp.Partition)
		}
		positions[pp.Partition] = pp.Offset
	}
	return positions, ""
}
