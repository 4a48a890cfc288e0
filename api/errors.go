package api

// ErrorBody is every error answer's body (docs/http-api.md, "Errors"):
// the code and the message, and what some codes carry besides.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
	// StartOffset is the partition's start, with offset_deleted.
	StartOffset *int64 `json:"start_offset,omitempty"`
	// NextOffset is the offset after a damaged frame, with
	// record_unreadable.
	NextOffset *int64 `json:"next_offset,omitempty"`
	// Owner is the node that serves the partition, with not_owner and
	// owner_unavailable (Addr empty: it is not live).
	Owner *Owner `json:"owner,omitempty"`
}

// ErrorDetail is what went wrong: one of the codes below, and a message
// in the request's own terms.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Owner is where a cluster serves a partition: the owner's node id and
// its address.
type Owner struct {
	NodeID string `json:"node_id"`
	Addr   string `json:"addr"`
}

// The error codes: docs/http-api.md gives each its status and says when
// it is answered.
const (
	CodeInvalidParameter          = "invalid_parameter"
	CodeInvalidBody               = "invalid_body"
	CodeInvalidOffset             = "invalid_offset"
	CodeInvalidTopicName          = "invalid_topic_name"
	CodeBadRequest                = "bad_request"
	CodeInvalidPath               = "invalid_path"
	CodeBodyTooSlow               = "body_too_slow"
	CodeUnauthorized              = "unauthorized"
	CodeNotFound                  = "not_found"
	CodeTopicNotFound             = "topic_not_found"
	CodePartitionNotFound         = "partition_not_found"
	CodeMethodNotAllowed          = "method_not_allowed"
	CodeTopicExists               = "topic_exists"
	CodeOffsetDeleted             = "offset_deleted"
	CodeRecordUnreadable          = "record_unreadable"
	CodeBatchTooLarge             = "batch_too_large"
	CodeOffsetBeyondHighWatermark = "offset_beyond_high_watermark"
	CodeCommitFailed              = "commit_failed"
	CodeLogPoisoned               = "log_poisoned"
	CodeMetastoreBroken           = "metastore_broken"
	CodeUnavailable               = "unavailable"
	CodeBusy                      = "busy"
	CodeTooManyLeased             = "too_many_leased"
	CodeCursorNotFound            = "cursor_not_found"
	CodeInvalidCursorName         = "invalid_cursor_name"
	CodeNotReady                  = "not_ready"
	CodeNoSpace                   = "no_space"
	CodeInternal                  = "internal"
	CodeNotOwner                  = "not_owner"
	CodeUnassigned                = "unassigned"
	CodeOwnerUnavailable          = "owner_unavailable"
	CodeMoving                    = "moving"
	CodeFenced                    = "fenced"
	CodeNodeLive                  = "node_live"
	CodeNodeNotFound              = "node_not_found"
	CodeMoveRefused               = "move_refused"
	CodeMoveNotFound              = "move_not_found"
	CodeMoveChanged               = "move_changed"
	CodeNotACluster               = "not_a_cluster"
	CodeDictionaryRefused         = "dictionary_refused"
)
