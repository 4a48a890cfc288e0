package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// writeNodeError answers an error of the node with the status and code
// http-api.md gives it. Anything it does not know is a 500: an I/O error,
// never bad input.
func (a *api) writeNodeError(w http.ResponseWriter, err error) {
	var unreadable *partition.UnreadableError
	switch {
	case errors.Is(err, wire.ErrBadName):
		writeError(w, http.StatusBadRequest, "invalid_topic_name", err.Error())
	case errors.Is(err, runtime.ErrTopicNotFound):
		writeError(w, http.StatusNotFound, "topic_not_found", err.Error())
	case errors.Is(err, runtime.ErrPartitionNotFound), errors.Is(err, runtime.ErrNotAssigned):
		writeError(w, http.StatusNotFound, "partition_not_found", err.Error())
	case errors.Is(err, runtime.ErrTopicExists):
		writeError(w, http.StatusConflict, "topic_exists", err.Error())
	case errors.Is(err, partition.ErrLogPoisoned):
		writeError(w, http.StatusServiceUnavailable, "log_poisoned", err.Error())
	case errors.Is(err, runtime.ErrMetastoreBroken):
		writeError(w, http.StatusServiceUnavailable, "metastore_broken", err.Error())
	case errors.Is(err, partition.ErrNoSpace):
		writeError(w, http.StatusInsufficientStorage, "no_space", err.Error())
	case errors.Is(err, partition.ErrCommitFailed):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "commit_failed", err.Error())
	case errors.Is(err, partition.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "batch_too_large", err.Error())
	case errors.As(err, &unreadable):
		next := unreadable.Next
		writeErrorBody(w, http.StatusGone, "record_unreadable", err.Error(), func(b *errorBody) { b.NextOffset = &next })
	case errors.Is(err, partition.ErrBeyondHighWatermark):
		writeError(w, http.StatusRequestedRangeNotSatisfiable, "offset_beyond_high_watermark", err.Error())
	case errors.Is(err, partition.ErrLogClosed), errors.Is(err, runtime.ErrNodeClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		a.logger.Error("request failed", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}
