package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// TestWriteNodeError_StatusAndCode pins every error of the contract to its
// status and code, including those the end-to-end tests cannot provoke in
// a healthy process (a failed commit, a poisoned log, a full disk); no
// message carries the server's paths or a Go package's words.
func TestWriteNodeError_StatusAndCode(t *testing.T) {
	a := &Handler{logger: zap.NewNop()}
	wrap := func(err error) error { return fmt.Errorf("read /srv/secret/topics/orders/p00003/hwm: %w", err) }
	cases := []struct {
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{wrap(wire.ErrBadName), 400, "invalid_topic_name", false},
		{wrap(runtime.ErrTopicNotFound), 404, "topic_not_found", false},
		{wrap(runtime.ErrPartitionNotFound), 404, "partition_not_found", false},
		{wrap(runtime.ErrTopicExists), 409, "topic_exists", false},
		{wrap(fmt.Errorf("%w: %w", partition.ErrLogPoisoned, syscall.EIO)), 503, "log_poisoned", false},
		{wrap(fmt.Errorf("%w: write: %w: %w", partition.ErrCommitFailed, partition.ErrNoSpace, syscall.ENOSPC)), 507, "no_space", false},
		{wrap(fmt.Errorf("%w: %w", runtime.ErrLowDisk, partition.ErrNoSpace)), 507, "no_space", false},
		{wrap(fmt.Errorf("%w: write: %w", partition.ErrCommitFailed, syscall.EIO)), 503, "commit_failed", true},
		{wrap(partition.ErrTooLarge), 413, "batch_too_large", false},
		{wrap(&partition.UnreadableError{Offset: 5, Next: 9, Cause: errors.New("crc")}), 410, "record_unreadable", false},
		{wrap(partition.ErrBeyondHighWatermark), 416, "offset_beyond_high_watermark", false},
		{wrap(partition.ErrLogClosed), 503, "unavailable", true},
		{wrap(fmt.Errorf("%w: %w", runtime.ErrBusy, supervisor.ErrNoRoom)), 503, "busy", true},
		{wrap(fmt.Errorf("%w: %w: %w", runtime.ErrBusy, partition.ErrCommitFailed, syscall.EMFILE)), 503, "busy", true},
		// EMFILE outside the data path (a topic change, a purge) may
		// have done part of its work: not "nothing was done".
		{wrap(syscall.EMFILE), 500, "internal", false},
		{wrap(syscall.EIO), 500, "internal", false},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/topics/orders/partitions/3/records", nil)
		r.SetPathValue("topic", "orders")
		r.SetPathValue("p", "3")
		a.writeNodeError(w, r, c.err)
		var body api.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: body %q is not the error shape: %v", c.err, w.Body.Bytes(), err)
		}
		if w.Code != c.status || body.Error.Code != c.code || body.Error.Message == "" {
			t.Fatalf("%v: %d %q, want %d %q", c.err, w.Code, body.Error.Code, c.status, c.code)
		}
		for _, leak := range []string{"/srv", "runtime:", "partition:", "wire:", "context:"} {
			if strings.Contains(body.Error.Message, leak) {
				t.Fatalf("%v: the message %q carries %q", c.err, body.Error.Message, leak)
			}
		}
		if (w.Header().Get("Retry-After") != "") != c.retryAfter {
			t.Fatalf("%v: Retry-After %q", c.err, w.Header().Get("Retry-After"))
		}
		if c.code == "record_unreadable" && (body.NextOffset == nil || *body.NextOffset != 9) {
			t.Fatalf("record_unreadable without next_offset 9: %s", w.Body.Bytes())
		}
	}
}
