package partition

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors callers branch on with errors.Is. Each is wrapped with
// where it happened (docs/architecture.md, "Errors").
var (
	// ErrLogPoisoned: an fdatasync of this log failed. Every later append
	// and commit fails with it, wrapping the fsync error, until the log is
	// reopened (docs/design.md, "Fsync failure").
	ErrLogPoisoned = errors.New("partition: log poisoned by a failed fsync")
	// ErrLogClosed: the log is closed. A read of a closed log answers this
	// and nothing else.
	ErrLogClosed = errors.New("partition: log closed")
	// ErrOffsetDeleted: the offset is below the log's start (retention).
	ErrOffsetDeleted = errors.New("partition: offset deleted")
	// ErrUnreadable: the offset is in a damaged frame, a recorded gap. The
	// error is an *UnreadableError carrying the offset after the gap.
	ErrUnreadable = errors.New("partition: record unreadable")
	// ErrBeyondHighWatermark: the offset is above the high watermark.
	ErrBeyondHighWatermark = errors.New("partition: offset beyond the high watermark")
	// ErrNoSpace: the file system is full (it wraps ENOSPC). Nothing of the
	// batch was kept.
	ErrNoSpace = errors.New("partition: no space left on device")
	// ErrCommitFailed: a commit failed and left nothing of its batch
	// behind; the caller may commit the same records again. It wraps the
	// cause (and ErrNoSpace when that was it).
	ErrCommitFailed = errors.New("partition: commit failed")
	// ErrTooLarge: a batch or record is larger than a frame can hold.
	ErrTooLarge = errors.New("partition: batch too large")
)

// UnreadableError is the error of a read that lands in a damaged frame.
type UnreadableError struct {
	Offset int64 // the offset asked for
	Next   int64 // the first offset after the damage
	Cause  error // what the damage looked like
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("partition: record %d unreadable (damaged frame; next readable offset %d): %v", e.Offset, e.Next, e.Cause)
}

// Is makes errors.Is(err, ErrUnreadable) true.
func (e *UnreadableError) Is(target error) bool { return target == ErrUnreadable }

func (e *UnreadableError) Unwrap() error { return e.Cause }

// commitError wraps a commit failure's cause so that errors.Is finds
// ErrCommitFailed, the cause, and ErrNoSpace when the cause is ENOSPC.
func commitError(step string, cause error) error {
	if errors.Is(cause, syscall.ENOSPC) {
		return fmt.Errorf("%w: %s: %w: %w", ErrCommitFailed, step, ErrNoSpace, cause)
	}
	return fmt.Errorf("%w: %s: %w", ErrCommitFailed, step, cause)
}
