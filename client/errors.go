package client

import (
	"fmt"
	"time"
)

// Error is an error answer of the API: its status, its code (the API's
// snake_case code) and message, and what some codes carry.
type Error struct {
	Status  int
	Code    string
	Message string
	// StartOffset is the partition's start, with offset_deleted.
	StartOffset *int64
	// NextOffset is the offset after a damaged frame, with
	// record_unreadable.
	NextOffset *int64
	// RetryAfter is the server's Retry-After, when it gave one.
	RetryAfter time.Duration
	// Owner is the node that serves the partition, with not_owner (which
	// the client follows itself) and owner_unavailable.
	Owner *Owner
}

// Owner is where a cluster serves a partition: the owner's node id and
// its address.
type Owner struct {
	NodeID string `json:"node_id"`
	Addr   string `json:"addr"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("narad: %s (%d): %s", e.Code, e.Status, e.Message)
}

// Is matches an *Error against a sentinel of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == 0 && t.Code == e.Code
}

func code(c string) *Error { return &Error{Code: c} }

// Sentinels, one per code of the API, for errors.Is.
var (
	ErrInvalidParameter          = code("invalid_parameter")
	ErrInvalidBody               = code("invalid_body")
	ErrInvalidOffset             = code("invalid_offset")
	ErrInvalidTopicName          = code("invalid_topic_name")
	ErrBadRequest                = code("bad_request")
	ErrInvalidPath               = code("invalid_path")
	ErrBodyTooSlow               = code("body_too_slow")
	ErrUnauthorized              = code("unauthorized")
	ErrNotFound                  = code("not_found")
	ErrTopicNotFound             = code("topic_not_found")
	ErrPartitionNotFound         = code("partition_not_found")
	ErrMethodNotAllowed          = code("method_not_allowed")
	ErrTopicExists               = code("topic_exists")
	ErrOffsetDeleted             = code("offset_deleted")
	ErrRecordUnreadable          = code("record_unreadable")
	ErrBatchTooLarge             = code("batch_too_large")
	ErrOffsetBeyondHighWatermark = code("offset_beyond_high_watermark")
	ErrCommitFailed              = code("commit_failed")
	ErrLogPoisoned               = code("log_poisoned")
	ErrMetastoreBroken           = code("metastore_broken")
	ErrUnavailable               = code("unavailable")
	ErrBusy                      = code("busy")
	ErrTooManyLeased             = code("too_many_leased")
	ErrCursorNotFound            = code("cursor_not_found")
	ErrInvalidCursorName         = code("invalid_cursor_name")
	ErrNotReady                  = code("not_ready")
	ErrNoSpace                   = code("no_space")
	ErrInternal                  = code("internal")
	ErrNotOwner                  = code("not_owner")
	ErrUnassigned                = code("unassigned")
	ErrOwnerUnavailable          = code("owner_unavailable")
	ErrMoving                    = code("moving")
	ErrFenced                    = code("fenced")
	ErrNodeLive                  = code("node_live")
	ErrNodeNotFound              = code("node_not_found")
	ErrMoveRefused               = code("move_refused")
	ErrMoveNotFound              = code("move_not_found")
	ErrMoveChanged               = code("move_changed")
	ErrNotACluster               = code("not_a_cluster")
)
