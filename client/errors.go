package client

import (
	"fmt"
	"time"

	"github.com/narad-io/storage/api"
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
type Owner = api.Owner

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
	ErrInvalidParameter          = code(api.CodeInvalidParameter)
	ErrInvalidBody               = code(api.CodeInvalidBody)
	ErrInvalidOffset             = code(api.CodeInvalidOffset)
	ErrInvalidTopicName          = code(api.CodeInvalidTopicName)
	ErrBadRequest                = code(api.CodeBadRequest)
	ErrInvalidPath               = code(api.CodeInvalidPath)
	ErrBodyTooSlow               = code(api.CodeBodyTooSlow)
	ErrUnauthorized              = code(api.CodeUnauthorized)
	ErrNotFound                  = code(api.CodeNotFound)
	ErrTopicNotFound             = code(api.CodeTopicNotFound)
	ErrPartitionNotFound         = code(api.CodePartitionNotFound)
	ErrMethodNotAllowed          = code(api.CodeMethodNotAllowed)
	ErrTopicExists               = code(api.CodeTopicExists)
	ErrOffsetDeleted             = code(api.CodeOffsetDeleted)
	ErrRecordUnreadable          = code(api.CodeRecordUnreadable)
	ErrBatchTooLarge             = code(api.CodeBatchTooLarge)
	ErrOffsetBeyondHighWatermark = code(api.CodeOffsetBeyondHighWatermark)
	ErrCommitFailed              = code(api.CodeCommitFailed)
	ErrLogPoisoned               = code(api.CodeLogPoisoned)
	ErrMetastoreBroken           = code(api.CodeMetastoreBroken)
	ErrUnavailable               = code(api.CodeUnavailable)
	ErrBusy                      = code(api.CodeBusy)
	ErrTooManyLeased             = code(api.CodeTooManyLeased)
	ErrCursorNotFound            = code(api.CodeCursorNotFound)
	ErrInvalidCursorName         = code(api.CodeInvalidCursorName)
	ErrNotReady                  = code(api.CodeNotReady)
	ErrNoSpace                   = code(api.CodeNoSpace)
	ErrInternal                  = code(api.CodeInternal)
	ErrNotOwner                  = code(api.CodeNotOwner)
	ErrUnassigned                = code(api.CodeUnassigned)
	ErrOwnerUnavailable          = code(api.CodeOwnerUnavailable)
	ErrMoving                    = code(api.CodeMoving)
	ErrFenced                    = code(api.CodeFenced)
	ErrNodeLive                  = code(api.CodeNodeLive)
	ErrNodeNotFound              = code(api.CodeNodeNotFound)
	ErrMoveRefused               = code(api.CodeMoveRefused)
	ErrMoveNotFound              = code(api.CodeMoveNotFound)
	ErrMoveChanged               = code(api.CodeMoveChanged)
	ErrNotACluster               = code(api.CodeNotACluster)
	ErrDictionaryRefused         = code(api.CodeDictionaryRefused)
)
