package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// writeNodeError answers an error of the node with the status and code
// docs/http-api.md gives it. The message is the daemon's own words about the
// request's topic and partition, never the error's text, which can name
// files of the server; the error itself goes to the log where it matters.
// Anything it does not know is a 500: an I/O error, never bad input.
func (a *Handler) writeNodeError(w http.ResponseWriter, r *http.Request, err error) {
	topic, p := r.PathValue("topic"), r.PathValue("p")
	where := fmt.Sprintf("topic %q", topic)
	if p != "" {
		where = fmt.Sprintf("partition %s of topic %q", p, topic)
	}
	var unreadable *partition.UnreadableError
	switch {
	case errors.Is(err, wire.ErrBadName):
		writeError(w, http.StatusBadRequest, api.CodeInvalidTopicName, nameProblem(topic))
	case errors.Is(err, runtime.ErrTopicNotFound):
		writeError(w, http.StatusNotFound, api.CodeTopicNotFound, fmt.Sprintf("no topic %q", topic))
	case errors.Is(err, runtime.ErrNotAssigned) && a.opts.Owners != nil && p != "":
		pn, _ := decimal(p)
		a.writeNotOwner(w, topic, int(pn))
	case errors.Is(err, runtime.ErrPartitionNotFound), errors.Is(err, runtime.ErrNotAssigned):
		writeError(w, http.StatusNotFound, api.CodePartitionNotFound, fmt.Sprintf("topic %q has no partition %s", topic, p))
	case errors.Is(err, runtime.ErrBadRetention):
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("retention_ms must be from 0 (no bound) to %d and retention_bytes 0 (no bound) or more", runtime.MaxRetentionMs))
	case errors.Is(err, runtime.ErrTopicExists):
		writeError(w, http.StatusConflict, api.CodeTopicExists, fmt.Sprintf("topic %q exists with other settings; delete it first to change its partitions", topic))
	case errors.Is(err, partition.ErrLogPoisoned):
		a.logger.Error("request refused: log poisoned", zap.String("topic", topic), zap.String("partition", p), zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, api.CodeLogPoisoned, where+" refuses writes since an fsync failed; a restart of the daemon reopens it")
	case errors.Is(err, runtime.ErrMetastoreBroken):
		writeError(w, http.StatusServiceUnavailable, api.CodeMetastoreBroken, "the node could not save its topic metadata; it refuses changes and produce until a restart")
	case errors.Is(err, runtime.ErrLowDisk):
		writeError(w, http.StatusInsufficientStorage, api.CodeNoSpace, "the disk's free space is under the node's floor; nothing of the batch was written, and produce resumes once space is freed (retention)")
	case errors.Is(err, partition.ErrNoSpace):
		writeError(w, http.StatusInsufficientStorage, api.CodeNoSpace, "the disk is full; nothing of the batch was kept")
	case errors.Is(err, runtime.ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeBusy, "the node has no open-log slot or file descriptor free for "+where+" right now; nothing was done; retry")
	case errors.Is(err, partition.ErrCommitFailed):
		a.logger.Warn("commit failed", zap.String("topic", topic), zap.String("partition", p), zap.Error(err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeCommitFailed, "the commit failed and nothing of it was kept; retry")
	case errors.Is(err, partition.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeBatchTooLarge, fmt.Sprintf("the batch is over the %d-byte bound of one commit", api.MaxProduceBytes))
	case errors.As(err, &unreadable):
		next := unreadable.Next
		writeErrorBody(w, http.StatusGone, api.CodeRecordUnreadable,
			fmt.Sprintf("offset %d of %s is in a damaged frame; records resume at next_offset %d", unreadable.Offset, where, next),
			func(b *errorBody) { b.NextOffset = &next })
	case errors.Is(err, partition.ErrBeyondHighWatermark):
		writeError(w, http.StatusRequestedRangeNotSatisfiable, api.CodeOffsetBeyondHighWatermark, "the offset is beyond the high watermark of "+where)
	case errors.Is(err, partition.ErrLogClosed), errors.Is(err, runtime.ErrNodeClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the node is closing "+where+" or shutting down; retry")
	default:
		a.logger.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "an internal error; the daemon's log has it")
	}
}

// nameProblem says what is wrong with a topic name, in the client's terms
// (wire's error says the same; this one is sure to carry no server path).
func nameProblem(topic string) string {
	if err := wire.ValidateTopicName(topic); err != nil {
		return "invalid " + strings.TrimPrefix(err.Error(), wire.ErrBadName.Error()+": ")
	}
	return fmt.Sprintf("invalid topic name %q", topic)
}
